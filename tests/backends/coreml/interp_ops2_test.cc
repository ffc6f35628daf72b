// Interpreter-vs-CPU parity cases for the backward ops (every output, every activation kind),
// rope, one_hot, gather_nd, the scatters, topk, conv_transpose and resize. They join the table
// in interp_ops_test.cc (fp32 and fp16, CoreML5/6/7, and the opset a case names).
//
// Tolerances: composed backward ops run several reductions over fp16-rounded intermediates, so
// their fp16 bound is 3e-2 (normalized values are O(1)); fp32 stays at 1e-5 except where a case
// says why.
#include <algorithm>

#include "interp_cases.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx::interp_cases {
namespace {

template <typename T>
std::function<Tensor()> fixed(Dims d, std::vector<T> vals, DType dt) {
  return [d, vals, dt] { return Tensor::from_vector(d, vals, dt); };
}

In labels(std::vector<int64_t> l) {
  In in = ints({int64_t(l.size())}, 0, 0, DType::I64);
  in.make = fixed<int64_t>(in.dims, l, DType::I64);
  return in;
}

In fixed_i64(Dims d, std::vector<int64_t> vals) {
  In in = ints(d, 0, 0, DType::I64);
  in.make = fixed<int64_t>(d, vals, DType::I64);
  return in;
}

void grad_cases(std::vector<OpCase>& c) {
  const Dims s{2, 3, 4}, img{2, 4, 3, 3};
  const double t16 = 3e-2;
  // Every output of a norm grad is compared (the harness outputs them all).
  c.push_back({"rms_norm_grad", Op::RmsNormGrad, {f(s), f(s), p({4})}, {{"eps", 1e-6}}, 1e-5, t16});
  c.push_back({"rms_norm_grad_nogamma_2axes",
               Op::RmsNormGrad,
               {f(s), f(s)},
               {{"naxes", int64_t(2)}},
               1e-5,
               t16});
  c.push_back({"rms_norm_grad_all_axes",
               Op::RmsNormGrad,
               {f(s), f(s)},
               {{"naxes", int64_t(3)}},
               1e-5,
               t16});
  c.push_back({"layer_norm_grad", Op::LayerNormGrad, {f(s), f(s), p({4})}, {}, 1e-5, t16});
  c.push_back({"layer_norm_grad_2axes",
               Op::LayerNormGrad,
               {f(s), f(s), p({3, 4})},
               {{"naxes", int64_t(2)}, {"eps", 1e-3}},
               1e-5,
               t16});
  c.push_back({"group_norm_grad",
               Op::GroupNormGrad,
               {f(img), f(img), p({4})},
               {{"groups", int64_t(2)}},
               1e-5,
               t16});
  c.push_back({"layer_norm_grad_nogamma", Op::LayerNormGrad, {f(s), f(s)}, {}, 1e-5, t16});
  c.push_back({"group_norm_grad_nogamma",
               Op::GroupNormGrad,
               {f({1, 6, 4}), f({1, 6, 4})},
               {{"groups", int64_t(3)}},
               1e-5,
               t16});
  // activation_grad for every kind; x ranges keep each derivative away from its domain edges.
  for (size_t i = size_t(Op::Relu); i <= size_t(Op::Clamp); ++i) {
    const Op k = Op(i);
    Attrs a{{"kind", std::string(op_name(k))}};
    double lo = -2, hi = 2;
    if (k == Op::Log || k == Op::Sqrt || k == Op::Rsqrt || k == Op::Reciprocal) lo = 0.25;
    if (k == Op::Tan) lo = -1.2, hi = 1.2;
    if (k == Op::HardSwish || k == Op::HardSigmoid) lo = -5, hi = 5;
    if (k == Op::Clamp) a.set("min", -0.5).set("max", 0.75);
    if (k == Op::Elu) a.set("alpha", 0.7);
    if (k == Op::LeakyRelu) a.set("slope", 0.2);
    if (k == Op::HardSigmoid) a.set("alpha", 0.2).set("beta", 0.4);
    c.push_back({std::string("activation_grad_") + op_name(k),
                 Op::ActivationGrad,
                 {f(s, lo, hi), f(s)},
                 a,
                 1e-5,
                 1e-2});
  }
  c.push_back({"activation_grad_softplus_beta_threshold",
               Op::ActivationGrad,
               {f(s, -3, 3), f(s)},
               {{"kind", std::string("softplus")}, {"beta", 2.0}, {"threshold", 3.0}},
               1e-5,
               1e-2});
  c.push_back({"activation_grad_clamp_max_only",
               Op::ActivationGrad,
               {f(s), f(s)},
               {{"kind", std::string("clamp")}, {"max", 0.25}},
               1e-5,
               1e-2});
  c.push_back({"activation_grad_clamp_none",
               Op::ActivationGrad,
               {f(s), f(s)},
               {{"kind", std::string("clamp")}},
               1e-5,
               1e-2});
  // cross entropy: label rows include an ignored one (the default -100, or a custom index)
  const std::vector<int64_t> lab{1, -100, 6, 0, 3}, lab2{2, 2, 6, 0, 3};
  for (const std::string red : {"mean", "sum", "none"}) {
    c.push_back({"softmax_ce_" + red,
                 Op::SoftmaxCrossEntropy,
                 {f({5, 7}, -3, 3), labels(lab)},
                 {{"reduction", red}},
                 1e-5,
                 1e-2});
    c.push_back({"softmax_ce_grad_" + red,
                 Op::SoftmaxCrossEntropyGrad,
                 {f({5, 7}, -3, 3), labels(lab), f(red == "none" ? Dims{5} : Dims{}, 0.5, 2)},
                 {{"reduction", red}},
                 1e-5,
                 1e-2});
  }
  c.push_back({"softmax_ce_ignore_index",
               Op::SoftmaxCrossEntropy,
               {f({5, 7}, -3, 3), labels(lab2)},
               {{"ignore_index", int64_t(2)}},
               1e-5,
               1e-2});
  c.push_back({"softmax_ce_grad_ignore_index",
               Op::SoftmaxCrossEntropyGrad,
               {f({5, 7}, -3, 3), labels(lab2), f(Dims{}, 0.5, 2)},
               {{"ignore_index", int64_t(2)}},
               1e-5,
               1e-2});
}

void indexing_cases(std::vector<OpCase>& c) {
  const Dims q{1, 2, 5, 8};
  // rope: positions up to 200. MIL computes the angles in fp32 (even in fp16 programs), the CPU
  // in double: an angle of 200 rad is off by up to ~2.4e-5, hence 1e-4 in fp32.
  auto rope = [&](const std::string& n, std::vector<In> in, Attrs a) {
    c.push_back({n, Op::Rope, std::move(in), a, 1e-4, 1e-2});
  };
  rope("rope_neox", {f(q), ints({5}, 0, 200, DType::I64)}, {});
  rope("rope_interleaved", {f(q), ints({5}, 0, 200, DType::I64)},
       {{"style", std::string("interleaved")}, {"theta", 500.0}});
  rope("rope_partial", {f(q), ints({5}, 0, 200, DType::I64)}, {{"rotary_dims", int64_t(4)}});
  rope("rope_partial_interleaved_ff", {f(q), ints({5}, 0, 200, DType::I64), p({2}, 1, 4)},
       {{"rotary_dims", int64_t(4)}, {"style", std::string("interleaved")}});
  rope("rope_freq_factors", {f(q), ints({5}, 0, 200, DType::I64), p({4}, 1, 8)}, {});
  // one_hot: negative indices wrap by depth
  c.push_back(
      {"one_hot", Op::OneHot, {ints({2, 3}, -4, 3, DType::I64)}, {{"depth", int64_t(4)}}, 0, 0});
  c.push_back({"one_hot_f32",
               Op::OneHot,
               {ints({5}, -3, 2, DType::I32)},
               {{"depth", int64_t(3)}, {"dtype", std::string("f32")}},
               0,
               0});
  // gather_nd: depth 2 into [3, 4, 5] (indices in [-3, 2] valid for both dims), batch_dims 1
  c.push_back(
      {"gather_nd", Op::GatherND, {f({3, 4, 5}), ints({2, 3, 2}, -3, 2, DType::I64)}, {}, 0, 0});
  c.push_back({"gather_nd_full_depth",
               Op::GatherND,
               {f({3, 4}), ints({4, 2}, -3, 2, DType::I64)},
               {},
               0,
               0});
  c.push_back({"gather_nd_batch_dims",
               Op::GatherND,
               {f({2, 4, 5}), ints({2, 3, 1}, -4, 3, DType::I64)},
               {{"batch_dims", int64_t(1)}},
               0,
               0,
               nullptr,
               6,
               6});
  // scatter_elements: "none" needs distinct targets; reductions take duplicates
  const std::vector<int64_t> perm{2, 0, -1, 1, 1, 1, 0, 2};  // [2, 4] along axis 0 of [3, 4]
  c.push_back({"scatter_elements",
               Op::ScatterElements,
               {f({3, 4}), fixed_i64({2, 4}, perm), f({2, 4})},
               {},
               0,
               0});
  for (const std::string red : {"add", "mul", "max", "min"})
    c.push_back({"scatter_elements_" + red,
                 Op::ScatterElements,
                 {f({4, 3}), ints({4, 2}, -3, 2, DType::I64), f({4, 2})},
                 {{"axis", int64_t(1)}, {"reduction", red}},
                 1e-6,
                 2e-3});
  c.push_back(
      {"scatter_nd", Op::ScatterND, {f({4, 3}), fixed_i64({2, 1}, {3, -4}), f({2, 3})}, {}, 0, 0});
  c.push_back({"scatter_nd_depth2",
               Op::ScatterND,
               {f({4, 3, 2}), fixed_i64({3, 2}, {0, 1, -1, 2, 2, 0}), f({3, 2})},
               {},
               0,
               0});
  for (const std::string red : {"add", "mul", "max", "min"})
    c.push_back({"scatter_nd_" + red,
                 Op::ScatterND,
                 {f({4, 3}), ints({5, 1}, -4, 3, DType::I64), f({5, 3})},
                 {{"reduction", red}},
                 1e-6,
                 2e-3});
  // topk (random fp16-representable values: no ties at these sizes for these seeds)
  const Dims t{2, 3, 9};
  c.push_back({"topk", Op::TopK, {f(t)}, {{"k", int64_t(3)}}, 0, 0});  // values and indices
  c.push_back({"topk_smallest_axis1",
               Op::TopK,
               {f(t)},
               {{"k", int64_t(2)}, {"axis", int64_t(1)}, {"largest", int64_t(0)}},
               0,
               0});
  c.push_back(
      {"topk_unsorted", Op::TopK, {f(t)}, {{"k", int64_t(5)}, {"sorted", int64_t(0)}}, 0, 0});
  // split into uneven pieces along a middle axis and the last
  c.push_back({"split", Op::Split, {f(t)}, {{"axis", int64_t(1)}, {"sizes", v({1, 2})}}, 0, 0});
  c.push_back(
      {"split_last", Op::Split, {f(t)}, {{"axis", int64_t(-1)}, {"sizes", v({4, 5})}}, 0, 0});
  // attention with grouped key heads (query head i reads kv head i / 2)
  for (int opset : {6, 8})
    c.push_back({"attention_gqa_causal" + std::string(opset == 8 ? "_sdpa" : ""),
                 Op::Attention,
                 {f({1, 4, 5, 8}), f({1, 2, 7, 8}), f({1, 2, 7, 8})},
                 {{"mask", std::string("causal")}},
                 1e-5,
                 1e-2,
                 nullptr,
                 opset});
  // conv_transpose
  auto convt = [&](const std::string& n, In x, In w, bool bias, Attrs a) {
    std::vector<In> in{x, w};
    if (bias) in.push_back(p({w.dims[1] * a.i("groups", 1)}));
    c.push_back({n, Op::ConvTranspose, in, a, 1e-5, 1e-2});
  };
  convt("conv_transpose2d", f({1, 3, 4, 5}), p({3, 2, 3, 3}), true,
        {{"stride", v({2, 2})}, {"pads", v({1, 1, 1, 1})}});
  convt("conv_transpose2d_outpad_dil", f({2, 2, 3, 4}), p({2, 3, 2, 3}), false,
        {{"stride", v({2, 3})},
         {"dilation", v({2, 1})},
         {"pads", v({0, 1, 1, 0})},
         {"output_padding", v({1, 2})}});
  convt("conv_transpose2d_groups", f({1, 4, 3, 3}), p({4, 3, 3, 3}), true,
        {{"groups", int64_t(2)}, {"stride", v({2, 2})}});
  convt("conv_transpose1d", f({2, 3, 6}), p({3, 4, 3}), true,
        {{"stride", v({3})}, {"pads", v({2, 1})}});
}

// A bound u8 [rows, row_bytes] weight: random values in [-1, 1] quantized to `scheme`.
In quantized(int64_t rows, int64_t k, const std::string& scheme, uint64_t seed) {
  const auto t = quant::parse_type_name(scheme);
  const int64_t rb = int64_t(quant::row_size(t, k));
  In in{{rows, rb}, DType::U8, 0, 0, true};
  in.make = [=] {
    Tensor w = testing::random_tensor({rows, k}, DType::F32, seed);
    Tensor q(Dims{rows, rb}, DType::U8);
    quant::quantize(t, w.data<float>(), q.data<uint8_t>(), rows * k);
    return q;
  };
  return in;
}

void resample_cases(std::vector<OpCase>& c) {
  auto resize = [&](const std::string& n, Dims x, std::vector<int64_t> size, Attrs a) {
    a.set("size", size);
    c.push_back({n, Op::Resize, {f(x)}, a, 1e-5, 1e-2});
  };
  const std::string nearest = "nearest", exact = "nearest_exact", bil = "bilinear";
  resize("resize_nearest_up", {1, 2, 3, 5}, {7, 9}, {{"mode", nearest}});
  resize("resize_nearest_down", {2, 1, 8, 7}, {3, 4}, {{"mode", nearest}});
  resize("resize_nearest_x2", {1, 2, 3, 4}, {6, 8}, {{"mode", nearest}});
  resize("resize_nearest_scales", {1, 1, 4, 4}, {10, 6},
         {{"mode", nearest}, {"scales", std::vector<double>{2.5, 1.5}}});
  resize("resize_nearest_exact", {1, 2, 5, 3}, {7, 8}, {{"mode", exact}});
  resize("resize_bilinear_align", {1, 2, 4, 5}, {7, 9},
         {{"mode", bil}, {"align_corners", int64_t(1)}});
  resize("resize_bilinear_align_down", {1, 2, 8, 9}, {3, 4},
         {{"mode", bil}, {"align_corners", int64_t(1)}});
  resize("resize_bilinear", {1, 2, 4, 5}, {7, 3}, {{"mode", bil}});
  resize("resize_bilinear_down", {2, 1, 9, 8}, {4, 3}, {{"mode", bil}});
  resize("resize_bilinear_scales", {1, 1, 4, 4}, {10, 6},
         {{"mode", bil}, {"scales", std::vector<double>{2.5, 1.5}}});
  // grid_sample: grid in [-1.2, 1.2] so some taps fall outside (zeros padding masks them)
  auto gs = [&](const std::string& n, Attrs a) {
    c.push_back({n, Op::GridSample, {f({2, 3, 5, 6}), f({2, 4, 7, 2}, -1.2, 1.2)}, a, 1e-5, 1e-2});
  };
  gs("grid_sample", {});
  gs("grid_sample_align", {{"align_corners", int64_t(1)}});
  gs("grid_sample_border", {{"padding", std::string("border")}});
  gs("grid_sample_nearest", {{"mode", std::string("nearest")}});
  gs("grid_sample_nearest_border_align", {{"mode", std::string("nearest")},
                                          {"padding", std::string("border")},
                                          {"align_corners", int64_t(1)}});
  // dequant_matmul: the CPU kernel quantizes the activations to the scheme's vec_dot type
  // (q8_0 / q8_K: ~1/254 relative per element) while CoreML multiplies by the dequantized
  // weight in float, so quantized schemes compare at 3e-2 (0.1 for q4_K: K = 256 gives outputs
  // ~5 and errors ~1% of that); f16 weights use f32 activations and compare at 1e-5. A wrong
  // block layout would be off by O(1).
  auto dqmm = [&](const std::string& scheme, int64_t k, bool bias, double t32) {
    std::vector<In> in{f({2, 3, k}), quantized(6, k, scheme, 77)};
    if (bias) in.push_back(p({6}));
    c.push_back({"dequant_matmul_" + scheme + (bias ? "_bias" : ""),
                 Op::DequantMatmul,
                 in,
                 {{"scheme", scheme}, {"k", k}},
                 t32,
                 std::max(t32, 3e-2)});
  };
  dqmm("q8_0", 64, false, 3e-2);
  dqmm("q4_0", 64, true, 3e-2);
  dqmm("q4_K", 256, false, 0.1);
  dqmm("f16", 48, true, 1e-5);
  for (const std::string scheme : {"q8_0", "q4_K"}) {
    const int64_t k = scheme == "q4_K" ? 256 : 32;
    c.push_back({"dequant_embedding_" + scheme,
                 Op::DequantEmbedding,
                 {quantized(10, k, scheme, 5), ints({2, 3}, 0, 9, DType::I64)},
                 {{"scheme", scheme}, {"k", k}},
                 0,
                 1e-3});
  }
}

}  // namespace

