// vjp rules of the normalizations (through the existing *_norm_grad backward
// ops), attention (recomputed scores), rope and softmax cross-entropy.
#include <cmath>

#include "opt/autodiff/primitives.h"
#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {
namespace {

// layer/rms/group norm: one backward node gives dx, dgamma[, dbeta].
template <typename A>
void norm_grad(VjpCall& c, Op grad_op, A attrs) {
  std::vector<NodeId> in{c.in(0), c.grad()};
  if (c.n.inputs.size() > 1) in.push_back(c.in(1));  // gamma
  const auto outs = c.e.results(grad_op, std::move(in), attrs);
  for (size_t i = 0; i < c.n.inputs.size() && i < outs.size(); ++i)
    if (c.needs(i)) c.dx[i] = outs[i];
}

}  // namespace

void vjp_layer_norm(VjpCall& c) {
  const auto& a = c.n.attrs_as<NormAttrs>();
  norm_grad(c, Op::LayerNormGrad, NormGradAttrs{.naxes = a.naxes, .eps = a.eps});
}

void vjp_rms_norm(VjpCall& c) {
  const auto& a = c.n.attrs_as<NormAttrs>();
  norm_grad(c, Op::RmsNormGrad, NormGradAttrs{.naxes = a.naxes, .eps = a.eps});
}

void vjp_group_norm(VjpCall& c) {
  const auto& a = c.n.attrs_as<GroupNormAttrs>();
  norm_grad(c, Op::GroupNormGrad, GroupNormGradAttrs{.groups = a.groups, .eps = a.eps});
}

void vjp_layer_norm_2d(VjpCall& c) {
  // layer_norm over axis 1 of NCHW: layer_norm_grad on the channels-last view.
  Emit& e = c.e;
  const double eps = c.n.attrs_as<EpsAttrs>().eps;
  std::vector<NodeId> in{e.transpose(c.in(0), {0, 2, 3, 1}), e.transpose(c.grad(), {0, 2, 3, 1})};
  if (c.n.inputs.size() > 1) in.push_back(c.in(1));
  const auto outs =
      e.results(Op::LayerNormGrad, std::move(in), NormGradAttrs{.naxes = 1, .eps = eps});
  if (c.needs(0)) c.dx[0] = e.transpose(outs[0], {0, 3, 1, 2});
  for (size_t i = 1; i < c.n.inputs.size(); ++i)
    if (c.needs(i)) c.dx[i] = outs[i];
}

void vjp_batch_norm(VjpCall& c) {
  // Inference batch norm (given statistics): y = (x - mean) * g / sqrt(var + eps) + b per channel.
  Emit& e = c.e;
  const Shape xs = c.in_shape(0);
  const DType t = xs.dtype;
  std::vector<Dim> bc(size_t(xs.rank()), Dim(1));  // [1, C, 1, ...]
  bc[1] = xs.dims[1];
  std::vector<int64_t> axes{0};
  for (int i = 2; i < xs.rank(); ++i) axes.push_back(i);
  auto per_channel = [&](NodeId v) { return e.reshape(v, bc); };
  auto channel_sum = [&](NodeId v) { return e.sum(v, axes, false); };
  const NodeId x = c.in(0), mean = c.in(1), var = c.in(2), g = c.in(3), dy = c.grad();
  const NodeId inv = e.op(Op::Rsqrt, {e.add(var, e.scalar(c.n.attrs_as<EpsAttrs>().eps, t))});
  const NodeId centered = e.sub(x, per_channel(mean));
  const NodeId g_inv = e.mul(g, inv);
  if (c.needs(0)) c.dx[0] = e.mul(dy, per_channel(g_inv));
  if (c.needs(1)) c.dx[1] = e.neg(e.mul(channel_sum(dy), g_inv));
  if (c.needs(2)) {
    // d/dvar of (var + eps)^-1/2 = -1/2 inv^3
    const NodeId inv3 = e.mul(e.mul(inv, inv), inv);
    c.dx[2] = e.mul(e.mul(channel_sum(e.mul(dy, centered)), e.mul(g, inv3)), -0.5);
  }
  if (c.needs(3)) c.dx[3] = e.mul(channel_sum(e.mul(dy, centered)), inv);
  if (c.needs(4)) c.dx[4] = channel_sum(dy);
}

