// matmul, conv, pools, norms (composed where MIL has no op) and attention.
#include <cmath>
#include <type_traits>

#include "lower.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

// A fused bias and activation become MIL add and activation ops after the matmul.
Val lower_matmul(Lowering& L, const Node& n) {
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<MatMulAttrs>();
  const bool bias = matmul_has_bias(a.residual, n.inputs.size());
  const bool fused = bias || a.residual || a.activation != Epilogue::none;
  Val y = L.b.op("matmul",
                 {{"x", L.in(n, 0)},
                  {"y", L.in(n, 1)},
                  {"transpose_x", L.b.boolean(a.transpose_a, h + "_tx")},
                  {"transpose_y", L.b.boolean(a.transpose_b, h + "_ty")}},
                 L.type_of(n), fused ? h + "_mm" : h);
  if (!fused) return y;
  if (bias) y = L.b.op("add", {{"x", y}, {"y", L.in(n, 2)}}, y.type, h + "_bias");
  if (a.residual)
    y = L.b.op("add", {{"x", y}, {"y", L.in(n, n.inputs.size() - 1)}}, y.type, h + "_residual");
  return L.activation(a.activation, y, h);
}

// IR pads [b..., e...] -> MIL [b0, e0, b1, e1, ...]
std::vector<int64_t> interleave_pads(const std::vector<int64_t>& p) {
  std::vector<int64_t> r;
  const size_t sp = p.size() / 2;
  for (size_t i = 0; i < sp; ++i) r.insert(r.end(), {p[i], p[i + sp]});
  return r;
}

Val lower_conv(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const size_t sp = size_t(x.type.rank() - 2);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<ConvAttrs>();
  std::vector<std::pair<std::string, Arg>> in{
      {"x", x},
      {"weight", L.in(n, 1)},
      {"strides", L.b.ints(list_or(a.stride, sp, 1), h + "_strides")},
      {"pad_type", L.b.string("custom", h + "_pad_type")},
      {"pad", L.b.ints(interleave_pads(list_or(a.pads, 2 * sp, 0)), h + "_pad")},
      {"dilations", L.b.ints(list_or(a.dilation, sp, 1), h + "_dil")},
      {"groups", L.b.int_scalar(a.groups, h + "_groups")}};
  if (conv_has_bias(a.residual, n.inputs.size())) in.push_back({"bias", L.in(n, 2)});
  if (a.activation == Epilogue::none && !a.residual) return L.b.op("conv", in, L.type_of(n), h);
  Val y = L.b.op("conv", in, L.type_of(n), h + "_conv");
  // A fused residual: added after the bias, before the activation.
  if (a.residual)
    y = L.b.op("add", {{"x", y}, {"y", L.in(n, n.inputs.size() - 1)}}, y.type,
               a.activation == Epilogue::none ? h : h + "_res");
  return a.activation == Epilogue::none ? y : L.activation(a.activation, y, h);
}

// MIL pools want [N, C, H, W]; an unbatched [C, H, W] gets a leading 1. A is MaxPoolAttrs or
// AvgPoolAttrs.
template <typename A>
Val pool(Lowering& L, const Node& n, const char* type) {
  constexpr bool avg = std::is_same_v<A, AvgPoolAttrs>;
  const auto& a = n.attrs_as<A>();
  Val x = L.in(n, 0);
  const std::string h = L.hint(n);
  if constexpr (!avg) {
    RLX_CHECK(list_or(a.dilation, 2, 1) == std::vector<int64_t>({1, 1}),
              "coreml: dilated pooling is not lowered");
  }
  const bool unbatched = x.type.rank() == 3;
  if (unbatched) {
    std::vector<int64_t> s{1};
    s.insert(s.end(), x.type.dims.begin(), x.type.dims.end());
    x = L.reshape(x, s, h + "_batched");
  }
  const auto& k = a.kernel;
  const auto& stride = pool_stride(a);
  std::vector<std::pair<std::string, Arg>> in{
      {"x", x},
      {"kernel_sizes", L.b.ints(k, h + "_k")},
      {"strides", L.b.ints(stride, h + "_strides")},
      {"pad_type", L.b.string("custom", h + "_pad_type")},
      {"pad", L.b.ints(interleave_pads(list_or(a.pads, 4, 0)), h + "_pad")},
      {"ceil_mode", L.b.boolean(a.ceil_mode, h + "_ceil")}};
  if constexpr (avg)
    in.push_back({"exclude_padding_from_average", L.b.boolean(!a.count_include_pad, h + "_excl")});
  Type out = L.type_of(n);
  if (!unbatched) return L.b.op(type, in, out, h);
  Type bt = out;
  bt.dims.insert(bt.dims.begin(), 1);
  return L.reshape(L.b.op(type, in, bt, h + "_pool"), out.dims, h);
}
Val lower_max_pool(Lowering& L, const Node& n) { return pool<MaxPoolAttrs>(L, n, "max_pool"); }
Val lower_avg_pool(Lowering& L, const Node& n) { return pool<AvgPoolAttrs>(L, n, "avg_pool"); }

