// Reductions, arg reductions, softmax/log_softmax and cumsum: checked against
// scalar references written here (double accumulation, index arithmetic) and
// against PyTorch goldens (one batched Python call for the whole file).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::random_tensor;
using testing::ravel;
using testing::run_op;
using testing::unravel;

// Output position of input element `idx` when axes in `red` are reduced.
Dims out_index(const Dims& idx, const std::vector<bool>& red, bool keep) {
  Dims o;
  for (size_t k = 0; k < idx.size(); ++k)
    if (!red[k])
      o.push_back(idx[k]);
    else if (keep)
      o.push_back(0);
  return o;
}

std::vector<bool> red_mask(int rank, const std::vector<int64_t>& axes) {
  std::vector<bool> red(size_t(rank), axes.empty());
  for (int64_t a : axes)
    if (rank > 0) red[size_t(a < 0 ? a + rank : a)] = true;
  return red;
}

Dims reduced_dims(const Dims& d, const std::vector<bool>& red, bool keep) {
  Dims o;
  for (size_t k = 0; k < d.size(); ++k)
    if (!red[k])
      o.push_back(d[k]);
    else if (keep)
      o.push_back(1);
  return o;
}

// Scalar reference for reduce_*: double (or int64 for integers) accumulation,
// NaN-propagating max/min; returned in the input's dtype.
Tensor ref_reduce(Op op, const Tensor& x, const std::vector<int64_t>& axes, bool keep) {
  auto red = red_mask(x.rank(), axes);
  Dims od = reduced_dims(x.dims(), red, keep);
  int64_t no = numel(od), count = no ? x.numel() / no : 0;
  if (no == 0) return Tensor(od, x.dtype());
  const bool integer = is_integer(x.dtype()) || x.dtype() == DType::Bool;
  double init = op == Op::ReduceProd  ? 1
                : op == Op::ReduceMax ? -INFINITY
                : op == Op::ReduceMin ? INFINITY
                                      : 0;
  std::vector<double> acc(size_t(no), init);
  std::vector<int64_t> iacc(size_t(no), op == Op::ReduceProd ? 1 : 0);
  std::vector<bool> first(size_t(no), true);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t o = ravel(out_index(unravel(i, x.dims()), red, keep), od);
    double v = x.item_as_double(i);
    double& a = acc[size_t(o)];
    switch (op) {
      case Op::ReduceSum:
      case Op::ReduceMean:
        a += v;
        if (integer) iacc[size_t(o)] = int64_t(uint64_t(iacc[size_t(o)]) + uint64_t(int64_t(v)));
        break;
      case Op::ReduceProd:
        a *= v;
        if (integer) iacc[size_t(o)] = int64_t(uint64_t(iacc[size_t(o)]) * uint64_t(int64_t(v)));
        break;
      case Op::ReduceMax:
        if (std::isnan(v) || v > a) a = std::isnan(a) ? a : v;
        break;
      case Op::ReduceMin:
        if (std::isnan(v) || v < a) a = std::isnan(a) ? a : v;
        break;
      default:
        break;
    }
  }
  Tensor r(od, DType::F64);
  for (int64_t o = 0; o < no; ++o) {
    double v = acc[size_t(o)];
    if (integer && (op == Op::ReduceSum || op == Op::ReduceProd)) {
      // Wrapped i64 result, truncated to the dtype below like a C++ cast.
      Tensor w = Tensor::from_vector<int64_t>({1}, {iacc[size_t(o)]}, DType::I64).to(x.dtype());
      v = w.item_as_double(0);
    }
    if (op == Op::ReduceMean) v = count ? v / double(count) : NAN;
    r.data<double>()[o] = v;
  }
  return r.to(x.dtype());
}

const char* torch_reduce(Op op) {
  switch (op) {
    case Op::ReduceSum:
      return "torch.sum";
    case Op::ReduceMean:
      return "torch.mean";
    case Op::ReduceMax:
      return "torch.amax";
    case Op::ReduceMin:
      return "torch.amin";
    default:
      return "torch.prod";
  }
}

std::string py_ints(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (int64_t a : v) s += std::to_string(a) + ",";
  return s + ")";
}

