// Neural-network ops: Conv/ConvTranspose, pools, norms, Gemm/MatMul,
// Softmax (opset < 13 flattens to 2-d), Dropout (inference: identity), GridSample.
#include <cmath>

#include "frontends/onnx/context.h"
#include "frontends/pool3d.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

// Explicit pads [begin..., end...] from `pads` or auto_pad, for `sp` spatial dims.
Dims conv_pads(Ctx& c, const Shape& x, const Dims& kernel, const Dims& stride, const Dims& dil) {
  const size_t sp = kernel.size();
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    return c.window_attr("pads", 2 * sp, 0, 0);
  }
  if (auto_pad == "VALID") return Dims(2 * sp, 0);
  RLX_CHECK(auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER", "auto_pad '", auto_pad, "'");
  Dims p(2 * sp, 0);
  for (size_t k = 0; k < sp; ++k) {
    const Dim& d = x.dims[2 + k];
    RLX_CHECK(d.is_static(), "auto_pad ", auto_pad, " needs static spatial dims, got ", x.str());
    const int64_t out = (d.value + stride[k] - 1) / stride[k];
    const int64_t total =
        std::max<int64_t>(0, (out - 1) * stride[k] + (kernel[k] - 1) * dil[k] + 1 - d.value);
    const int64_t small = total / 2, big = total - small;
    p[k] = auto_pad == "SAME_UPPER" ? small : big;
    p[k + sp] = auto_pad == "SAME_UPPER" ? big : small;
  }
  return p;
}

}  // namespace

NodeId conv_node(Ctx& c, NodeId xi, NodeId wi, NodeId bias) {
  const Shape x = c.shape_of(xi), w = c.shape_of(wi);
  RLX_CHECK(w.is_static() && w.rank() >= 3 && x.rank() == w.rank(),
            "Conv needs x [N, C, ...] and a static weight [O, C/g, k...] of the same rank, got ",
            x.str(), " and ", w.str());
  const size_t sp = size_t(w.rank() - 2);
  const Dims wd = w.concrete();
  const Dims kernel(wd.begin() + 2, wd.end());
  const Dims stride = c.window_attr("strides", sp, 1, 1),
             dil = c.window_attr("dilations", sp, 1, 1);
  const Dims pads = conv_pads(c, x, kernel, stride, dil);
  std::vector<NodeId> in{xi, wi};
  if (bias >= 0) in.push_back(bias);
  return c.b().op(
      Op::Conv, in,
      {{"stride", stride}, {"pads", pads}, {"dilation", dil}, {"groups", c.i("group", 1)}});
}

