// Backward ops composed from primitive MIL ops, with the math of the CPU kernels
// (src/backends/cpu/grad_*.cc): rms/layer/group_norm_grad, activation_grad,
// softmax_cross_entropy(_grad), and max_pool2d_grad, batch_norm_train(_grad) and attention_grad
// through autodiff's primitives. MIL cannot raise errors at run time, so an out-of-range label
// (checked by the CPU kernel) is not detected here; ignore_index rows are masked.
#include <cmath>

#include "lower.h"
#include "opt/autodiff/primitives.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

std::vector<int64_t> trailing_axes(int64_t naxes) {
  std::vector<int64_t> a;
  for (int64_t i = naxes; i >= 1; --i) a.push_back(-i);
  return a;
}

// The node's declared result, named after the node.
Val finish(Lowering& L, const Node& n, const Val& v) {
  return L.b.op("identity", {{"x", v}}, L.type_of(n), L.hint(n));
}
// Output i of a multi-output node, named after the node and the output.
Val finish(Lowering& L, const Node& n, size_t i, const Val& v) {
  return L.b.op("identity", {{"x", v}}, L.type_of(n.results[i]),
                L.hint(n) + "_" + std::to_string(i));
}

Val rsqrt(Lowering& L, const Val& x, const std::string& h) {
  return L.b.op("rsqrt", {{"x", x}, {"epsilon", L.scalar_like(0, x, h + "_e0")}}, x.type, h);
}

Val select(Lowering& L, const Val& cond, const Val& a, const Val& b, const std::string& h) {
  Type t = broadcast_type(broadcast_type(a.type, b.type, a.type.dt), cond.type, a.type.dt);
  return L.b.op("select", {{"cond", cond}, {"a", a}, {"b", b}}, t, h);
}

// Sums t over the axes not in `keep_from..` (the batch axes); identity when there are none.
Val sum_leading(Lowering& L, const Val& t, int64_t nlead, const std::string& h) {
  if (nlead == 0) return t;
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < nlead; ++i) axes.push_back(i);
  return L.reduce("reduce_sum", t, axes, false, h);
}

std::vector<Val> lower_rms_norm_grad(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &dy = L.in(n, 1);
  const std::string h = L.hint(n);
  const auto& at = n.attrs_as<NormGradAttrs>();
  const int64_t naxes = at.naxes;
  const auto axes = trailing_axes(naxes);
  Val ms = L.reduce("reduce_mean", L.binary("mul", x, x, h + "_sq"), axes, true, h + "_ms");
  Val inv =
      rsqrt(L, L.binary("add", ms, L.scalar_like(at.eps, x, h + "_eps"), h + "_mse"), h + "_inv");
  Val dgamma = sum_leading(L, L.binary("mul", L.binary("mul", dy, x, h + "_dyx"), inv, h + "_t"),
                           x.type.rank() - naxes, h + "_dg");
  // dx = inv * sy - x * (mean(x * sy) * inv^3)
  Val sy = n.inputs.size() > 2 ? L.binary("mul", dy, L.in(n, 2), h + "_sy") : dy;
  Val m = L.reduce("reduce_mean", L.binary("mul", x, sy, h + "_xsy"), axes, true, h + "_m");
  Val inv3 = L.binary("mul", inv, L.binary("mul", inv, inv, h + "_inv2"), h + "_inv3");
  Val q = L.binary("mul", m, inv3, h + "_q");
  Val dx = L.binary("sub", L.binary("mul", inv, sy, h + "_p"), L.binary("mul", x, q, h + "_xq"),
                    h + "_dx");
  return {finish(L, n, 0, dx), finish(L, n, 1, dgamma)};
}

// dx = inv * (sy - mean(sy) - xh * mean(sy * xh)) with the means over `axes` (kept).
Val ln_dx(Lowering& L, const Val& sy, const Val& xh, const Val& inv,
          const std::vector<int64_t>& axes, const std::string& h) {
  Val a = L.reduce("reduce_mean", sy, axes, true, h + "_a");
  Val bm = L.reduce("reduce_mean", L.binary("mul", sy, xh, h + "_syxh"), axes, true, h + "_b");
  Val t = L.binary("sub", L.binary("sub", sy, a, h + "_sya"), L.binary("mul", xh, bm, h + "_xhb"),
                   h + "_t");
  return L.binary("mul", inv, t, h + "_dx");
}

