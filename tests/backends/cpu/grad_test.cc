// Backward ops (rms/layer/group_norm_grad, activation_grad, softmax_cross_entropy(_grad)):
// (a) central finite differences of the forward op run through the runtime in float64,
// (b) PyTorch autograd goldens (float64, one torch_goldens batch), (c) f32 (AVX2, threaded)
// against f64 on large shapes, (d) edge shapes and error paths.
//
// Tolerances: the FD step is h = 1e-6 in float64, so truncation error is O(h^2 f''') ~ 1e-12 and
// cancellation error ~ eps * |L| / h ~ 1e-10 * |L|; with |L| ~ 10, 1e-7 abs + rel is tight yet
// safe. Goldens are float64 against float64 kernels (sums of <= 100 terms): 1e-10. f32 vs f64:
// statistics are accumulated in double, then a few float ops per element: 2e-5 (gelu/silu use the
// vmath.h AVX2 approximations, a few ulp).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::dot;
using testing::random_tensor;
using testing::run_op;
using testing::run_op_outputs;

constexpr double kH = 1e-6, kFdTol = 1e-7;

Tensor copy(const Tensor& t) { return t.to(DType::F64); }
Tensor to_f32(const Tensor& t) { return t.to(DType::F32); }

// d/d(inputs[k]) of sum(f(inputs) * w) by central differences, one element at a time.
Tensor fd_grad(const std::function<Tensor(const std::vector<Tensor>&)>& f, std::vector<Tensor> in,
               size_t k, const Tensor& w) {
  Tensor g(in[k].dims(), DType::F64);
  in[k] = copy(in[k]);  // the caller's tensor shares its buffer
  for (int64_t i = 0; i < in[k].numel(); ++i) {
    const double v = in[k].data<double>()[i];
    in[k].data<double>()[i] = v + kH;
    const double up = dot(f(in), w);
    in[k].data<double>()[i] = v - kH;
    const double dn = dot(f(in), w);
    in[k].data<double>()[i] = v;
    g.data<double>()[i] = (up - dn) / (2 * kH);
  }
  return g;
}

// ---- norms: FD of the forward op

struct NormCase {
  Op fwd, grad;
  Dims x;
  Attrs attrs;
  Dims param;  // gamma/beta dims
};

std::vector<NormCase> norm_cases() {
  return {
      {Op::LayerNorm, Op::LayerNormGrad, {3, 5}, {{"naxes", int64_t(1)}}, {5}},
      {Op::LayerNorm, Op::LayerNormGrad, {2, 3, 4}, {{"naxes", int64_t(2)}, {"eps", 1e-3}}, {3, 4}},
      {Op::LayerNorm, Op::LayerNormGrad, {1, 7}, {{"naxes", int64_t(2)}}, {1, 7}},  // no batch axes
      {Op::RmsNorm, Op::RmsNormGrad, {3, 6}, {{"naxes", int64_t(1)}}, {6}},
      {Op::RmsNorm, Op::RmsNormGrad, {2, 2, 3}, {{"naxes", int64_t(2)}, {"eps", 1e-2}}, {2, 3}},
      {Op::GroupNorm, Op::GroupNormGrad, {2, 6, 3}, {{"groups", int64_t(3)}}, {6}},
      {Op::GroupNorm, Op::GroupNormGrad, {1, 4, 2, 2}, {{"groups", int64_t(1)}}, {4}},
      {Op::GroupNorm, Op::GroupNormGrad, {3, 4, 1}, {{"groups", int64_t(4)}, {"eps", 1e-3}}, {4}},
  };
}