namespace {

std::vector<Val> lower_conv(Ctx& c) {
  return one(conv_node(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : -1));
}

std::vector<Val> lower_conv_transpose(Ctx& c) {
  const Shape x = c.shape(0), w = c.shape(1);
  RLX_CHECK(w.is_static() && w.rank() >= 3 && x.rank() == w.rank(),
            "ConvTranspose needs x [N, C, ...] and a static weight [C, O/g, k...] of the same "
            "rank, got ",
            x.str(), " and ", w.str());
  const size_t sp = size_t(w.rank() - 2);
  const Dims stride = c.window_attr("strides", sp, 1, 1),
             dil = c.window_attr("dilations", sp, 1, 1);
  Dims opad = c.window_attr("output_padding", sp, 0, 0);
  const std::string auto_pad = c.s("auto_pad", "NOTSET");
  RLX_CHECK(auto_pad == "NOTSET" || auto_pad == "VALID" || auto_pad == "SAME_UPPER" ||
                auto_pad == "SAME_LOWER",
            "ConvTranspose auto_pad '", auto_pad, "'");
  Dims pads = auto_pad == "VALID" ? Dims(2 * sp, 0) : c.window_attr("pads", 2 * sp, 0, 0);
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  if (c.has_attr("output_shape") || same) {
    // The pads that give the requested output (ONNX's formula: the larger
    // half at the end for SAME_UPPER, at the start otherwise).
    RLX_CHECK(x.is_static(), "ConvTranspose output_shape/SAME needs static input dims, got ",
              x.str());
    const Dims xd = x.concrete(), wd = w.concrete();
    Dims out = c.ints_attr("output_shape");
    if (out.size() == sp + 2) out.erase(out.begin(), out.begin() + 2);
    if (out.empty())
      for (size_t k = 0; k < sp; ++k) out.push_back(checked_mul(xd[2 + k], stride[k], "output"));
    RLX_CHECK(out.size() == sp, "output_shape has ", out.size(), " values for ", sp,
              " spatial dims");
    for (size_t k = 0; k < sp; ++k) {
      // Every term is checked: the dims and attributes come from the file.
      const int64_t span = checked_add(checked_mul(stride[k], xd[2 + k] - 1, "output"),
                                       checked_mul(wd[2 + k] - 1, dil[k], "kernel span"), "output");
      RLX_CHECK(out[k] >= 0, "ConvTranspose output_shape ", short_dims_str(out), " is negative");
      const int64_t total = checked_add(span, opad[k] + 1, "output") - out[k];
      // ONNX's reference halves with floor division, so a total of -1 is pads (0, -1).
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      pads[k] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads[k + sp] = total - pads[k];
      // A negative end pad is output the natural size lacks: output_padding at the end.
      if (pads[k + sp] < 0) {
        opad[k] -= pads[k + sp];
        pads[k + sp] = 0;
      }
      RLX_CHECK(pads[k] >= 0, "ConvTranspose output_shape ", dims_str(out),
                " needs negative padding at the start of spatial dim ", k);
    }
  }
  std::vector<NodeId> in{c.in(0), c.in(1)};
  if (c.has(2)) in.push_back(c.in(2));
  return one(c.b().op(Op::ConvTranspose, in,
                      {{"stride", stride},
                       {"pads", pads},
                       {"dilation", dil},
                       {"groups", c.i("group", 1)},
                       {"output_padding", opad}}));
}

// MaxPool's Indices from max_pool2d_indices' (ih * W + iw per plane of the
// 4-d input `in`): flat over the whole tensor, each plane row-major
// (storage_order 0) or column-major (1).
NodeId flat_pool_indices(Ctx& c, NodeId in, NodeId plane_idx) {
  const Shape& s = c.shape_of(in);
  RLX_CHECK(s.is_static(), "MaxPool Indices of a dynamic shape ", s.str(), " are not supported");
  const Dims d = s.concrete();
  const int64_t H = d[2], W = d[3];
  NodeId idx = plane_idx;
  if (c.i("storage_order", 0) != 0) {
    const NodeId w = c.b().scalar(float(W), DType::I64);
    const NodeId ih = c.b().op(Op::Div, {idx, w}, {{"rounding", std::string("floor")}});
    idx =
        c.b().add(c.b().mul(c.b().binary(Op::Mod, idx, w), c.b().scalar(float(H), DType::I64)), ih);
  }
  const NodeId plane =
      c.b().reshape(c.b().arange(d[0] * d[1], 0, double(H * W)), {d[0], d[1], 1, 1});
  return c.b().add(idx, plane);
}

// One rlx 2-d pool of the 4-d `in` (pads [t, l, b, r]); *indices gets MaxPool's Indices when
// asked for.
NodeId pool2d(Ctx& c, NodeId in, bool max, Dims kernel, Dims stride, Dims dil, Dims pads,
              NodeId* indices) {
  // rlx's pools take pads up to half the kernel (PyTorch's rule); ONNX allows
  // more. Larger pads become an explicit Pad: -inf for max, 0 for an average.
  // An average that does not count the padding is then the padded average over
  // the same average of a map of the input's cells (1 inside, 0 in the padding).
  bool wide = false;
  for (size_t k = 0; k < 2; ++k)
    wide = wide || 2 * pads[k] > kernel[k] || 2 * pads[k + 2] > kernel[k];
  const bool include_pad = c.i("count_include_pad", 0) != 0;
  Attrs a{{"kernel", kernel}, {"stride", stride}, {"ceil_mode", c.i("ceil_mode", 0)}};
  if (wide) {
    RLX_CHECK(!indices, "MaxPool Indices with pads ", dims_str(pads), " above half the kernel ",
              dims_str(kernel), " are not supported");
    const Dims pad_attr{0, 0, pads[0], pads[1], 0, 0, pads[2], pads[3]};
    const DType t = c.shape_of(in).dtype;
    auto padded = [&](NodeId v, double value) {
      return c.b().op(Op::Pad, {v}, {{"pads", pad_attr}, {"value", value}});
    };
    a.set("pads", Dims{0, 0, 0, 0});
    if (max) {
      a.set("dilation", dil);
      return c.b().op(Op::MaxPool2d, {padded(in, is_float(t) ? -INFINITY : -1e300)}, a);
    }
    RLX_CHECK(dil == Dims(2, 1), "AveragePool dilations ", dims_str(dil), " are not supported");
    a.set("count_include_pad", true);
    const NodeId avg = c.b().op(Op::AvgPool2d, {padded(in, 0)}, a);
    if (include_pad) return avg;
    for (size_t k = 0; k < 2; ++k)
      RLX_CHECK(pads[k] < kernel[k] && pads[k + 2] < kernel[k], "AveragePool pads ", dims_str(pads),
                " reach a whole kernel ", dims_str(kernel),
                " with count_include_pad=0: some windows would hold no input");
    const Shape& s = c.shape_of(in);
    RLX_CHECK(s.dims[2].is_static() && s.dims[3].is_static(), "AveragePool pads ", dims_str(pads),
              " above half the kernel of ", s.str(), " need static H and W");
    const NodeId cells = c.b().full({1, 1, s.dims[2].value, s.dims[3].value}, 1, t);
    return c.b().div(avg, c.b().op(Op::AvgPool2d, {padded(cells, 0)}, a));
  }
  a.set("pads", pads);
  if (max) {
    a.set("dilation", dil);
    if (indices) *indices = flat_pool_indices(c, in, c.b().op(Op::MaxPool2dIndices, {in}, a));
    return c.b().op(Op::MaxPool2d, {in}, a);
  }
  RLX_CHECK(dil == Dims(2, 1), "AveragePool dilations ", dims_str(dil), " are not supported");
  a.set("count_include_pad", c.i("count_include_pad", 0));
  return c.b().op(Op::AvgPool2d, {in}, a);
}

// x reshaped to `d`, one symbolic dim at most (-1).
NodeId reshape_dims(Ctx& c, NodeId x, const std::vector<Dim>& d, const char* what) {
  Dims t;
  int unknown = 0;
  for (auto& e : d) t.push_back(e.is_static() ? e.value : (++unknown, -1));
  RLX_CHECK(unknown <= 1, what, " of ", c.shape_of(x).str());
  return c.b().reshape(x, t);
}

// rlx pools are 2-d: a 1-d pool runs as [N, C, 1, L]; a 3-d pool as two 2-d pools
// (frontends/pool3d.h).
std::vector<Val> lower_pool(Ctx& c, bool max) {
  const Shape x = c.shape(0);
  RLX_CHECK(x.rank() >= 3 && x.rank() <= 5, "only 1-d, 2-d and 3-d pools are supported, got ",
            x.str());
  const size_t sp = size_t(x.rank() - 2);
  RLX_CHECK(c.has_attr("kernel_shape"), "pool needs kernel_shape");
  const Dims kernel = c.window_attr("kernel_shape", sp, 1, 1);
  const Dims stride = c.window_attr("strides", sp, 1, 1),
             dil = c.window_attr("dilations", sp, 1, 1);
  const Dims pads = conv_pads(c, x, kernel, stride, dil);
  const bool want_indices = max && c.node.outputs.size() > 1 && !c.node.outputs[1].empty();
  NodeId indices = -1;
  NodeId* idx = want_indices ? &indices : nullptr;
  if (sp == 2) {
    const NodeId y = pool2d(c, c.in(0), max, kernel, stride, dil, pads, idx);
    return indices >= 0 ? std::vector<Val>{node_val(y), node_val(indices)} : one(y);
  }
  if (sp == 1) {
    std::vector<Dim> d = x.dims;
    d.insert(d.begin() + 2, Dim(1));
    const NodeId in = reshape_dims(c, c.in(0), d, "1-d pool");
    NodeId y = pool2d(c, in, max, {1, kernel[0]}, {1, stride[0]}, {1, dil[0]},
                      {0, pads[0], 0, pads[1]}, idx);
    d = c.shape_of(y).dims;
    d.erase(d.begin() + 2);
    y = reshape_dims(c, y, d, "1-d pool");
    if (indices < 0) return one(y);
    return {node_val(y), node_val(reshape_dims(c, indices, d, "1-d pool"))};
  }
  RLX_CHECK(!want_indices, "MaxPool Indices of a 3-d pool are not supported");
  RLX_CHECK(x.is_static(), "3-d pool of ", x.str(), ": the dims must be static");
  return one(frontends::pool3d_by_2d(
      c.b(), c.in(0), x.concrete(), kernel, stride, dil, pads,
      [&](NodeId v, const Dims& k, const Dims& s, const Dims& dl, const Dims& p) {
        return pool2d(c, v, max, k, s, dl, p, nullptr);
      }));
}

std::vector<Val> lower_global_pool(Ctx& c, Op op) {
  const Shape x = c.shape(0);
  RLX_CHECK(x.rank() >= 3, "global pool of ", x.str());
  Dims axes;
  for (int k = 2; k < x.rank(); ++k) axes.push_back(k);
  return one(c.b().reduce(op, c.in(0), axes, true));
}

// training_mode=1 (opset 14+): normalized by the batch's own statistics over
// every axis but the channel (variance without Bessel's correction), and the
// running statistics as outputs: input * momentum + batch * (1 - momentum).
std::vector<Val> lower_batch_norm_training(Ctx& c) {
  const Shape xs = c.shape(0);
  RLX_CHECK(xs.rank() >= 2 && xs.dims[1].is_static(), "BatchNormalization training_mode=1 of ",
            xs.str(), ": the channel dim must be static");
  const DType t = xs.dtype;
  const int64_t C = xs.dims[1].value;
  Dims axes{0}, per_channel(size_t(xs.rank()), 1);
  for (int k = 2; k < xs.rank(); ++k) axes.push_back(k);
  per_channel[1] = C;
  auto& b = c.b();
  NodeId x = c.in(0);
  NodeId mean = b.reduce(Op::ReduceMean, x, axes, true);
  NodeId d = b.sub(x, mean);
  NodeId var = b.reduce(Op::ReduceMean, b.mul(d, d), axes, true);
  NodeId inv = b.unary(Op::Rsqrt, b.add(var, c.scalar_const(c.f("epsilon", 1e-5), t)));
  NodeId y =
      b.add(b.mul(b.mul(d, inv), b.reshape(c.in(1), per_channel)), b.reshape(c.in(2), per_channel));
  std::vector<Val> out = one(y);
  const double m = c.f("momentum", 0.9);
  auto running = [&](int input, NodeId batch) {
    return node_val(b.add(b.mul(c.in(input), c.scalar_const(m, t)),
                          b.mul(b.reshape(batch, {C}), c.scalar_const(1 - m, t))));
  };
  if (c.node.outputs.size() > 1) out.push_back(running(3, mean));
  if (c.node.outputs.size() > 2) out.push_back(running(4, var));
  return out;
}

std::vector<Val> lower_batch_norm(Ctx& c) {
  if (c.i("training_mode", 0) != 0) return lower_batch_norm_training(c);
  RLX_CHECK(c.node.outputs.size() == 1 || c.opset >= 14 || c.opset < 9 ||
                std::all_of(c.node.outputs.begin() + 1, c.node.outputs.end(),
                            [](const std::string& s) { return s.empty(); }),
            "BatchNormalization training outputs are not supported");
  return one(c.b().op(Op::BatchNorm, {c.in(0), c.in(3), c.in(4), c.in(1), c.in(2)},
                      {{"eps", c.f("epsilon", 1e-5)}}));
}

std::vector<Val> lower_layer_norm(Ctx& c) {
  const int r = c.shape(0).rank();
  const int64_t axis = norm_axis(c.i("axis", -1), r, "LayerNormalization");
  const double eps = c.f("epsilon", 1e-5);
  std::vector<NodeId> in{c.in(0), c.in(1)};
  if (c.has(2)) in.push_back(c.in(2));
  std::vector<Val> out = one(c.b().op(Op::LayerNorm, in, {{"naxes", r - axis}, {"eps", eps}}));
  if (c.node.outputs.size() > 1) {
    // Mean and InvStdDev (the training outputs), over the normalized axes kept
    // as 1, as separate reductions.
    Dims axes;
    for (int64_t k = axis; k < r; ++k) axes.push_back(k);
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    NodeId mean = c.b().reduce(Op::ReduceMean, x, axes, true);
    NodeId d = c.b().sub(x, mean);
    NodeId var = c.b().reduce(Op::ReduceMean, c.b().mul(d, d), axes, true);
    out.push_back(node_val(mean));
    out.push_back(node_val(c.b().unary(Op::Rsqrt, c.b().add(var, c.scalar_const(eps, t)))));
  }
  return out;
}

std::vector<Val> lower_instance_norm(Ctx& c) {
  const Shape x = c.shape(0);
  RLX_CHECK(x.rank() >= 3 && x.dims[1].is_static(), "InstanceNormalization of ", x.str());
  return one(c.b().op(Op::GroupNorm, {c.in(0), c.in(1), c.in(2)},
                      {{"groups", x.dims[1].value}, {"eps", c.f("epsilon", 1e-5)}}));
}

std::vector<Val> lower_gemm(Ctx& c) {
  NodeId a = c.in(0), bm = c.in(1);
  const DType t = c.shape_of(a).dtype;
  NodeId y =
      c.b().op(Op::MatMul, {a, bm},
               {{"transpose_a", c.i("transA", 0) != 0}, {"transpose_b", c.i("transB", 0) != 0}});
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  if (alpha != 1.0) y = c.b().mul(y, c.scalar_const(alpha, t));
  if (c.has(2) && beta != 0.0) {
    NodeId bias = c.in(2);
    if (beta != 1.0) bias = c.b().mul(bias, c.scalar_const(beta, t));
    y = c.b().add(y, bias);
  }
  return one(y);
}

std::vector<Val> lower_softmax(Ctx& c, Op op) {
  const Shape x = c.shape(0);
  if (c.opset >= 13) return one(c.b().op(op, {c.in(0)}, {{"axis", c.i("axis", -1)}}));
  // Before opset 13 the input is coerced to 2-d at `axis` (default 1) and
  // normalized over the flattened tail.
  const int64_t axis = norm_axis(c.i("axis", 1), x.rank(), "Softmax");
  if (axis == x.rank() - 1) return one(c.b().op(op, {c.in(0)}, {{"axis", -1}}));
  RLX_CHECK(x.is_static(), "Softmax (opset < 13) over flattened dims needs a static shape, got ",
            x.str());
  const Dims d = x.concrete();
  int64_t lead = 1;
  for (int64_t k = 0; k < axis; ++k) lead *= d[size_t(k)];
  NodeId f = c.b().reshape(c.in(0), {lead, x.numel() / std::max<int64_t>(lead, 1)});
  return one(c.b().reshape(c.b().op(op, {f}, {{"axis", -1}}), d));
}

std::vector<Val> lower_dropout(Ctx& c) {
  if (c.has(2)) {  // training_mode input (opset 12)
    auto t = c.scalar(2);
    RLX_CHECK(t, "Dropout: training_mode must be known at import");
    // Training with ratio 0 keeps every element, as inference does; with
    // another ratio the mask would come from ONNX Runtime's RNG stream.
    auto ratio = c.has(1) ? c.scalar(1) : std::optional<double>(0.5);
    RLX_CHECK(*t == 0 || (ratio && *ratio == 0), "Dropout in training mode with ratio ",
              ratio ? std::to_string(*ratio) : std::string("unknown"), " is not supported");
  }
  std::vector<Val> out{c.val(0)};
  if (c.node.outputs.size() > 1 && !c.node.outputs[1].empty()) {
    // In inference every element is kept: the mask is all true.
    const Shape s = c.shape(0);
    RLX_CHECK(s.is_static(), "Dropout mask of symbolic shape ", s.str());
    out.push_back(node_val(c.b().full(s.concrete(), 1, DType::Bool)));
  }
  return out;
}

// NegativeLogLikelihoodLoss(input [N, C, d...] log-probabilities, target [N, d...], weight [C]):
// loss = -input[n, target, d...] * weight[target], 0 (and weight 0) where target is ignore_index;
// reduction none (target's shape), sum, or mean (the sum over the weights' sum).
NodeId nll_loss(Ctx& c, NodeId logp, NodeId target, NodeId weight) {
  auto& b = c.b();
  const Shape ls = c.shape_of(logp), ts = c.shape_of(target);
  RLX_CHECK(ls.rank() >= 2 && ts.rank() == ls.rank() - 1, "input ", ls.str(), " and target ",
            ts.str(), " must be [N, C, d...] and [N, d...]");
  const DType t = ls.dtype;
  const NodeId tgt = c.cast(target, DType::I64);
  NodeId valid = -1, safe = tgt;
  if (c.has_attr("ignore_index")) {
    valid = b.op(Op::Ne, {tgt, c.scalar_const(double(c.i("ignore_index")), DType::I64)});
    safe = b.op(Op::Where, {valid, tgt, c.scalar_const(0, DType::I64)});
  }
  std::vector<Dim> col = ts.dims;
  col.insert(col.begin() + 1, Dim(1));
  Dims col_dims;
  for (const Dim& d : col) col_dims.push_back(d.is_static() ? d.value : -1);
  const NodeId picked =
      b.op(Op::GatherElements, {logp, b.reshape(safe, col_dims)}, {{"axis", int64_t(1)}});
  NodeId w =
      weight >= 0 ? b.op(Op::Gather, {weight, safe}, {{"axis", int64_t(0)}}) : c.scalar_const(1, t);
  if (valid >= 0) w = b.mul(w, c.cast(valid, t));
  NodeId loss = b.mul(b.unary(Op::Neg, b.reduce(Op::ReduceSum, picked, {1}, false)), w);
  const std::string how = c.s("reduction", "mean");
  if (how == "none") return loss;
  if (how == "sum") return b.reduce(Op::ReduceSum, loss, {}, false);
  RLX_CHECK(how == "mean", "unknown reduction '", how, "'");
  // w over every target position (w is [1] without weights or ignore_index)
  const NodeId every = b.op(Op::Where, {b.op(Op::Eq, {tgt, tgt}), w, c.scalar_const(0, t)});
  const NodeId total = b.reduce(Op::ReduceSum, every, {}, false);
  return b.div(b.reduce(Op::ReduceSum, loss, {}, false), total);
}

std::vector<Val> lower_nll_loss(Ctx& c) {
  return one(nll_loss(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : -1));
}

// SoftmaxCrossEntropyLoss(scores [N, C, d...], labels, weights) -> (loss, log_prob): the
// negative log-likelihood of log_softmax over C.
std::vector<Val> lower_softmax_cross_entropy(Ctx& c) {
  const NodeId logp = c.b().op(Op::LogSoftmax, {c.in(0)}, {{"axis", int64_t(1)}});
  std::vector<Val> out = one(nll_loss(c, logp, c.in(1), c.has(2) ? c.in(2) : -1));
  if (c.node.outputs.size() > 1) out.push_back(node_val(logp));
  return out;
}

std::vector<Val> lower_grid_sample(Ctx& c) {
  std::string mode = c.s("mode", c.opset >= 20 ? "linear" : "bilinear");
  if (mode == "linear") mode = "bilinear";
  if (mode == "cubic") mode = "bicubic";
  const std::string pad = c.s("padding_mode", "zeros");
  return one(c.b().op(
      Op::GridSample, {c.in(0), c.in(1)},
      {{"mode", mode}, {"padding", pad}, {"align_corners", c.i("align_corners", 0) != 0}}));
}

}  // namespace