// x_hat and inv_std over `axes` (kept), composed like Lowering::normalize.
std::pair<Val, Val> x_hat(Lowering& L, const Val& x, const std::vector<int64_t>& axes, double eps,
                          const std::string& h) {
  Val mean = L.reduce("reduce_mean", x, axes, true, h + "_mean");
  Val d = L.binary("sub", x, mean, h + "_d");
  Val var = L.reduce("reduce_mean", L.binary("mul", d, d, h + "_d2"), axes, true, h + "_var");
  Val inv =
      rsqrt(L, L.binary("add", var, L.scalar_like(eps, x, h + "_eps"), h + "_ve"), h + "_inv");
  return {L.binary("mul", d, inv, h + "_xh"), inv};
}

std::vector<Val> lower_layer_norm_grad(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &dy = L.in(n, 1);
  const std::string h = L.hint(n);
  const auto& at = n.attrs_as<NormGradAttrs>();
  const int64_t naxes = at.naxes;
  const auto axes = trailing_axes(naxes);
  const int64_t nlead = x.type.rank() - naxes;
  auto [xh, inv] = x_hat(L, x, axes, at.eps, h);
  Val sy = n.inputs.size() > 2 ? L.binary("mul", dy, L.in(n, 2), h + "_sy") : dy;
  return {finish(L, n, 0, ln_dx(L, sy, xh, inv, axes, h)),
          finish(L, n, 1, sum_leading(L, L.binary("mul", dy, xh, h + "_dyxh"), nlead, h + "_dg")),
          finish(L, n, 2, sum_leading(L, dy, nlead, h + "_db"))};
}

// Computed in the [N, G, M] layout (M = C/G * spatial) with last-axis reductions only.
std::vector<Val> lower_group_norm_grad(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &dy = L.in(n, 1);
  const std::string h = L.hint(n);
  const auto& at = n.attrs_as<GroupNormGradAttrs>();
  const int64_t g = at.groups;
  std::vector<int64_t> rest(x.type.dims.begin() + 1, x.type.dims.end());
  int64_t m = 1;
  for (int64_t d : rest) {
    RLX_CHECK(d >= 0, "coreml: group_norm_grad needs static C and spatial dims");
    m *= d;
  }
  std::vector<int64_t> reduce_axes{0};  // dgamma/dbeta: every axis but C
  for (int i = 2; i < x.type.rank(); ++i) reduce_axes.push_back(i);
  const int64_t nb = x.type.dims[0] >= 0 ? x.type.dims[0] : -1;
  std::vector<int64_t> back = x.type.dims;
  if (back[0] < 0) back[0] = -1;
  auto [xh, inv] = x_hat(L, L.reshape(x, {nb, g, m / g}, h + "_xg"), {-1}, at.eps, h);
  Val xhb = L.reshape(xh, back, h + "_xhb");
  Val dgamma =
      L.reduce("reduce_sum", L.binary("mul", dy, xhb, h + "_dyxh"), reduce_axes, false, h + "_dg");
  Val dbeta = L.reduce("reduce_sum", dy, reduce_axes, false, h + "_db");
  Val sy = dy;
  if (n.inputs.size() > 2) {
    std::vector<int64_t> s(size_t(x.type.rank()), 1);
    s[1] = x.type.dims[1];
    sy = L.binary("mul", dy, L.reshape(L.in(n, 2), s, h + "_g"), h + "_sy");
  }
  Val dx = ln_dx(L, L.reshape(sy, {nb, g, m / g}, h + "_syg"), xh, inv, {-1}, h);
  return {finish(L, n, 0, L.reshape(dx, back, h + "_back")), finish(L, n, 1, dgamma),
          finish(L, n, 2, dbeta)};
}