// Every case of this file: the rlx op, its attrs and input, and the torch code.
struct ReduceCase {
  std::string name;
  Op op;
  Attrs attrs;
  Tensor x;
  std::string code;   // empty: no torch golden (rlx-only semantics)
  double atol, rtol;  // tolerance against torch
};

Tensor with_nans(Tensor t, std::vector<int64_t> at) {
  for (int64_t i : at) t.data<float>()[i] = NAN;
  return t;
}

std::string pybool(bool b) { return b ? "True" : "False"; }

void add_arg_cases(std::vector<ReduceCase>& cs) {
  struct A {
    std::string name;
    Tensor x;
    int64_t axis;
    bool keep;
  };
  Tensor nan = with_nans(random_tensor({3, 40}, DType::F32, 31), {5, 20, 39, 41, 100});
  std::vector<A> as = {
      {"rows", random_tensor({5, 37}, DType::F32, 21), 1, false},
      {"cols", random_tensor({5, 37}, DType::F32, 22), 0, true},
      {"mid", random_tensor({2, 3, 4, 5}, DType::F32, 23), -2, true},
      {"ties_rows", random_tensor({6, 20}, DType::I32, 24, 0, 2), 1, false},
      {"ties_cols", random_tensor({20, 6}, DType::I64, 25, 0, 2), 0, false},
      {"ties_u8", random_tensor({4, 5, 6}, DType::U8, 26, 0, 1), 1, false},
      {"nan_rows", nan, 1, false},
      {"nan_cols", nan, 0, false},
      {"f64", random_tensor({7, 3}, DType::F64, 27), -1, true},
      {"size1", random_tensor({4, 1, 3}, DType::F32, 28), 1, false},
      {"empty_out", Tensor({0, 4}, DType::F32), 1, false},
      {"scalar", Tensor::scalar_f32(3.0f), 0, false},
  };
  for (Op op : {Op::ArgMax, Op::ArgMin})
    for (const A& a : as) {
      std::string fn = op == Op::ArgMax ? "argmax" : "argmin";
      cs.push_back({fn + "_" + a.name, op, Attrs{{"axis", a.axis}, {"keepdims", int64_t(a.keep)}},
                    a.x,
                    "y = torch." + fn + "(x['x'], dim=" + std::to_string(a.axis) +
                        ", keepdim=" + pybool(a.keep) + ")",
                    0, 0});
    }
}

void add_softmax_cases(std::vector<ReduceCase>& cs) {
  struct S {
    std::string name;
    Tensor x;
    int64_t axis;
  };
  Tensor masked = random_tensor({4, 19}, DType::F32, 41, -3, 3);
  for (int64_t i : {0, 3, 7, 18, 19, 20, 21}) masked.data<float>()[i] = -INFINITY;
  Tensor big = random_tensor({2, 3, 40}, DType::F32, 42, -3000, 3000);
  std::vector<S> ss = {
      {"last", random_tensor({4, 33}, DType::F32, 43, -5, 5), -1},
      {"first", random_tensor({4, 33}, DType::F32, 44, -5, 5), 0},
      {"mid", random_tensor({2, 3, 17, 5}, DType::F32, 45, -5, 5), 1},
      {"wide_cols", random_tensor({3, 300, 2}, DType::F32, 46, -5, 5), 1},
      {"long_rows", random_tensor({3, 1000}, DType::F32, 47, -10, 10), 1},
      {"big", big, 2},
      {"masked", masked, 1},
      {"nan", with_nans(random_tensor({3, 20}, DType::F32, 48), {25}), -1},
      {"f64", random_tensor({5, 9, 4}, DType::F64, 49, -5, 5), 1},
      {"f64_last", random_tensor({5, 9}, DType::F64, 50, -5, 5), 1},
      {"size1", random_tensor({5, 1}, DType::F32, 51), 1},
      {"empty", Tensor({0, 5}, DType::F32), 1},
      {"scalar", Tensor::scalar_f32(0.7f), -1},
  };
  for (Op op : {Op::Softmax, Op::LogSoftmax})
    for (const S& s : ss) {
      std::string fn = op == Op::Softmax ? "softmax" : "log_softmax";
      // f32 probabilities: exp error (~2 ulp) amplified by the rounding of
      // x - max (|x - max| up to ~20): 4e-6 relative; log_softmax: absolute.
      bool f64 = s.x.dtype() == DType::F64;
      double atol = f64 ? 1e-12 : op == Op::Softmax ? 1e-9 : 4e-6;
      double rtol = f64 ? 1e-12 : op == Op::Softmax ? 4e-6 : 1e-6;
      cs.push_back({fn + "_" + s.name, op, Attrs{{"axis", s.axis}}, s.x,
                    "y = F." + fn + "(x['x'], dim=" + std::to_string(s.axis) + ")", atol, rtol});
    }
}

