// Element-wise ONNX ops: unary activations, binary arithmetic (integer
// arithmetic on known values folds at import, for shape code), comparisons,
// logic, Where, Cast, Clip and the variadic Sum/Mean/Max/Min.
#include <cmath>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

void unary(Registry& r, const char* name, Op op) {
  r.add(name, [op](Ctx& c) -> std::vector<Val> {
    // Shape code negates and takes absolute values of axis counts: fold those.
    if (op == Op::Neg || op == Op::Abs)
      if (auto l = c.ints(0); l && l->is_static() && is_integer(l->dtype)) {
        for (auto& d : l->v) d = Dim(op == Op::Neg ? -d.value : std::abs(d.value));
        return {int_val(*l)};
      }
    return one(c.b().unary(op, c.in(0)));
  });
}

// Folds an element-wise integer op over known inputs (equal dims, or one side
// a single element); nullopt when not foldable.
template <typename F>
std::optional<IntList> fold2(Ctx& c, DType out, F f) {
  auto a = c.ints(0), b = c.ints(1);
  if (!a || !b || !a->is_static() || !b->is_static()) return std::nullopt;
  const bool as = a->v.size() == 1, bs = b->v.size() == 1;
  if (!(a->dims == b->dims || as || bs)) return std::nullopt;
  IntList r{a->v.size() >= b->v.size() ? a->dims : b->dims, out, {}};
  if (as && bs) r.dims = a->dims.size() >= b->dims.size() ? a->dims : b->dims;
  const size_t n = std::max(a->v.size(), b->v.size());
  for (size_t k = 0; k < n; ++k)
    r.v.emplace_back(f(a->v[as ? 0 : k].value, b->v[bs ? 0 : k].value));
  return r;
}

std::vector<Val> binary(Ctx& c, Op op) {
  NodeId a = c.in(0), b = c.in(1);
  // ONNX Pow lets the exponent have another type; rlx's binary ops share one.
  if (op == Op::Pow) b = c.cast(b, c.shape_of(a).dtype);
  Attrs attrs;
  if (op == Op::Div && is_integer(c.shape_of(a).dtype)) attrs.set("rounding", std::string("trunc"));
  return one(c.b().op(op, {a, b}, attrs));
}

void arith(Registry& r, const char* name, Op op) {
  r.add(name, [op](Ctx& c) -> std::vector<Val> {
    if (op != Op::Pow) {
      auto a = c.ints(0);
      auto folded = fold2(c, a ? a->dtype : DType::I64, [op](int64_t x, int64_t y) -> int64_t {
        switch (op) {
          case Op::Add:
            return x + y;
          case Op::Sub:
            return x - y;
          case Op::Mul:
            return x * y;
          case Op::Div:
            RLX_CHECK(y != 0, "integer division by zero");
            return x / y;
          case Op::Max:
            return std::max(x, y);
          case Op::Min:
            return std::min(x, y);
          default:
            return 0;
        }
      });
      if (folded) return {int_val(*folded)};
    }
    return binary(c, op);
  });
}

void compare(Registry& r, const char* name, Op op) {
  r.add(name, [op](Ctx& c) -> std::vector<Val> {
    auto folded = fold2(c, DType::Bool, [op](int64_t x, int64_t y) -> int64_t {
      switch (op) {
        case Op::Eq:
          return x == y;
        case Op::Lt:
          return x < y;
        case Op::Le:
          return x <= y;
        case Op::Gt:
          return x > y;
        case Op::Ge:
          return x >= y;
        default:
          return 0;
      }
    });
    if (folded) return {int_val(*folded)};
    return one(c.b().op(op, {c.in(0), c.in(1)}));
  });
}

// Sum/Mean/Max/Min take 1..N inputs, broadcast together.
void variadic(Registry& r, const char* name, Op op, bool mean) {
  r.add(name, [op, mean](Ctx& c) {
    NodeId acc = c.in(0);
    for (size_t k = 1; k < c.num_inputs(); ++k) acc = c.b().op(op, {acc, c.in(k)});
    if (mean && c.num_inputs() > 1)
      acc = c.b().div(acc, c.scalar_const(double(c.num_inputs()), c.shape_of(acc).dtype));
    return one(acc);
  });
}

