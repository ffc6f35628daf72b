// Linear algebra and neural-network ops: matmuls, convolution, pooling,
// norms, attention, embedding, upsampling and grid sampling.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

NodeId nn_scaled(LowerCtx& c, NodeId x, double s) {
  return s == 1 ? x : c.b.mul(x, c.scalar(s, c.shape(x).dtype));
}

Value addmm(LowerCtx& c) {  // beta * bias + alpha * (a @ b); baddbmm the same, batched
  NodeId bias = c.tensor(0, "self");
  NodeId prod = nn_scaled(c, c.b.matmul(c.tensor(1), c.tensor(2)), c.f(4, "alpha", 1));
  double beta = c.f(3, "beta", 1);
  if (beta == 0) return Value::tensor(prod);
  return Value::tensor(c.b.add(prod, nn_scaled(c, bias, beta)));
}

Value convolution(LowerCtx& c) {
  NodeId x = c.tensor(0, "input"), w = c.tensor(1, "weight");
  const int sp = c.rank(x) - 2;
  auto stride = c.ints(3, "stride"), padding = c.ints(4, "padding"), dil = c.ints(5, "dilation");
  bool transposed = c.flag(6, "transposed", false);
  auto out_pad = c.ints(7, "output_padding", {});
  int64_t groups = c.i(8, "groups", 1);
  auto expand = [&](std::vector<int64_t> v) {
    if (v.size() == 1) v.assign(size_t(sp), v[0]);
    return v;
  };
  stride = expand(stride);
  dil = expand(dil);
  padding = expand(padding);
  std::vector<int64_t> pads = padding;
  pads.insert(pads.end(), padding.begin(), padding.end());
  std::vector<NodeId> in{x, w};
  if (c.has(2, "bias")) in.push_back(c.tensor(2, "bias"));
  Attrs a{{"stride", stride}, {"pads", pads}, {"dilation", dil}, {"groups", groups}};
  if (transposed) {
    a.set("output_padding",
          out_pad.empty() ? std::vector<int64_t>(size_t(sp), 0) : expand(out_pad));
    return Value::tensor(c.b.op(Op::ConvTranspose, in, a));
  }
  return Value::tensor(c.b.op(Op::Conv, in, a));
}