void add_cumsum_cases(std::vector<ReduceCase>& cs) {
  struct C {
    std::string name;
    Tensor x;
    int64_t axis;
  };
  std::vector<C> ccs = {
      {"rows", random_tensor({5, 37}, DType::F32, 61), 1},
      {"cols", random_tensor({37, 5}, DType::F32, 62), 0},
      {"mid", random_tensor({2, 3, 4}, DType::F32, 63), -2},
      {"long", random_tensor({2, 3000}, DType::F32, 64), -1},
      {"i32", random_tensor({4, 9}, DType::I32, 65, -50, 50), 1},
      {"i64_cols", random_tensor({9, 4}, DType::I64, 66, -50, 50), 0},
      {"f64", random_tensor({6, 7}, DType::F64, 67), 0},
      {"empty", Tensor({0, 3}, DType::F32), 1},
      {"scalar", Tensor::scalar_f32(1.5f), 0},
  };
  for (const C& c : ccs)
    for (int excl = 0; excl < 2; ++excl)
      for (int rev = 0; rev < 2; ++rev) {
        std::string d = std::to_string(c.axis);
        std::string code = "t = x['x']\nd = " + d + "\n";
        if (rev) code += "t = t.flip(d) if t.dim() else t\n";
        code += "y = torch.cumsum(t, d)\n";
        if (excl)
          code +=
              "y = torch.cat([torch.zeros_like(y.narrow(d, 0, 1)), y.narrow(d, 0, y.size(d) - 1)], "
              "d) if t.dim() else torch.zeros_like(y)\n";
        if (rev) code += "y = y.flip(d) if t.dim() else y\n";
        code += "y = y.to(x['x'].dtype)";
        // f32: torch accumulates in f32 (error grows with the running sum),
        // rlx in double.
        bool f32 = c.x.dtype() == DType::F32;
        cs.push_back(
            {"cumsum_" + c.name + "_e" + std::to_string(excl) + "r" + std::to_string(rev),
             Op::CumSum,
             Attrs{{"axis", c.axis}, {"exclusive", int64_t(excl)}, {"reverse", int64_t(rev)}}, c.x,
             code, f32 ? 2e-5 : 1e-12, f32 ? 1e-5 : 1e-12});
      }
}

bool is_reduce(Op op) {
  return op == Op::ReduceSum || op == Op::ReduceMean || op == Op::ReduceMax ||
         op == Op::ReduceMin || op == Op::ReduceProd;
}