// f'(x) for activation_grad, composed from MIL primitives (round is handled by the caller).
// `a` holds the activation's own attributes (activation_attrs).
Val activation_derivative(Lowering& L, Op kind, const OpAttrs& a, const Val& x,
                          const std::string& h) {
  auto k = [&](double v, const char* s) { return L.scalar_like(v, x, h + s); };
  auto mul = [&](const Val& p, const Val& q, const char* s) {
    return L.binary("mul", p, q, h + s);
  };
  auto add = [&](const Val& p, const Val& q, const char* s) {
    return L.binary("add", p, q, h + s);
  };
  auto sub = [&](const Val& p, const Val& q, const char* s) {
    return L.binary("sub", p, q, h + s);
  };
  auto div = [&](const Val& p, const Val& q, const char* s) {
    return L.binary("real_div", p, q, h + s);
  };
  auto un = [&](const char* t, const Val& p, const char* s) { return L.unary(t, p, h + s); };
  auto cmp = [&](const char* t, const Val& p, double v, const char* s) {
    return L.binary(t, p, k(v, s), h + s + "_c");
  };
  auto zero = [&] { return k(0, "_zero"); };
  auto one = [&] { return k(1, "_one"); };
  switch (family_op<UnaryOp>(kind)) {
    case UnaryOp::Relu:
      return select(L, cmp("greater", x, 0, "_pos"), one(), zero(), h + "_d");
    case UnaryOp::Gelu: {  // Phi(x) + x phi(x)
      Val cdf =
          mul(k(0.5, "_half"),
              add(one(), un("erf", mul(x, k(M_SQRT1_2, "_rs2"), "_xs"), "_erf"), "_1erf"), "_cdf");
      Val pdf = mul(k(0.3989422804014327, "_ip"),
                    un("exp", mul(mul(x, x, "_x2"), k(-0.5, "_mh"), "_e"), "_exp"), "_pdf");
      return add(cdf, mul(x, pdf, "_xpdf"), "_d");
    }
    case UnaryOp::GeluTanh: {
      const double kk = 0.79788456080286535588, c3 = 0.044715;
      Val x2 = mul(x, x, "_x2");
      Val t =
          un("tanh",
             mul(k(kk, "_k"), add(x, mul(k(c3, "_c3"), mul(x2, x, "_x3"), "_cx3"), "_in"), "_u"),
             "_t");
      Val left = mul(k(0.5, "_half"), add(one(), t, "_1t"), "_l");
      Val dt = sub(one(), mul(t, t, "_t2"), "_dt");
      Val du = mul(k(kk, "_k2"), add(one(), mul(k(3 * c3, "_3c"), x2, "_3cx2"), "_du0"), "_du");
      return add(left, mul(mul(k(0.5, "_half2"), x, "_hx"), mul(dt, du, "_dtdu"), "_r"), "_d");
    }
    case UnaryOp::Silu: {
      Val s = un("sigmoid", x, "_s");
      return mul(s, add(one(), mul(x, sub(one(), s, "_1s"), "_x1s"), "_f"), "_d");
    }
    case UnaryOp::Sigmoid: {
      Val s = un("sigmoid", x, "_s");
      return mul(s, sub(one(), s, "_1s"), "_d");
    }
    case UnaryOp::Tanh: {
      Val t = un("tanh", x, "_t");
      return sub(one(), mul(t, t, "_t2"), "_d");
    }
    case UnaryOp::Exp:
      return un("exp", x, "_d");
    case UnaryOp::Log:
      return div(one(), x, "_d");
    case UnaryOp::Sqrt:
      return div(k(0.5, "_half"), un("sqrt", x, "_sqrt"), "_d");
    case UnaryOp::Rsqrt:
      return div(k(-0.5, "_mh"), mul(x, un("sqrt", x, "_sqrt"), "_xs"), "_d");
    case UnaryOp::Neg:
      return k(-1, "_d");
    case UnaryOp::Abs:
      return un("sign", x, "_d");
    case UnaryOp::Sin:
      return un("cos", x, "_d");
    case UnaryOp::Cos:
      return mul(k(-1, "_m1"), un("sin", x, "_sin"), "_d");
    case UnaryOp::Tan: {
      Val t = un("tan", x, "_t");
      return add(one(), mul(t, t, "_t2"), "_d");
    }
    case UnaryOp::Atan:
      return div(one(), add(one(), mul(x, x, "_x2"), "_1x2"), "_d");
    case UnaryOp::Erf:
      return mul(k(1.1283791670955126, "_2sp"),
                 un("exp", mul(k(-1, "_m1"), mul(x, x, "_x2"), "_mx2"), "_e"), "_d");
    case UnaryOp::Reciprocal:
      return div(k(-1, "_m1"), mul(x, x, "_x2"), "_d");
    case UnaryOp::Round:  // straight-through
      return one();
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
    case UnaryOp::Sign:
      return zero();
    case UnaryOp::Softplus: {
      const auto& sp = std::get<SoftplusAttrs>(a);
      const double beta = sp.beta, thr = sp.threshold;
      Val bx = mul(x, k(beta, "_beta"), "_bx");
      return select(L, cmp("greater", bx, thr, "_lin"), one(), un("sigmoid", bx, "_s"), h + "_d");
    }
    case UnaryOp::Elu:
      return select(L, cmp("greater", x, 0, "_pos"), one(),
                    mul(k(std::get<EluAttrs>(a).alpha, "_alpha"), un("exp", x, "_e"), "_ae"),
                    h + "_d");
    case UnaryOp::LeakyRelu:
      return select(L, cmp("greater", x, 0, "_pos"), one(),
                    k(std::get<LeakyReluAttrs>(a).slope, "_slope"), h + "_d");
    case UnaryOp::HardSigmoid: {
      const auto& hs = std::get<HardSigmoidAttrs>(a);
      const double al = hs.alpha, be = hs.beta;
      Val v = add(mul(x, k(al, "_al"), "_ax"), k(be, "_be"), "_v");
      Val in =
          L.binary("logical_and", cmp("greater", v, 0, "_lo"), cmp("less", v, 1, "_hi"), h + "_in");
      return select(L, in, k(al, "_al2"), zero(), h + "_d");
    }
    case UnaryOp::HardSwish: {
      Val mid = add(div(x, k(3, "_3"), "_x3"), k(0.5, "_half"), "_mid");
      return select(L, cmp("less", x, -3, "_lo"), zero(),
                    select(L, cmp("less_equal", x, 3, "_hi"), mid, one(), h + "_upper"), h + "_d");
    }
    case UnaryOp::Mish: {
      Val t = un("tanh", un("softplus", x, "_sp"), "_t");
      return add(
          t, mul(mul(x, un("sigmoid", x, "_s"), "_xs"), sub(one(), mul(t, t, "_t2"), "_dt"), "_r"),
          "_d");
    }
    case UnaryOp::Clamp: {
      const auto& c = std::get<ClampAttrs>(a);
      const double lo = c.min, hi = c.max;
      const bool has_lo = std::isfinite(lo), has_hi = std::isfinite(hi);
      if (!has_lo && !has_hi) return one();
      Val in = has_lo ? cmp("greater_equal", x, lo, "_lo") : cmp("less_equal", x, hi, "_hi");
      if (has_lo && has_hi)
        in = L.binary("logical_and", in, cmp("less_equal", x, hi, "_hi"), h + "_in");
      return select(L, in, one(), zero(), h + "_d");
    }
  }
  throw make_error("coreml: activation_grad kind '", op_name(kind), "' is not lowered");
}