std::vector<int64_t> pool_pair(std::vector<int64_t> v, std::vector<int64_t> def) {
  if (v.empty()) return def;
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

Value max_pool(LowerCtx& c, bool with_indices) {
  NodeId x = c.tensor(0, "self");
  auto k = pool_pair(c.ints(1, "kernel_size"), {});
  auto s = pool_pair(c.ints(2, "stride", {}), k);
  auto p = pool_pair(c.ints(3, "padding", {0}), {0, 0});
  auto d = pool_pair(c.ints(4, "dilation", {1}), {1, 1});
  const Attrs a{{"kernel", k},
                {"stride", s},
                {"pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]}},
                {"dilation", d},
                {"ceil_mode", int64_t(c.flag(5, "ceil_mode", false))}};
  NodeId y = c.b.op(Op::MaxPool2d, {x}, a);
  // The indices are a node of their own: graphs that never read them (DCE
  // drops it) pay nothing.
  return with_indices ? Value::tuple({y, c.b.op(Op::MaxPool2dIndices, {x}, a)}) : Value::tensor(y);
}

// nn.Embedding(max_norm=m): PyTorch rescales, in place, every row the
// indices touch whose p-norm exceeds m by m / (norm + 1e-7) before the lookup;
// functionalized, embedding_renorm returns the rescaled table. Rows are
// marked touched by scattering ones (eq(i, i): ones of the indices' shape, also
// when it is symbolic) into zeros [V].
Value embedding_renorm(LowerCtx& c) {
  const NodeId w = c.tensor(0, "self"), ids = c.b.reshape(c.tensor(1, "indices"), {-1});
  const double max_norm = c.f(2, "max_norm"), p = c.f(3, "norm_type");
  const Dims wd = c.dims(w);
  RLX_CHECK(wd.size() == 2, "embedding_renorm: the table must be [V, D], got ", dims_str(wd));
  const DType t = c.shape(w).dtype;
  const NodeId ones = c.b.cast(c.b.binary(Op::Eq, ids, ids), t);
  const NodeId touched = c.b.reshape(
      c.b.op(Op::ScatterElements, {c.b.full({wd[0]}, 0.0, t), ids, ones}, {{"axis", int64_t(0)}}),
      {wd[0], 1});
  const NodeId a = c.b.unary(Op::Abs, w);
  NodeId norm;
  if (std::isinf(p))
    norm = c.b.reduce(Op::ReduceMax, a, {1}, true);
  else if (p == 1)
    norm = c.b.reduce(Op::ReduceSum, a, {1}, true);
  else if (p == 2)
    norm = c.b.unary(Op::Sqrt, c.b.reduce(Op::ReduceSum, c.b.mul(w, w), {1}, true));
  else
    norm = c.b.binary(Op::Pow,
                      c.b.reduce(Op::ReduceSum, c.b.binary(Op::Pow, a, c.scalar(p, t)), {1}, true),
                      c.scalar(1 / p, t));
  const NodeId scale = c.b.div(c.scalar(max_norm, t), c.b.add(norm, c.scalar(1e-7, t)));
  const NodeId rescale = c.b.op(Op::LogicalAnd, {c.b.binary(Op::Gt, touched, c.scalar(0, t)),
                                                 c.b.binary(Op::Gt, norm, c.scalar(max_norm, t))});
  return Value::tensor(c.b.op(Op::Where, {rescale, c.b.mul(w, scale), w}));
}

Value avg_pool(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  auto k = pool_pair(c.ints(1, "kernel_size"), {});
  auto s = pool_pair(c.ints(2, "stride", {}), k);
  auto p = pool_pair(c.ints(3, "padding", {0}), {0, 0});
  bool ceil = c.flag(4, "ceil_mode", false), include_pad = c.flag(5, "count_include_pad", true);
  // divisor_override: window sum / divisor. Without ceil_mode every window
  // with count_include_pad divides by k0*k1, so that average is rescaled; with
  // it, edge windows are cut short, so the average over the window's elements
  // inside the input is scaled by their count per output position.
  // Any nonzero divisor, negative too, as PyTorch allows; 0 (or None) is none.
  int64_t divisor = c.i(6, "divisor_override", 0);
  const bool cut = divisor != 0 && ceil;
  NodeId y = c.b.op(Op::AvgPool2d, {x},
                    {{"kernel", k},
                     {"stride", s},
                     {"pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]}},
                     {"ceil_mode", int64_t(ceil)},
                     {"count_include_pad", int64_t(cut ? false : include_pad || divisor != 0)}});
  DType t = c.shape(x).dtype;
  if (cut) {
    const Dims in = c.dims(x), out = c.dims(y);
    const int64_t OH = out[2], OW = out[3];
    // Input elements of window o along one axis: [o*s - p, o*s - p + k) within [0, n).
    auto inside = [](int64_t o, int64_t k, int64_t s, int64_t p, int64_t n) {
      const int64_t lo = o * s - p;
      return std::min(lo + k, n) - std::max<int64_t>(lo, 0);
    };
    Tensor scale({OH, OW}, DType::F32);
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j)
        scale.data<float>()[i * OW + j] =
            float(double(inside(i, k[0], s[0], p[0], in[2]) * inside(j, k[1], s[1], p[1], in[3])) /
                  double(divisor));
    return Value::tensor(c.b.mul(y, c.b.constant(scale.to(t))));
  }
  if (divisor != 0) y = c.b.mul(y, c.scalar(double(k[0] * k[1]) / double(divisor), t));
  return Value::tensor(y);
}

// layer_norm(x, normalized_shape, weight, bias, eps)
NodeId layer_norm(LowerCtx& c, NodeId x, int64_t naxes, NodeId w, NodeId b, double eps) {
  std::vector<NodeId> in{x};
  if (w >= 0 || b >= 0) in.push_back(w >= 0 ? w : c.b.full(c.dims(b), 1, c.shape(b).dtype));
  if (b >= 0) in.push_back(b);
  return c.b.op(Op::LayerNorm, in, {{"naxes", naxes}, {"eps", eps}});
}

// mean and rstd over the trailing `naxes` dims, kept as size-1 dims (native_layer_norm's extras).
std::pair<NodeId, NodeId> moments(LowerCtx& c, NodeId x, std::vector<int64_t> axes, double eps) {
  NodeId mean = c.b.reduce(Op::ReduceMean, x, axes, true);
  NodeId d = c.b.sub(x, mean);
  NodeId var = c.b.reduce(Op::ReduceMean, c.b.mul(d, d), axes, true);
  NodeId rstd = c.b.unary(Op::Rsqrt, c.b.add(var, c.scalar(eps, c.shape(x).dtype)));
  return {mean, rstd};
}

NodeId opt_tensor(LowerCtx& c, size_t pos, const char* name) {
  return c.has(pos, name) ? c.tensor(pos, name) : -1;
}

Value native_layer_norm(LowerCtx& c) {
  NodeId x = c.tensor(0, "input");
  int64_t naxes = int64_t(c.ints(1, "normalized_shape").size());
  double eps = c.f(4, "eps", 1e-5);
  NodeId y = layer_norm(c, x, naxes, opt_tensor(c, 2, "weight"), opt_tensor(c, 3, "bias"), eps);
  std::vector<int64_t> axes;
  for (int64_t k = 0; k < naxes; ++k) axes.push_back(c.rank(x) - naxes + k);
  auto [mean, rstd] = moments(c, x, axes, eps);
  return Value::tuple({y, mean, rstd});
}

NodeId batch_norm(LowerCtx& c, NodeId x, NodeId w, NodeId b, NodeId mean, NodeId var, double eps) {
  const int64_t C = c.static_dim(x, 1);
  DType t = c.shape(x).dtype;
  if (w < 0) w = c.b.full({C}, 1, t);
  if (b < 0) b = c.b.full({C}, 0, t);
  return c.b.op(Op::BatchNorm, {x, mean, var, w, b}, {{"eps", eps}});
}

// native_batch_norm(x, w, b, running_mean, running_var, training=True, momentum, eps): batch
// statistics (one batch_norm_train node), and as a tuple (y, save_mean, save_invstd) of [C] each.
// The running statistics' in-place update is not part of the exported function's result.
Value batch_norm_training(LowerCtx& c, bool as_tuple) {
  NodeId x = c.tensor(0, "input"), w = opt_tensor(c, 1, "weight"), b = opt_tensor(c, 2, "bias");
  const int64_t C = c.static_dim(x, 1);
  const DType t = c.shape(x).dtype;
  const double eps = c.f(7, "eps");
  std::vector<NodeId> in{x};
  if (w >= 0 || b >= 0) {
    in.push_back(w >= 0 ? w : c.b.full({C}, 1, t));
    in.push_back(b >= 0 ? b : c.b.full({C}, 0, t));
  }
  const NodeId bn = c.b.op(Op::BatchNormTrain, in, {{"eps", eps}});
  const Graph& g = c.b.graph();
  const NodeId y = g.result(bn, 0);
  if (!as_tuple) return Value::tensor(y);
  const NodeId mean = c.b.reshape(g.result(bn, 1), {C});
  const NodeId var = c.b.reshape(g.result(bn, 2), {C});
  const NodeId invstd = c.b.unary(Op::Rsqrt, c.b.add(var, c.scalar(eps, t)));
  return Value::tuple({y, mean, invstd});
}

Value group_norm(LowerCtx& c, NodeId x, int64_t groups, NodeId w, NodeId b, double eps,
                 bool extras) {
  const int64_t C = c.static_dim(x, 1);
  DType t = c.shape(x).dtype;
  if (w < 0) w = c.b.full({C}, 1, t);
  if (b < 0) b = c.b.full({C}, 0, t);
  NodeId y = c.b.op(Op::GroupNorm, {x, w, b}, {{"groups", groups}, {"eps", eps}});
  if (!extras) return Value::tensor(y);
  // mean/rstd per (N, G)
  Dims d = c.dims(x);
  int64_t per_group =
      groups > 0 ? C / groups : 0;  // explicit: an empty batch leaves no -1 to infer
  for (size_t k = 2; k < d.size(); ++k) per_group *= d[k];
  NodeId g = c.b.reshape(x, {d[0], groups, per_group});
  auto [mean, rstd] = moments(c, g, {2}, eps);
  return Value::tuple({y, c.b.reshape(mean, {d[0], groups}), c.b.reshape(rstd, {d[0], groups})});
}

// q [.., L, E], k/v [.., S, E] -> [B, H, L, E] views for the attention op.
NodeId as_bhsd(LowerCtx& c, NodeId t) {
  Dims d = c.dims(t);
  if (d.size() == 4) return t;
  Dims e(4 - d.size(), 1);
  e.insert(e.end(), d.begin(), d.end());
  return c.b.reshape(t, e);
}

Value sdpa(LowerCtx& c) {
  NodeId q = c.tensor(0, "query"), k = c.tensor(1, "key"), v = c.tensor(2, "value");
  Dims out_dims = c.dims(q);
  out_dims.back() = c.dims(v).back();
  bool causal = c.flag(5, "is_causal", false);
  Attrs a{{"mask", std::string(causal ? "causal" : "none")}};
  if (c.has(6, "scale")) a.set("scale", c.f(6, "scale"));
  std::vector<NodeId> in{as_bhsd(c, q), as_bhsd(c, k), as_bhsd(c, v)};
  bool known = c.shape(q).is_static() && c.shape(k).is_static();
  int64_t L = known ? c.dims(q).end()[-2] : 0, S = known ? c.dims(k).end()[-2] : 0;
  if (causal && L != S) {
    // PyTorch's is_causal is tril(ones(L, S)), aligned top-left; the
    // attention op's causal mask is aligned bottom-right (KV caches): pass
    // PyTorch's mask as a bias instead.
    DType t = c.shape(q).dtype;
    Tensor bias({L, S}, DType::F32);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < S; ++j) bias.data<float>()[i * S + j] = j <= i ? 0.f : -INFINITY;
    in.push_back(c.b.constant(bias.to(t)));
    a.set("mask", std::string("bias"));
  } else if (c.has(3, "attn_mask")) {
    RLX_CHECK(!causal, "attn_mask together with is_causal is not supported");
    NodeId m = c.tensor(3, "attn_mask");
    DType t = c.shape(q).dtype;
    if (c.shape(m).dtype == DType::Bool)  // true = attend
      m = c.b.op(Op::Where, {m, c.scalar(0, t), c.scalar(-INFINITY, t)});
    in.push_back(c.cast(m, t));
    a.set("mask", std::string("bias"));
  }
  NodeId y = c.b.op(Op::Attention, in, a);
  return Value::tensor(c.b.reshape(y, out_dims));
}

// Self/cross attention of the fused MHA kernels: q [B, L, E], k/v [B, S, E],
// packed in-projection wqkv [3E, E] / bqkv [3E], out-projection wo, bo.
NodeId fused_mha(LowerCtx& c, NodeId q, NodeId k, NodeId v, int64_t E, int64_t H, NodeId wqkv,
                 NodeId bqkv, NodeId wo, NodeId bo) {
  RLX_CHECK(c.shape(q).rank() == 3, "fused multi-head attention expects batch-first [B, L, E]");
  // [B, L, ...] -> [B, L, rest...]: a reshape with B or L as its -1, or, when
  // both are symbolic, a reshape_like reading them from `like`.
  auto lead2 = [&](NodeId x, NodeId like, Dims rest) {
    const Shape& s = c.shape(like);
    if (s.dims[0].is_static() || s.dims[1].is_static()) {
      Dims d = c.reshape_dims(like);
      d.resize(2);
      d.insert(d.end(), rest.begin(), rest.end());
      return c.b.reshape(x, d);
    }
    Dims d{-2, -3};
    d.insert(d.end(), rest.begin(), rest.end());
    return c.b.op(Op::ReshapeLike, {x, like}, {{"shape", d}});
  };
  RLX_CHECK(H > 0 && E % H == 0, "fused multi-head attention: embed_dim ", E,
            " not divisible by num_heads ", H);
  auto proj = [&](NodeId x, int64_t part) {
    NodeId w = c.b.op(Op::Slice, {wqkv},
                      {{"axis", int64_t(0)}, {"start", part * E}, {"end", (part + 1) * E}});
    NodeId bb = c.b.op(Op::Slice, {bqkv},
                       {{"axis", int64_t(0)}, {"start", part * E}, {"end", (part + 1) * E}});
    NodeId y = c.b.linear(x, w, bb);
    return c.b.transpose(lead2(y, x, {H, E / H}), {0, 2, 1, 3});
  };
  NodeId y =
      c.b.op(Op::Attention, {proj(q, 0), proj(k, 1), proj(v, 2)}, {{"mask", std::string("none")}});
  y = lead2(c.b.transpose(y, {0, 2, 1, 3}), q, {E});
  return c.b.linear(y, wo, bo);
}

// _native_multi_head_attention(q, k, v, embed_dim, num_head, qkv_weight,
// qkv_bias, proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type)
Value native_mha(LowerCtx& c) {
  RLX_CHECK(!c.has(9, "mask"), "_native_multi_head_attention with a mask is not supported");
  return Value::tuple({fused_mha(c, c.tensor(0), c.tensor(1), c.tensor(2), c.i(3), c.i(4),
                                 c.tensor(5), c.tensor(6), c.tensor(7), c.tensor(8)),
                       -1});
}

// nn.TransformerEncoderLayer's fast path (torch 1.13 transformer_encoder_layer.cpp):
// _transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
// proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
// norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2,
// mask, mask_type). use_gelu is the exact (erf) gelu, else relu.
Value transformer_encoder_layer(LowerCtx& c) {
  NodeId src = c.tensor(0, "src");
  int64_t E = c.i(1, "embed_dim"), H = c.i(2, "num_heads");
  RLX_CHECK(!c.has(18, "mask"),
            "_transformer_encoder_layer_fwd with a mask (src_key_padding_mask) is not supported");
  bool gelu = c.flag(7, "use_gelu", false), norm_first = c.flag(8, "norm_first", false);
  double eps = c.f(9, "eps");
  auto norm = [&](NodeId x, size_t w) {
    return layer_norm(c, x, 1, c.tensor(w), c.tensor(w + 1), eps);
  };
  NodeId x = norm_first ? norm(src, 10) : src;
  x = fused_mha(c, x, x, x, E, H, c.tensor(3), c.tensor(4), c.tensor(5), c.tensor(6));
  x = c.b.add(x, src);
  if (!norm_first) x = norm(x, 10);
  NodeId res = x;
  if (norm_first) x = norm(x, 12);
  x = c.b.linear(x, c.tensor(14), c.tensor(15));
  x = gelu ? c.b.unary(Op::Gelu, x) : c.b.relu(x);
  x = c.b.add(c.b.linear(x, c.tensor(16), c.tensor(17)), res);
  if (!norm_first) x = norm(x, 12);
  return Value::tensor(x);
}

// 2-d upsampling of NCHW; 1-d (NCW) runs as NC1W.
Value upsample(LowerCtx& c, const std::string& mode, bool has_align, bool antialias) {
  NodeId x = c.tensor(0, "input");
  const Dims& o = c.out().shape;
  RLX_CHECK(o.size() == 4 || o.size() == 3, "only 1-d and 2-d upsampling (NCW, NCHW) is supported");
  const bool one_d = o.size() == 3;
  if (one_d) {
    RLX_CHECK(c.rank(x) == 3, "1-d upsampling needs an NCW input, got ", c.shape(x).str());
    const Dims d = c.dims(x);
    x = c.b.reshape(x, {d[0], d[1], 1, d[2]});
  }
  bool align = has_align && c.flag(2, "align_corners", false);
  Attrs a{{"size", one_d ? std::vector<int64_t>{1, o[2]} : std::vector<int64_t>{o[2], o[3]}},
          {"mode", mode},
          {"align_corners", int64_t(align)},
          {"antialias", int64_t(antialias)}};
  // PyTorch maps coordinates with the given scale factors, not out/in:
  // .vec overloads take scale_factors: [h, w]; the others scales_h, scales_w.
  size_t pos = has_align ? 3 : 2;
  std::vector<double> scales;
  if (const Value* v = c.arg(pos, "scale_factors"); v && v->kind == Value::List) {
    for (const Value& e : v->items) scales.push_back(e.number());
  } else if (one_d && c.has(pos, "scales")) {
    scales = {c.f(pos, "scales")};
  } else if (!one_d && (c.has(pos, "scales_h") || c.has(pos + 1, "scales_w"))) {
    scales = {c.f(pos, "scales_h", 0), c.f(pos + 1, "scales_w", 0)};
  }
  if (!scales.empty()) {
    RLX_CHECK(scales.size() == o.size() - 2, "expected ", o.size() - 2, " scale factors, got ",
              scales.size());
    if (one_d) scales.insert(scales.begin(), 1.0);
    a.set("scales", scales);
  }
  NodeId y = c.b.op(Op::Resize, {x}, a);
  return Value::tensor(one_d ? c.b.reshape(y, {o[0], o[1], o[2]}) : y);
}

}  // namespace