void vjp_batch_norm_train(VjpCall& c) {
  // y's cotangent through batch_norm_train_grad (which gives gamma's and
  // beta's too); the statistics' own ones (rare: they usually feed only
  // running averages) by their definitions, d mean / dx = 1 / n and
  // d var / dx = 2 (x - mean) / n.
  Emit& e = c.e;
  const bool affine = c.n.inputs.size() == 3;
  if (c.dy[0] >= 0 && (c.needs(0) || (affine && (c.needs(1) || c.needs(2))))) {
    std::vector<NodeId> in{c.in(0), c.dy[0]};
    if (affine) in.push_back(c.in(1));
    const auto outs = e.results(Op::BatchNormTrainGrad, std::move(in), c.n.attrs_as<EpsAttrs>());
    c.dx[0] = outs[0];
    for (size_t i = 1; affine && i < 3; ++i)
      if (c.needs(i)) c.dx[i] = outs[i];
  }
  if (!c.needs(0)) {
    c.dx[0] = -1;
    return;
  }
  const NodeId x = c.in(0);
  const Dims xd = e.dims(x, "batch_norm_train's gradient");
  const double n = double(numel(xd) / std::max<int64_t>(1, xd[1]));
  std::vector<Dim> full(xd.begin(), xd.end());
  auto acc = [&](NodeId v) { c.dx[0] = c.dx[0] < 0 ? v : e.add(c.dx[0], v); };
  if (c.dy[1] >= 0) acc(e.expand(e.mul(c.dy[1], 1 / n), full));
  if (c.dy[2] >= 0) {
    const NodeId mean = e.graph().result(c.n.id, 1);
    acc(e.mul(e.mul(e.sub(x, mean), c.dy[2]), 2 / n));
  }
}

namespace {

// Batch statistics of x [N, C, ...] over every axis but 1 (kept), spelt with primitives.
struct BatchStats {
  NodeId mean, var, rstd, xhat;
};

// A reduction of v [N, C, ...] over every axis but 1, kept.
NodeId batch_reduce(Emit& e, Op op, NodeId v) {
  std::vector<int64_t> axes{0};
  for (int i = 2; i < e.rank(v); ++i) axes.push_back(i);
  return e.op(op, {v}, ReduceAttrs{.axes = axes, .keepdims = true});
}
NodeId batch_mean(Emit& e, NodeId v) { return batch_reduce(e, Op::ReduceMean, v); }
NodeId batch_sum(Emit& e, NodeId v) { return batch_reduce(e, Op::ReduceSum, v); }

// [1, C, 1, ...] for x [N, C, ...].
std::vector<Dim> stats_dims(Emit& e, NodeId x) {
  const Dims xd = e.dims(x, "batch_norm_train");
  std::vector<Dim> d(xd.size(), Dim(1));
  d[1] = Dim(xd[1]);
  return d;
}

BatchStats batch_stats(Emit& e, NodeId x, double eps) {
  BatchStats s;
  s.mean = batch_mean(e, x);
  const NodeId d = e.sub(x, s.mean);
  s.var = batch_mean(e, e.mul(d, d));
  s.rstd = e.op(Op::Rsqrt, {e.add(s.var, e.scalar(eps, e.dtype(x)))});
  s.xhat = e.mul(d, s.rstd);
  return s;
}

}  // namespace

std::vector<NodeId> batch_norm_train_primitives(Emit& e, NodeId x, NodeId gamma, NodeId beta,
                                                double eps) {
  const BatchStats s = batch_stats(e, x, eps);
  if (gamma < 0) return {s.xhat, s.mean, s.var};
  const std::vector<Dim> per_channel = stats_dims(e, x);
  const NodeId y =
      e.add(e.mul(s.xhat, e.reshape(gamma, per_channel)), e.reshape(beta, per_channel));
  return {y, s.mean, s.var};
}

std::vector<NodeId> batch_norm_train_grad_primitives(Emit& e, NodeId x, NodeId dy, NodeId gamma,
                                                     double eps) {
  const BatchStats s = batch_stats(e, x, eps);
  const std::vector<Dim> per_channel = stats_dims(e, x);
  const NodeId centered = e.sub(dy, batch_mean(e, dy));
  NodeId dx = e.mul(s.rstd, e.sub(centered, e.mul(s.xhat, batch_mean(e, e.mul(dy, s.xhat)))));
  std::vector<Dim> pdims = per_channel;
  if (gamma >= 0) {
    dx = e.mul(dx, e.reshape(gamma, per_channel));
    const Dims gd = e.dims(gamma, "batch_norm_train_grad");
    pdims.assign(gd.begin(), gd.end());
  }
  const NodeId dgamma = e.reshape(batch_sum(e, e.mul(dy, s.xhat)), pdims);
  const NodeId dbeta = e.reshape(batch_sum(e, dy), pdims);
  return {dx, dgamma, dbeta};
}