Val lower_adaptive_avg_pool(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const auto& o = n.attrs_as<AdaptivePoolAttrs>().output;
  RLX_CHECK(o == std::vector<int64_t>({1, 1}),
            "coreml: adaptive_avg_pool2d is lowered for output [1,1] only");
  const std::string h = L.hint(n);
  return L.b.op("reduce_mean",
                {{"x", x},
                 {"axes", L.b.ints({-2, -1}, h + "_axes")},
                 {"keep_dims", L.b.boolean(true, h + "_keep")}},
                L.type_of(n), h);
}

std::vector<int64_t> last_axes(int naxes) {
  std::vector<int64_t> a;
  for (int i = naxes; i >= 1; --i) a.push_back(-i);
  return a;
}

Val lower_layer_norm(Lowering& L, const Node& n) {
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<NormAttrs>();
  std::vector<std::pair<std::string, Arg>> in{
      {"x", L.in(n, 0)}, {"axes", L.b.ints(last_axes(int(a.naxes)), h + "_axes")}};
  if (n.inputs.size() >= 2) in.push_back({"gamma", L.in(n, 1)});
  if (n.inputs.size() >= 3) in.push_back({"beta", L.in(n, 2)});
  in.push_back({"epsilon", L.scalar_like(a.eps, L.in(n, 0), h + "_eps")});
  return L.b.op("layer_norm", in, L.type_of(n), h);
}

// x * rsqrt(reduce_mean(x*x) + eps) * gamma
Val lower_rms_norm(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<NormAttrs>();
  Val ms = L.reduce("reduce_mean", L.binary("mul", x, x, h + "_sq"), last_axes(int(a.naxes)), true,
                    h + "_ms");
  Val inv = L.b.op("rsqrt",
                   {{"x", L.binary("add", ms, L.scalar_like(a.eps, x, h + "_eps"), h + "_mse")},
                    {"epsilon", L.scalar_like(0, x, h + "_eps0")}},
                   ms.type, h + "_inv");
  if (n.inputs.size() < 2) return L.b.op("mul", {{"x", x}, {"y", inv}}, L.type_of(n), h);
  Val y = L.binary("mul", x, inv, h + "_norm");
  return L.b.op("mul", {{"x", y}, {"y", L.in(n, 1)}}, L.type_of(n), h);
}

// Per-channel affine for NC... layouts: gamma/beta [C] reshaped to [1, C, 1, ...].
Val channel_affine(Lowering& L, const Node& n, Val y, size_t gi, size_t bi, const std::string& h) {
  std::vector<int64_t> s(size_t(y.type.rank()), 1);
  if (n.inputs.size() > gi) {
    s[1] = L.in(n, gi).type.dims[0];
    y = L.binary("mul", y, L.reshape(L.in(n, gi), s, h + "_g"), h + "_scaled");
  }
  if (n.inputs.size() > bi) {
    s[1] = L.in(n, bi).type.dims[0];
    y = L.binary("add", y, L.reshape(L.in(n, bi), s, h + "_b"), h + "_shifted");
  }
  return L.b.op("identity", {{"x", y}}, L.type_of(n), h);
}

Val lower_group_norm(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<GroupNormAttrs>();
  const int64_t g = a.groups;
  std::vector<int64_t> rest(x.type.dims.begin() + 1, x.type.dims.end());
  for (int64_t d : rest) RLX_CHECK(d >= 0, "coreml: group_norm needs static C and spatial dims");
  int64_t m = 1;  // (C/G)*H*W, static so a symbolic batch can take the one -1
  for (int64_t d : rest) m *= d;
  Val r = L.reshape(x, {x.type.dims[0] >= 0 ? x.type.dims[0] : -1, g, m / g}, h + "_grouped");
  Val y = L.normalize(r, {-1}, a.eps, h);
  std::vector<int64_t> back = x.type.dims;
  if (back[0] < 0) back[0] = -1;
  return channel_affine(L, n, L.reshape(y, back, h + "_back"), 1, 2, h);
}