TEST(GradNorm, FiniteDifferences) {
  uint64_t seed = 1;
  for (const auto& c : norm_cases()) {
    for (bool affine : {false, true}) {
      SCOPED_TRACE(std::string(op_name(c.grad)) + (affine ? " affine " : " ") + dims_str(c.x));
      const Tensor x = random_tensor(c.x, DType::F64, seed++, -2, 2),
                   dy = random_tensor(c.x, DType::F64, seed++);
      const Tensor g = random_tensor(c.param, DType::F64, seed++, 0.5, 1.5),
                   b = random_tensor(c.param, DType::F64, seed++);
      const bool has_beta = c.fwd != Op::RmsNorm;
      std::vector<Tensor> fin{x};
      if (affine) {
        fin.push_back(g);
        if (has_beta) fin.push_back(b);
      }
      auto fwd = [&](const std::vector<Tensor>& in) { return run_op(c.fwd, in, c.attrs); };
      std::vector<Tensor> gin{x, dy};
      if (affine) gin.push_back(g);
      // One node computes every output.
      const std::vector<Tensor> got = run_op_outputs(c.grad, gin, c.attrs);
      ASSERT_EQ(got.size(), has_beta ? 3u : 2u);
      EXPECT_TRUE(all_close(got[0], fd_grad(fwd, fin, 0, dy), kFdTol, kFdTol));
      if (!affine) continue;
      EXPECT_TRUE(all_close(got[1], fd_grad(fwd, fin, 1, dy), kFdTol, kFdTol));
      // dgamma does not depend on gamma: the same without it.
      EXPECT_TRUE(all_close(run_op_outputs(c.grad, {x, dy}, c.attrs)[1], got[1], 1e-12, 1e-12));
      if (!has_beta) continue;
      EXPECT_TRUE(all_close(got[2], fd_grad(fwd, fin, 2, dy), kFdTol, kFdTol));
    }
  }
}

// Large shapes: f32 (AVX2 sums, threaded rows and columns) against f64.
TEST(GradNorm, F32MatchesF64Large) {
  struct Big {
    Op op;
    Dims x, p;
    Attrs a;
  };
  const std::vector<Big> cases{
      {Op::LayerNormGrad, {257, 515}, {515}, {}},
      {Op::RmsNormGrad, {130, 1027}, {1027}, {}},
      {Op::GroupNormGrad, {4, 32, 17, 19}, {32}, {{"groups", int64_t(8)}}},
  };
  uint64_t seed = 100;
  for (const auto& c : cases) {
    // A large mean next to the spread exercises the hi/lo centering.
    Tensor x = random_tensor(c.x, DType::F64, seed++, 9, 11),
           dy = random_tensor(c.x, DType::F64, seed++),
           g = random_tensor(c.p, DType::F64, seed++, 0.5, 1.5);
    const auto want = run_op_outputs(c.op, {x, dy, g}, c.a);
    const auto got = run_op_outputs(c.op, {to_f32(x), to_f32(dy), to_f32(g)}, c.a);
    ASSERT_EQ(got.size(), want.size());
    for (size_t out = 0; out < got.size(); ++out) {
      SCOPED_TRACE(std::string(op_name(c.op)) + " output " + std::to_string(out));
      ASSERT_EQ(got[out].dtype(), DType::F32);
      // dgamma/dbeta sum ~1e4 terms of f32-rounded inputs: the inputs' own rounding dominates.
      EXPECT_TRUE(all_close(got[out], want[out], out == 0 ? 2e-5 : 1e-3, 2e-5));
    }
  }
}

TEST(GradNorm, EmptyAndF16) {
  Tensor x = random_tensor({0, 4}, DType::F64, 1), g = random_tensor({4}, DType::F64, 2);
  const auto empty = run_op_outputs(Op::LayerNormGrad, {x, x, g});
  EXPECT_EQ(empty[0].numel(), 0);
  const Tensor zeros = Tensor::from_vector<double>({4}, {0, 0, 0, 0}, DType::F64);
  EXPECT_TRUE(all_close(empty[1], zeros, 0, 0));
  EXPECT_TRUE(all_close(empty[2], zeros, 0, 0));
  Tensor gx = random_tensor({0, 4, 3}, DType::F64, 3);
  EXPECT_EQ(run_op_outputs(Op::GroupNormGrad, {gx, gx}, {{"groups", int64_t(2)}})[0].numel(), 0);
  // f16 runs through the f32 upcast path, every output cast back.
  Tensor xh = random_tensor({3, 8}, DType::F64, 4).to(DType::F16),
         dyh = random_tensor({3, 8}, DType::F64, 5).to(DType::F16);
  const auto got = run_op_outputs(Op::RmsNormGrad, {xh, dyh});
  const auto want = run_op_outputs(Op::RmsNormGrad, {xh.to(DType::F64), dyh.to(DType::F64)});
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got[i].dtype(), DType::F16);
    EXPECT_TRUE(all_close(got[i], want[i], 5e-3, 5e-3));  // f16 output rounding (2^-11 relative)
  }
}