void register_nn(Registry& r) {
  r.add("GridSample", lower_grid_sample);
  r.add("NegativeLogLikelihoodLoss", lower_nll_loss);
  r.add("SoftmaxCrossEntropyLoss", lower_softmax_cross_entropy);
  r.add("Det", [](Ctx& c) {  // the linalg op's det (LU through LAPACK)
    return one(c.b().results(Op::Linalg, {c.in(0)}, {{"fn", std::string("det")}})[0]);
  });
  r.add("Conv", lower_conv);
  r.add("ConvTranspose", lower_conv_transpose);
  r.add("MaxPool", [](Ctx& c) { return lower_pool(c, true); });
  r.add("AveragePool", [](Ctx& c) { return lower_pool(c, false); });
  r.add("GlobalAveragePool", [](Ctx& c) { return lower_global_pool(c, Op::ReduceMean); });
  r.add("GlobalMaxPool", [](Ctx& c) { return lower_global_pool(c, Op::ReduceMax); });
  r.add("BatchNormalization", lower_batch_norm);
  r.add("LayerNormalization", lower_layer_norm);
  r.add("InstanceNormalization", lower_instance_norm);
  r.add("Gemm", lower_gemm);
  r.add("MatMul", [](Ctx& c) { return one(c.b().matmul(c.in(0), c.in(1))); });
  r.add("Softmax", [](Ctx& c) { return lower_softmax(c, Op::Softmax); });
  r.add("LogSoftmax", [](Ctx& c) { return lower_softmax(c, Op::LogSoftmax); });
  r.add("Dropout", lower_dropout);
}

}  // namespace rlx::onnx