void register_nn(Registry& r) {
  r.add("aten.mm", [](LowerCtx& c) { return Value::tensor(c.b.matmul(c.tensor(0), c.tensor(1))); });
  r.alias("aten.bmm", "aten.mm");
  r.alias("aten.matmul", "aten.mm");
  r.alias("aten.mv", "aten.mm");  // MatMul treats a 1-d operand like NumPy
  r.add("aten.addmm", addmm);
  r.add("aten.baddbmm", addmm);
  r.add("aten.linear", [](LowerCtx& c) {
    return Value::tensor(
        c.b.linear(c.tensor(0, "input"), c.tensor(1, "weight"), opt_tensor(c, 2, "bias")));
  });
  r.add("aten.convolution", convolution);
  r.add("aten._convolution", convolution);
  r.add("aten.max_pool2d", [](LowerCtx& c) { return max_pool(c, false); });
  r.add("aten.max_pool2d_with_indices", [](LowerCtx& c) { return max_pool(c, true); });
  r.add("aten.avg_pool2d", avg_pool);
  r.add("aten.adaptive_avg_pool2d", [](LowerCtx& c) {
    auto o = pool_pair(c.ints(1, "output_size"), {});
    return Value::tensor(c.b.op(Op::AdaptiveAvgPool2d, {c.tensor(0)}, {{"output", o}}));
  });
  r.alias("aten._adaptive_avg_pool2d", "aten.adaptive_avg_pool2d");
  r.add("aten.layer_norm", [](LowerCtx& c) {
    return Value::tensor(
        layer_norm(c, c.tensor(0, "input"), int64_t(c.ints(1, "normalized_shape").size()),
                   opt_tensor(c, 2, "weight"), opt_tensor(c, 3, "bias"), c.f(4, "eps", 1e-5)));
  });
  r.add("aten.native_layer_norm", native_layer_norm);
  r.add("aten.rms_norm", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "input");
    int64_t naxes = int64_t(c.ints(1, "normalized_shape").size());
    std::vector<NodeId> in{x};
    if (c.has(2, "weight")) in.push_back(c.tensor(2, "weight"));
    // eps=None means torch.finfo(dtype).eps
    double eps = c.f(
        3, "eps", c.shape(x).dtype == DType::F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07);
    return Value::tensor(c.b.op(Op::RmsNorm, in, {{"naxes", naxes}, {"eps", eps}}));
  });
  // _native_batch_norm_legit_no_training(x, w, b, mean, var, momentum, eps)
  r.add("aten._native_batch_norm_legit_no_training", [](LowerCtx& c) {
    NodeId y = batch_norm(c, c.tensor(0), opt_tensor(c, 1, "weight"), opt_tensor(c, 2, "bias"),
                          c.tensor(3), c.tensor(4), c.f(6, "eps"));
    return Value::tuple({y, -1, -1});
  });
  // native_batch_norm(x, w, b, mean, var, training, momentum, eps); batch_norm adds cudnn_enabled.
  auto bn = [](LowerCtx& c, bool as_tuple) {
    if (c.flag(5, "training", false)) return batch_norm_training(c, as_tuple);
    RLX_CHECK(c.has(3, "running_mean") && c.has(4, "running_var"),
              "batch norm needs running statistics");
    NodeId y = batch_norm(c, c.tensor(0), opt_tensor(c, 1, "weight"), opt_tensor(c, 2, "bias"),
                          c.tensor(3), c.tensor(4), c.f(7, "eps"));
    if (!as_tuple) return Value::tensor(y);
    // In eval mode PyTorch's CPU kernel returns empty save_mean / save_invstd.
    const DType t = c.shape(y).dtype;
    return Value::tuple({y, c.b.full({0}, 0, t), c.b.full({0}, 0, t)});
  };
  r.add("aten.native_batch_norm", [bn](LowerCtx& c) { return bn(c, true); });
  r.add("aten._native_batch_norm_legit", [bn](LowerCtx& c) { return bn(c, true); });
  r.add("aten.batch_norm", [bn](LowerCtx& c) { return bn(c, false); });
  r.add("aten.group_norm", [](LowerCtx& c) {
    return group_norm(c, c.tensor(0), c.i(1, "num_groups"), opt_tensor(c, 2, "weight"),
                      opt_tensor(c, 3, "bias"), c.f(4, "eps", 1e-5), false);
  });
  // native_group_norm(x, w, b, N, C, HxW, group, eps) -> (y, mean, rstd)
  r.add("aten.native_group_norm", [](LowerCtx& c) {
    return group_norm(c, c.tensor(0), c.i(6, "group"), opt_tensor(c, 1, "weight"),
                      opt_tensor(c, 2, "bias"), c.f(7, "eps"), true);
  });
  r.add("aten.embedding_renorm", embedding_renorm);
  r.add("aten.embedding", [](LowerCtx& c) {
    return Value::tensor(c.b.op(Op::Embedding, {c.tensor(0, "weight"), c.tensor(1, "indices")}));
  });
  for (const char* op :
       {"aten.scaled_dot_product_attention", "aten._scaled_dot_product_attention_math"})
    r.add(op, sdpa);
  // The fused variants return (out, logsumexp, ...): only `out` is computed.
  for (const char* op : {"aten._scaled_dot_product_flash_attention",
                         "aten._scaled_dot_product_flash_attention_for_cpu",
                         "aten._scaled_dot_product_efficient_attention"})
    r.add(op, [](LowerCtx& c) {
      return Value::tuple({sdpa(c).id, -1, -1, -1, -1, -1, -1, -1, -1});
    });
  r.add("aten._native_multi_head_attention", native_mha);
  // _scaled_dot_product_attention_forward(q, k, v, attn_mask, dropout_p,
  // need_attn_weights, is_causal): PyTorch 1.13's math path, softmax(q / sqrt(E)
  // k^T + mask) v, with a top-left causal mask [L, S] and a bool mask as -inf
  // where false; the attention weights are the second output.
  r.add("aten._scaled_dot_product_attention_forward", [](LowerCtx& c) {
    NodeId q = c.tensor(0, "query");
    const NodeId k = c.tensor(1, "key"), v = c.tensor(2, "value");
    RLX_CHECK(
        c.f(4, "dropout_p", 0) == 0,
        "scaled_dot_product_attention with dropout is random; only dropout_p = 0 is supported");
    const DType t = c.shape(q).dtype;
    const int r = c.rank(q);
    const Dims qd = c.dims(q), kd = c.dims(k);
    const int64_t L = qd[size_t(r - 2)], S = kd[size_t(r - 2)];
    q = c.b.div(q, c.scalar(std::sqrt(double(qd[size_t(r - 1)])), t));
    NodeId s = c.b.matmul(q, mT(c, k));
    const NodeId ninf = c.scalar(-INFINITY, t);
    if (c.flag(6, "is_causal", false)) {
      const NodeId rows = c.b.reshape(c.b.arange(L), {L, 1}),
                   cols = c.b.reshape(c.b.arange(S), {1, S});
      s = c.b.op(Op::Where, {c.b.op(Op::Le, {cols, rows}), s, ninf});
    }
    if (c.has(3, "attn_mask")) {
      const NodeId m = c.tensor(3, "attn_mask");
      s = c.shape(m).dtype == DType::Bool ? c.b.op(Op::Where, {m, s, ninf})
                                          : c.b.add(s, c.cast(m, t));
    }
    const NodeId a = c.b.softmax(s, -1);
    const NodeId out = c.b.matmul(a, v);
    // The math path returns the weights whether asked for or not; another
    // kernel's empty tensor is given as recorded.
    NodeId w = a;
    if (c.node.out.tuple.size() > 1 && c.node.out.tuple[1] &&
        c.node.out.tuple[1]->shape != c.dims(a))
      w = c.b.full(c.node.out.tuple[1]->shape, 0, t);
    return Value::tuple({out, w});
  });
  r.add("aten._transformer_encoder_layer_fwd", transformer_encoder_layer);
  r.add("aten.upsample_nearest2d",
        [](LowerCtx& c) { return upsample(c, "nearest", false, false); });
  r.alias("aten.upsample_nearest1d", "aten.upsample_nearest2d");
  r.add("aten._upsample_nearest_exact2d",
        [](LowerCtx& c) { return upsample(c, "nearest_exact", false, false); });
  r.add("aten.upsample_bilinear2d",
        [](LowerCtx& c) { return upsample(c, "bilinear", true, false); });
  // 1-d linear: bilinear over [N, C, 1, W] (upsample's 1-d form).
  r.add("aten.upsample_linear1d", [](LowerCtx& c) { return upsample(c, "bilinear", true, false); });
  r.add("aten.upsample_bicubic2d", [](LowerCtx& c) { return upsample(c, "bicubic", true, false); });
  r.add("aten._upsample_bilinear2d_aa",
        [](LowerCtx& c) { return upsample(c, "bilinear", true, true); });
  r.add("aten._upsample_bicubic2d_aa",
        [](LowerCtx& c) { return upsample(c, "bicubic", true, true); });
  // grid_sampler(x, grid, interpolation_mode, padding_mode, align_corners) with enums as ints.
  r.add("aten.grid_sampler", [](LowerCtx& c) {
    static const char* modes[] = {"bilinear", "nearest", "bicubic"};
    static const char* pads[] = {"zeros", "border", "reflection"};
    int64_t m = c.i(2), p = c.i(3);
    RLX_CHECK(m >= 0 && m < 3 && p >= 0 && p < 3, "grid_sampler: bad mode ", m, " or padding ", p);
    return Value::tensor(c.b.op(Op::GridSample, {c.tensor(0), c.tensor(1)},
                                {{"mode", std::string(modes[m])},
                                 {"padding", std::string(pads[p])},
                                 {"align_corners", int64_t(c.flag(4, "align_corners", false))}}));
  });
  r.alias("aten.grid_sampler_2d", "aten.grid_sampler");
}

}  // namespace rlx::torch_ir