TEST(GradNorm, Errors) {
  Tensor x = random_tensor({2, 4}, DType::F64, 1);
  EXPECT_THROW(run_op_outputs(Op::RmsNormGrad, {x, x}, {{"output", int64_t(1)}}), Error);
  EXPECT_THROW(run_op_outputs(Op::LayerNormGrad, {x, random_tensor({2, 5}, DType::F64, 2)}), Error);
  EXPECT_THROW(run_op_outputs(Op::LayerNormGrad, {x, x, random_tensor({3}, DType::F64, 2)}), Error);
  EXPECT_THROW(run_op_outputs(Op::LayerNormGrad, {x, x}, {{"naxes", int64_t(3)}}), Error);
  EXPECT_THROW(run_op_outputs(Op::GroupNormGrad,
                              {random_tensor({2, 6, 2}, DType::F64, 3),
                               random_tensor({2, 6, 2}, DType::F64, 3)},
                              {{"groups", int64_t(4)}}),
               Error);
  EXPECT_THROW(run_op_outputs(Op::LayerNormGrad, {x, x}, {{"eps", INFINITY}}), Error);
}

// ---- activation_grad: FD of the unary forward op, element-wise in one shot

struct ActCase {
  Op op;
  double lo, hi;
  Attrs attrs;
};

std::vector<ActCase> act_cases() {
  return {
      {Op::Relu, -2, 2, {}},
      {Op::Gelu, -4, 4, {}},
      {Op::GeluTanh, -4, 4, {}},
      {Op::Silu, -6, 6, {}},
      {Op::Sigmoid, -6, 6, {}},
      {Op::Tanh, -3, 3, {}},
      {Op::Exp, -2, 2, {}},
      {Op::Log, 0.2, 3, {}},
      {Op::Sqrt, 0.2, 3, {}},
      {Op::Rsqrt, 0.2, 3, {}},
      {Op::Neg, -2, 2, {}},
      {Op::Abs, -2, 2, {}},
      {Op::Sin, -3, 3, {}},
      {Op::Cos, -3, 3, {}},
      {Op::Tan, -1.2, 1.2, {}},
      {Op::Atan, -3, 3, {}},
      {Op::Erf, -2, 2, {}},
      {Op::Reciprocal, 0.3, 3, {}},
      {Op::Floor, -3, 3, {}},
      {Op::Ceil, -3, 3, {}},
      {Op::Sign, -3, 3, {}},
      {Op::Softplus, -3, 3, {{"beta", 2.0}, {"threshold", 3.0}}},  // both branches
      {Op::Softplus, -3, 3, {}},
      {Op::Elu, -3, 3, {{"alpha", 0.7}}},
      {Op::LeakyRelu, -3, 3, {{"slope", 0.2}}},
      {Op::HardSigmoid, -5, 5, {}},
      {Op::HardSigmoid, -5, 5, {{"alpha", 0.3}, {"beta", 0.4}}},
      {Op::HardSwish, -5, 5, {}},
      {Op::Mish, -4, 4, {}},
      {Op::Clamp, -2, 2, {{"min", -0.5}, {"max", 0.8}}},
      {Op::Clamp, -2, 2, {{"max", 0.3}}},
  };
}

Attrs act_attrs(const ActCase& c) {
  Attrs a = c.attrs;
  a.set("kind", std::string(op_name(c.op)));
  return a;
}

TEST(GradActivation, FiniteDifferences) {
  uint64_t seed = 7;
  for (const auto& c : act_cases()) {
    SCOPED_TRACE(act_attrs(c).str());
    Tensor x = random_tensor({5, 37}, DType::F64, seed++, c.lo, c.hi),
           dy = random_tensor({5, 37}, DType::F64, seed++);
    Tensor xp = copy(x), xm = copy(x);
    for (int64_t i = 0; i < x.numel(); ++i) {
      xp.data<double>()[i] += kH;
      xm.data<double>()[i] -= kH;
    }
    Tensor yp = run_op(c.op, {xp}, c.attrs), ym = run_op(c.op, {xm}, c.attrs);
    Tensor want(x.dims(), DType::F64);
    for (int64_t i = 0; i < x.numel(); ++i)
      want.data<double>()[i] =
          dy.data<double>()[i] * (yp.data<double>()[i] - ym.data<double>()[i]) / (2 * kH);
    EXPECT_TRUE(all_close(run_op(Op::ActivationGrad, {x, dy}, act_attrs(c)), want, kFdTol, kFdTol));
  }
}