NodeId clamp(Ctx& c, NodeId x, double lo, double hi) {
  return c.b().op(Op::Clamp, {x}, {{"min", lo}, {"max", hi}});
}

std::vector<Val> lower_clip(Ctx& c) {
  NodeId x = c.in(0);
  const DType t = c.shape_of(x).dtype;
  if (c.opset < 11) return one(clamp(c, x, c.f("min", -INFINITY), c.f("max", INFINITY)));
  // Opset 11+: min/max are optional inputs; known ones become the clamp's
  // attributes, others are element-wise max/min against the tensor.
  double lo = -INFINITY, hi = INFINITY;
  NodeId lo_t = -1, hi_t = -1;
  if (c.has(1)) {
    if (auto v = c.scalar(1))
      lo = *v;
    else
      lo_t = c.in(1);
  }
  if (c.has(2)) {
    if (auto v = c.scalar(2))
      hi = *v;
    else
      hi_t = c.in(2);
  }
  if (is_float(t)) {
    x = clamp(c, x, lo, hi);
  } else {  // clamp is a float op; integer clips are max/min with constants
    if (c.has(1) && lo_t < 0) lo_t = c.in(1);
    if (c.has(2) && hi_t < 0) hi_t = c.in(2);
  }
  if (lo_t >= 0) x = c.b().op(Op::Max, {x, c.cast(lo_t, t)});
  if (hi_t >= 0) x = c.b().op(Op::Min, {x, c.cast(hi_t, t)});
  return one(x);
}

std::vector<Val> lower_cast(Ctx& c) {
  const int32_t to = int32_t(c.i("to"));
  auto t = dtype_of(to);
  RLX_CHECK(t, "Cast to ", onnx_type_name(to), ": rlx has no such dtype");
  if (auto l = c.ints(0); l && (is_integer(*t) || *t == DType::Bool) && is_integer(l->dtype)) {
    l->dtype = *t;
    if (*t == DType::Bool)
      for (auto& d : l->v)
        if (d.is_static()) d = Dim(d.value != 0);
    return {int_val(*l)};
  }
  return one(c.cast(c.in(0), *t));
}

std::vector<Val> lower_where(Ctx& c) {
  auto cond = c.ints(0), a = c.ints(1), b = c.ints(2);
  if (cond && a && b && cond->is_static() && cond->dims == a->dims && a->dims == b->dims) {
    IntList r = *a;
    for (size_t k = 0; k < r.v.size(); ++k) r.v[k] = cond->v[k].value ? a->v[k] : b->v[k];
    return {int_val(r)};
  }
  NodeId x = c.in(1), y = c.in(2);
  return one(c.b().op(Op::Where, {c.in(0), x, c.cast(y, c.shape_of(x).dtype)}));
}

// x if x > 0 else alpha * x for a tensor alpha (PRelu: broadcast slope).
std::vector<Val> lower_prelu(Ctx& c) {
  NodeId x = c.in(0), s = c.in(1);
  const DType t = c.shape_of(x).dtype;
  NodeId pos = c.b().op(Op::Gt, {x, c.scalar_const(0, t)});
  return one(c.b().op(Op::Where, {pos, x, c.b().mul(x, s)}));
}

}  // namespace