std::vector<ReduceCase> make_reduce_cases() {
  std::vector<ReduceCase> cs;
  // --- reduce: (dims, axes, keepdims) over every op; f32 sums are compared
  // with torch at 1e-5: torch accumulates in f32 (cascade sum), rlx in double.
  struct RShape {
    Dims d;
    std::vector<int64_t> axes;
    bool keep;
  };
  std::vector<RShape> shapes = {
      {{3, 4, 5}, {}, false},        {{3, 4, 5}, {1}, true},       {{3, 4, 5}, {-1}, false},
      {{3, 4, 5}, {0, 2}, false},    {{2, 3, 4, 5}, {1, 3}, true}, {{2, 1, 4, 1, 6}, {1, 2}, false},
      {{7, 4099}, {1}, false},       {{4099, 3}, {0}, true},       {{70000}, {}, false},
      {{2, 40000, 3}, {-2}, false},  {{3, 1}, {1}, false},         {{2, 3, 4}, {0, -1, 1}, true},
      {{5, 2, 3, 2}, {0, 2}, false},
  };
  const Op rops[] = {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd};
  int seed = 1;
  for (const auto& s : shapes)
    for (Op op : rops) {
      // Products stay near 1 so long rows neither overflow nor underflow.
      double lo = op == Op::ReduceProd ? 0.999 : -1, hi = op == Op::ReduceProd ? 1.001 : 1;
      Tensor x = random_tensor(s.d, DType::F32, uint64_t(seed++), lo, hi);
      std::string name = std::string(op_name(op)) + "_" + std::to_string(seed);
      std::string dim = s.axes.empty() ? py_ints([&] {
        std::vector<int64_t> all;
        for (size_t k = 0; k < s.d.size(); ++k) all.push_back(int64_t(k));
        return all;
      }())
                                       : py_ints(s.axes);
      std::string code = op == Op::ReduceProd
                             ? "y = x['x'].double()\nfor a in sorted([d % y.dim() for d in " + dim +
                                   "], reverse=True): y = torch.prod(y, a, keepdim=" +
                                   (s.keep ? "True" : "False") + ")\ny = y.float()"
                             : "y = " + std::string(torch_reduce(op)) + "(x['x'], dim=" + dim +
                                   ", keepdim=" + (s.keep ? "True" : "False") + ")";
      cs.push_back(
          {name, op, Attrs{{"axes", s.axes}, {"keepdims", int64_t(s.keep)}}, x, code, 1e-5, 1e-5});
    }
  // f64 and NaN propagation.
  cs.push_back({"sum_f64", Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{0}}},
                random_tensor({33, 17}, DType::F64, 99), "y = torch.sum(x['x'], 0)", 1e-12, 1e-12});
  cs.push_back({"mean_f64", Op::ReduceMean, Attrs{{"axes", std::vector<int64_t>{1}}},
                random_tensor({17, 33}, DType::F64, 98), "y = torch.mean(x['x'], 1)", 1e-12,
                1e-12});
  Tensor xn = with_nans(random_tensor({3, 40}, DType::F32, 97), {5, 20, 39, 41});
  cs.push_back({"max_nan", Op::ReduceMax, Attrs{{"axes", std::vector<int64_t>{1}}}, xn,
                "y = torch.amax(x['x'], 1)", 0, 0});
  cs.push_back({"min_nan", Op::ReduceMin, Attrs{{"axes", std::vector<int64_t>{1}}}, xn,
                "y = torch.amin(x['x'], 1)", 0, 0});
  cs.push_back({"max_nan_cols", Op::ReduceMax, Attrs{{"axes", std::vector<int64_t>{0}}}, xn,
                "y = torch.amax(x['x'], 0)", 0, 0});
  cs.push_back({"sum_nan", Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{1}}}, xn,
                "y = torch.sum(x['x'], 1)", 1e-5, 1e-5});
  // Integers: exact; torch promotes sums to i64, rlx keeps the dtype.
  for (DType t : {DType::I32, DType::I64, DType::U8, DType::I8}) {
    std::string tn(dtype_name(t));
    Tensor xi = random_tensor({6, 50}, t, 7, t == DType::U8 ? 0 : -100, 100);
    Tensor xp = random_tensor({6, 9}, t, 8, t == DType::U8 ? 0 : -3, 3);
    cs.push_back({"isum_" + tn, Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{1}}}, xi,
                  "y = torch.sum(x['x'], 1).to(x['x'].dtype)", 0, 0});
    cs.push_back({"imax_" + tn, Op::ReduceMax, Attrs{{"axes", std::vector<int64_t>{0}}}, xi,
                  "y = torch.amax(x['x'], 0)", 0, 0});
    cs.push_back({"imin_" + tn, Op::ReduceMin, Attrs{}, xi, "y = torch.amin(x['x'])", 0, 0});
    cs.push_back({"iprod_" + tn, Op::ReduceProd, Attrs{{"axes", std::vector<int64_t>{1}}}, xp,
                  "y = torch.prod(x['x'], 1).to(x['x'].dtype)", 0, 0});
  }
  // Empty tensors.
  cs.push_back({"sum_empty_axis", Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{1}}},
                Tensor({3, 0}, DType::F32), "y = torch.sum(x['x'], 1)", 0, 0});
  cs.push_back({"prod_empty_axis", Op::ReduceProd, Attrs{{"axes", std::vector<int64_t>{1}}},
                Tensor({3, 0}, DType::F32), "y = torch.prod(x['x'], 1)", 0, 0});
  cs.push_back({"mean_empty_axis", Op::ReduceMean, Attrs{{"axes", std::vector<int64_t>{1}}},
                Tensor({3, 0}, DType::F32), "y = torch.mean(x['x'], 1)", 0, 0});
  cs.push_back({"sum_empty_out", Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{1}}},
                Tensor({0, 4}, DType::F32), "y = torch.sum(x['x'], 1)", 0, 0});
  cs.push_back({"max_empty_out", Op::ReduceMax, Attrs{{"axes", std::vector<int64_t>{1}}},
                Tensor({0, 4}, DType::F32), "y = torch.amax(x['x'], 1)", 0, 0});
  cs.push_back({"sum_scalar", Op::ReduceSum, Attrs{}, Tensor::scalar_f32(2.5f),
                "y = torch.sum(x['x'])", 0, 0});
  cs.push_back({"sum_scalar_axis", Op::ReduceSum, Attrs{{"axes", std::vector<int64_t>{-1}}},
                Tensor::scalar_f32(2.5f), "y = torch.sum(x['x'], -1)", 0, 0});
  add_arg_cases(cs);
  add_softmax_cases(cs);
  add_cumsum_cases(cs);
  return cs;
}