AttentionGradNodes attention_grad_primitives(Emit& e, NodeId q_in, NodeId k_in, NodeId v_in,
                                             NodeId bias_in, NodeId dout_in, AttentionAttrs a,
                                             bool want_dbias) {
  // Recomputes the probabilities P of attention.cc's definition (grouped key
  // heads as a broadcast axis: [B, Hk, G, S, D]) and backpropagates through
  // out = P v, P = softmax(scale q k^T + mask):
  //   dv = P^T dout, dP = dout v^T, dS = P (dP - rowsum(dP P)),
  //   dq = scale dS k, dk = scale dS^T q, dbias = dS.
  // Rows that see no key are zero, as in the kernel. [B, S, H, D] operands
  // are transposed to [B, H, S, D] first, and the gradients back.
  if (a.layout == AttentionLayout::bshd) {
    auto t = [&](NodeId x) { return e.transpose(x, {0, 2, 1, 3}); };
    a.layout = AttentionLayout::bhsd;
    AttentionGradNodes r =
        attention_grad_primitives(e, t(q_in), t(k_in), t(v_in), bias_in, t(dout_in), a, want_dbias);
    r.dq = t(r.dq);
    r.dk = t(r.dk);
    r.dv = t(r.dv);
    return r;
  }
  const Dims qd = e.dims(q_in, "attention's gradient");
  const Dims kd = e.dims(k_in, "attention's gradient");
  const Dims vd = e.dims(v_in, "attention's gradient");
  const int64_t B = qd[0], Hq = qd[1], Sq = qd[2], D = qd[3], Hk = kd[1], Sk = kd[2], Dv = vd[3];
  const int64_t G = Hq / Hk;
  const DType t = e.dtype(q_in);
  const double scale = a.scale.value_or(1.0 / std::sqrt(double(D)));
  auto five = [&](NodeId x, int64_t g, int64_t s, int64_t d) {
    return e.reshape(x, {Dim(B), Dim(Hk), Dim(g), Dim(s), Dim(d)});
  };
  const NodeId q = five(q_in, G, Sq, D), k = five(k_in, 1, Sk, D), v = five(v_in, 1, Sk, Dv);
  NodeId s = e.mul(e.matmul(q, k, false, true), scale);  // [B, Hk, G, Sq, Sk]
  // Soft-capping s = cap * tanh(raw / cap): d s / d raw = 1 - tanh^2.
  NodeId capped_tanh = -1;
  if (a.softcap > 0) {
    capped_tanh = e.op(Op::Tanh, {e.mul(s, 1.0 / a.softcap)});
    s = e.mul(capped_tanh, a.softcap);
  }
  const std::vector<Dim> scores{Dim(B), Dim(Hk), Dim(G), Dim(Sq), Dim(Sk)};
  const std::vector<Dim> scores4{Dim(B), Dim(Hq), Dim(Sq), Dim(Sk)};
  Tensor ninf_t({}, t);
  {
    const double ninf = -INFINITY;
    cast_elements(&ninf, DType::F64, ninf_t.raw(), t, 1);
  }
  const NodeId ninf = e.constant(ninf_t);
  if (a.mask == MaskKind::causal || a.mask == MaskKind::sliding) {
    Tensor vis({Sq, Sk}, DType::Bool);
    const int64_t off = Sk - Sq;
    for (int64_t i = 0; i < Sq; ++i)
      for (int64_t j = 0; j < Sk; ++j)
        vis.data<bool>()[i * Sk + j] =
            j <= i + off && (a.mask == MaskKind::causal || j > i + off - a.window);
    s = e.where(e.constant(vis), s, ninf);
  } else if (a.mask == MaskKind::bias) {
    const NodeId bias = e.reshape(e.expand(bias_in, scores4), scores);
    s = e.dtype(bias_in) == DType::Bool ? e.where(bias, s, ninf) : e.add(s, bias);
  }
  // Softmax that gives 0 (not NaN) on rows whose every score is -inf.
  const NodeId zero = e.scalar(0, t);
  const NodeId m = e.op(Op::ReduceMax, {s}, ReduceAttrs{.axes = {-1}, .keepdims = true});
  const NodeId ex = e.op(Op::Exp, {e.sub(s, e.where(e.compare(Op::Eq, m, ninf), zero, m))});
  const NodeId sum = e.sum(ex, {-1}, true);
  const NodeId p = e.div(ex, e.where(e.compare(Op::Eq, sum, zero), e.scalar(1, t), sum));

  AttentionGradNodes r;
  const NodeId dout = five(dout_in, G, Sq, Dv);
  r.dv = e.sum(e.matmul(p, dout, true, false), {2}, false);
  const NodeId dp = e.matmul(dout, v, false, true);
  NodeId ds = e.mul(p, e.sub(dp, e.sum(e.mul(dp, p), {-1}, true)));
  // The bias is added after the cap, so it takes ds as it is; q and k take it through the cap.
  if (want_dbias)
    r.dbias = e.sum_to(e.reshape(ds, scores4), Shape(e.dims(bias_in, "attention's gradient"), t));
  if (capped_tanh >= 0) ds = e.mul(ds, e.sub(e.scalar(1, t), e.mul(capped_tanh, capped_tanh)));
  r.dq = e.reshape(e.mul(e.matmul(ds, k), scale), {qd.begin(), qd.end()});
  r.dk = e.sum(e.mul(e.matmul(ds, q, true, false), scale), {2}, false);
  return r;
}

