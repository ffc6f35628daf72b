// Element-wise math that rlx has no op for, composed from its primitives:
// inverse trigonometric and hyperbolic functions, log / exp variants, the
// float classification tests, and binary helpers (atan2, copysign, fmax, ...).
// Each composition is chosen to keep float32 accuracy (well inside the OpInfo
// sweep's rtol 1e-4 / atol 1e-5) over the whole domain, not just near 0.
#include <cmath>
#include <limits>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {

namespace {

struct Math {
  LowerCtx& c;
  DType t;

  NodeId k(double v) const { return c.scalar(v, t); }
  NodeId add(NodeId a, NodeId b) const { return c.b.add(a, b); }
  NodeId sub(NodeId a, NodeId b) const { return c.b.sub(a, b); }
  NodeId mul(NodeId a, NodeId b) const { return c.b.mul(a, b); }
  NodeId div(NodeId a, NodeId b) const { return c.b.div(a, b); }
  NodeId un(Op op, NodeId x) const { return c.b.unary(op, x); }
  NodeId cmp(Op op, NodeId a, NodeId b) const { return c.b.op(op, {a, b}); }
  NodeId where(NodeId cond, NodeId a, NodeId b) const { return c.b.op(Op::Where, {cond, a, b}); }
  NodeId is_nan(NodeId x) const { return cmp(Op::Ne, x, x); }
  NodeId both(NodeId a, NodeId b) const { return c.b.op(Op::LogicalAnd, {a, b}); }
  NodeId either(NodeId a, NodeId b) const { return c.b.op(Op::LogicalOr, {a, b}); }
};

// The operand at `pos` as a tensor of the node's output dtype.
NodeId operand(LowerCtx& c, size_t pos, const char* name) {
  const Value* v = c.arg(pos, name);
  RLX_CHECK(v, "missing operand ", name);
  return c.as_tensor(*v, c.out_dtype());
}

// x < 0, or x a negative zero (1 / -0 = -inf).
NodeId signbit(const Math& m, NodeId x) {
  return m.either(m.cmp(Op::Lt, x, m.k(0)),
                  m.both(m.cmp(Op::Eq, x, m.k(0)), m.cmp(Op::Lt, m.un(Op::Reciprocal, x), m.k(0))));
}

// exp(x) - 1 (Kahan): (u - 1) * x / log(u) with u = exp(x) cancels u's
// rounding; x where u rounds to 1, -1 where u - 1 does, inf where u is.
NodeId expm1(const Math& m, NodeId x) {
  const NodeId u = m.un(Op::Exp, x), um1 = m.sub(u, m.k(1));
  const NodeId ratio = m.div(m.mul(um1, x), m.un(Op::Log, u));
  NodeId y = m.where(m.cmp(Op::Eq, um1, m.k(-1)), m.k(-1), ratio);
  y = m.where(m.cmp(Op::Eq, u, m.k(INFINITY)), u, y);
  return m.where(m.cmp(Op::Eq, u, m.k(1)), x, y);
}

// trunc(x): floor for x >= 0, ceil below.
NodeId trunc(const Math& m, NodeId x) {
  return m.where(m.cmp(Op::Lt, x, m.k(0)), m.un(Op::Ceil, x), m.un(Op::Floor, x));
}

Value unary_fn(LowerCtx& c, NodeId (*f)(const Math&, NodeId)) {
  const DType t = c.out_dtype();
  const Math m{c, t};
  return Value::tensor(f(m, c.cast(c.tensor(0, "self"), t)));
}

// asin(x) = atan(x / sqrt((1 - x)(1 + x))): the factored form keeps the
// digits near |x| = 1, where x / 0 = inf gives pi / 2; |x| > 1 gives NaN.
NodeId asin(const Math& m, NodeId x) {
  const NodeId s = m.un(Op::Sqrt, m.mul(m.sub(m.k(1), x), m.add(m.k(1), x)));
  return m.un(Op::Atan, m.div(x, s));
}

// acos(x) = 2 atan(sqrt((1 - x) / (1 + x))): exact at 1 (0) and -1 (pi),
// small results near 1 keep their relative accuracy.
NodeId acos(const Math& m, NodeId x) {
  const NodeId r = m.un(Op::Sqrt, m.div(m.sub(m.k(1), x), m.add(m.k(1), x)));
  return m.mul(m.k(2), m.un(Op::Atan, r));
}

// acosh(x) = log1p(t + sqrt(t (t + 2))) with t = x - 1: accurate near 1.
NodeId acosh(const Math& m, NodeId x) {
  const NodeId t = m.sub(x, m.k(1));
  return log1p_of(m.c, m.add(t, m.un(Op::Sqrt, m.mul(t, m.add(t, m.k(2))))));
}

// asinh(x) = sign(x) log1p(a + a^2 / (1 + sqrt(1 + a^2))), a = |x|; the
// fraction written as a / (1/a + sqrt(1 + 1/a^2)) so large a do not overflow
// (a = 0: 0 / inf = 0).
NodeId asinh(const Math& m, NodeId x) {
  const NodeId a = m.un(Op::Abs, x), r = m.un(Op::Reciprocal, a);
  const NodeId frac = m.div(a, m.add(r, m.un(Op::Sqrt, m.add(m.k(1), m.mul(r, r)))));
  const NodeId y = log1p_of(m.c, m.add(a, frac));
  return m.where(signbit(m, x), m.un(Op::Neg, y), y);
}

// atanh(x) = sign(x) log1p(2a / (1 - a)) / 2 with a = |x|: 1 - a is exact
// near 1 and the log1p argument is positive, so nothing cancels.
NodeId atanh(const Math& m, NodeId x) {
  const NodeId a = m.un(Op::Abs, x);
  const NodeId y = m.mul(m.k(0.5), log1p_of(m.c, m.div(m.mul(m.k(2), a), m.sub(m.k(1), a))));
  return m.where(signbit(m, x), m.un(Op::Neg, y), y);
}

NodeId cosh(const Math& m, NodeId x) {
  return m.mul(m.k(0.5), m.add(m.un(Op::Exp, x), m.un(Op::Exp, m.un(Op::Neg, x))));
}

// sinh(x): (u + u / (u + 1)) / 2 with u = expm1(x) for |x| < 1 (no
// cancellation), (e^x - e^-x) / 2 beyond.
NodeId sinh(const Math& m, NodeId x) {
  const NodeId u = expm1(m, x);
  const NodeId small = m.mul(m.k(0.5), m.add(u, m.div(u, m.add(u, m.k(1)))));
  const NodeId large = m.mul(m.k(0.5), m.sub(m.un(Op::Exp, x), m.un(Op::Exp, m.un(Op::Neg, x))));
  return m.where(m.cmp(Op::Lt, m.un(Op::Abs, x), m.k(1)), small, large);
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0 (PyTorch's form: the product in the
// tensor's dtype).
NodeId sinc(const Math& m, NodeId x) {
  const NodeId px = m.mul(x, m.k(M_PI));
  return m.where(m.cmp(Op::Eq, x, m.k(0)), m.k(1), m.div(m.un(Op::Sin, px), px));
}

// special.entr: -x log x for x > 0, 0 at 0, -inf below, NaN stays NaN.
NodeId entr(const Math& m, NodeId x) {
  const NodeId v = m.mul(m.un(Op::Neg, x), m.un(Op::Log, x));
  NodeId y = m.where(m.cmp(Op::Eq, x, m.k(0)), m.k(0), v);
  return m.where(m.cmp(Op::Lt, x, m.k(0)), m.k(-INFINITY), y);
}

// A float classification test; integer and bool tensors hold no inf.
Value classify(LowerCtx& c, Op op, double v, bool abs) {
  const NodeId x = c.tensor(0, "self");
  const DType t = c.shape(x).dtype;
  if (!is_float(t)) return Value::tensor(c.b.op(Op::Ne, {x, x}));  // all false
  const Math m{c, t};
  return Value::tensor(m.cmp(op, abs ? m.un(Op::Abs, x) : x, m.k(v)));
}

// atan2(y, x): atan(y / x), moved by +-pi into the left half plane (toward
// y's sign); 0 where both are 0 (where y / x is NaN).
Value atan2(LowerCtx& c) {
  const DType t = c.out_dtype();
  const Math m{c, t};
  const NodeId y = operand(c, 0, "self"), x = operand(c, 1, "other");
  const NodeId base = m.un(Op::Atan, m.div(y, x));
  const NodeId turn = m.where(signbit(m, y), m.k(-M_PI), m.k(M_PI));
  NodeId r = m.where(signbit(m, x), m.add(base, turn), base);
  const NodeId zero = m.both(m.cmp(Op::Eq, y, m.k(0)), m.cmp(Op::Eq, x, m.k(0)));
  // atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi.
  return Value::tensor(m.where(zero, m.where(signbit(m, x), turn, y), r));
}

// lerp(a, b, w): PyTorch's two-sided form, a + w (b - a) for |w| < 0.5 and
// b - (b - a)(1 - w) otherwise, exact at both ends.
Value lerp(LowerCtx& c) {
  const DType t = c.out_dtype();
  const Math m{c, t};
  const NodeId a = operand(c, 0, "self"), b = operand(c, 1, "end"), w = operand(c, 2, "weight");
  const NodeId d = m.sub(b, a);
  const NodeId lo = m.add(a, m.mul(w, d)), hi = m.sub(b, m.mul(d, m.sub(m.k(1), w)));
  return Value::tensor(m.where(m.cmp(Op::Lt, m.un(Op::Abs, w), m.k(0.5)), lo, hi));
}

}  // namespace

// log1p(x) = log(u) * x / (u - 1) with u = 1 + x (Goldberg): the rounding of u
// cancels, so small x keep their digits; x where u rounds to 1, and u = inf, as is.
NodeId log1p_of(const LowerCtx& c, NodeId x) {
  const DType t = c.shape(x).dtype;
  const NodeId u = c.b.add(x, c.scalar(1, t));
  const NodeId ratio = c.b.div(c.b.mul(c.b.unary(Op::Log, u), x), c.b.sub(u, c.scalar(1, t)));
  const NodeId exact = c.b.op(Op::Where, {c.b.op(Op::Eq, {u, c.scalar(INFINITY, t)}), u, ratio});
  return c.b.op(Op::Where, {c.b.op(Op::Eq, {u, c.scalar(1, t)}), x, exact});
}

void register_math(Registry& r) {
  r.add("aten.log1p", [](LowerCtx& c) {
    return Value::tensor(log1p_of(c, c.cast(c.tensor(0, "self"), c.out_dtype())));
  });
  r.add("aten.expm1", [](LowerCtx& c) { return unary_fn(c, expm1); });
  r.add("aten.asin", [](LowerCtx& c) { return unary_fn(c, asin); });
  r.add("aten.acos", [](LowerCtx& c) { return unary_fn(c, acos); });
  r.add("aten.asinh", [](LowerCtx& c) { return unary_fn(c, asinh); });
  r.add("aten.acosh", [](LowerCtx& c) { return unary_fn(c, acosh); });
  r.add("aten.atanh", [](LowerCtx& c) { return unary_fn(c, atanh); });
  r.add("aten.sinh", [](LowerCtx& c) { return unary_fn(c, sinh); });
  r.add("aten.cosh", [](LowerCtx& c) { return unary_fn(c, cosh); });
  r.add("aten.sinc", [](LowerCtx& c) { return unary_fn(c, sinc); });
  r.add("aten.special_entr", [](LowerCtx& c) { return unary_fn(c, entr); });
  r.add("aten.erfc", [](LowerCtx& c) {  // 1 - erf(x): its absolute error is erf's
    return unary_fn(c, [](const Math& m, NodeId x) { return m.sub(m.k(1), m.un(Op::Erf, x)); });
  });
  r.add("aten.exp2", [](LowerCtx& c) {
    return unary_fn(c, [](const Math& m, NodeId x) { return m.c.b.binary(Op::Pow, m.k(2), x); });
  });
  r.add("aten.log2", [](LowerCtx& c) {
    return unary_fn(c,
                    [](const Math& m, NodeId x) { return m.mul(m.un(Op::Log, x), m.k(M_LOG2E)); });
  });
  r.add("aten.log10", [](LowerCtx& c) {
    return unary_fn(c,
                    [](const Math& m, NodeId x) { return m.mul(m.un(Op::Log, x), m.k(M_LOG10E)); });
  });
  r.add("aten.deg2rad", [](LowerCtx& c) {
    return unary_fn(c, [](const Math& m, NodeId x) { return m.mul(x, m.k(M_PI / 180)); });
  });
  r.add("aten.rad2deg", [](LowerCtx& c) {
    return unary_fn(c, [](const Math& m, NodeId x) { return m.mul(x, m.k(180 / M_PI)); });
  });
  r.add("aten.trunc", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    if (!is_float(c.shape(x).dtype)) return Value::tensor(x);
    return unary_fn(c, trunc);
  });
  r.add("aten.frac", [](LowerCtx& c) {
    return unary_fn(c, [](const Math& m, NodeId x) { return m.sub(x, trunc(m, x)); });
  });
  r.add("aten.sgn",
        [](LowerCtx& c) { return Value::tensor(c.b.unary(Op::Sign, c.tensor(0, "self"))); });
  r.add("aten.signbit", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const DType t = c.shape(x).dtype;
    if (t == DType::Bool) return Value::tensor(c.b.op(Op::Ne, {x, x}));
    return Value::tensor(is_float(t) ? signbit(Math{c, t}, x)
                                     : c.b.op(Op::Lt, {x, c.scalar(0, t)}));
  });
  r.add("aten.isinf", [](LowerCtx& c) { return classify(c, Op::Eq, INFINITY, true); });
  r.add("aten.isposinf", [](LowerCtx& c) { return classify(c, Op::Eq, INFINITY, false); });
  r.add("aten.isneginf", [](LowerCtx& c) { return classify(c, Op::Eq, -INFINITY, false); });
  // logit(x, eps): log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given.
  r.add("aten.logit", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const Math m{c, t};
    NodeId x = c.cast(c.tensor(0, "self"), t);
    if (c.has(1, "eps")) {
      const double eps = c.f(1, "eps");
      x = c.b.unary(Op::Clamp, x, {{"min", eps}, {"max", 1 - eps}});
    }
    return Value::tensor(m.un(Op::Log, m.div(x, m.sub(m.k(1), x))));
  });
  // nan_to_num(x, nan=0, posinf=max, neginf=lowest) of the dtype.
  r.add("aten.nan_to_num", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const DType t = c.shape(x).dtype;
    if (!is_float(t)) return Value::tensor(x);
    const Math m{c, t};
    const double big = t == DType::F64 ? std::numeric_limits<double>::max()
                                       : double(std::numeric_limits<float>::max());
    NodeId y = m.where(m.is_nan(x), m.k(c.f(1, "nan", 0)), x);
    y = m.where(m.cmp(Op::Eq, x, m.k(INFINITY)), m.k(c.f(2, "posinf", big)), y);
    return Value::tensor(m.where(m.cmp(Op::Eq, x, m.k(-INFINITY)), m.k(c.f(3, "neginf", -big)), y));
  });
  // xlog1py(x, y) = x log1p(y), 0 where x = 0 unless y is NaN.
  r.add("aten.special_xlog1py", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const Math m{c, t};
    const NodeId x = operand(c, 0, "self"), y = operand(c, 1, "other");
    const NodeId v = m.mul(x, log1p_of(c, y));
    const NodeId zero = m.both(m.cmp(Op::Eq, x, m.k(0)), m.cmp(Op::Eq, y, y));
    return Value::tensor(m.where(zero, m.k(0), v));
  });
  // logaddexp2(a, b) = max + log2(1 + 2^-|a - b|); equal operands give max + 1.
  r.add("aten.logaddexp2", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const Math m{c, t};
    const NodeId a = operand(c, 0, "self"), b = operand(c, 1, "other");
    const NodeId gap =
        m.where(m.cmp(Op::Eq, a, b), m.k(0), m.un(Op::Neg, m.un(Op::Abs, m.sub(a, b))));
    const NodeId p = c.b.binary(Op::Pow, m.k(2), gap);  // in (0, 1]
    return Value::tensor(
        m.add(c.b.binary(Op::Max, a, b), m.mul(m.un(Op::Log, m.add(m.k(1), p)), m.k(M_LOG2E))));
  });
  // angle of a real number: pi below 0, else 0; NaN stays.
  r.add("aten.angle", [](LowerCtx& c) {
    return unary_fn(c, [](const Math& m, NodeId x) {
      const NodeId a = m.where(m.cmp(Op::Lt, x, m.k(0)), m.k(M_PI), m.k(0));
      return m.where(m.is_nan(x), x, a);
    });
  });
  r.add("aten.atan2", atan2);
  r.add("aten.arctan2", atan2);
  // copysign(a, b) = |a| with b's sign bit.
  r.add("aten.copysign", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const Math m{c, t};
    const NodeId a = m.un(Op::Abs, operand(c, 0, "self")), b = operand(c, 1, "other");
    return Value::tensor(m.where(signbit(m, b), m.un(Op::Neg, a), a));
  });
  // fmax / fmin: the other operand where one is NaN.
  for (auto [name, op] : {std::pair{"aten.fmax", Op::Max}, std::pair{"aten.fmin", Op::Min}}) {
    r.add(name, [op = op](LowerCtx& c) {
      const DType t = c.out_dtype();
      const Math m{c, t};
      const NodeId a = operand(c, 0, "self"), b = operand(c, 1, "other");
      if (!is_float(t)) return Value::tensor(c.b.binary(op, a, b));
      const NodeId y = m.where(m.is_nan(b), a, c.b.binary(op, a, b));
      return Value::tensor(m.where(m.is_nan(a), b, y));
    });
  }
  // heaviside(x, v): v where x = 0, else x > 0 (NaN gives 0).
  r.add("aten.heaviside", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const Math m{c, t};
    const NodeId x = operand(c, 0, "self"), v = operand(c, 1, "values");
    const NodeId step = c.cast(m.cmp(Op::Gt, x, m.k(0)), t);
    return Value::tensor(m.where(m.cmp(Op::Eq, x, m.k(0)), v, step));
  });
  // hypot(a, b) = sqrt(a^2 + b^2), in f64 for f32 tensors so no square
  // overflows or underflows.
  r.add("aten.hypot", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const DType w = t == DType::F32 ? DType::F64 : t;
    const Math m{c, w};
    const NodeId a = c.cast(operand(c, 0, "self"), w), b = c.cast(operand(c, 1, "other"), w);
    return Value::tensor(c.cast(m.un(Op::Sqrt, m.add(m.mul(a, a), m.mul(b, b))), t));
  });
  r.add("aten.logical_xor", [](LowerCtx& c) {
    const NodeId a = c.cast(c.tensor(0, "self"), DType::Bool);
    const NodeId b = c.cast(c.tensor(1, "other"), DType::Bool);
    return Value::tensor(c.b.op(Op::Ne, {a, b}));
  });
  r.add("aten.lerp", lerp);
  // addcdiv / addcmul(self, t1, t2, value): self + value * t1 / t2 (* t2).
  for (auto [name, op] : {std::pair{"aten.addcdiv", Op::Div}, std::pair{"aten.addcmul", Op::Mul}}) {
    r.add(name, [op = op](LowerCtx& c) {
      const DType t = c.out_dtype();
      const NodeId s = operand(c, 0, "self"), a = operand(c, 1, "tensor1"),
                   b = operand(c, 2, "tensor2");
      const Value* v = c.arg(3, "value");
      NodeId num = a;
      if (v && v->number() != 1) num = c.b.mul(c.as_tensor(*v, t), a);
      return Value::tensor(c.b.add(s, c.b.binary(op, num, b)));
    });
  }
}

}  // namespace rlx::torch_ir