Val lower_layer_norm_2d(Lowering& L, const Node& n) {
  const std::string h = L.hint(n);
  return channel_affine(L, n, L.normalize(L.in(n, 0), {1}, n.attrs_as<EpsAttrs>().eps, h), 1, 2, h);
}

// (x - mean) * rsqrt(var + eps) * gamma + beta, statistics reshaped to [1, C, 1, ...].
Val lower_batch_norm(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  std::vector<int64_t> s(size_t(x.type.rank()), 1);
  s[1] = L.in(n, 1).type.dims[0];
  Val mean = L.reshape(L.in(n, 1), s, h + "_mean");
  Val var = L.reshape(L.in(n, 2), s, h + "_var");
  Val inv = L.b.op(
      "rsqrt",
      {{"x",
        L.binary("add", var, L.scalar_like(n.attrs_as<EpsAttrs>().eps, x, h + "_eps"), h + "_ve")},
       {"epsilon", L.scalar_like(0, x, h + "_eps0")}},
      var.type, h + "_inv");
  Val y = L.binary("mul", L.binary("sub", x, mean, h + "_d"), inv, h + "_norm");
  return channel_affine(L, n, y, 3, 4, h);
}

// Visibility mask as an additive bias [Sq, Sk]: 0 visible, a large negative value masked
// (finite, so a fully masked row stays finite in fp16).
Val mask_bias(Lowering& L, const Node& n, int64_t sq, int64_t sk, pb::DataType dt) {
  const auto& a = n.attrs_as<AttentionAttrs>();
  const bool sliding = a.mask == MaskKind::sliding;
  const int64_t off = sk - sq, window = sliding ? a.window : 0;
  Tensor t({sq, sk}, DType::F32);
  for (int64_t i = 0; i < sq; ++i)
    for (int64_t j = 0; j < sk; ++j) {
      bool vis = j <= i + off && (!sliding || j > i + off - window);
      t.data<float>()[i * sk + j] = vis ? 0.0f : -65000.0f;
    }
  return L.b.constant(t, dt, L.hint(n) + "_mask");
}

// Grouped key/value heads [B, Hkv, S, D] repeated to [B, H, S, D]: query head i reads kv head
// i / (H / Hkv), as the CPU kernel (expand_dims + tile + reshape).
Val repeat_kv(Lowering& L, const Val& kv, int64_t heads, const std::string& h) {
  const int64_t hkv = kv.type.dims[1], g = heads / hkv;
  Type e = kv.type;
  e.dims.insert(e.dims.begin() + 2, 1);
  Val x = L.b.op("expand_dims", {{"x", kv}, {"axes", L.b.ints({2}, h + "_axes")}}, e, h + "_e");
  Type t = e;
  t.dims[2] = g;
  x = L.b.op("tile", {{"x", x}, {"reps", L.b.ints({1, 1, g, 1, 1}, h + "_reps")}}, t, h + "_t");
  std::vector<int64_t> shape{kv.type.dims[0], heads, kv.type.dims[2], kv.type.dims[3]};
  int unknown = 0;
  for (auto& d : shape) unknown += d < 0 ? (d = -1, 1) : 0;
  RLX_CHECK(unknown <= 1, "coreml: grouped attention needs a static batch or length");
  return L.reshape(x, shape, h);
}

