// max_pool2d / avg_pool2d / adaptive_avg_pool2d against scalar references and
// PyTorch goldens (max_pool2d_grad against torch.autograd) over
// kernel/stride/padding/dilation/ceil_mode/count_include_pad grids.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

struct PoolCase {
  std::string name;
  Dims x;
  std::vector<int64_t> k, s, pads, dil;  // pads [t, l, b, r]
  bool ceil = false, cip = true;
};

// Max pooling takes a dilation, average pooling count_include_pad.
Attrs pool_attrs(const PoolCase& c, bool max_pool) {
  Attrs a;
  a.set("kernel", c.k);
  a.set("stride", c.s);
  a.set("pads", c.pads);
  if (max_pool)
    a.set("dilation", c.dil);
  else
    a.set("count_include_pad", c.cip);
  a.set("ceil_mode", c.ceil);
  return a;
}

// Output size written out from PyTorch's formula (ceil division done in double).
int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d, bool ceil) {
  double q = double(in + pb + pe - d * (k - 1) - 1) / double(s);
  int64_t o = int64_t(ceil ? std::ceil(q) : std::floor(q)) + 1;
  if (ceil && (o - 1) * s >= in + pb) --o;
  return o;
}

// mode 0: max; 1: avg. Every output element scans its own window.
Tensor ref_pool(const PoolCase& c, const Tensor& x, int mode) {
  const int64_t H = c.x[c.x.size() - 2], W = c.x.back();
  const int64_t planes = numel(c.x) / (H * W);
  const int64_t OH = out_size(H, c.k[0], c.s[0], c.pads[0], c.pads[2], mode ? 1 : c.dil[0], c.ceil);
  const int64_t OW = out_size(W, c.k[1], c.s[1], c.pads[1], c.pads[3], mode ? 1 : c.dil[1], c.ceil);
  Dims od = c.x;
  od[od.size() - 2] = OH;
  od.back() = OW;
  Tensor out(od, DType::F64);
  double* y = out.data<double>();
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        int64_t inside = 0;
        for (int64_t i = 0; i < c.k[0]; ++i)
          for (int64_t j = 0; j < c.k[1]; ++j) {
            int64_t ih = oh * c.s[0] - c.pads[0] + i * (mode ? 1 : c.dil[0]);
            int64_t iw = ow * c.s[1] - c.pads[1] + j * (mode ? 1 : c.dil[1]);
            if (ih < 0 || iw < 0 || ih >= H || iw >= W) continue;
            double v = x.item_as_double((p * H + ih) * W + iw);
            if (std::isnan(v) || v > best) best = std::isnan(best) ? best : v;
            sum += v;
            ++inside;
          }
        double r = best;
        if (mode == 1) {
          // Divisor with count_include_pad: the window clipped to the padded
          // input (only ceil_mode windows reach past it).
          int64_t hi = std::min(oh * c.s[0] - c.pads[0] + c.k[0], H + c.pads[2]);
          int64_t wi = std::min(ow * c.s[1] - c.pads[1] + c.k[1], W + c.pads[3]);
          int64_t padded = (hi - (oh * c.s[0] - c.pads[0])) * (wi - (ow * c.s[1] - c.pads[1]));
          r = sum / double(c.cip ? padded : inside);
        }
        y[(p * OH + oh) * OW + ow] = r;
      }
  return out.to(x.dtype());
}