const std::vector<ReduceCase>& reduce_cases() {
  static const std::vector<ReduceCase> cs = make_reduce_cases();
  return cs;
}

// Torch goldens for every case with code, computed once for the whole file.
const std::map<std::string, std::vector<Tensor>>& reduce_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> gc;
    for (const ReduceCase& c : reduce_cases())
      if (!c.code.empty()) gc.push_back({c.name, c.code, {{"x", c.x}}});
    return testing::torch_goldens(gc);
  }();
  return g;
}

TEST(CpuReduce, MatchesScalarReference) {
  for (const ReduceCase& c : reduce_cases()) {
    if (!is_reduce(c.op)) continue;
    SCOPED_TRACE(c.name);
    Tensor got = run_op(c.op, {c.x}, c.attrs);
    Tensor want = ref_reduce(c.op, c.x, c.attrs.ints("axes", {}), c.attrs.i("keepdims", 0) != 0);
    ASSERT_EQ(got.dtype(), c.x.dtype());
    // f32: rlx accumulates in double and rounds once, so one f32 ulp (2^-23
    // relative, with a tiny floor for sums that cancel to ~0).
    if (c.x.dtype() == DType::F32)
      EXPECT_TRUE(all_close(got, want, 1e-12, 2.4e-7));
    else if (c.x.dtype() == DType::F64)
      EXPECT_TRUE(all_close(got, want, 1e-14, 1e-14));
    else
      EXPECT_TRUE(all_equal(got, want));
  }
}

TEST(CpuReduce, MatchesTorch) {
  for (const ReduceCase& c : reduce_cases()) {
    if (!is_reduce(c.op)) continue;
    SCOPED_TRACE(c.name);
    Tensor got = run_op(c.op, {c.x}, c.attrs);
    EXPECT_TRUE(all_close(got, reduce_goldens().at(c.name)[0], c.atol, c.rtol));
  }
}

// [outer, len, inner] around `axis` (a scalar is [1, 1, 1]).
struct Layout {
  int64_t outer = 1, len = 1, inner = 1;
};
Layout layout(const Dims& d, int64_t axis) {
  Layout l;
  if (d.empty()) return l;
  int ax = int(axis < 0 ? axis + int64_t(d.size()) : axis);
  for (int k = 0; k < int(d.size()); ++k)
    (k < ax ? l.outer : k == ax ? l.len : l.inner) *= d[size_t(k)];
  return l;
}