Val lower_activation_grad(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &dy = L.in(n, 1);
  const auto& g = n.attrs_as<ActivationGradAttrs>();
  const std::string h = L.hint(n);
  if (g.kind == Op::Round) return finish(L, n, dy);
  return L.b.op("mul",
                {{"x", dy}, {"y", activation_derivative(L, g.kind, activation_attrs(g), x, h)}},
                L.type_of(n), h);
}

// Shared part of the loss and its gradient: labels with ignored rows replaced by 0 (so the
// gather stays in range) and the per-row mask as floats (1 counted, 0 ignored).
struct CeParts {
  Val safe, valid;
};

CeParts ce_parts(Lowering& L, const Node& n) {
  const Val &logits = L.in(n, 0), &labels = L.in(n, 1);
  const std::string h = L.hint(n);
  Val keep = L.binary("not_equal", labels,
                      L.b.int_scalar(n.attrs_as<CrossEntropyAttrs>().ignore_index, h + "_ignore"),
                      h + "_keep");
  Val safe = select(L, keep, labels, L.b.int_scalar(0, h + "_zero_label"), h + "_safe");
  return {safe, L.cast(keep, logits.type.dt, h + "_valid")};
}

Val lower_softmax_ce(Lowering& L, const Node& n) {
  const Val& logits = L.in(n, 0);
  const std::string h = L.hint(n);
  auto [safe, valid] = ce_parts(L, n);
  Val lse = L.reduce("reduce_log_sum_exp", logits, {-1}, false, h + "_lse");
  std::vector<std::pair<std::string, Arg>> in{{"x", logits},
                                              {"indices", L.reshape(safe, {-1, 1}, h + "_idx")},
                                              {"axis", L.b.int_scalar(-1, h + "_axis")}};
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  Type pt{logits.type.dt, {logits.type.dims[0], 1}};
  Val picked = L.reshape(L.b.op("gather_along_axis", in, pt, h + "_picked2"), {-1}, h + "_picked");
  Val loss = L.binary("mul", L.binary("sub", lse, picked, h + "_nll"), valid, h + "_loss");
  switch (n.attrs_as<CrossEntropyAttrs>().reduction) {
    case LossReduction::none:
      return finish(L, n, loss);
    case LossReduction::sum:
      return finish(L, n, L.reduce("reduce_sum", loss, {0}, false, h + "_sum"));
    case LossReduction::mean: {
      Val sum = L.reduce("reduce_sum", loss, {0}, false, h + "_sum");
      Val count = L.reduce("reduce_sum", valid, {0}, false, h + "_count");
      return L.b.op("real_div", {{"x", sum}, {"y", count}}, L.type_of(n), h);
    }
  }
  throw make_error("coreml: ", n.label(), ": bad loss reduction");
}

