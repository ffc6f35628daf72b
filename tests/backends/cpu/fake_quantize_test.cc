// fake_quantize and fake_quantize_grad (the straight-through estimators): the CPU kernels against
// a scalar reference written from the op's definition in ops.def (bit-exact in f32 and f64, per
// tensor and per channel, bits 8/4/2, batch and input scales, zero points, ties, NaN, tails of
// the 8-lane loop, a threaded size), the vjp against the STE formulas, PyTorch 1.13's
// fake_quantize_per_tensor/per_channel_affine and learnable (LSQ) ops forward and backward, and
// the errors for bad attributes and operands.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>

#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx::fake_quantize_test {
namespace {

using testing::run_op;
using testing::run_op_outputs;

struct Spec {
  int64_t bits = 8;
  std::optional<int64_t> axis;
  bool input_scale = false;
  std::string ste = "clipped";
  std::optional<int64_t> qmin, qmax;
  double grad_factor = 1;
};

// Spec().bits(4).axis(0): a Spec with some fields set (designated initializers would leave the
// others to -Wmissing-field-initializers).
struct S {
  Spec s;
  S& bits(int64_t v) { return s.bits = v, *this; }
  S& axis(int64_t v) { return s.axis = v, *this; }
  S& input_scale(bool v) { return s.input_scale = v, *this; }
  S& ste(std::string v) { return s.ste = std::move(v), *this; }
  S& qmin(int64_t v) { return s.qmin = v, *this; }
  S& qmax(int64_t v) { return s.qmax = v, *this; }
  S& grad_factor(double v) { return s.grad_factor = v, *this; }
  operator Spec() const { return s; }  // NOLINT: converts where a Spec is taken
};

Attrs attrs_of(const Spec& s) {
  Attrs a{{"bits", s.bits},
          {"scale", std::string(s.input_scale ? "input" : "batch")},
          {"ste", s.ste},
          {"grad_factor", s.grad_factor}};
  if (s.axis) a.set("axis", *s.axis);
  if (s.qmin) a.set("quant_min", *s.qmin);
  if (s.qmax) a.set("quant_max", *s.qmax);
  return a;
}

// The reference, straight from the definition: channel of element i, scale per channel,
// q = clamp(round(x * (1/s)) + z), y = (q - z) * s; the STE's dx and lsq's dscale.
template <typename T>
struct Ref {
  std::vector<T> y, dx;
  std::vector<double> dscale;  // per channel
};

template <typename T>
Ref<T> reference(const Spec& sp, const Tensor& xt, const Tensor* st, const Tensor* zt,
                 const Tensor* dyt) {
  const T* x = xt.data<T>();
  const int64_t n = xt.numel();
  int64_t c = 1, inner = n;
  if (sp.axis) {
    const int ax = normalize_axis(*sp.axis, xt.rank());
    c = xt.dim(ax);
    inner = 1;
    for (int i = ax + 1; i < xt.rank(); ++i) inner *= xt.dim(i);
  }
  const int64_t q = (int64_t(1) << (sp.bits - 1)) - 1;
  const T lo = T(sp.qmin.value_or(-q)), hi = T(sp.qmax.value_or(q));
  std::vector<T> s(size_t(c), 0), z(size_t(c), 0);
  for (int64_t i = 0; i < n; ++i) {
    const size_t ch = size_t((i / inner) % c);
    if (st)
      s[ch] = T(st->item_as_double(st->numel() == 1 ? 0 : int64_t(ch)));
    else
      s[ch] = std::max(s[ch], T(std::fabs(x[i])));
    if (zt) z[ch] = T(zt->item_as_double(zt->numel() == 1 ? 0 : int64_t(ch)));
  }
  if (!st)
    for (T& v : s) v = v / hi;
  for (T& v : s) v = std::max(v, T(1e-12));
  Ref<T> r;
  r.y.resize(size_t(n));
  r.dx.resize(size_t(n));
  r.dscale.assign(size_t(c), 0);
  for (int64_t i = 0; i < n; ++i) {
    const size_t ch = size_t((i / inner) % c);
    const T v = x[i] * (T(1) / s[ch]);
    const T qi = std::nearbyint(v) + z[ch];
    const T qc = qi < lo ? lo : qi > hi ? hi : qi;
    r.y[size_t(i)] = std::isnan(x[i]) ? x[i] : (qc - z[ch]) * s[ch];
    if (!dyt) continue;
    const T dy = dyt->data<T>()[i];
    const bool out = qi < lo || qi > hi;
    r.dx[size_t(i)] = sp.ste != "identity" && out ? T(0) : dy;
    if (sp.ste == "lsq")
      r.dscale[ch] += double(dy) * double(qi < lo   ? lo - z[ch]
                                          : qi > hi ? hi - z[ch]
                                                    : (qi - z[ch]) - v);
  }
  for (double& d : r.dscale) d *= sp.grad_factor;
  return r;
}

template <typename T>
void expect_exact(const Tensor& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.numel(), int64_t(want.size())) << what;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const T g = got.data<T>()[i], w = want[size_t(i)];
    if (std::isnan(w))
      ASSERT_TRUE(std::isnan(g)) << what << " [" << i << "]";
    else
      ASSERT_EQ(g, w) << what << " [" << i << "]";
  }
}