std::vector<PoolCase> grid(bool with_dil) {
  std::vector<PoolCase> v;
  const std::vector<std::vector<int64_t>> ks{{2, 2}, {3, 3}, {3, 2}};
  const std::vector<std::vector<int64_t>> ss{{1, 1}, {2, 2}, {2, 1}};
  for (size_t ki = 0; ki < ks.size(); ++ki)
    for (size_t si = 0; si < ss.size(); ++si)
      for (int64_t p : {0, 1})
        for (int ceil = 0; ceil < 2; ++ceil)
          for (int extra = 0; extra < 2;
               ++extra) {  // dilation 2 (max) / count_include_pad off (avg)
            PoolCase c;
            c.name = "k" + std::to_string(ki) + "_s" + std::to_string(si) + "_p" +
                     std::to_string(p) + "_c" + std::to_string(ceil) + "_e" + std::to_string(extra);
            c.x = {2, 3, 7, 8};
            c.k = ks[ki];
            c.s = ss[si];
            int64_t ph = std::min(p, c.k[0] / 2), pw = std::min(p, c.k[1] / 2);
            c.pads = {ph, pw, ph, pw};
            c.dil = with_dil && extra ? std::vector<int64_t>{2, 2} : std::vector<int64_t>{1, 1};
            c.ceil = ceil;
            c.cip = with_dil || !extra;
            v.push_back(c);
          }
  return v;
}

std::string torch_max(const PoolCase& c) {
  auto t = [](const std::vector<int64_t>& v) {
    return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")";
  };
  return "y = F.max_pool2d(x['x'], " + t(c.k) + ", " + t(c.s) + ", " + t(c.pads) + ", " + t(c.dil) +
         ", ceil_mode=" + (c.ceil ? "True" : "False") + ")";
}
std::string torch_avg(const PoolCase& c) {
  auto t = [](const std::vector<int64_t>& v) {
    return "(" + std::to_string(v[0]) + "," + std::to_string(v[1]) + ")";
  };
  return "y = F.avg_pool2d(x['x'], " + t(c.k) + ", " + t(c.s) + ", " + t(c.pads) +
         ", ceil_mode=" + (c.ceil ? "True" : "False") +
         ", count_include_pad=" + (c.cip ? "True" : "False") + ")";
}