Tensor ref_arg(Op op, const Tensor& x, int64_t axis, const Dims& out_dims) {
  Layout l = layout(x.dims(), axis);
  Tensor r(out_dims, DType::I64);
  if (r.numel() == 0) return r;
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      int64_t best = 0;
      for (int64_t a = 0; a < l.len; ++a) {
        double v = x.item_as_double((o * l.len + a) * l.inner + i);
        double b = x.item_as_double((o * l.len + best) * l.inner + i);
        if (std::isnan(b)) break;
        if (std::isnan(v) || (op == Op::ArgMax ? v > b : v < b)) best = a;
      }
      r.data<int64_t>()[o * l.inner + i] = best;
    }
  return r;
}

Tensor ref_softmax(Op op, const Tensor& x, int64_t axis) {
  Layout l = layout(x.dims(), axis);
  Tensor r(x.dims(), DType::F64);
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      auto at = [&](int64_t a) { return (o * l.len + a) * l.inner + i; };
      double m = -INFINITY, s = 0;
      for (int64_t a = 0; a < l.len; ++a) m = std::max(m, x.item_as_double(at(a)));
      for (int64_t a = 0; a < l.len; ++a) s += std::exp(x.item_as_double(at(a)) - m);
      for (int64_t a = 0; a < l.len; ++a) {
        double v = x.item_as_double(at(a)) - m;
        bool nan_row = std::isnan(s);
        r.data<double>()[at(a)] = nan_row             ? NAN
                                  : op == Op::Softmax ? std::exp(v) / s
                                                      : v - std::log(s);
      }
    }
  return r;
}

Tensor ref_cumsum(const Tensor& x, int64_t axis, bool excl, bool rev) {
  Layout l = layout(x.dims(), axis);
  Tensor r(x.dims(), DType::F64);
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t i = 0; i < l.inner; ++i) {
      double s = 0;
      for (int64_t k = 0; k < l.len; ++k) {
        int64_t a = rev ? l.len - 1 - k : k, at = (o * l.len + a) * l.inner + i;
        if (excl) r.data<double>()[at] = s;
        s += x.item_as_double(at);
        if (!excl) r.data<double>()[at] = s;
      }
    }
  return r.to(x.dtype());
}

TEST(CpuArgReduce, MatchesScalarReferenceAndTorch) {
  int n = 0;
  for (const ReduceCase& c : reduce_cases()) {
    if (c.op != Op::ArgMax && c.op != Op::ArgMin) continue;
    SCOPED_TRACE(c.name);
    ++n;
    Tensor got = run_op(c.op, {c.x}, c.attrs);
    ASSERT_EQ(got.dtype(), DType::I64);
    EXPECT_TRUE(all_equal(got, ref_arg(c.op, c.x, c.attrs.i("axis"), got.dims())));
    EXPECT_TRUE(all_equal(got, reduce_goldens().at(c.name)[0]));
  }
  EXPECT_EQ(n, 24);
}

TEST(CpuArgReduce, FirstNanWinsAndTiesTakeFirstIndex) {
  Tensor x = Tensor::from_vector<float>({2, 5}, {1, 3, 3, NAN, NAN, 2, 0, 0, 2, -1}, DType::F32);
  auto ax = Attrs{{"axis", int64_t(1)}};
  EXPECT_TRUE(all_equal(run_op(Op::ArgMax, {x}, ax),
                        Tensor::from_vector<int64_t>({2}, {3, 0}, DType::I64)));
  EXPECT_TRUE(all_equal(run_op(Op::ArgMin, {x}, ax),
                        Tensor::from_vector<int64_t>({2}, {3, 4}, DType::I64)));
}

TEST(CpuSoftmax, MatchesScalarReferenceAndTorch) {
  int n = 0;
  for (const ReduceCase& c : reduce_cases()) {
    if (c.op != Op::Softmax && c.op != Op::LogSoftmax) continue;
    SCOPED_TRACE(c.name);
    ++n;
    Tensor got = run_op(c.op, {c.x}, c.attrs);
    ASSERT_EQ(got.dtype(), c.x.dtype());
    // The double reference sees the same f32 inputs, so the error budget is
    // the same as against torch.
    EXPECT_TRUE(all_close(got, ref_softmax(c.op, c.x, c.attrs.i("axis")), c.atol, c.rtol));
    EXPECT_TRUE(all_close(got, reduce_goldens().at(c.name)[0], c.atol, c.rtol));
  }
  EXPECT_EQ(n, 26);
}