Tensor positive(const Dims& d, DType t, uint64_t seed) {
  return testing::random_tensor(d, t, seed, 0.01, 0.2);
}

template <typename T>
void check_forward(const Spec& sp, const Dims& dims, DType dt, uint64_t seed) {
  const std::string what = "bits " + std::to_string(sp.bits) + " axis " +
                           (sp.axis ? std::to_string(*sp.axis) : "none") + " dims " +
                           dims_str(dims) + (sp.input_scale ? " input" : " batch");
  Tensor x = testing::random_tensor(dims, dt, seed, -2, 2);
  std::vector<Tensor> in{x};
  Tensor s;
  if (sp.input_scale) {
    const int64_t c = sp.axis ? x.dim(int(*sp.axis)) : 1;
    s = positive({c}, dt, seed + 1);
    in.push_back(s);
  }
  const Ref<T> r = reference<T>(sp, x, sp.input_scale ? &s : nullptr, nullptr, nullptr);
  expect_exact<T>(run_op(Op::FakeQuantize, in, attrs_of(sp)), r.y, what);
}

TEST(FakeQuantize, MatchesTheReferenceExactly) {
  uint64_t seed = 1;
  for (int64_t bits : {8, 4, 2})
    for (bool input : {false, true}) {
      Spec per_tensor = S().bits(bits).input_scale(input);
      check_forward<float>(per_tensor, {3, 37}, DType::F32, seed++);  // 8-lane tails
      check_forward<double>(per_tensor, {5, 7}, DType::F64, seed++);
      for (int64_t axis : {0, 1, -1}) {
        Spec per_channel = S().bits(bits).axis(axis).input_scale(input);
        check_forward<float>(per_channel, {4, 3, 2, 11}, DType::F32, seed++);
        check_forward<double>(per_channel, {4, 3, 5}, DType::F64, seed++);
      }
    }
}

TEST(FakeQuantize, LargeTensorsAreThreadIndependent) {
  // Per tensor over several reduction blocks, and per channel with long channels.
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    check_forward<float>({}, {3, 70001}, DType::F32, 7);
    check_forward<float>(S().axis(0), {5, 40003}, DType::F32, 8);
    check_forward<float>(S().bits(4).axis(1), {3, 4, 9000}, DType::F32, 9);
  }
  set_num_threads(0);
}

TEST(FakeQuantize, RoundsHalfToEvenAndClampsToTheGrid) {
  const Tensor x = Tensor::from_vector(
      {12},
      std::vector<double>{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 126.5, 127.5, -130, 1e30, -1e30},
      DType::F32);
  const Tensor one = Tensor::from_vector({1}, std::vector<double>{1}, DType::F32);
  const Tensor y = run_op(Op::FakeQuantize, {x, one}, attrs_of(S().input_scale(true)));
  const std::vector<float> want{0, 2, 2, -0.0f, -2, -2, 3, 126, 127, -127, 127, -127};
  expect_exact<float>(y, want, "ties");
  // 4 bits: [-7, 7]; PyTorch's affine [-8, 7] through quant_min/quant_max
  const Tensor y4 = run_op(Op::FakeQuantize, {x, one}, attrs_of(S().bits(4).input_scale(true)));
  EXPECT_EQ(y4.data<float>()[9], -7);
  const Tensor y4a =
      run_op(Op::FakeQuantize, {x, one}, attrs_of(S().bits(4).input_scale(true).qmin(-8).qmax(7)));
  EXPECT_EQ(y4a.data<float>()[9], -8);
  EXPECT_EQ(y4a.data<float>()[10], 7);
}