// Extra cases: asymmetric pads (reference only, and through F.pad where exact),
// unbatched input, ceil-mode windows overhanging a small input, NaN.
std::vector<PoolCase> extra_pool_cases() {
  return {
      {"asym", {1, 2, 9, 10}, {3, 3}, {2, 2}, {1, 0, 0, 1}, {1, 1}, false, true},
      {"asym_ceil", {1, 2, 9, 10}, {3, 4}, {2, 3}, {0, 2, 1, 1}, {1, 1}, true, false},
      {"asym_ceil_cip", {2, 1, 8, 7}, {4, 3}, {3, 2}, {2, 1, 1, 0}, {1, 1}, true, true},
      {"unbatched", {3, 6, 7}, {2, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false},
      {"tiny_ceil", {1, 1, 2, 2}, {3, 3}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true, true},
      {"big", {2, 16, 33, 35}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false},
      {"wide_row", {1, 2, 5, 70}, {2, 3}, {1, 1}, {0, 1, 0, 1}, {1, 1}, false, true},
  };
}

// Max is exact; averages of <= 12 values in f32: ~1e-7 relative error.
constexpr double kAvgTol = 1e-6;

TEST(MaxPool2d, MatchesScalarReference) {
  uint64_t seed = 1;
  auto cases = grid(true);
  for (const auto& c : extra_pool_cases()) cases.push_back(c);
  for (const PoolCase& c : cases) {
    Tensor x = random_tensor(c.x, DType::F32, seed++);
    EXPECT_TRUE(
        testing::all_equal(run_op(Op::MaxPool2d, {x}, pool_attrs(c, true)), ref_pool(c, x, 0)))
        << c.name;
  }
}

// Rows wide enough for the f32 vector rows (8 outputs a step, strides 1 and
// 2), with NaNs sprinkled: NaN must win wherever a window holds one, as the
// scalar rule and PyTorch give.
TEST(MaxPool2d, VectorRowsMatchReferenceWithNaN) {
  uint64_t seed = 500;
  for (const auto& k : std::vector<std::vector<int64_t>>{{2, 2}, {3, 3}, {2, 3}, {3, 5}})
    for (const auto& s : std::vector<std::vector<int64_t>>{{1, 1}, {2, 2}, {1, 2}})
      for (int64_t p : {0, 1})
        for (bool ceil : {false, true}) {
          PoolCase c;
          c.name = "k" + std::to_string(k[0]) + std::to_string(k[1]) + "_s" + std::to_string(s[1]) +
                   "_p" + std::to_string(p) + (ceil ? "_ceil" : "");
          c.x = {1, 3, 13, 75};
          c.k = k;
          c.s = s;
          const int64_t ph = std::min(p, k[0] / 2), pw = std::min(p, k[1] / 2);
          c.pads = {ph, pw, ph, pw};
          c.dil = {1, 1};
          c.ceil = ceil;
          Tensor x = random_tensor(c.x, DType::F32, seed++);
          for (int64_t i = 0; i < x.numel(); i += 97)
            x.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
          const Tensor got = run_op(Op::MaxPool2d, {x}, pool_attrs(c, true));
          const Tensor want = ref_pool(c, x, 0);
          ASSERT_EQ(got.dims(), want.dims()) << c.name;
          int64_t nans = 0;
          for (int64_t i = 0; i < want.numel(); ++i) {
            const float g = got.data<float>()[i], w = want.data<float>()[i];
            nans += std::isnan(w);
            ASSERT_TRUE(std::isnan(w) ? std::isnan(g) : g == w)
                << c.name << " at " << i << ": got " << g << ", want " << w;
          }
          EXPECT_GT(nans, 0) << c.name;
        }
}

TEST(AvgPool2d, MatchesScalarReference) {
  uint64_t seed = 100;
  auto cases = grid(false);
  for (const auto& c : extra_pool_cases()) cases.push_back(c);
  for (const PoolCase& c : cases) {
    Tensor x = random_tensor(c.x, DType::F32, seed++);
    EXPECT_TRUE(all_close(run_op(Op::AvgPool2d, {x}, pool_attrs(c, false)), ref_pool(c, x, 1),
                          kAvgTol, kAvgTol))
        << c.name;
  }
}

struct AdaptiveCase {
  std::string name;
  Dims x;
  int64_t oh, ow;
};
std::vector<AdaptiveCase> adaptive_cases() {
  return {{"down", {2, 3, 7, 5}, 3, 2},   {"even", {1, 2, 8, 8}, 4, 4},
          {"same", {1, 2, 5, 6}, 5, 6},   {"up", {1, 2, 3, 3}, 5, 4},
          {"global", {2, 4, 6, 9}, 1, 1}, {"odd", {1, 1, 10, 13}, 3, 7},
          {"unbatched", {3, 11, 6}, 4, 5}};
}

// Bins from PyTorch's rule, with integer floor/ceil.
Tensor ref_adaptive(const AdaptiveCase& c, const Tensor& x) {
  const int64_t H = c.x[c.x.size() - 2], W = c.x.back(), planes = numel(c.x) / (H * W);
  Dims od = c.x;
  od[od.size() - 2] = c.oh;
  od.back() = c.ow;
  Tensor out(od, DType::F64);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t i = 0; i < c.oh; ++i)
      for (int64_t j = 0; j < c.ow; ++j) {
        int64_t h0 = int64_t(std::floor(double(i * H) / c.oh)),
                h1 = int64_t(std::ceil(double((i + 1) * H) / c.oh));
        int64_t w0 = int64_t(std::floor(double(j * W) / c.ow)),
                w1 = int64_t(std::ceil(double((j + 1) * W) / c.ow));
        double s = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) s += x.item_as_double((p * H + h) * W + w);
        out.data<double>()[(p * c.oh + i) * c.ow + j] = s / double((h1 - h0) * (w1 - w0));
      }
  return out.to(x.dtype());
}