void vjp_attention(VjpCall& c) {
  // attention_grad, the flash-style kernel, unless the bias needs its
  // gradient (dS itself, which that kernel never forms): then the composed rule.
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<AttentionAttrs>();
  const bool has_bias = c.n.inputs.size() == 4;
  if (!(has_bias && c.needs(3))) {
    std::vector<NodeId> in{c.in(0), c.in(1), c.in(2), c.grad()};
    if (has_bias) in.push_back(c.in(3));
    const auto outs = e.results(Op::AttentionGrad, std::move(in), a);
    for (size_t i = 0; i < 3; ++i)
      if (c.needs(i)) c.dx[i] = outs[i];
    return;
  }
  const AttentionGradNodes r =
      attention_grad_primitives(e, c.in(0), c.in(1), c.in(2), c.in(3), c.grad(), a, true);
  const NodeId d[] = {r.dq, r.dk, r.dv, r.dbias};
  for (size_t i = 0; i < 4; ++i)
    if (c.needs(i)) c.dx[i] = d[i];
}

void vjp_rope(VjpCall& c) {
  // rope rotates pairs (a, b) by angle = pos * theta^(-2i/rd) / f_i. Its
  // adjoint is the inverse rotation: rope at the negated positions. For the
  // freq_factors f: d out / d angle = (-b', a') (the output pair turned by 90
  // degrees), and d angle / d f_i = -angle / f_i.
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<RopeAttrs>();
  const NodeId pos = c.in(1), dy = c.grad();
  if (c.needs(0)) {
    std::vector<NodeId> in{dy, e.sub(e.scalar(0, e.dtype(pos)), pos)};
    if (c.n.inputs.size() > 2) in.push_back(c.in(2));
    c.dx[0] = e.op(Op::Rope, std::move(in), a);
  }
  if (!c.needs(2)) return;
  const Dims x = e.dims(c.in(0), "rope's freq_factors gradient");
  const int64_t rd = a.rotary_dims.value_or(x[3]), half = rd / 2;
  const DType t = e.dtype(dy);
  const bool neox = a.style == RopeStyle::neox;
  auto part = [&](NodeId v, int k) {  // first (k = 0) or second element of every pair
    return neox ? e.slice(v, 3, k * half, (k + 1) * half) : e.slice(v, 3, k, rd, 2);
  };
  const NodeId y = c.n.id;
  const NodeId dangle = e.sum(e.sub(e.mul(part(y, 0), part(dy, 1)), e.mul(part(y, 1), part(dy, 0))),
                              {0, 1}, false);  // [S, half]
  Tensor base({half}, DType::F64);
  for (int64_t i = 0; i < half; ++i)
    base.data<double>()[i] = std::pow(a.theta, -2.0 * double(i) / double(rd));
  const NodeId posf = e.reshape(e.cast(pos, t), {Dim(x[2]), Dim(1)});
  const NodeId f = c.in(2);
  const NodeId per_f = e.sum(e.mul(dangle, posf), {0}, false);  // sum_s dangle * pos
  c.dx[2] = e.neg(e.div(e.mul(per_f, e.constant(base.to(t))), e.mul(f, f)));
}

void vjp_softmax_cross_entropy(VjpCall& c) {
  c.dx[0] = c.e.op(Op::SoftmaxCrossEntropyGrad, {c.in(0), c.in(1), c.grad()},
                   c.n.attrs_as<CrossEntropyAttrs>());
}

// y = x * mask / (1 - p) is linear in x: dx = dropout(dy) with the node's seed and step draws
// the very same mask (a hash of seed, step and index), so nothing is saved for backward.
void vjp_dropout(VjpCall& c) {
  c.dx[0] = c.e.op(Op::Dropout, {c.grad(), c.in(1)}, c.n.attrs_as<DropoutAttrs>());
}

}  // namespace rlx::opt::ad