TEST(FakeQuantize, ZeroPointsNaNAndAllZeroChannels) {
  Tensor x = testing::random_tensor({2, 3, 9}, DType::F32, 3, -1, 1);
  x.data<float>()[4] = NAN;
  for (int64_t i = 9; i < 18; ++i) x.data<float>()[i] = 0;  // channel 1 of batch 0 all zero
  // batch scale: NaN stays NaN, is ignored by max|x|; an all-zero channel gives zeros (scale
  // floored at 1e-12), never NaN
  const Spec batch = S().axis(1);
  const Ref<float> rb = reference<float>(batch, x, nullptr, nullptr, nullptr);
  const Tensor yb = run_op(Op::FakeQuantize, {x}, attrs_of(batch));
  expect_exact<float>(yb, rb.y, "batch with NaN");
  EXPECT_TRUE(std::isnan(yb.data<float>()[4]));
  // unsigned grid [0, 255] with per-channel integer zero points, and float ones
  const Spec u8 = S().axis(1).input_scale(true).qmin(0).qmax(255);
  const Tensor s = positive({3}, DType::F32, 4);
  const Tensor zi = Tensor::from_vector({3}, std::vector<double>{128, 0, 250}, DType::I32);
  const Tensor zf = zi.to(DType::F32);
  const Ref<float> ru = reference<float>(u8, x, &s, &zi, nullptr);
  expect_exact<float>(run_op(Op::FakeQuantize, {x, s, zi}, attrs_of(u8)), ru.y, "u8 int zp");
  expect_exact<float>(run_op(Op::FakeQuantize, {x, s, zf}, attrs_of(u8)), ru.y, "u8 float zp");
}

// fake_quantize_grad: dx and dscale of every estimator against the formulas.
template <typename T>
void check_grad(const Spec& sp, const Dims& dims, DType dt, uint64_t seed, bool zero_point) {
  const std::string what = sp.ste + " axis " + (sp.axis ? std::to_string(*sp.axis) : "none");
  const Tensor x = testing::random_tensor(dims, dt, seed, -3, 3);
  const Tensor dy = testing::random_tensor(dims, dt, seed + 1);
  std::vector<Tensor> in{x, dy};
  Tensor s, z;
  const int64_t c = sp.axis ? x.dim(int(*sp.axis)) : 1;
  if (sp.input_scale) {
    s = positive({c}, dt, seed + 2);
    in.push_back(s);
    if (zero_point) {
      z = testing::random_tensor({c}, DType::I64, seed + 3, -3, 3);
      in.push_back(z);
    }
  }
  const Ref<T> r =
      reference<T>(sp, x, sp.input_scale ? &s : nullptr, zero_point ? &z : nullptr, &dy);
  const std::vector<Tensor> out = run_op_outputs(Op::FakeQuantizeGrad, in, attrs_of(sp));
  expect_exact<T>(out[0], r.dx, what + " dx");
  ASSERT_EQ(out[1].numel(), c) << what;
  for (int64_t k = 0; k < c; ++k) {
    const double want = sp.ste == "lsq" ? r.dscale[size_t(k)] : 0.0;
    EXPECT_NEAR(out[1].item_as_double(k), want, 1e-5 * std::max(1.0, std::fabs(want)))
        << what << " dscale[" << k << "]";
  }
}

TEST(FakeQuantizeGrad, EstimatorsMatchTheirFormulas) {
  uint64_t seed = 20;
  for (const std::string ste : {"identity", "clipped", "lsq"})
    for (bool zp : {false, true}) {
      check_grad<float>(S().bits(4).input_scale(true).ste(ste).grad_factor(0.5), {3, 37},
                        DType::F32, seed++, zp);
      check_grad<double>(S().bits(2).axis(1).input_scale(true).ste(ste), {2, 3, 5}, DType::F64,
                         seed++, zp);
      check_grad<float>(S().axis(0).input_scale(true).ste(ste), {6, 40001}, DType::F32, seed++, zp);
    }
  check_grad<float>(S().bits(2).axis(-1).ste("clipped"), {4, 5}, DType::F32, seed++, false);
}