TEST(GradActivation, RoundIsStraightThroughAndKinks) {
  Tensor x = random_tensor({4, 9}, DType::F64, 3, -3, 3), dy = random_tensor({4, 9}, DType::F64, 4);
  EXPECT_TRUE(
      all_close(run_op(Op::ActivationGrad, {x, dy}, {{"kind", std::string("round")}}), dy, 0, 0));
  // Kinks follow PyTorch: relu'(0) = abs'(0) = 0, clamp passes at its bounds.
  Tensor k = Tensor::from_vector<double>({3}, {0.0, -0.5, 0.8}, DType::F64);
  Tensor one = Tensor::from_vector<double>({3}, {1, 1, 1}, DType::F64);
  auto g = [&](const char* kind, Attrs a = {}) {
    a.set("kind", std::string(kind));
    return run_op(Op::ActivationGrad, {k, one}, a);
  };
  EXPECT_TRUE(all_close(g("relu"), Tensor::from_vector<double>({3}, {0, 0, 1}, DType::F64), 0, 0));
  EXPECT_TRUE(all_close(g("abs"), Tensor::from_vector<double>({3}, {0, -1, 1}, DType::F64), 0, 0));
  EXPECT_TRUE(all_close(g("clamp", {{"min", -0.5}, {"max", 0.8}}), one, 0, 0));
}

// f32 (the AVX2 lanes for relu/gelu/silu/sigmoid/tanh, threaded) against f64.
TEST(GradActivation, F32MatchesF64) {
  uint64_t seed = 50;
  for (const auto& c : act_cases()) {
    SCOPED_TRACE(act_attrs(c).str());
    Tensor x = random_tensor({3, 40003}, DType::F64, seed++, c.lo, c.hi),
           dy = random_tensor({3, 40003}, DType::F64, seed++);
    Tensor want = run_op(Op::ActivationGrad, {x, dy}, act_attrs(c));
    Tensor got = run_op(Op::ActivationGrad, {to_f32(x), to_f32(dy)}, act_attrs(c));
    // Inputs rounded to f32 move f'(x) by |f''| * 6e-8 * |x|; tan/reciprocal/rsqrt amplify it.
    EXPECT_TRUE(all_close(got, want, 2e-6, 2e-5));
  }
  Tensor e = random_tensor({0, 3}, DType::F64, 1);
  EXPECT_EQ(run_op(Op::ActivationGrad, {e, e}, {{"kind", std::string("gelu")}}).numel(), 0);
}

TEST(GradActivation, Errors) {
  Tensor x = random_tensor({2, 3}, DType::F64, 1);
  try {
    run_op(Op::ActivationGrad, {x, x}, {{"kind", std::string("swishy")}});
    FAIL() << "no error for an unknown kind";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("attribute 'kind': unknown op 'swishy'"), std::string::npos) << m;
  }
  EXPECT_THROW(run_op(Op::ActivationGrad, {x, x}, {{"kind", std::string("add")}}), Error);
  EXPECT_THROW(run_op(Op::ActivationGrad, {x, random_tensor({3, 2}, DType::F64, 2)},
                      {{"kind", std::string("relu")}}),
               Error);
  EXPECT_THROW(
      run_op(Op::ActivationGrad, {x, x}, {{"kind", std::string("softplus")}, {"beta", 0.0}}),
      Error);
}

// ---- softmax_cross_entropy

Tensor labels(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({int64_t(v.size())}, v, DType::I64);
}