TEST(CpuSoftmax, RowsSumToOneAndLogMatchesLog) {
  Tensor x = random_tensor({64, 1000}, DType::F32, 5, -20, 20);
  Tensor p = run_op(Op::Softmax, {x}, Attrs{{"axis", int64_t(-1)}});
  Tensor lp = run_op(Op::LogSoftmax, {x}, Attrs{{"axis", int64_t(-1)}});
  for (int64_t r = 0; r < 64; ++r) {
    double s = 0;
    for (int64_t i = 0; i < 1000; ++i) {
      s += p.data<float>()[r * 1000 + i];
      ASSERT_NEAR(std::log(double(p.data<float>()[r * 1000 + i])), lp.data<float>()[r * 1000 + i],
                  1e-5 + 1e-6 * std::abs(lp.data<float>()[r * 1000 + i]));
    }
    ASSERT_NEAR(s, 1.0, 1e-5);
  }
}

TEST(CpuCumSum, MatchesScalarReferenceAndTorch) {
  int n = 0;
  for (const ReduceCase& c : reduce_cases()) {
    if (c.op != Op::CumSum) continue;
    SCOPED_TRACE(c.name);
    ++n;
    Tensor got = run_op(c.op, {c.x}, c.attrs);
    ASSERT_EQ(got.dtype(), c.x.dtype());
    Tensor want =
        ref_cumsum(c.x, c.attrs.i("axis"), c.attrs.i("exclusive") != 0, c.attrs.i("reverse") != 0);
    // Same double accumulation order as the reference: one f32 rounding.
    EXPECT_TRUE(all_close(got, want, 1e-12, 2.4e-7));
    EXPECT_TRUE(all_close(got, reduce_goldens().at(c.name)[0], c.atol, c.rtol));
  }
  EXPECT_EQ(n, 36);
}

// cumprod against a scalar product in double along each axis (the rows
// layout and the strided one), exclusive and reverse, with zeros in the
// input; integers wrap as their int64 product truncated.
TEST(CpuCumProd, MatchesScalarReference) {
  Tensor x = random_tensor({3, 5, 7}, DType::F32, 21, -1.5, 1.5);
  x.data<float>()[17] = 0;
  x.data<float>()[40] = 0;
  for (int64_t axis : {0, 1, 2, -1})
    for (int excl = 0; excl < 2; ++excl)
      for (int rev = 0; rev < 2; ++rev) {
        SCOPED_TRACE("axis " + std::to_string(axis) + " excl " + std::to_string(excl) + " rev " +
                     std::to_string(rev));
        const Tensor got =
            run_op(Op::CumProd, {x},
                   Attrs{{"axis", axis}, {"exclusive", int64_t(excl)}, {"reverse", int64_t(rev)}});
        const int ax = int(axis < 0 ? axis + 3 : axis);
        const Dims d = x.dims();
        const int64_t len = d[size_t(ax)], inner = ax == 2 ? 1 : (ax == 1 ? 7 : 35);
        const int64_t outer = x.numel() / (len * inner);
        Tensor want(d, DType::F32);
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t i = 0; i < inner; ++i) {
            double p = 1;
            for (int64_t k = 0; k < len; ++k) {
              const int64_t a = rev ? len - 1 - k : k, at = (o * len + a) * inner + i;
              if (excl) want.data<float>()[at] = float(p);
              p *= x.data<float>()[at];
              if (!excl) want.data<float>()[at] = float(p);
            }
          }
        EXPECT_TRUE(all_equal(got, want));
      }
  const Tensor big = Tensor::from_vector<int32_t>({4}, {100000, 100000, -3, 7}, DType::I32);
  const Tensor p = run_op(Op::CumProd, {big}, Attrs{{"axis", int64_t(0)}});
  const int64_t p2 = int64_t(100000) * 100000;
  EXPECT_EQ(p.data<int32_t>()[1], int32_t(uint32_t(uint64_t(p2))));
  EXPECT_EQ(p.data<int32_t>()[3], int32_t(uint32_t(uint64_t(p2 * -21))));
  EXPECT_THROW(
      run_op(Op::CumProd, {random_tensor({3}, DType::Bool, 1)}, Attrs{{"axis", int64_t(0)}}),
      Error);
}

