// Every vjp rule against central finite differences in float64: one harness
// over a sample table (the spirit of op_sweep_test.cc), several shapes and
// attributes per op. For each sample the op's node gets a random cotangent
// per float output, vjp() builds the gradient of L = sum <ct, y> with respect
// to every float input, and each element of those gradients is compared with
// (L(x + h) - L(x - h)) / 2h on the forward graph. An op with a rule and no
// sample fails the coverage test, as does an unlisted gap.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "rlx/autodiff.h"
#include "rlx/quant.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx::autodiff_fd_test {
namespace {

using Ints = std::vector<int64_t>;
using testing::dot;

struct In {
  Dims dims;
  DType dtype = DType::F64;
  double lo = -1, hi = 1;
  Tensor fixed;  // given data instead of random values
};

// Max error |analytic - fd| / max(1, |fd|) allowed. Float64 central
// differences with h = 1e-6 land within ~4e-9 of the vjp on every sample
// here (truncation ~h^2, rounding ~1e-16/h); 1e-8 keeps a margin. Samples
// with float32 ends say why they need more.
constexpr double kTol = 1e-8;

struct Case {
  Op op;
  std::vector<In> in;
  Attrs attrs;
  double tol = kTol;
};

In input(Dims d, DType t, double lo, double hi) {
  In in;
  in.dims = std::move(d);
  in.dtype = t;
  in.lo = lo;
  in.hi = hi;
  return in;
}
In f(Dims d, double lo = -1, double hi = 1) { return input(std::move(d), DType::F64, lo, hi); }
In f32(Dims d, double lo = -1, double hi = 1) { return input(std::move(d), DType::F32, lo, hi); }
In idx(Dims d, int64_t lo, int64_t hi) {
  return input(std::move(d), DType::I64, double(lo), double(hi));
}
In boolean(Dims d) { return input(std::move(d), DType::Bool, 0, 1); }
In given(Tensor t) {
  In in = input(t.dims(), t.dtype(), 0, 0);
  in.fixed = std::move(t);
  return in;
}
Tensor f64s(Dims d, std::vector<double> v) { return Tensor::from_vector(d, v, DType::F64); }

// Quantized rows of random weights, as GGUF files hold them.
Tensor quant_rows(const char* scheme, int64_t rows, int64_t k) {
  const Tensor w = testing::random_tensor({rows, k}, DType::F32, 77);
  const auto type = quant::parse_type_name(scheme);
  Tensor q({rows, int64_t(quant::row_size(type, k))}, DType::U8);
  quant::quantize(type, w.data<float>(), q.data<uint8_t>(), rows * k);
  return q;
}

std::vector<Case> cases() {
  std::vector<Case> c = {
      // ---- unary activations (each op's own range keeps it smooth and defined)
      {Op::Relu, {f({2, 3})}, {}},
      {Op::Gelu, {f({2, 3}, -3, 3)}, {}},
      {Op::GeluTanh, {f({2, 3}, -3, 3)}, {}},
      {Op::Silu, {f({2, 3}, -4, 4)}, {}},
      {Op::Sigmoid, {f({2, 3}, -4, 4)}, {}},
      {Op::Tanh, {f({2, 3}, -2, 2)}, {}},
      {Op::Exp, {f({2, 3})}, {}},
      {Op::Log, {f({2, 3}, 0.2, 3)}, {}},
      {Op::Sqrt, {f({2, 3}, 0.2, 3)}, {}},
      {Op::Rsqrt, {f({2, 3}, 0.2, 3)}, {}},
      {Op::Neg, {f({2, 3})}, {}},
      {Op::Abs, {f({2, 3})}, {}},
      {Op::Sin, {f({2, 3}, -3, 3)}, {}},
      {Op::Cos, {f({2, 3}, -3, 3)}, {}},
      {Op::Tan, {f({2, 3}, -1.2, 1.2)}, {}},
      {Op::Atan, {f({2, 3}, -3, 3)}, {}},
      {Op::Erf, {f({2, 3}, -2, 2)}, {}},
      {Op::Reciprocal, {f({2, 3}, 0.3, 3)}, {}},
      {Op::Softplus, {f({2, 3}, -3, 3)}, {}},
      {Op::Softplus, {f({2, 3}, -3, 3)}, {{"beta", 2.0}, {"threshold", 3.0}}},
      {Op::Elu, {f({2, 3}, -3, 3)}, {{"alpha", 0.7}}},
      {Op::LeakyRelu, {f({2, 3}, -3, 3)}, {{"slope", 0.2}}},
      {Op::HardSigmoid, {f({2, 3}, -5, 5)}, {}},
      {Op::HardSigmoid, {f({2, 3}, -5, 5)}, {{"alpha", 0.2}, {"beta", 0.4}}},
      {Op::HardSwish, {f({2, 3}, -5, 5)}, {}},
      {Op::Mish, {f({2, 3}, -4, 4)}, {}},
      {Op::Clamp, {f({2, 3}, -2, 2)}, {{"min", -0.5}, {"max", 0.8}}},

      // ---- binary with broadcasting (each operand's gradient summed back)
      {Op::Add, {f({2, 3}), f({2, 3})}, {}},
      {Op::Add, {f({2, 1, 3}), f({4, 1})}, {}},
      {Op::Sub, {f({3}), f({2, 3})}, {}},
      {Op::Sub, {f({2, 3}), f({})}, {}},
      {Op::Mul, {f({2, 3}), f({1, 3})}, {}},
      {Op::Mul, {f({2, 1, 3}), f({2, 4, 1})}, {}},
      {Op::Div, {f({2, 3}), f({2, 3}, 0.5, 2)}, {}},
      {Op::Div, {f({2, 3}), f({3}, -2, -0.5)}, {}},
      {Op::Max, {f({2, 3}), f({2, 3})}, {}},
      {Op::Max, {f({2, 3}), f({1, 3})}, {}},
      {Op::Min, {f({2, 3}), f({2, 1})}, {}},
      {Op::Pow, {f({2, 3}, 0.3, 2), f({2, 3}, -2, 2)}, {}},
      {Op::Pow, {f({2, 3}, 0.3, 2), f({})}, {}},
      {Op::Mod, {f({2, 3}, -3, 3), f({1, 3}, 0.7, 1.3)}, {}},
      {Op::Mod, {f({2, 3}, -3, 3), f({2, 3}, -1.3, -0.7)}, {}},
      {Op::Fmod, {f({2, 3}, -3, 3), f({1, 3}, 0.7, 1.3)}, {}},

      {Op::Where, {boolean({2, 3}), f({2, 3}), f({1, 3})}, {}},
      {Op::Where, {boolean({2, 1}), f({3}), f({})}, {}},
      {Op::Cast, {f32({2, 3})}, {{"dtype", std::string("f64")}}, 1e-7},  // f32 gradient
      // f32 only; quadratic in x0 and linear in x1, so the central difference is exact but for
      // the outputs' f32 rounding (~6e-8 relative over a 2e-2 step)
      {Op::FusedElementwise,
       {f32({2, 3}), f32({1, 3}), boolean({2, 1})},
       {{"program", std::string("mul(x0, x1); mul(t0, x0); add(t1, x1); where(x2, t2, x0)")}},
       2e-5},

      // f32 only; linear in each input (no activation), so exact but for f32 rounding
      {Op::ConvBlocked,
       {f32({1, 1, 3, 2, 16}), f32({1, 1, 1, 1, 16, 16}), f32({16}), f32({1, 1, 3, 2, 16})},
       {{"stride", Ints{1, 1}},
        {"pads", Ints{0, 0, 0, 0}},
        {"channels", 16},
        {"out_channels", 16},
        {"residual", true}},
       5e-5},
      {Op::ConvBlocked,
       {f32({1, 1, 4, 3, 16}), f32({1, 3, 3, 16}), f32({16})},
       {{"stride", Ints{2, 1}},
        {"pads", Ints{1, 1, 0, 1}},
        {"channels", 16},
        {"out_channels", 16},
        {"depthwise", true}},
       5e-5},

      // f32 only; no activations, so linear in each input (one at a time, as the differences
      // go); three convs deep, the loss's f32 rounding reaches ~4e-4 of the differences
      {Op::ConvBlockedChain,
       {f32({1, 1, 3, 3, 16}), f32({1, 1, 1, 1, 16, 16}), f32({16}), f32({1, 3, 3, 16}), f32({16}),
        f32({1, 1, 1, 1, 16, 16}), f32({16}), f32({1, 1, 3, 3, 16})},
       {{"stride", Ints{1, 1}},
        {"pads", Ints{1, 1, 1, 1}},
        {"channels", 16},
        {"hidden", 16},
        {"out_channels", 16},
        {"residual", true}},
       1e-3},

      // ---- reductions
      {Op::ReduceSum, {f({2, 3, 4})}, {{"axes", Ints{1}}}},
      {Op::ReduceSum, {f({2, 3, 4})}, {{"axes", Ints{0, 2}}, {"keepdims", true}}},
      {Op::ReduceSum, {f({2, 3})}, {}},
      {Op::ReduceMean, {f({2, 3, 4})}, {{"axes", Ints{-1}}}},
      {Op::ReduceMean, {f({2, 3})}, {{"keepdims", true}}},
      {Op::ReduceMax, {f({2, 3, 4})}, {{"axes", Ints{1}}}},
      {Op::ReduceMax, {f({2, 3})}, {}},
      {Op::ReduceMin, {f({2, 3, 4})}, {{"axes", Ints{0, 2}}, {"keepdims", true}}},
      {Op::ReduceProd, {f({2, 3, 4}, 0.5, 1.5)}, {{"axes", Ints{1}}}},
      {Op::ReduceProd, {f({2, 3}, -1.5, 1.5)}, {}},
      // one zero in a row, two in another: the product's gradient without dividing by 0
      {Op::ReduceProd,
       {given(f64s({3, 3}, {0.5, 0, 2, 0, 1.5, 0, 0.7, -1.2, 0.9}))},
       {{"axes", Ints{1}}}},
      {Op::Softmax, {f({2, 5}, -2, 2)}, {}},
      {Op::Softmax, {f({3, 2, 4}, -2, 2)}, {{"axis", 0}}},
      {Op::LogSoftmax, {f({2, 5}, -2, 2)}, {}},
      {Op::LogSoftmax, {f({3, 2, 4}, -2, 2)}, {{"axis", 1}}},
      {Op::CumSum, {f({2, 4})}, {{"axis", 1}}},
      {Op::CumSum, {f({3, 2})}, {{"axis", 0}, {"exclusive", true}}},
      {Op::CumSum, {f({2, 4})}, {{"axis", -1}, {"reverse", true}}},
      {Op::CumProd, {f({2, 5}, -1.5, 1.5)}, {{"axis", 1}}},
      // zeros: a row's first one (its own gradient), one after it (gradient 0), and two rows
      // without, along either direction
      {Op::CumProd,
       {given(f64s({3, 4}, {0.5, 0, 2, 0, 1.5, -0.7, 0.3, 1.1, 0.9, 1.2, 0, -0.4}))},
       {{"axis", 1}}},
      {Op::CumProd,
       {given(f64s({3, 4}, {0.5, 0, 2, 0, 1.5, -0.7, 0.3, 1.1, 0.9, 1.2, 0, -0.4}))},
       {{"axis", 1}, {"reverse", true}}},
      {Op::CumProd, {f({4, 3}, 0.5, 1.5)}, {{"axis", 0}, {"reverse", true}}},
      {Op::CumSum, {f({2, 4})}, {{"axis", 1}, {"reverse", true}, {"exclusive", true}}},

      // ---- movement
      {Op::Reshape, {f({2, 3, 2})}, {{"shape", Ints{3, -1}}}},
      {Op::ReshapeLike, {f({2, 3, 2}), f({3, 4})}, {{"shape", Ints{-2, -1}}}},
      {Op::Transpose, {f({2, 3, 4})}, {{"perm", Ints{2, 0, 1}}}},
      {Op::Slice, {f({3, 7})}, {{"axis", 1}, {"start", 1}, {"end", 6}}},
      {Op::Slice, {f({3, 7})}, {{"axis", 1}, {"start", 1}, {"step", 3}}},
      {Op::Slice, {f({7, 2})}, {{"axis", 0}, {"start", -2}, {"end", 0}, {"step", -2}}},
      {Op::Slice, {f({5, 2})}, {{"axis", 0}, {"step", -1}}},
      {Op::Concat, {f({2, 3}), f({1, 3}), f({3, 3})}, {{"axis", 0}}},
      {Op::Concat, {f({2, 1}), f({2, 3})}, {{"axis", -1}}},
      {Op::Expand, {f({3, 1})}, {{"shape", Ints{2, 3, 4}}}},
      {Op::Pad, {f({2, 3})}, {{"pads", Ints{1, 0, 2, 1}}, {"value", 0.5}}},
      {Op::Pad, {f({3, 4})}, {{"pads", Ints{-1, 1, 0, -2}}}},
      {Op::Pad, {f({3, 4})}, {{"pads", Ints{2, 1, 1, 3}}, {"mode", std::string("reflect")}}},
      {Op::Pad, {f({2, 5})}, {{"pads", Ints{0, -1, 0, 3}}, {"mode", std::string("reflect")}}},
      {Op::Pad, {f({3, 4})}, {{"pads", Ints{2, 0, 1, 3}}, {"mode", std::string("replicate")}}},
      {Op::Tile, {f({2, 3})}, {{"repeats", Ints{2, 3}}}},
      {Op::Flip, {f({2, 3, 2})}, {{"axes", Ints{0, 2}}}},
      {Op::Split, {f({2, 6})}, {{"axis", 1}, {"sizes", Ints{1, 0, 2, 3}}}},

      // ---- indexing (indices carry no gradient; negative ones wrap)
      {Op::Gather, {f({4, 3}), idx({2, 3}, -4, 3)}, {{"axis", 0}}},
      {Op::Gather, {f({2, 5, 3}), idx({4}, 0, 4)}, {{"axis", 1}}},
      {Op::GatherElements, {f({3, 4}), idx({2, 4}, -3, 2)}, {{"axis", 0}}},
      {Op::GatherElements, {f({3, 4}), idx({3, 6}, 0, 3)}, {{"axis", 1}}},
      {Op::GatherND, {f({3, 4}), idx({2, 1}, 0, 2)}, {}},
      {Op::GatherND, {f({3, 4, 2}), idx({5, 2}, 0, 1)}, {}},
      {Op::GatherND, {f({2, 3, 4}), idx({2, 3, 1}, 0, 2)}, {{"batch_dims", 1}}},
      {Op::ScatterElements, {f({3, 4}), idx({2, 4}, 0, 2), f({2, 4})}, {{"axis", 0}}},
      {Op::ScatterElements,
       {f({3, 4}), idx({3, 3}, -4, 3), f({3, 3})},
       {{"axis", 1}, {"reduction", std::string("add")}}},
      {Op::ScatterElements,
       {f({3, 4}), idx({4, 4}, 0, 2), f({4, 4})},
       {{"axis", 0}, {"reduction", std::string("mul")}}},
      {Op::ScatterElements,
       {f({3, 4}), idx({4, 4}, 0, 2), f({4, 4})},
       {{"axis", 0}, {"reduction", std::string("max")}}},
      {Op::ScatterElements,
       {f({3, 4}), idx({3, 4}, 0, 3), f({3, 4})},
       {{"axis", 1}, {"reduction", std::string("min")}}},
      {Op::ScatterND, {f({4, 3}), idx({3, 1}, 0, 3), f({3, 3})}, {}},
      {Op::ScatterND,
       {f({4, 3}), idx({5, 1}, -4, 3), f({5, 3})},
       {{"reduction", std::string("add")}}},
      {Op::ScatterND, {f({3, 4}), idx({4, 2}, 0, 2), f({4})}, {{"reduction", std::string("mul")}}},
      {Op::ScatterND,
       {f({4, 3}), idx({5, 1}, 0, 3), f({5, 3})},
       {{"reduction", std::string("max")}}},
      {Op::ScatterND,
       {f({4, 3}), idx({5, 1}, 0, 3), f({5, 3})},
       {{"reduction", std::string("min")}}},
      {Op::TopK, {f({2, 5})}, {{"k", 3}}},
      {Op::TopK, {f({4, 3})}, {{"k", 2}, {"axis", 0}, {"largest", false}}},
      {Op::Embedding, {f({5, 3}), idx({2, 3}, 0, 4)}, {}},

      // ---- linear algebra
      {Op::MatMul, {f({2, 3}), f({3, 4})}, {}},
      {Op::MatMul, {f({3, 2}), f({3, 4})}, {{"transpose_a", true}}},
      {Op::MatMul, {f({2, 3}), f({4, 3})}, {{"transpose_b", true}}},
      {Op::MatMul, {f({2, 3, 2}), f({4, 3})}, {{"transpose_a", true}, {"transpose_b", true}}},
      {Op::MatMul, {f({2, 1, 2, 3}), f({4, 3, 2})}, {}},
      {Op::MatMul, {f({3}), f({2, 3, 4})}, {}},
      {Op::MatMul, {f({2, 2, 3}), f({3})}, {}},
      {Op::MatMul, {f({3}), f({3})}, {}},
      // 16 rows of q3_K take the kernel's f32 GEMM path; fewer rows, and the
      // types of the integer GEMM (q8_0, q4_K, ...) at any M, round the
      // activations to 8 bits, which finite differences would see as steps.
      {Op::DequantMatmul,
       {f32({16, 256}), given(quant_rows("q3_K", 3, 256)), f32({3})},
       {{"scheme", std::string("q3_K")}, {"k", 256}},
       1e-4},

      // ---- conv / pool
      {Op::Conv, {f({2, 2, 5, 5}), f({3, 2, 3, 3}), f({3})}, {{"pads", Ints{1, 1, 1, 1}}}},
      {Op::Conv,
       {f({1, 4, 6, 7}), f({6, 2, 3, 2})},
       {{"stride", Ints{2, 3}}, {"pads", Ints{1, 0, 2, 1}}, {"groups", 2}}},
      {Op::Conv, {f({1, 2, 7, 7}), f({2, 1, 3, 3})}, {{"dilation", Ints{2, 1}}, {"groups", 2}}},
      {Op::Conv, {f({2, 3, 9}), f({2, 3, 3}), f({2})}, {{"stride", Ints{2}}, {"pads", Ints{1, 2}}}},
      {Op::Conv, {f({1, 2, 4, 3, 3}), f({2, 2, 2, 2, 2})}, {{"stride", Ints{2, 1, 1}}}},
      {Op::ConvTranspose, {f({1, 2, 3, 3}), f({2, 3, 3, 3}), f({3})}, {{"stride", Ints{2, 2}}}},
      {Op::ConvTranspose,
       {f({2, 4, 3, 4}), f({4, 1, 2, 3})},
       {{"stride", Ints{2, 1}},
        {"pads", Ints{1, 0, 0, 1}},
        {"groups", 2},
        {"output_padding", Ints{1, 0}}}},
      {Op::ConvTranspose,
       {f({1, 2, 5}), f({2, 2, 3})},
       {{"dilation", Ints{2}}, {"stride", Ints{3}}, {"output_padding", Ints{1}}}},
      {Op::MaxPool2d, {f({2, 2, 4, 4})}, {{"kernel", Ints{2, 2}}}},
      {Op::MaxPool2d,
       {f({1, 2, 5, 6})},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {Op::MaxPool2d,
       {f({2, 5, 5})},
       {{"kernel", Ints{2, 3}}, {"stride", Ints{2, 2}}, {"ceil_mode", true}}},
      {Op::MaxPool2d,
       {f({1, 1, 7, 6})},
       {{"kernel", Ints{2, 2}}, {"dilation", Ints{2, 2}}, {"stride", Ints{1, 2}}}},
      {Op::BatchNormTrain, {f({3, 2, 3, 2})}, {{"eps", 1e-5}}},
      {Op::BatchNormTrain, {f({5, 3})}, {{"eps", 0.1}}},
      {Op::BatchNormTrain, {f({3, 2, 3, 2}), f({2}), f({2})}, {{"eps", 1e-5}}},  // the affine
      {Op::BatchNormTrain, {f({4, 3, 2}), f({3, 1}), f({3, 1})}, {{"eps", 1e-3}}},
      // Linear in dy; piecewise constant in x (no gradient).
      {Op::MaxPool2dGrad,
       {f({1, 2, 5, 6}), f({1, 2, 3, 3})},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {Op::AvgPool2d, {f({2, 2, 4, 4})}, {{"kernel", Ints{2, 2}}}},
      {Op::AvgPool2d,
       {f({1, 2, 5, 6})},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {Op::AvgPool2d,
       {f({1, 1, 5, 6})},
       {{"kernel", Ints{3, 2}},
        {"stride", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 0}},
        {"count_include_pad", false},
        {"ceil_mode", true}}},
      {Op::AvgPool2d, {f({2, 5, 5})}, {{"kernel", Ints{2, 2}}, {"ceil_mode", true}}},
      {Op::AdaptiveAvgPool2d, {f({1, 2, 5, 7})}, {{"output", Ints{2, 3}}}},
      {Op::AdaptiveAvgPool2d, {f({2, 4, 3})}, {{"output", Ints{4, 1}}}},

      // ---- normalization
      {Op::LayerNorm, {f({3, 5}, -2, 2), f({5}), f({5})}, {}},
      {Op::LayerNorm, {f({2, 3, 4}, -2, 2), f({3, 4})}, {{"naxes", 2}, {"eps", 1e-3}}},
      {Op::LayerNorm, {f({2, 4}, -2, 2)}, {}},
      {Op::RmsNorm, {f({3, 5}, -2, 2), f({5})}, {{"eps", 1e-6}}},
      {Op::RmsNorm, {f({2, 3, 4}, -2, 2)}, {{"naxes", 2}}},
      {Op::GroupNorm, {f({2, 4, 3}, -2, 2), f({4}), f({4})}, {{"groups", 2}}},
      {Op::GroupNorm, {f({1, 6, 2, 2}, -2, 2)}, {{"groups", 3}}},
      {Op::BatchNorm, {f({2, 3, 4}), f({3}), f({3}, 0.5, 2), f({3}), f({3})}, {{"eps", 1e-3}}},
      {Op::LayerNorm2d, {f({2, 3, 2, 2}, -2, 2), f({3}), f({3})}, {}},

      // ---- attention and rope
      {Op::Attention, {f({1, 2, 3, 4}), f({1, 2, 3, 4}), f({1, 2, 3, 4})}, {}},
      {Op::Attention,
       {f({1, 4, 3, 4}), f({1, 2, 5, 4}), f({1, 2, 5, 2})},
       {{"mask", std::string("causal")}, {"scale", 0.3}}},
      {Op::Attention,
       {f({2, 2, 4, 2}), f({2, 1, 4, 2}), f({2, 1, 4, 3})},
       {{"mask", std::string("sliding")}, {"window", 2}}},
      {Op::Attention,
       {f({1, 2, 3, 4}), f({1, 2, 4, 4}), f({1, 2, 4, 4}), f({1, 3, 4})},
       {{"mask", std::string("bias")}}},
      {Op::Attention,
       {f({1, 2, 3, 4}), f({1, 2, 4, 4}), f({1, 2, 4, 4}), boolean({3, 4})},
       {{"mask", std::string("bias")}}},
      {Op::Attention,  // q, k, v and the output as [B, S, H, D]
       {f({1, 3, 4, 2}), f({1, 4, 2, 2}), f({1, 4, 2, 3})},
       {{"mask", std::string("causal")}, {"layout", std::string("bshd")}}},
      {Op::Attention,  // soft-capped scores, a bias added after the cap
       {f({1, 2, 3, 4}, -2, 2), f({1, 1, 4, 4}, -2, 2), f({1, 1, 4, 4}), f({3, 4})},
       {{"mask", std::string("bias")}, {"softcap", 1.5}}},
      {Op::Attention,
       {f({1, 2, 4, 2}, -2, 2), f({1, 2, 4, 2}, -2, 2), f({1, 2, 4, 3})},
       {{"mask", std::string("sliding")}, {"window", 2}, {"softcap", 0.8}}},
      // ---- sequence ops: backpropagation through their unrolled primitives. The recurrent
      // kernels are float32, so those finite differences take h = 1e-2 and allow 2e-3.
      {Op::Lstm,
       {f32({2, 3, 4}), f32({12, 4}, -0.5, 0.5), f32({12, 3}, -0.5, 0.5), f32({12})},
       {{"hidden", 3}},
       2e-3},
      {Op::Lstm,  // 2 layers, both directions, [S, B, in], initial states, lengths
       {f32({3, 2, 6}), f32({4, 12, 6}, -0.5, 0.5), f32({4, 12, 3}, -0.5, 0.5), f32({4, 12}),
        f32({4, 2, 3}), f32({4, 2, 3}), idx({2}, 1, 3)},
       {{"hidden", 3},
        {"num_layers", 2},
        {"direction", std::string("bidirectional")},
        {"batch_first", false},
        {"carry", true},
        {"lengths", true}},
       2e-3},
      {Op::Lstm,  // ONNX's gate order, clip, peepholes, reverse
       {f32({1, 3, 2}), f32({8, 2}, -0.5, 0.5), f32({8, 2}, -0.5, 0.5), f32({16}),
        f32({1, 6}, -0.5, 0.5)},
       {{"hidden", 2},
        {"gates", std::string("onnx")},
        {"clip", 5.0},
        {"peephole", true},
        {"direction", std::string("reverse")}},
       2e-3},
      {Op::Gru,
       {f32({2, 3, 4}), f32({9, 4}, -0.5, 0.5), f32({9, 3}, -0.5, 0.5), f32({18})},
       {{"hidden", 3}},
       2e-3},
      {Op::Gru,  // ONNX's: gate order, the reset before the matmul, b_ih | b_hh
       {f32({2, 3, 4}), f32({9, 4}, -0.5, 0.5), f32({9, 3}, -0.5, 0.5), f32({18}), f32({1, 2, 3})},
       {{"hidden", 3},
        {"gates", std::string("onnx")},
        {"linear_before_reset", false},
        {"carry", true}},
       2e-3},
      {Op::Rnn,
       {f32({2, 4, 3}), f32({2, 2, 3}, -0.5, 0.5), f32({2, 2, 2}, -0.5, 0.5), f32({2, 2})},
       {{"hidden", 2}, {"direction", std::string("bidirectional")}},
       2e-3},
      {Op::GatedDeltaNet,
       {f({1, 3, 2, 2}), f({1, 3, 2, 2}), f({1, 3, 2, 2}), f({1, 3, 2}, -1, 0), f({1, 3, 2}, 0, 1)},
       {{"state_size", 2}}},
      {Op::GatedDeltaNet,
       {f({2, 2, 1, 3}), f({2, 2, 1, 3}), f({2, 2, 1, 3}), f({2, 2, 1}, -1, 0), f({2, 2, 1}, 0, 1),
        f({2, 1, 3, 3})},
       {{"state_size", 3}}},
      {Op::SelectiveScan,
       {f({1, 3, 2}), f({1, 3, 2}, 0.1, 1), f({2, 2}, -1, 0), f({1, 3, 2}), f({1, 3, 2})},
       {}},
      {Op::SelectiveScan,
       {f({2, 2, 3}), f({2, 2, 3}, 0.1, 1), f({3, 2}, -1, 0), f({2, 2, 2}), f({2, 2, 2}), f({3}),
        f({2, 3, 2})},
       {{"d_skip", true}, {"carry", true}}},
      {Op::Rope, {f({1, 2, 3, 4}), idx({3}, 0, 9)}, {}},
      {Op::Rope, {f({1, 2, 3, 4}), idx({3}, -3, 9), f({2}, 0.5, 2)}, {{"theta", 500.0}}},
      {Op::Rope,
       {f({2, 1, 3, 6}), idx({3}, 0, 9), f({2}, 0.5, 2)},
       {{"style", std::string("interleaved")}, {"rotary_dims", 4}, {"theta", 100.0}}},

      // ---- resampling
      {Op::Resize, {f({1, 2, 3, 4})}, {{"size", Ints{5, 3}}}},
      {Op::Resize,
       {f({1, 1, 4, 3})},
       {{"size", Ints{3, 5}}, {"mode", std::string("nearest_exact")}}},
      {Op::Resize, {f({1, 2, 3, 4})}, {{"size", Ints{5, 7}}, {"mode", std::string("bilinear")}}},
      {Op::Resize,
       {f({1, 1, 3, 4})},
       {{"size", Ints{4, 2}}, {"mode", std::string("bilinear")}, {"align_corners", true}}},
      {Op::Resize,
       {f({1, 1, 4, 5})},
       {{"size", Ints{6, 3}},
        {"mode", std::string("bicubic")},
        {"scales", std::vector<double>{1.5, 0.6}}}},
      {Op::Resize,
       {f({1, 1, 6, 5})},
       {{"size", Ints{3, 2}}, {"mode", std::string("bilinear")}, {"antialias", true}}},
      {Op::GridSample, {f({1, 2, 3, 4}), f({1, 2, 3, 2}, -1.2, 1.2)}, {}},
      {Op::GridSample,
       {f({2, 1, 4, 3}), f({2, 3, 2, 2}, -1.2, 1.2)},
       {{"padding", std::string("border")}, {"align_corners", true}}},
      {Op::GridSample,
       {f({1, 2, 3, 4}), f({1, 2, 2, 2}, -1.1, 1.1)},
       {{"mode", std::string("nearest")}}},
      {Op::GridSample,
       {f({1, 2, 3, 4}), f({1, 3, 2, 2}, -2.5, 2.5)},
       {{"padding", std::string("reflection")}}},
      {Op::GridSample,
       {f({1, 1, 4, 3}), f({1, 3, 2, 2}, -2.5, 2.5)},
       {{"padding", std::string("reflection")}, {"align_corners", true}}},
      {Op::GridSample,
       {f({1, 2, 4, 5}), f({1, 2, 3, 2}, -1.2, 1.2)},
       {{"mode", std::string("bicubic")}}},
      {Op::GridSample,
       {f({1, 1, 4, 5}), f({1, 2, 3, 2}, -1.3, 1.3)},
       {{"mode", std::string("bicubic")},
        {"padding", std::string("border")},
        {"align_corners", true}}},
      {Op::GridSample,
       {f({1, 1, 4, 5}), f({1, 2, 3, 2}, -2.5, 2.5)},
       {{"mode", std::string("bicubic")}, {"padding", std::string("reflection")}}},

      // ---- losses
      {Op::SoftmaxCrossEntropy, {f({4, 5}, -2, 2), idx({4}, 0, 4)}, {}},
      {Op::SoftmaxCrossEntropy,
       {f({4, 3}, -2, 2), idx({4}, 0, 2)},
       {{"reduction", std::string("sum")}, {"ignore_index", 1}}},
      {Op::SoftmaxCrossEntropy,
       {f({3, 4}, -2, 2), idx({3}, 0, 3)},
       {{"reduction", std::string("none")}}},

      // ---- random: linear in x for a fixed (seed, step); the vjp redraws the same mask
      {Op::Dropout, {f({4, 5}), idx({}, 0, 9)}, {{"p", 0.5}, {"seed", 3}}},
      {Op::Dropout, {f({2, 3, 4}), idx({}, 0, 9)}, {{"p", 0.1}, {"seed", 11}}},
  };
  return c;
}

std::string label(const Case& c) { return std::string(op_name(c.op)) + " {" + c.attrs.str() + "}"; }

// Forward graph of one sample: inputs x0.., the op, one output per float value.
struct Sample {
  Graph g;
  std::vector<NodeId> ins, outs;
  TensorMap feed;
};

Sample build(const Case& c, uint64_t& seed) {
  Sample s;
  for (size_t i = 0; i < c.in.size(); ++i) {
    const In& in = c.in[i];
    const std::string name = "x" + std::to_string(i);
    s.ins.push_back(s.g.input(name, Shape(in.dims, in.dtype)));
    s.feed[name] = in.fixed.defined()
                       ? in.fixed
                       : testing::random_tensor(in.dims, in.dtype, seed++, in.lo, in.hi);
  }
  const NodeId y = s.g.add(c.op, s.ins, c.attrs);
  std::vector<NodeId> values{y};
  if (has_results(c.op)) {
    values.clear();
    for (size_t i = 0; i < s.g.node(y).results.size(); ++i) values.push_back(s.g.result(y, int(i)));
  }
  for (NodeId v : values)
    if (is_float(s.g.node(v).shape.dtype)) s.outs.push_back(v);
  for (size_t i = 0; i < s.outs.size(); ++i) s.g.add_output("y" + std::to_string(i), s.outs[i]);
  return s;
}

// Largest |analytic - fd| / max(1, |fd|) over every element of every float input.
double max_fd_error(const Case& c, uint64_t& seed) {
  Sample s = build(c, seed);
  TensorMap cts;
  for (size_t i = 0; i < s.outs.size(); ++i) {
    const Shape& sh = s.g.node(s.outs[i]).shape;
    cts["ct" + std::to_string(i)] = testing::random_tensor(sh.concrete(), sh.dtype, seed++);
  }
  // The gradient graph: the forward graph plus cotangent inputs and vjp().
  Graph bg = s.g;
  std::vector<NodeId> ct_nodes, wrt;
  std::vector<std::string> wrt_names;
  for (size_t i = 0; i < s.outs.size(); ++i)
    ct_nodes.push_back(bg.input("ct" + std::to_string(i), bg.node(s.outs[i]).shape));
  for (size_t i = 0; i < c.in.size(); ++i)
    if (is_float(c.in[i].dtype)) {
      wrt.push_back(s.ins[i]);
      wrt_names.push_back("x" + std::to_string(i));
    }
  const std::vector<NodeId> grads = vjp(bg, s.outs, ct_nodes, wrt);
  for (size_t i = 0; i < grads.size(); ++i) bg.add_output("grad::" + wrt_names[i], grads[i]);
  TensorMap feed = s.feed;
  for (const auto& [k, v] : cts) feed[k] = v;
  const TensorMap analytic = testing::run_graph(bg, feed);

  auto fwd = Executable::compile(s.g, {});
  Session session(fwd);
  auto loss = [&](const TensorMap& in) {
    const TensorMap out = session.run(in);
    double l = 0;
    for (size_t i = 0; i < s.outs.size(); ++i)
      l += dot(out.at("y" + std::to_string(i)), cts.at("ct" + std::to_string(i)));
    return l;
  };
  double worst = 0;
  for (const std::string& name : wrt_names) {
    const Tensor& base = s.feed.at(name);
    const Tensor& a = analytic.at("grad::" + name);
    EXPECT_EQ(a.dims(), base.dims()) << name;
    const double h = base.dtype() == DType::F64 ? 1e-6 : 1e-2;
    for (int64_t j = 0; j < base.numel(); ++j) {
      TensorMap in = s.feed;
      Tensor plus = base.to(DType::F64), minus = base.to(DType::F64);
      plus.data<double>()[j] += h;
      minus.data<double>()[j] -= h;
      in[name] = plus.to(base.dtype());
      // The step actually taken (f32 inputs round it).
      const double step = in[name].item_as_double(j);
      const double lp = loss(in);
      in[name] = minus.to(base.dtype());
      const double lm = loss(in), denom = step - in[name].item_as_double(j);
      const double fd = (lp - lm) / denom, got = a.item_as_double(j);
      const double err = std::abs(got - fd) / std::max(1.0, std::abs(fd));
      if (!(err <= c.tol))
        ADD_FAILURE() << name << "[" << j << "]: vjp " << got << ", finite difference " << fd;
      worst = std::max(worst, std::isnan(err) ? INFINITY : err);
    }
  }
  return worst;
}

TEST(AutodiffFD, EveryRuleMatchesFiniteDifferences) {
  uint64_t seed = 1;
  std::map<Op, double> worst;
  for (const Case& c : cases()) {
    SCOPED_TRACE(label(c));
    double err = 0;
    try {
      err = max_fd_error(c, seed);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      continue;
    }
    worst[c.op] = std::max(worst[c.op], err);
  }
  for (const auto& [op, err] : worst)
    std::printf("[fd] %-26s max rel err %.2e\n", op_name(op), err);
}

TEST(AutodiffFD, EveryRuleHasASample) {
  std::set<Op> covered;
  for (const Case& c : cases()) covered.insert(c.op);
  for (int i = 0; i < num_ops(); ++i) {
    if (op_gradient(Op(i)).support != GradSupport::rule) continue;
    EXPECT_TRUE(covered.count(Op(i))) << op_name(Op(i)) << " has a vjp rule but no FD sample";
  }
}

// The ops without a rule: differentiating through them throws. This list is
// the checked-in record (README "Autodiff"); extend it only with a reason.
const std::set<Op> kGaps = {Op::MoeFfn,  // an inference op of GGUF MoE models
                            Op::RmsNormGrad,
                            Op::LayerNormGrad,
                            Op::GroupNormGrad,
                            Op::ActivationGrad,
                            Op::SoftmaxCrossEntropyGrad,
                            Op::FakeQuantizeGrad,
                            Op::BatchNormTrainGrad,
                            Op::AttentionGrad,
                            Op::SpecialUnary,  // lgamma, bessel, polygamma, ...: forward only
                            Op::SpecialBinary,
                            Op::Linalg,  // cholesky, solve, qr, svd, eigh, ...: forward only
                            Op::Unique,  // its values: a gather at data-dependent indices
                            Op::If,      // control flow: bodies not differentiated yet
                            Op::Loop};

// Rules that are surrogates by design (straight-through estimators): finite differences of a
// rounding op are zero almost everywhere, so they are not samples here. Each is checked against
// its estimator's formula and against PyTorch in tests/backends/cpu/fake_quantize_test.cc.
const std::set<Op> kEstimators = {Op::FakeQuantize};

TEST(AutodiffFD, EstimatorsAreTheListedOnes) {
  std::set<Op> est;
  for (int i = 0; i < num_ops(); ++i)
    if (op_gradient(Op(i)).support == GradSupport::estimator) {
      est.insert(Op(i));
      EXPECT_FALSE(op_gradient(Op(i)).why.empty()) << op_name(Op(i));
    }
  EXPECT_EQ(est, kEstimators);
  for (const Case& c : cases()) EXPECT_FALSE(kEstimators.count(c.op)) << op_name(c.op);
}

TEST(AutodiffFD, GapsAreTheListedOnes) {
  std::set<Op> gaps;
  for (int i = 0; i < num_ops(); ++i)
    if (op_gradient(Op(i)).support == GradSupport::gap) {
      gaps.insert(Op(i));
      EXPECT_FALSE(op_gradient(Op(i)).why.empty()) << op_name(Op(i));
    }
  EXPECT_EQ(gaps, kGaps);
}

}  // namespace
}  // namespace rlx::autodiff_fd_test
