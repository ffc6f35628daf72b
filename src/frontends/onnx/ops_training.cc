// The optimizer steps of ONNX's training domain (ai.onnx.preview.training): Adagrad, Momentum
// and Adam, each over n tensors at once (inputs R, T, then n X, n G and the n-tensor states;
// outputs the n new X, then the new states), composed element-wise as the ONNX spec writes them.
#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

struct Step {
  Ctx& c;
  DType t;
  size_t n;  // tensors optimized
  Builder& b() { return c.b(); }
  NodeId k(double v) { return c.scalar_const(v, t); }
  NodeId in(size_t group, size_t i) { return c.in(2 + group * n + i); }
  NodeId rate() { return c.cast(c.in(0), t); }
  NodeId steps() { return c.cast(c.in(1), t); }
  // norm_coefficient * X + G
  NodeId regularized(size_t i) {
    return b().add(b().mul(k(c.f("norm_coefficient", 0.0)), in(0, i)), in(1, i));
  }
};

// The tensor count: inputs 2 + groups * n, outputs (groups - 1) * n.
Step step_of(Ctx& c, size_t groups) {
  const size_t in = c.num_inputs();
  RLX_CHECK(in > 2 && (in - 2) % groups == 0, c.node.op_type, " takes R, T and ", groups,
            " groups of tensors, got ", in, " inputs");
  const size_t n = (in - 2) / groups;
  RLX_CHECK(c.node.outputs.size() == (groups - 1) * n, c.node.op_type, " over ", n,
            " tensor(s) gives ", (groups - 1) * n, " outputs, the node lists ",
            c.node.outputs.size());
  return {c, c.shape(2).dtype, n};
}

// r = R / (1 + T decay); H' = H + G^2; X' = X - r G / (sqrt(H') + eps), G regularized.
std::vector<Val> lower_adagrad(Ctx& c) {
  Step s = step_of(c, 3);
  auto& b = s.b();
  const NodeId r = b.div(s.rate(), b.add(s.k(1), b.mul(s.steps(), s.k(c.f("decay_factor", 0.0)))));
  std::vector<Val> xs, hs;
  for (size_t i = 0; i < s.n; ++i) {
    const NodeId g = s.regularized(i);
    const NodeId h = b.add(s.in(2, i), b.mul(g, g));
    const NodeId denom = b.add(b.unary(Op::Sqrt, h), s.k(c.f("epsilon", 1e-6)));
    xs.push_back(node_val(b.sub(s.in(0, i), b.div(b.mul(r, g), denom))));
    hs.push_back(node_val(h));
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

// V' = alpha V + beta' G (beta' = 1 on the first step, T = 0); X' = X - R V' (standard) or
// X - R (G + alpha V') (nesterov), G regularized.
std::vector<Val> lower_momentum(Ctx& c) {
  Step s = step_of(c, 3);
  auto& b = s.b();
  const std::string mode = c.s("mode", "standard");
  RLX_CHECK(mode == "standard" || mode == "nesterov", "Momentum mode '", mode, "'");
  const NodeId alpha = s.k(c.f("alpha", 0.9));
  const NodeId beta =
      b.op(Op::Where, {b.op(Op::Gt, {s.steps(), s.k(0)}), s.k(c.f("beta", 1.0)), s.k(1)});
  std::vector<Val> xs, vs;
  for (size_t i = 0; i < s.n; ++i) {
    const NodeId g = s.regularized(i);
    const NodeId v = b.add(b.mul(alpha, s.in(2, i)), b.mul(beta, g));
    const NodeId dir = mode == "standard" ? v : b.add(g, b.mul(alpha, v));
    xs.push_back(node_val(b.sub(s.in(0, i), b.mul(s.rate(), dir))));
    vs.push_back(node_val(v));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

// V' = a V + (1 - a) G; H' = b H + (1 - b) G^2; R' = R sqrt(1 - b^T) / (1 - a^T) once T > 0;
// X' = (1 - norm_coefficient_post) (X - R' V' / (sqrt(H') + eps)), G regularized.
std::vector<Val> lower_adam(Ctx& c) {
  Step s = step_of(c, 4);
  auto& b = s.b();
  const double a = c.f("alpha", 0.9), be = c.f("beta", 0.999);
  const NodeId T = s.steps();
  const NodeId pa = b.binary(Op::Pow, s.k(a), T), pb = b.binary(Op::Pow, s.k(be), T);
  const NodeId adjusted =
      b.div(b.mul(s.rate(), b.unary(Op::Sqrt, b.sub(s.k(1), pb))), b.sub(s.k(1), pa));
  const NodeId r = b.op(Op::Where, {b.op(Op::Gt, {T, s.k(0)}), adjusted, s.rate()});
  const NodeId post = s.k(1 - c.f("norm_coefficient_post", 0.0));
  std::vector<Val> xs, vs, hs;
  for (size_t i = 0; i < s.n; ++i) {
    const NodeId g = s.regularized(i);
    const NodeId v = b.add(b.mul(s.k(a), s.in(2, i)), b.mul(s.k(1 - a), g));
    const NodeId h = b.add(b.mul(s.k(be), s.in(3, i)), b.mul(s.k(1 - be), b.mul(g, g)));
    const NodeId denom = b.add(b.unary(Op::Sqrt, h), s.k(c.f("epsilon", 1e-6)));
    const NodeId x = b.sub(s.in(0, i), b.div(b.mul(r, v), denom));
    xs.push_back(node_val(b.mul(post, x)));
    vs.push_back(node_val(v));
    hs.push_back(node_val(h));
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

}  // namespace

void register_training(Registry& r) {
  r.add("ai.onnx.preview.training.Adagrad", lower_adagrad);
  r.add("ai.onnx.preview.training.Momentum", lower_momentum);
  r.add("ai.onnx.preview.training.Adam", lower_adam);
}

}  // namespace rlx::onnx
