// Domain com.microsoft: the ONNX Runtime contrib ops that its optimizer and exporters write into
// real models (fused GELUs, SkipLayerNormalization, FusedConv), composed from rlx ops; rlx's own
// passes fuse them again where that pays. Semantics as ONNX Runtime's contrib op schemas.
#include <cmath>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

// x (+ the optional input i, a bias broadcast over the last axis).
NodeId plus_optional(Ctx& c, NodeId x, size_t i) { return c.has(i) ? c.b().add(x, c.in(i)) : x; }

// input + skip (+ bias), normalized over the last axis, * gamma (+ beta); outputs: that, the mean
// and inverse standard deviation (kept as 1), and the sum.
std::vector<Val> lower_skip_layer_norm(Ctx& c) {
  RLX_CHECK(c.has(0) && c.has(1) && c.has(2), "takes input, skip and gamma");
  const NodeId sum = plus_optional(c, c.b().add(c.in(0), c.in(1)), 4);
  const Shape s = c.shape_of(sum);
  RLX_CHECK(s.rank() >= 1, "input is ", s.str(), ", a scalar");
  const double eps = c.f("epsilon", 1e-12);
  std::vector<NodeId> in{sum, c.in(2)};
  if (c.has(3)) in.push_back(c.in(3));
  std::vector<Val> out = one(c.b().op(Op::LayerNorm, in, {{"naxes", int64_t(1)}, {"eps", eps}}));
  const NodeId mean = c.b().reduce(Op::ReduceMean, sum, {s.rank() - 1}, true);
  const NodeId d = c.b().sub(sum, mean);
  const NodeId var = c.b().reduce(Op::ReduceMean, c.b().mul(d, d), {s.rank() - 1}, true);
  out.push_back(node_val(mean));
  out.push_back(node_val(c.b().unary(Op::Rsqrt, c.b().add(var, c.scalar_const(eps, s.dtype)))));
  out.push_back(node_val(sum));
  return out;
}

// FusedConv: activation(Conv(X, W, B) + Z) with ONNX Runtime's activation names.
std::vector<Val> lower_fused_conv(Ctx& c) {
  NodeId y = conv_node(c, c.in(0), c.in(1), c.has(2) ? c.in(2) : -1);
  y = plus_optional(c, y, 3);
  const std::string act = c.s("activation", "");
  const std::vector<double> p =
      c.has_attr("activation_params") ? c.floats_attr("activation_params") : std::vector<double>{};
  auto param = [&](size_t i, double def) { return i < p.size() ? p[i] : def; };
  if (act.empty()) return one(y);
  if (act == "Relu") return one(c.b().unary(Op::Relu, y));
  if (act == "Tanh") return one(c.b().unary(Op::Tanh, y));
  if (act == "Sigmoid") return one(c.b().unary(Op::Sigmoid, y));
  if (act == "LeakyRelu") return one(c.b().unary(Op::LeakyRelu, y, {{"slope", param(0, 0.01)}}));
  if (act == "Clip")
    return one(
        c.b().unary(Op::Clamp, y, {{"min", param(0, -INFINITY)}, {"max", param(1, INFINITY)}}));
  if (act == "HardSigmoid")
    return one(
        c.b().unary(Op::HardSigmoid, y, {{"alpha", param(0, 0.2)}, {"beta", param(1, 0.5)}}));
  c.unsupported("activation '" + act + "'");
}

}  // namespace

void register_microsoft(Registry& r) {
  r.add("com.microsoft.Gelu", [](Ctx& c) { return one(c.b().unary(Op::Gelu, c.in(0))); });
  r.add("com.microsoft.BiasGelu",
        [](Ctx& c) { return one(c.b().unary(Op::Gelu, plus_optional(c, c.in(0), 1))); });
  r.add("com.microsoft.FastGelu",  // the tanh approximation
        [](Ctx& c) { return one(c.b().unary(Op::GeluTanh, plus_optional(c, c.in(0), 1))); });
  r.add("com.microsoft.QuickGelu", [](Ctx& c) {  // x * sigmoid(alpha x)
    const NodeId x = c.in(0);
    const NodeId a = c.scalar_const(c.f("alpha", 1.702), c.shape_of(x).dtype);
    return one(c.b().mul(x, c.b().unary(Op::Sigmoid, c.b().mul(x, a))));
  });
  r.add("com.microsoft.SkipLayerNormalization", lower_skip_layer_norm);
  r.add("com.microsoft.FusedConv", lower_fused_conv);
}

}  // namespace rlx::onnx