// (softmax(logits) - onehot(label)) * w, w = dloss * valid (/ count for mean), as [N, 1].
Val lower_softmax_ce_grad(Lowering& L, const Node& n) {
  const Val &logits = L.in(n, 0), &dloss = L.in(n, 2);
  const std::string h = L.hint(n);
  const int64_t C = logits.type.dims[1];
  RLX_CHECK(C >= 0, "coreml: softmax_cross_entropy_grad needs a static class count");
  auto [safe, valid] = ce_parts(L, n);
  Val p = L.b.op("softmax", {{"x", logits}, {"axis", L.b.int_scalar(-1, h + "_axis")}}, logits.type,
                 h + "_p");
  Tensor range({C}, DType::I32);
  for (int64_t j = 0; j < C; ++j) range.data<int32_t>()[j] = int32_t(j);
  Val hot = L.binary("equal", L.reshape(safe, {-1, 1}, h + "_lab"),
                     L.b.constant(range, pb::INT32, h + "_range"), h + "_hot");
  Val diff = L.binary("sub", p, L.cast(hot, logits.type.dt, h + "_onehot"), h + "_diff");
  Val w = L.binary("mul", valid, dloss, h + "_w0");
  if (n.attrs_as<CrossEntropyAttrs>().reduction == LossReduction::mean)
    w = L.binary("real_div", w, L.reduce("reduce_sum", valid, {0}, false, h + "_count"), h + "_w1");
  return L.b.op("mul", {{"x", diff}, {"y", L.reshape(w, {-1, 1}, h + "_w")}}, L.type_of(n), h);
}

// MIL's random ops take a constant seed and keep no counter, and MIL has no 64-bit integer or
// bitwise ops to compute the CPU kernel's hash of (seed, step, index): a lowering could not give
// the same mask as the CPU reference, nor the same mask to the forward and its vjp. So only
// p = 0 (the identity) lowers; anything else fails at export, naming the node. Inference exports
// never meet this: eval mode has no dropout node.
Val lower_dropout(Lowering& L, const Node& n) {
  RLX_CHECK(n.attrs_as<DropoutAttrs>().p == 0, "coreml: ", L.hint(n),
            ": dropout with p > 0 has no MIL form (MIL has no counter-based RNG); export the "
            "model in eval mode, where dropout is the identity");
  return L.b.op("identity", {{"x", L.in(n, 0)}}, L.type_of(n), L.hint(n));
}

// Ops with no MIL counterpart, lowered through autodiff's primitive spelling
// of them (opt/autodiff/primitives.h): `build` makes that spelling as a small
// rlx graph on inputs shaped like the node's, whose nodes lower through the
// table like any other; returns the values of build's outputs.
template <typename Build>
std::vector<Val> lower_via_primitives(Lowering& L, const Node& n, Build build) {
  Graph sub;
  std::vector<NodeId> ins;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    ins.push_back(sub.input("in" + std::to_string(i), L.g.node(n.inputs[i]).shape));
  opt::ad::Emit e(sub);
  e.set_origin(n.origin);
  const std::vector<NodeId> outs = build(e, ins);
  Lowering S{sub, L.weights, L.b, L.fp16, std::vector<Val>(sub.size()), {}};
  S.results.resize(sub.size());
  for (size_t i = 0; i < ins.size(); ++i) S.vals[size_t(ins[i])] = L.in(n, i);
  for (const Node& m : sub.nodes()) {
    if (m.op == Op::Input) continue;
    const LowerFn f = lower_table().one[size_t(m.op)];
    RLX_CHECK(f, "coreml: ", L.hint(n), ": no lowering for its primitive ", op_name(m.op));
    S.vals[size_t(m.id)] = f(S, m);
  }
  std::vector<Val> r;
  for (NodeId o : outs) r.push_back(S.vals[size_t(o)]);
  return r;
}