// fake_quantize(_grad): the CPU kernel's arithmetic step by step, so fp32 programs match it
// (round-off only in lsq's scale sum); fp16 moves values across grid points, so fp32 only.
void quant_cases(std::vector<OpCase>& c) {
  const Dims s{2, 3, 7};
  auto fq = [&](const std::string& n, Op op, std::vector<In> in, Attrs a) {
    c.push_back({n, op, std::move(in), a, 1e-5, -1});
  };
  const std::string input = "input";
  fq("fake_quantize_per_tensor", Op::FakeQuantize, {f(s, -2, 2)}, {});
  fq("fake_quantize_per_channel_int4", Op::FakeQuantize, {f(s, -2, 2)},
     {{"bits", int64_t(4)}, {"axis", int64_t(1)}});
  fq("fake_quantize_weight_int8", Op::FakeQuantize, {p({6, 5}, -1, 1)}, {{"axis", int64_t(0)}});
  fq("fake_quantize_weight_int2_per_tensor", Op::FakeQuantize, {p({6, 5}, -1, 1)},
     {{"bits", int64_t(2)}});
  fq("fake_quantize_input_scale_zero_point", Op::FakeQuantize,
     {f(s, -2, 2), f({3}, 0.01, 0.1), ints({3}, 0, 9)},
     {{"axis", int64_t(-2)},
      {"scale", input},
      {"quant_min", int64_t(0)},
      {"quant_max", int64_t(255)}});
  for (const std::string ste : {"identity", "clipped", "lsq"})
    fq("fake_quantize_grad_" + ste, Op::FakeQuantizeGrad,
       {f(s, -2, 2), f(s), f({3}, 0.01, 0.05), ints({3}, -3, 3)},
       {{"axis", int64_t(1)}, {"scale", input}, {"ste", ste}, {"bits", int64_t(4)}});
  fq("fake_quantize_grad_batch", Op::FakeQuantizeGrad, {f(s, -2, 2), f(s)}, {});
}

std::vector<OpCase> extra_cases() {
  std::vector<OpCase> c;
  quant_cases(c);
  grad_cases(c);
  indexing_cases(c);
  resample_cases(c);
  return c;
}

}  // namespace rlx::interp_cases