// Through autodiff: the vjp of fake_quantize is the estimator (dx = dy masked; lsq gives the
// scale its gradient), while finite differences of the forward see a step function.
TEST(FakeQuantizeGrad, VjpIsTheStraightThroughEstimator) {
  for (const std::string ste : {"identity", "clipped", "lsq"}) {
    Graph g;
    const Spec sp = S().bits(4).axis(0).input_scale(true).ste(ste);
    const NodeId x = g.input("x", Shape(Dims{3, 8}, DType::F64));
    const NodeId s = g.input("s", Shape(Dims{3}, DType::F64));
    const NodeId ct = g.input("ct", Shape(Dims{3, 8}, DType::F64));
    const NodeId y = g.add(Op::FakeQuantize, {x, s}, attrs_of(sp));
    const std::vector<NodeId> d = vjp(g, {y}, {ct}, {x, s});
    g.add_output("dx", d[0]);
    g.add_output("ds", d[1]);
    const Tensor xv = testing::random_tensor({3, 8}, DType::F64, 5, -1.5, 1.5);
    const Tensor sv = Tensor::from_vector({3}, std::vector<double>{0.1, 0.2, 0.15}, DType::F64);
    const Tensor cv = testing::random_tensor({3, 8}, DType::F64, 6);
    const TensorMap out = testing::run_graph(g, {{"x", xv}, {"s", sv}, {"ct", cv}});
    const Ref<double> r = reference<double>(sp, xv, &sv, nullptr, &cv);
    expect_exact<double>(out.at("dx"), r.dx, ste);
    for (int64_t k = 0; k < 3; ++k)
      EXPECT_NEAR(out.at("ds").item_as_double(k), ste == "lsq" ? r.dscale[size_t(k)] : 0, 1e-12);
  }
  EXPECT_EQ(op_gradient(Op::FakeQuantize).support, GradSupport::estimator);
  // The true derivative: a step function, flat between grid points (what the FD harness would see).
  const Tensor one = Tensor::from_vector({1}, std::vector<double>{0.25}, DType::F64);
  const Tensor a = Tensor::from_vector({1}, std::vector<double>{0.3}, DType::F64);
  const Tensor b = Tensor::from_vector({1}, std::vector<double>{0.3 + 1e-6}, DType::F64);
  const Spec sp = S().input_scale(true);
  EXPECT_EQ(run_op(Op::FakeQuantize, {a, one}, attrs_of(sp)).item_as_double(0),
            run_op(Op::FakeQuantize, {b, one}, attrs_of(sp)).item_as_double(0));
}

TEST(FakeQuantize, BadAttributesAndOperandsNameTheNodeAndShapes) {
  Graph g;
  const NodeId x = g.input("x", Shape(Dims{4, 3}, DType::F32));
  const NodeId s3 = g.input("s3", Shape(Dims{3}, DType::F32));
  const NodeId s4 = g.input("s4", Shape(Dims{4}, DType::F32));
  const NodeId s64 = g.input("s64", Shape(Dims{3}, DType::F64));
  const NodeId i = g.input("i", Shape(Dims{4, 3}, DType::I32));
  const NodeId z2 = g.input("z2", Shape(Dims{2}, DType::I32));
  auto err = [&](std::vector<NodeId> in, const Spec& sp) {
    return testing::error_of([&] { g.add(Op::FakeQuantize, in, attrs_of(sp)); });
  };
  auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos;
  };
  std::string m = err({x}, S().bits(3));
  EXPECT_TRUE(has(m, "bits must be 8, 4 or 2, got 3")) << m;
  EXPECT_TRUE(has(m, "fake_quantize")) << m;
  EXPECT_TRUE(has(m, "%")) << m;  // the node
  m = err({x}, S().axis(2));
  EXPECT_TRUE(has(m, "axis 2 out of range for x [4,3] f32")) << m;
  m = err({x, s4}, S().axis(1).input_scale(true));
  EXPECT_TRUE(has(m, "scale [4] f32 must be [C]")) << m;
  EXPECT_TRUE(has(m, "x [4,3] f32")) << m;
  m = err({x, s3}, S().input_scale(true));
  EXPECT_TRUE(has(m, "no axis")) << m;
  m = err({x, s3}, S().axis(1));
  EXPECT_TRUE(has(m, "scale=batch computes the scale from x and takes no scale input")) << m;
  m = err({x}, S().input_scale(true));
  EXPECT_TRUE(has(m, "scale=input needs a scale input")) << m;
  m = err({x}, S().ste("lsq"));
  EXPECT_TRUE(has(m, "ste=lsq learns the scale, so it needs scale=input")) << m;
  m = err({x, s64}, S().axis(1).input_scale(true));
  EXPECT_TRUE(has(m, "must have x's dtype")) << m;
  m = err({x, s3, z2}, S().axis(1).input_scale(true));
  EXPECT_TRUE(has(m, "zero_point [2] i32 must have scale's shape [3] f32")) << m;
  m = err({i}, {});
  EXPECT_TRUE(has(m, "x must be floating point")) << m;
  m = err({x}, S().qmin(-8));
  EXPECT_TRUE(has(m, "quant_min and quant_max are given together")) << m;
  m = err({x}, S().bits(4).qmin(-8).qmax(8));
  EXPECT_TRUE(has(m, "more than 2^4 values")) << m;
  m = testing::error_of([&] {
    g.add(Op::FakeQuantize, {x}, Attrs{{"bits", int64_t(8)}, {"scale", std::string("ema")}});
  });
  EXPECT_TRUE(has(m, "ema")) << m;
  EXPECT_NO_THROW(g.add(Op::FakeQuantize, {x, s3}, attrs_of(S().axis(1).input_scale(true))));
}