TEST(CpuReduce, ThreadCountDoesNotChangeResults) {
  Tensor x = random_tensor({3, 200000}, DType::F32, 11);
  auto attrs = Attrs{{"axes", std::vector<int64_t>{1}}};
  int before = num_threads();
  set_num_threads(1);
  Tensor one = run_op(Op::ReduceSum, {x}, attrs);
  set_num_threads(4);
  Tensor four = run_op(Op::ReduceSum, {x}, attrs);
  set_num_threads(before);
  EXPECT_TRUE(all_equal(one, four));
}

TEST(CpuReduce, ErrorPaths) {
  Tensor x = random_tensor({3, 4}, DType::F32, 1);
  auto axes = [](std::vector<int64_t> v) { return Attrs{{"axes", v}}; };
  EXPECT_THROW(run_op(Op::ReduceSum, {x}, axes({2})), Error);
  EXPECT_THROW(run_op(Op::ReduceSum, {x}, axes({-3})), Error);
  EXPECT_THROW(run_op(Op::ReduceSum, {x}, axes({1, -1})), Error);
  EXPECT_THROW(run_op(Op::ReduceMean, {random_tensor({3, 4}, DType::I32, 1, 0, 5)}, axes({1})),
               Error);
  EXPECT_THROW(run_op(Op::ReduceMax, {Tensor({3, 0}, DType::F32)}, axes({1})), Error);
  EXPECT_THROW(run_op(Op::ReduceMin, {Tensor({0}, DType::I32)}, axes({})), Error);
  EXPECT_THROW(run_op(Op::ReduceSum, {random_tensor({3}, DType::Bool, 1)}, axes({})), Error);
  EXPECT_THROW(run_op(Op::ArgMax, {x}, Attrs{{"axis", int64_t(2)}}), Error);
  EXPECT_THROW(run_op(Op::ArgMax, {x}, Attrs{}), Error);  // axis is required
  EXPECT_THROW(run_op(Op::ArgMin, {Tensor({3, 0}, DType::F32)}, Attrs{{"axis", int64_t(1)}}),
               Error);
  EXPECT_THROW(run_op(Op::Softmax, {x}, Attrs{{"axis", int64_t(-3)}}), Error);
  EXPECT_THROW(run_op(Op::Softmax, {random_tensor({3}, DType::I64, 1, 0, 5)}), Error);
  EXPECT_THROW(run_op(Op::CumSum, {x}, Attrs{{"axis", int64_t(5)}}), Error);
  EXPECT_THROW(
      run_op(Op::CumSum, {random_tensor({3}, DType::Bool, 1)}, Attrs{{"axis", int64_t(0)}}), Error);
}

TEST(CpuReduce, BoolMaxMinAreAnyAll) {
  Tensor b = Tensor::from_vector<uint8_t>({2, 3}, {0, 1, 0, 1, 1, 1}, DType::Bool);
  auto ax = Attrs{{"axes", std::vector<int64_t>{1}}};
  EXPECT_TRUE(all_equal(run_op(Op::ReduceMax, {b}, ax),
                        Tensor::from_vector<uint8_t>({2}, {1, 1}, DType::Bool)));
  EXPECT_TRUE(all_equal(run_op(Op::ReduceMin, {b}, ax),
                        Tensor::from_vector<uint8_t>({2}, {0, 1}, DType::Bool)));
}

TEST(CpuReduce, HalfInputsGoThroughTheF32Path) {
  Tensor x = random_tensor({4, 50}, DType::F16, 3);
  auto ax = Attrs{{"axes", std::vector<int64_t>{1}}};
  Tensor got = run_op(Op::ReduceSum, {x}, ax);
  ASSERT_EQ(got.dtype(), DType::F16);
  // The f16 output rounds the exact sum once: 2^-11 relative.
  EXPECT_TRUE(
      all_close(got, ref_reduce(Op::ReduceSum, x.to(DType::F64), {1}, false), 1e-6, 4.9e-4));
}

}  // namespace
}  // namespace rlx