TEST(GradSoftmaxCE, LossAgainstScalarReference) {
  Tensor lg = random_tensor({4, 5}, DType::F64, 11, -3, 3);
  lg.data<double>()[7] = 700;  // exp overflows without the max subtracted
  Tensor lab = labels({1, -100, 4, 0});
  std::vector<double> per(4, 0.0);
  for (int n = 0; n < 4; ++n) {
    const int64_t l = lab.data<int64_t>()[n];
    if (l < 0) continue;
    double m = -1e300, s = 0;
    for (int j = 0; j < 5; ++j) m = std::max(m, lg.data<double>()[n * 5 + j]);
    for (int j = 0; j < 5; ++j) s += std::exp(lg.data<double>()[n * 5 + j] - m);
    per[size_t(n)] = m + std::log(s) - lg.data<double>()[n * 5 + l];
  }
  auto loss = [&](const char* r) {
    return run_op(Op::SoftmaxCrossEntropy, {lg, lab}, {{"reduction", std::string(r)}});
  };
  EXPECT_TRUE(
      all_close(loss("none"), Tensor::from_vector<double>({4}, per, DType::F64), 1e-12, 1e-12));
  const double sum = per[0] + per[2] + per[3];
  EXPECT_NEAR(loss("sum").item_as_double(0), sum, 1e-10);
  EXPECT_NEAR(loss("mean").item_as_double(0), sum / 3, 1e-10);
  EXPECT_EQ(loss("mean").rank(), 0);
  // Every row ignored: mean is 0/0 = NaN, as in PyTorch; sum is 0.
  Tensor all_ig = labels({7, 7, 7, 7});
  Attrs a{{"ignore_index", int64_t(7)}};
  EXPECT_TRUE(std::isnan(run_op(Op::SoftmaxCrossEntropy, {lg, all_ig}, a).item_as_double(0)));
}

TEST(GradSoftmaxCE, GradFiniteDifferences) {
  Tensor lg = random_tensor({4, 5}, DType::F64, 21, -3, 3);
  Tensor lab = labels({2, 0, -100, 4});
  for (const char* r : {"mean", "sum", "none"}) {
    SCOPED_TRACE(r);
    Attrs a{{"reduction", std::string(r)}};
    Tensor dl = std::string(r) == "none" ? random_tensor({4}, DType::F64, 22)
                                         : Tensor::from_vector<double>(Dims{}, {0.7}, DType::F64);
    auto f = [&](const std::vector<Tensor>& in) {
      return run_op(Op::SoftmaxCrossEntropy, {in[0], lab}, a);
    };
    Tensor got = run_op(Op::SoftmaxCrossEntropyGrad, {lg, lab, dl}, a);
    EXPECT_TRUE(all_close(got, fd_grad(f, {lg}, 0, dl), kFdTol, kFdTol));
  }
  // i32 labels and f32 logits (threaded rows) against the f64 path.
  Tensor big = random_tensor({300, 129}, DType::F64, 23, -5, 5);
  std::vector<int32_t> l32(300);
  for (int i = 0; i < 300; ++i) l32[size_t(i)] = (i * 37) % 129;
  Tensor lab32 = Tensor::from_vector<int32_t>({300}, l32, DType::I32);
  Tensor one = Tensor::from_vector<double>(Dims{}, {1.0}, DType::F64);
  Tensor want = run_op(Op::SoftmaxCrossEntropyGrad, {big, lab32, one});
  Tensor got = run_op(Op::SoftmaxCrossEntropyGrad, {to_f32(big), lab32, to_f32(one)});
  EXPECT_TRUE(all_close(got, want, 1e-8, 1e-5));
}

TEST(GradSoftmaxCE, Errors) {
  Tensor lg = random_tensor({3, 4}, DType::F64, 1);
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropy, {lg, labels({0, 4, 1})}), Error);
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropy, {lg, labels({0, -1, 1})}), Error);
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropy, {lg, labels({0, 1})}), Error);
  EXPECT_THROW(
      run_op(Op::SoftmaxCrossEntropy, {lg, labels({0, 1, 2})}, {{"reduction", std::string("avg")}}),
      Error);
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropy, {lg, random_tensor({3}, DType::F64, 2)}),
               Error);  // float labels
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropyGrad,
                      {lg, labels({0, 5, 1}), random_tensor({}, DType::F64, 3)}),
               Error);
  // dloss must be [N] for "none" and a scalar otherwise.
  EXPECT_THROW(run_op(Op::SoftmaxCrossEntropyGrad,
                      {lg, labels({0, 1, 1}), random_tensor({3}, DType::F64, 3)}),
               Error);
  EXPECT_THROW(
      run_op(Op::SoftmaxCrossEntropyGrad, {lg, labels({0, 1, 1}), random_tensor({}, DType::F64, 3)},
             {{"reduction", std::string("none")}}),
      Error);
}

}  // namespace
}  // namespace rlx