Val lower_max_pool_grad(Lowering& L, const Node& n) {
  const auto v = lower_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
    return std::vector<NodeId>{
        opt::ad::max_pool_grad_primitives(e, in[0], in[1], n.attrs_as<MaxPoolAttrs>())};
  });
  return finish(L, n, v[0]);
}

// MIL has no op that runs a program, so a fused region lowers as the ops it
// was fused from.
// A fused node spelt back into primitives by `spell` (fused_elementwise, conv_blocked[_chain]).
template <NodeId (*spell)(opt::ad::Emit&, const Node&, const std::vector<NodeId>&)>
Val lower_spelt(Lowering& L, const Node& n) {
  const auto v = lower_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
    return std::vector<NodeId>{spell(e, n, in)};
  });
  return finish(L, n, v[0]);
}

std::vector<Val> lower_batch_norm_train(Lowering& L, const Node& n) {
  const double eps = n.attrs_as<EpsAttrs>().eps;
  return lower_results_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
    const bool affine = in.size() == 3;
    return opt::ad::batch_norm_train_primitives(e, in[0], affine ? in[1] : -1, affine ? in[2] : -1,
                                                eps);
  });
}

std::vector<Val> lower_batch_norm_train_grad(Lowering& L, const Node& n) {
  const double eps = n.attrs_as<EpsAttrs>().eps;
  return lower_results_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
    return opt::ad::batch_norm_train_grad_primitives(e, in[0], in[1], in.size() > 2 ? in[2] : -1,
                                                     eps);
  });
}

std::vector<Val> lower_attention_grad(Lowering& L, const Node& n) {
  return lower_results_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
    const auto r =
        opt::ad::attention_grad_primitives(e, in[0], in[1], in[2], in.size() == 5 ? in[4] : -1,
                                           in[3], n.attrs_as<AttentionAttrs>(), false);
    return std::vector<NodeId>{r.dq, r.dk, r.dv};
  });
}

}  // namespace

std::vector<Val> lower_results_via_primitives(Lowering& L, const Node& n,
                                              const PrimitiveSpelling& build) {
  const std::vector<Val> v = lower_via_primitives(L, n, build);
  std::vector<Val> r;
  for (size_t i = 0; i < v.size(); ++i) r.push_back(finish(L, n, i, v[i]));
  return r;
}

void register_grad(LowerTable& t) {
  auto set = [&](Op op, LowerFn f) { t.one[size_t(op)] = f; };
  t.many[size_t(Op::RmsNormGrad)] = lower_rms_norm_grad;
  t.many[size_t(Op::LayerNormGrad)] = lower_layer_norm_grad;
  t.many[size_t(Op::GroupNormGrad)] = lower_group_norm_grad;
  set(Op::ActivationGrad, lower_activation_grad);
  set(Op::SoftmaxCrossEntropy, lower_softmax_ce);
  set(Op::SoftmaxCrossEntropyGrad, lower_softmax_ce_grad);
  set(Op::Dropout, lower_dropout);
  set(Op::MaxPool2dGrad, lower_max_pool_grad);
  set(Op::FusedElementwise, lower_spelt<opt::ad::elementwise_primitives>);
  set(Op::ConvBlocked, lower_spelt<opt::ad::conv_blocked_primitives>);
  set(Op::ConvBlockedChain, lower_spelt<opt::ad::conv_blocked_chain_primitives>);
  t.many[size_t(Op::BatchNormTrainGrad)] = lower_batch_norm_train_grad;
  t.many[size_t(Op::BatchNormTrain)] = lower_batch_norm_train;
  t.many[size_t(Op::AttentionGrad)] = lower_attention_grad;
}

}  // namespace rlx::coreml