// Attention on [B, H, S, D] values q, k, v with output type `out`.
Val attention_bhsd(Lowering& L, const Node& n, const Val& q, Val k, Val v, const Type& out,
                   const std::string& h) {
  const auto& a = n.attrs_as<AttentionAttrs>();
  const MaskKind mask = a.mask;
  const int64_t hq = q.type.dims[1], hk = k.type.dims[1];
  RLX_CHECK(hq >= 0 && hk > 0 && hq % hk == 0 && v.type.dims[1] == hk,
            "coreml: attention needs static head counts with query heads a multiple of key heads");
  if (hq != hk) {
    k = repeat_kv(L, k, hq, h + "_k");
    v = repeat_kv(L, v, hq, h + "_v");
  }
  const int64_t d = q.type.dims[3], sq = q.type.dims[2], sk = k.type.dims[2];
  RLX_CHECK(d > 0, "coreml: attention needs a static head dim");
  const bool banded = mask == MaskKind::causal || mask == MaskKind::sliding;
  RLX_CHECK(!banded || (sq >= 0 && sk >= 0),
            "coreml: causal/sliding attention needs static lengths");
  const double scale = a.scale.value_or(1.0 / std::sqrt(double(d)));
  // CoreML8's fused op scales by 1/sqrt(D) itself and takes an additive or bool mask.
  if (L.opset() >= 8 && a.softcap == 0 &&
      std::abs(scale - 1.0 / std::sqrt(double(d))) < 1e-12 * scale) {
    std::vector<std::pair<std::string, Arg>> in{{"query", q}, {"key", k}, {"value", v}};
    if (banded) in.push_back({"attn_mask", mask_bias(L, n, sq, sk, q.type.dt)});
    if (mask == MaskKind::bias) in.push_back({"attn_mask", L.in(n, 3)});
    return L.b.op("scaled_dot_product_attention", in, out, h);
  }
  Type st = q.type;
  st.dims[3] = sk;
  Val s = L.b.op("matmul",
                 {{"x", q},
                  {"y", k},
                  {"transpose_x", L.b.boolean(false, h + "_tx")},
                  {"transpose_y", L.b.boolean(true, h + "_ty")}},
                 st, h + "_scores");
  s = L.binary("mul", s, L.scalar_like(scale, q, h + "_scale"), h + "_scaled");
  if (a.softcap > 0) {  // softcap * tanh(s / softcap), as the CPU kernel
    s = L.binary("mul", s, L.scalar_like(1.0 / a.softcap, q, h + "_inv_cap"), h + "_uncapped");
    s = L.binary("mul", L.unary("tanh", s, h + "_tanh"), L.scalar_like(a.softcap, q, h + "_cap"),
                 h + "_capped");
  }
  if (banded) s = L.binary("add", s, mask_bias(L, n, sq, sk, q.type.dt), h + "_masked");
  if (mask == MaskKind::bias) {
    Val bias = L.in(n, 3);
    if (bias.type.dt == pb::BOOL)  // true = attend
      bias = L.b.op("select",
                    {{"cond", bias},
                     {"a", L.scalar_like(0, q, h + "_zero")},
                     {"b", L.scalar_like(-65000, q, h + "_neg")}},
                    Type{q.type.dt, bias.type.dims}, h + "_bias");
    s = L.binary("add", s, bias, h + "_biased");
  }
  Val p = L.b.op("softmax", {{"x", s}, {"axis", L.b.int_scalar(-1, h + "_axis")}}, s.type,
                 h + "_probs");
  return L.b.op("matmul",
                {{"x", p},
                 {"y", v},
                 {"transpose_x", L.b.boolean(false, h + "_tx2")},
                 {"transpose_y", L.b.boolean(false, h + "_ty2")}},
                out, h);
}

// Swaps axes 1 and 2 of a rank-4 value (attention's [B, S, H, D] <-> [B, H, S, D]).
Val swap_heads(Lowering& L, const Val& x, const std::string& h) {
  Type t = x.type;
  std::swap(t.dims[1], t.dims[2]);
  return L.b.op("transpose", {{"x", x}, {"perm", L.b.ints({0, 2, 1, 3}, h + "_perm")}}, t, h);
}

Val lower_attention(Lowering& L, const Node& n) {
  const std::string h = L.hint(n);
  RLX_CHECK(L.type_of(n).dt == L.in(n, 1).type.dt,
            "coreml: attention with f16 keys and values beside an f32 query (an f16 KV cache) "
            "runs on the CPU only; build the graph with an f32 cache");
  if (n.attrs_as<AttentionAttrs>().layout == AttentionLayout::bhsd)
    return attention_bhsd(L, n, L.in(n, 0), L.in(n, 1), L.in(n, 2), L.type_of(n), h);
  // [B, S, H, D]: MIL's attention and matmuls take heads first.
  Type out = L.type_of(n);
  std::swap(out.dims[1], out.dims[2]);
  const Val y =
      attention_bhsd(L, n, swap_heads(L, L.in(n, 0), h + "_q"), swap_heads(L, L.in(n, 1), h + "_k"),
                     swap_heads(L, L.in(n, 2), h + "_v"), out, h + "_bhsd");
  return swap_heads(L, y, h);
}

}  // namespace

void register_nn(LowerTable& t) {
  auto set = [&](Op op, LowerFn f) { t.one[size_t(op)] = f; };
  set(Op::MatMul, lower_matmul);
  set(Op::Conv, lower_conv);
  set(Op::MaxPool2d, lower_max_pool);
  set(Op::AvgPool2d, lower_avg_pool);
  set(Op::AdaptiveAvgPool2d, lower_adaptive_avg_pool);
  set(Op::LayerNorm, lower_layer_norm);
  set(Op::RmsNorm, lower_rms_norm);
  set(Op::GroupNorm, lower_group_norm);
  set(Op::LayerNorm2d, lower_layer_norm_2d);
  set(Op::BatchNorm, lower_batch_norm);
  set(Op::Attention, lower_attention);
}

}  // namespace rlx::coreml