// PyTorch 1.13's fake quantization, forward and backward, on the same data.
TEST(FakeQuantizeTorch, MatchesPyTorch) {
  const Tensor x = testing::random_tensor({4, 3, 5}, DType::F32, 11, -2, 2);
  const Tensor dy = testing::random_tensor({4, 3, 5}, DType::F32, 12);
  const Tensor s1 = Tensor::from_vector({1}, std::vector<double>{0.0173}, DType::F32);
  const Tensor sc = Tensor::from_vector({3}, std::vector<double>{0.011, 0.23, 0.05}, DType::F32);
  const Tensor zc = Tensor::from_vector({3}, std::vector<double>{0, 3, -2}, DType::I32);
  const TensorMap in{{"x", x}, {"dy", dy}, {"s1", s1}, {"sc", sc}, {"zc", zc}};
  // Each case: y and x.grad (and scale.grad for the learnable ones) for the upstream grad dy.
  const std::string pre = "xx = x['x'].clone().requires_grad_()\n";
  auto backward = [](const std::string& extra) {
    return "out.backward(x['dy'])\ny = [out.detach(), xx.grad" + extra + "]\n";
  };
  std::vector<testing::GoldenCase> cases{
      {"per_tensor",
       pre + "out = torch.fake_quantize_per_tensor_affine(xx, 0.0173, 0, -128, 127)\n" +
           backward(""),
       in},
      {"per_tensor_u8",
       pre + "out = torch.fake_quantize_per_tensor_affine(xx, 0.0173, 100, 0, 255)\n" +
           backward(""),
       in},
      {"per_channel",
       pre + "out = torch.fake_quantize_per_channel_affine(xx, x['sc'], x['zc'], 1, -8, 7)\n" +
           backward(""),
       in},
      {"lsq_per_tensor",
       pre + "ss = x['s1'].clone().requires_grad_()\n" +
           "out = torch._fake_quantize_learnable_per_tensor_affine(xx, ss, torch.zeros(1), "
           "-128, 127, 0.25)\n" +
           backward(", ss.grad"),
       in},
      {"lsq_per_channel",
       pre + "ss = x['sc'].clone().requires_grad_()\n" +
           "out = torch._fake_quantize_learnable_per_channel_affine(xx, ss, x['zc'].float(), 1, "
           "-8, 7, 1.0)\n" +
           backward(", ss.grad"),
       in},
  };
  const auto gold = testing::torch_goldens(cases);
  struct Run {
    std::string name;
    Spec sp;
    std::vector<Tensor> params;  // scale[, zero point]
  };
  const std::vector<Run> runs{
      {"per_tensor", S().input_scale(true).qmin(-128).qmax(127), {s1}},
      {"per_tensor_u8",
       S().input_scale(true).qmin(0).qmax(255),
       {s1, Tensor::from_vector({1}, std::vector<double>{100}, DType::I64)}},
      {"per_channel", S().bits(4).axis(1).input_scale(true).qmin(-8).qmax(7), {sc, zc}},
      {"lsq_per_tensor",
       S().input_scale(true).ste("lsq").qmin(-128).qmax(127).grad_factor(0.25),
       {s1}},
      {"lsq_per_channel",
       S().bits(4).axis(1).input_scale(true).ste("lsq").qmin(-8).qmax(7),
       {sc, zc}},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.name);
    const std::vector<Tensor>& want = gold.at(r.name);
    std::vector<Tensor> fin{x}, bin{x, dy};
    for (const Tensor& p : r.params) {
      fin.push_back(p);
      bin.push_back(p);
    }
    // Same formula as PyTorch's kernel (x * (1/s), round half to even): bit for bit.
    EXPECT_TRUE(testing::all_equal(run_op(Op::FakeQuantize, fin, attrs_of(r.sp)), want[0]));
    const std::vector<Tensor> g = run_op_outputs(Op::FakeQuantizeGrad, bin, attrs_of(r.sp));
    EXPECT_TRUE(testing::all_equal(g[0], want[1]));
    if (want.size() > 2) {  // PyTorch sums the scale gradient in float: relative 1e-5
      EXPECT_TRUE(testing::all_close(g[1].reshape(want[2].dims()), want[2], 1e-5, 1e-5));
    }
  }
}

}  // namespace
}  // namespace rlx::fake_quantize_test
