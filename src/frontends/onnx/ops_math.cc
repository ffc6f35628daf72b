// Element-wise math without an rlx op of its own, decomposed into rlx ops:
// inverse and hyperbolic trigonometry, IsNaN/IsInf, Shrink.
#include <cmath>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

struct M {
  Ctx& c;
  DType t;
  Builder& b() { return c.b(); }
  NodeId k(double v) { return c.scalar_const(v, t); }
  NodeId add(NodeId a, NodeId x) { return b().add(a, x); }
  NodeId sub(NodeId a, NodeId x) { return b().sub(a, x); }
  NodeId mul(NodeId a, NodeId x) { return b().mul(a, x); }
  NodeId div(NodeId a, NodeId x) { return b().div(a, x); }
  NodeId u(Op op, NodeId x) { return b().unary(op, x); }
};

void math(Registry& r, const char* name, NodeId (*f)(M&, NodeId)) {
  r.add(name, [f](Ctx& c) {
    NodeId x = c.in(0);
    M m{c, c.shape_of(x).dtype};
    return one(f(m, x));
  });
}

// asin(x) = atan(x / sqrt(1 - x^2)); at |x| = 1 the division gives +-inf and atan +-pi/2.
NodeId asin_of(M& m, NodeId x) {
  return m.u(Op::Atan, m.div(x, m.u(Op::Sqrt, m.sub(m.k(1), m.mul(x, x)))));
}

}  // namespace

void register_math(Registry& r) {
  math(r, "Asin", asin_of);
  math(r, "Acos", [](M& m, NodeId x) { return m.sub(m.k(M_PI / 2), asin_of(m, x)); });
  math(r, "Sinh", [](M& m, NodeId x) {
    return m.mul(m.sub(m.u(Op::Exp, x), m.u(Op::Exp, m.u(Op::Neg, x))), m.k(0.5));
  });
  math(r, "Cosh", [](M& m, NodeId x) {
    return m.mul(m.add(m.u(Op::Exp, x), m.u(Op::Exp, m.u(Op::Neg, x))), m.k(0.5));
  });
  math(r, "Asinh", [](M& m, NodeId x) {
    return m.u(Op::Log, m.add(x, m.u(Op::Sqrt, m.add(m.mul(x, x), m.k(1)))));
  });
  math(r, "Acosh", [](M& m, NodeId x) {
    return m.u(Op::Log, m.add(x, m.u(Op::Sqrt, m.sub(m.mul(x, x), m.k(1)))));
  });
  math(r, "Atanh", [](M& m, NodeId x) {
    return m.mul(m.u(Op::Log, m.div(m.add(m.k(1), x), m.sub(m.k(1), x))), m.k(0.5));
  });
  r.add("IsNaN", [](Ctx& c) {
    NodeId x = c.in(0);
    return one(c.b().op(Op::Ne, {x, x}));
  });
  r.add("IsInf", [](Ctx& c) {
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    const bool pos = c.i("detect_positive", 1) != 0, neg = c.i("detect_negative", 1) != 0;
    NodeId p = c.b().op(Op::Eq, {x, c.scalar_const(INFINITY, t)});
    NodeId n = c.b().op(Op::Eq, {x, c.scalar_const(-INFINITY, t)});
    if (pos && neg) return one(c.b().op(Op::LogicalOr, {p, n}));
    if (pos) return one(p);
    if (neg) return one(n);
    return one(c.b().op(Op::LogicalAnd, {p, n}));  // neither: all false
  });
  r.add("Shrink", [](Ctx& c) {
    // x < -lambd: x + bias; x > lambd: x - bias; else 0
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    const double l = c.f("lambd", 0.5), bias = c.f("bias", 0.0);
    NodeId lo = c.b().op(Op::Lt, {x, c.scalar_const(-l, t)});
    NodeId hi = c.b().op(Op::Gt, {x, c.scalar_const(l, t)});
    NodeId zero = c.scalar_const(0, t);
    NodeId y = c.b().op(Op::Where, {hi, c.b().sub(x, c.scalar_const(bias, t)), zero});
    return one(c.b().op(Op::Where, {lo, c.b().add(x, c.scalar_const(bias, t)), y}));
  });
}

}  // namespace rlx::onnx