void register_elementwise(Registry& r) {
  unary(r, "Relu", Op::Relu);
  unary(r, "Sigmoid", Op::Sigmoid);
  unary(r, "Tanh", Op::Tanh);
  unary(r, "Exp", Op::Exp);
  unary(r, "Log", Op::Log);
  unary(r, "Sqrt", Op::Sqrt);
  unary(r, "Neg", Op::Neg);
  unary(r, "Abs", Op::Abs);
  unary(r, "Sin", Op::Sin);
  unary(r, "Cos", Op::Cos);
  unary(r, "Tan", Op::Tan);
  unary(r, "Atan", Op::Atan);
  unary(r, "Erf", Op::Erf);
  unary(r, "Reciprocal", Op::Reciprocal);
  unary(r, "Round", Op::Round);
  unary(r, "Floor", Op::Floor);
  unary(r, "Ceil", Op::Ceil);
  unary(r, "Sign", Op::Sign);
  unary(r, "Mish", Op::Mish);
  unary(r, "HardSwish", Op::HardSwish);
  unary(r, "Softplus", Op::Softplus);
  r.add("Not", [](Ctx& c) { return one(c.b().op(Op::LogicalNot, {c.in(0)})); });
  r.add("And", [](Ctx& c) { return one(c.b().op(Op::LogicalAnd, {c.in(0), c.in(1)})); });
  r.add("Or", [](Ctx& c) { return one(c.b().op(Op::LogicalOr, {c.in(0), c.in(1)})); });
  r.add("Xor", [](Ctx& c) { return one(c.b().op(Op::Ne, {c.in(0), c.in(1)})); });
  r.add("Identity", [](Ctx& c) { return std::vector<Val>{c.val(0)}; });
  r.add("LeakyRelu", [](Ctx& c) {
    return one(c.b().op(Op::LeakyRelu, {c.in(0)}, {{"slope", c.f("alpha", 0.01)}}));
  });
  r.add("Elu", [](Ctx& c) {
    return one(c.b().op(Op::Elu, {c.in(0)}, {{"alpha", c.f("alpha", 1.0)}}));
  });
  r.add("HardSigmoid", [](Ctx& c) {
    return one(c.b().op(Op::HardSigmoid, {c.in(0)},
                        {{"alpha", c.f("alpha", 0.2)}, {"beta", c.f("beta", 0.5)}}));
  });
  r.add("Selu", [](Ctx& c) {
    // gamma * elu_alpha(x)
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    NodeId e = c.b().op(Op::Elu, {x}, {{"alpha", c.f("alpha", 1.67326319217681884765625)}});
    return one(c.b().mul(e, c.scalar_const(c.f("gamma", 1.05070102214813232421875), t)));
  });
  r.add("Celu", [](Ctx& c) {
    // max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = elu_1(x / alpha) * alpha
    NodeId x = c.in(0);
    const double a = c.f("alpha", 1.0);
    const DType t = c.shape_of(x).dtype;
    NodeId e = c.b().op(Op::Elu, {c.b().div(x, c.scalar_const(a, t))}, {{"alpha", 1.0}});
    return one(c.b().mul(e, c.scalar_const(a, t)));
  });
  r.add("Softsign", [](Ctx& c) {
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    return one(c.b().div(x, c.b().add(c.b().unary(Op::Abs, x), c.scalar_const(1, t))));
  });
  r.add("ThresholdedRelu", [](Ctx& c) {
    NodeId x = c.in(0);
    const DType t = c.shape_of(x).dtype;
    NodeId keep = c.b().op(Op::Gt, {x, c.scalar_const(c.f("alpha", 1.0), t)});
    return one(c.b().op(Op::Where, {keep, x, c.scalar_const(0, t)}));
  });
  r.add("Gelu", [](Ctx& c) {  // opset 20
    const std::string approx = c.s("approximate", "none");
    RLX_CHECK(approx == "none" || approx == "tanh", "Gelu approximate='", approx, "'");
    return one(c.b().unary(approx == "tanh" ? Op::GeluTanh : Op::Gelu, c.in(0)));
  });
  r.add("PRelu", lower_prelu);
  arith(r, "Add", Op::Add);
  arith(r, "Sub", Op::Sub);
  arith(r, "Mul", Op::Mul);
  arith(r, "Div", Op::Div);
  arith(r, "Pow", Op::Pow);
  r.add("Mod", [](Ctx& c) {
    return one(c.b().op(c.i("fmod", 0) ? Op::Fmod : Op::Mod, {c.in(0), c.in(1)}));
  });
  compare(r, "Equal", Op::Eq);
  compare(r, "Less", Op::Lt);
  compare(r, "LessOrEqual", Op::Le);
  compare(r, "Greater", Op::Gt);
  compare(r, "GreaterOrEqual", Op::Ge);
  variadic(r, "Sum", Op::Add, false);
  variadic(r, "Mean", Op::Add, true);
  variadic(r, "Max", Op::Max, false);
  variadic(r, "Min", Op::Min, false);
  r.add("Clip", lower_clip);
  r.add("Cast", lower_cast);
  r.add("CastLike", [](Ctx& c) { return one(c.cast(c.in(0), c.shape(1).dtype)); });
  r.add("Where", lower_where);
}

}  // namespace rlx::onnx