TEST(AdaptiveAvgPool2d, MatchesScalarReference) {
  uint64_t seed = 300;
  for (const auto& c : adaptive_cases()) {
    Tensor x = random_tensor(c.x, DType::F32, seed++);
    Attrs a{{"output", std::vector<int64_t>{c.oh, c.ow}}};
    EXPECT_TRUE(all_close(run_op(Op::AdaptiveAvgPool2d, {x}, a), ref_adaptive(c, x), 1e-6, 1e-6))
        << c.name;
  }
}

TEST(Pool, MatchesTorch) {
  std::vector<testing::GoldenCase> gc;
  std::vector<std::function<Tensor()>> run;
  uint64_t seed = 1000;
  auto add = [&](const std::string& name, const std::string& code, Tensor x, Op op, Attrs a) {
    gc.push_back({name, code, {{"x", x}}});
    run.push_back([=] { return run_op(op, {x}, a); });
  };
  for (const PoolCase& c : grid(true))
    add("max_" + c.name, torch_max(c), random_tensor(c.x, DType::F32, seed++), Op::MaxPool2d,
        pool_attrs(c, true));
  for (const PoolCase& c : grid(false))
    add("avg_" + c.name, torch_avg(c), random_tensor(c.x, DType::F32, seed++), Op::AvgPool2d,
        pool_attrs(c, false));
  for (const PoolCase& c : extra_pool_cases()) {
    const bool sym = c.pads[0] == c.pads[2] && c.pads[1] == c.pads[3];
    const std::string pad = "(" + std::to_string(c.pads[1]) + "," + std::to_string(c.pads[3]) +
                            "," + std::to_string(c.pads[0]) + "," + std::to_string(c.pads[2]) + ")";
    Tensor x = random_tensor(c.x, DType::F32, seed++);
    if (sym) {
      add("max_" + c.name, torch_max(c), x, Op::MaxPool2d, pool_attrs(c, true));
      add("avg_" + c.name, torch_avg(c), x, Op::AvgPool2d, pool_attrs(c, false));
    } else if (!c.ceil) {  // without ceil_mode, asymmetric pads == explicit padding
      PoolCase u = c;
      u.pads = {0, 0, 0, 0};
      std::string mx = torch_max(u), av = torch_avg(u);
      mx.replace(mx.find("x['x']"), 6, "F.pad(x['x'], " + pad + ", value=-float('inf'))");
      av.replace(av.find("x['x']"), 6, "F.pad(x['x'], " + pad + ")");
      add("max_" + c.name, mx, x, Op::MaxPool2d, pool_attrs(c, true));
      if (c.cip) add("avg_" + c.name, av, x, Op::AvgPool2d, pool_attrs(c, false));
    }
  }
  for (const auto& c : adaptive_cases())
    add("adaptive_" + c.name,
        "y = F.adaptive_avg_pool2d(x['x'], (" + std::to_string(c.oh) + "," + std::to_string(c.ow) +
            "))",
        random_tensor(c.x, DType::F32, seed++), Op::AdaptiveAvgPool2d,
        Attrs{{"output", std::vector<int64_t>{c.oh, c.ow}}});
  // NaN propagates through max pooling.
  Tensor nan_x = random_tensor({1, 1, 4, 4}, DType::F32, 9);
  nan_x.data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  add("max_nan", "y = F.max_pool2d(x['x'], 2, 2)", nan_x, Op::MaxPool2d,
      Attrs{{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
  // f64
  PoolCase d{"f64", {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false};
  Tensor xd = random_tensor(d.x, DType::F64, 11);
  add("max_f64", torch_max(d), xd, Op::MaxPool2d, pool_attrs(d, true));
  add("avg_f64", torch_avg(d), xd, Op::AvgPool2d, pool_attrs(d, false));
  add("adaptive_f64", "y = F.adaptive_avg_pool2d(x['x'], (4, 3))", xd, Op::AdaptiveAvgPool2d,
      Attrs{{"output", std::vector<int64_t>{4, 3}}});

  auto gold = testing::torch_goldens(gc);
  for (size_t i = 0; i < gc.size(); ++i) {
    const Tensor& want = gold.at(gc[i].name)[0];
    const bool is_max = gc[i].name.rfind("max_", 0) == 0;
    const double tol = want.dtype() == DType::F64 ? 1e-12 : (is_max ? 0 : kAvgTol);
    EXPECT_TRUE(all_close(run[i](), want, tol, tol)) << gc[i].name;
  }
}

// x -> PyTorch's dx of max_pool2d for the cotangent x['dy'] (torch.autograd).
std::string torch_max_grad(const PoolCase& c) {
  std::string code = torch_max(c);
  code.replace(0, std::string("y = F.max_pool2d(x['x']").size(),
               "xx = x['x'].clone().requires_grad_(True)\nF.max_pool2d(xx");
  return code + ".backward(x['dy'])\ny = xx.grad";
}

Dims pooled_dims(const PoolCase& c) {
  Dims d = c.x;
  const size_t r = d.size();
  d[r - 2] = out_size(c.x[r - 2], c.k[0], c.s[0], c.pads[0], c.pads[2], c.dil[0], c.ceil);
  d[r - 1] = out_size(c.x[r - 1], c.k[1], c.s[1], c.pads[1], c.pads[3], c.dil[1], c.ceil);
  return d;
}

TEST(MaxPool2dGrad, MatchesTorchAutograd) {
  // The pooling grid, the symmetric extra cases, and 2x2 stride-2 pools (the
  // vectorized path) with odd sizes, row tails and ties; NaN; f64.
  std::vector<PoolCase> cases = grid(true);
  for (const PoolCase& c : extra_pool_cases())
    if (c.pads[0] == c.pads[2] && c.pads[1] == c.pads[3]) cases.push_back(c);
  const std::vector<int64_t> k2{2, 2}, none{0, 0, 0, 0}, one{1, 1};
  cases.push_back({"2x2_odd", {1, 3, 9, 11}, k2, k2, none, one, false, true});
  cases.push_back({"2x2_ceil", {1, 2, 5, 7}, k2, k2, none, one, true, true});
  cases.push_back({"2x2_tails", {2, 4, 8, 14}, k2, k2, none, one, false, true});
  cases.push_back({"2x2_wide", {1, 2, 6, 40}, k2, k2, none, one, false, true});
  cases.push_back({"2x2_unbatched", {3, 4, 8}, k2, k2, none, one, false, true});
  std::vector<testing::GoldenCase> gc;
  std::vector<std::function<Tensor()>> run;
  uint64_t seed = 2000;
  auto add = [&](const std::string& name, const PoolCase& c, Tensor x) {
    const Tensor dy = random_tensor(pooled_dims(c), x.dtype(), seed++);
    gc.push_back({name, torch_max_grad(c), {{"x", x}, {"dy", dy}}});
    run.push_back([=] { return run_op(Op::MaxPool2dGrad, {x, dy}, pool_attrs(c, true)); });
  };
  for (const PoolCase& c : cases) {
    add(c.name, c, random_tensor(c.x, DType::F32, seed++));
    // Ties: values on a coarse grid, so windows hold equal maxima.
    Tensor t = random_tensor(c.x, DType::F32, seed++);
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<float>()[i] = std::round(t.data<float>()[i] * 2) / 2;
    add(c.name + "_ties", c, t);
  }
  Tensor nan_x = random_tensor({1, 2, 6, 8}, DType::F32, 9);
  for (int64_t i : {5, 17, 18, 60})
    nan_x.data<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  add("nan", {"nan", {1, 2, 6, 8}, k2, k2, none, one, false, true}, nan_x);
  PoolCase d{"f64", {1, 2, 6, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, false};
  add("f64", d, random_tensor(d.x, DType::F64, 11));

  auto gold = testing::torch_goldens(gc);
  for (size_t i = 0; i < gc.size(); ++i) {
    const Tensor& want = gold.at(gc[i].name)[0];
    // Overlapping windows sum several dy in another order than PyTorch.
    const double tol = want.dtype() == DType::F64 ? 1e-12 : 1e-6;
    EXPECT_TRUE(all_close(run[i](), want, tol, tol)) << gc[i].name;
  }
}

TEST(MaxPool2dGrad, RejectsAMismatchedGradient) {
  const Attrs a{{"kernel", std::vector<int64_t>{2, 2}}};
  const std::string e = testing::error_of([&] {
    run_op(Op::MaxPool2dGrad,
           {random_tensor({1, 2, 6, 6}, DType::F32, 1), random_tensor({1, 2, 4, 3}, DType::F32, 2)},
           a);
  });
  EXPECT_NE(e.find("max_pool2d_grad: dy [1,2,4,3] f32 does not match max_pool2d's output "
                   "[1,2,3,3] f32"),
            std::string::npos)
      << e;
}

TEST(MaxPool2d, IntegerDtypes) {
  PoolCase c{"int", {1, 2, 5, 6}, {3, 2}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true, true};
  for (DType dt : {DType::I32, DType::I64, DType::I8, DType::U8}) {
    Tensor x = random_tensor(c.x, dt, 5, 0, 100);
    Tensor got = run_op(Op::MaxPool2d, {x}, pool_attrs(c, true));
    EXPECT_TRUE(testing::all_equal(got, ref_pool(c, x, 0))) << dtype_name(dt);
  }
}

TEST(Pool, EmptyBatch) {
  Attrs a{{"kernel", std::vector<int64_t>{2, 2}}};
  Tensor x({0, 3, 4, 4}, DType::F32);
  EXPECT_EQ(run_op(Op::MaxPool2d, {x}, a).dims(), (Dims{0, 3, 2, 2}));
  EXPECT_EQ(run_op(Op::AvgPool2d, {x}, a).dims(), (Dims{0, 3, 2, 2}));
  EXPECT_EQ(
      run_op(Op::AdaptiveAvgPool2d, {x}, Attrs{{"output", std::vector<int64_t>{3, 1}}}).dims(),
      (Dims{0, 3, 3, 1}));
}

TEST(Pool, RejectsBadAttributes) {
  Tensor x = random_tensor({1, 2, 6, 6}, DType::F32, 1);
  using V = std::vector<int64_t>;
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{2, 2}}, {"pads", V{2, 0, 2, 0}}}),
               Error);
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{2}}}), Error);
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{0, 2}}}), Error);
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{2, 2}}, {"stride", V{0, 1}}}), Error);
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{2, 2}}, {"stride", V{1}}}), Error);
  EXPECT_THROW(run_op(Op::MaxPool2d, {x}, Attrs{{"kernel", V{7, 2}}}), Error);  // kernel > input
  EXPECT_THROW(run_op(Op::AvgPool2d, {x}, Attrs{{"kernel", V{2, 2}}, {"dilation", V{2, 2}}}),
               Error);
  EXPECT_THROW(run_op(Op::AdaptiveAvgPool2d, {x}, Attrs{{"output", V{0, 2}}}), Error);
  EXPECT_THROW(
      run_op(Op::AdaptiveAvgPool2d, {Tensor({1, 2, 0, 3}, DType::F32)}, Attrs{{"output", V{2, 2}}}),
      Error);
  EXPECT_THROW(
      run_op(Op::MaxPool2d, {random_tensor({6, 6}, DType::F32, 1)}, Attrs{{"kernel", V{2, 2}}}),
      Error);
  EXPECT_THROW(
      run_op(Op::AvgPool2d, {Tensor({1, 1, 4, 4}, DType::I32)}, Attrs{{"kernel", V{2, 2}}}), Error);
}

}  // namespace
}  // namespace rlx
