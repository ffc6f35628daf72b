// Element-wise aten and prims ops with PyTorch's type promotion, `alpha`,
// rounding modes and scalar operands.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

const Value& operand_value(LowerCtx& c, size_t pos, const char* name) {
  const Value* v = c.arg(pos, name);
  RLX_CHECK(v, "missing operand ", name);
  return *v;
}

// Arithmetic computes in the recorded output dtype.
Value arith(LowerCtx& c, Op op) {
  DType t = c.out_dtype();
  NodeId a = c.as_tensor(operand_value(c, 0, "self"), t);
  NodeId b = c.as_tensor(operand_value(c, 1, "other"), t);
  return Value::tensor(c.b.binary(op, a, b));
}

// add/sub with alpha: self + alpha * other; rsub: other - alpha * self.
Value add_sub(LowerCtx& c, Op op, bool reversed = false) {
  DType t = c.out_dtype();
  NodeId a = c.as_tensor(operand_value(c, 0, "self"), t);
  NodeId b = c.as_tensor(operand_value(c, 1, "other"), t);
  NodeId& scaled = reversed ? a : b;
  if (c.has(2, "alpha") && c.f(2, "alpha") != 1)
    scaled = c.b.mul(scaled, c.scalar(c.f(2, "alpha"), t));
  return Value::tensor(reversed ? c.b.binary(op, b, a) : c.b.binary(op, a, b));
}

Value div(LowerCtx& c) {
  std::string mode = c.str(2, "rounding_mode", "");
  const Value &x = operand_value(c, 0, "self"), &y = operand_value(c, 1, "other");
  if (mode.empty()) {  // true division: integers promote to float first
    DType t = c.out_dtype();
    return Value::tensor(c.b.div(c.as_tensor(x, t), c.as_tensor(y, t)));
  }
  DType t = promote(c, x, y);
  return Value::tensor(
      c.b.op(Op::Div, {c.as_tensor(x, t), c.as_tensor(y, t)}, {{"rounding", mode}}));
}

Value compare(LowerCtx& c, Op op) {
  const Value &x = operand_value(c, 0, "self"), &y = operand_value(c, 1, "other");
  DType t = promote(c, x, y);
  return Value::tensor(c.b.binary(op, c.as_tensor(x, t), c.as_tensor(y, t)));
}

Value unary(LowerCtx& c, Op op, Attrs a = {}) {
  NodeId x = c.tensor(0, "self");
  // Float-only ops on integer inputs compute in the (float) output dtype.
  return Value::tensor(c.b.unary(op, c.cast(x, c.out_dtype()), std::move(a)));
}

Value clamp(LowerCtx& c, const char* lo_name, const char* hi_name, bool has_lo, bool has_hi) {
  NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
  const Value* lo = has_lo ? c.arg(1, lo_name) : nullptr;
  const Value* hi = has_hi ? c.arg(has_lo ? 2 : 1, hi_name) : nullptr;
  bool tensor_bounds = (lo && lo->kind == Value::Tensor) || (hi && hi->kind == Value::Tensor);
  if (!tensor_bounds) {
    Attrs a;
    if (lo) a.set("min", lo->number());
    if (hi) a.set("max", hi->number());
    return Value::tensor(c.b.unary(Op::Clamp, x, a));
  }
  DType t = c.out_dtype();
  if (lo) x = c.b.binary(Op::Max, x, c.as_tensor(*lo, t));
  if (hi) x = c.b.binary(Op::Min, x, c.as_tensor(*hi, t));
  return Value::tensor(x);
}

Value where(LowerCtx& c) {
  NodeId cond = c.cast(c.tensor(0, "condition"), DType::Bool);
  DType t = c.out_dtype();
  return Value::tensor(c.b.op(Op::Where, {cond, c.as_tensor(operand_value(c, 1, "self"), t),
                                          c.as_tensor(operand_value(c, 2, "other"), t)}));
}

Value masked_fill(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  NodeId mask = c.cast(c.tensor(1, "mask"), DType::Bool);
  DType t = c.shape(x).dtype;
  return Value::tensor(c.b.op(Op::Where, {mask, c.as_tensor(operand_value(c, 2, "value"), t), x}));
}

Value pow(LowerCtx& c) {
  DType t = c.out_dtype();
  const Value& base = operand_value(c, 0, "self");
  const Value& e = operand_value(c, 1, "exponent");
  if (e.is_number() && e.number() == 2) {  // exact and faster than pow
    NodeId x = c.as_tensor(base, t);
    return Value::tensor(c.b.mul(x, x));
  }
  if (e.is_number() && e.number() == 0.5)
    return Value::tensor(c.b.unary(Op::Sqrt, c.as_tensor(base, t)));
  return Value::tensor(c.b.binary(Op::Pow, c.as_tensor(base, t), c.as_tensor(e, t)));
}

// bitwise_and/or/xor: rlx has logical kernels only, which equal the bitwise
// ops on bool tensors.
Value bitwise_bool(LowerCtx& c, Op op) {
  const Value &x = operand_value(c, 0, "self"), &y = operand_value(c, 1, "other");
  RLX_CHECK(c.out_dtype() == DType::Bool, c.node.op, " on ", dtype_name(c.out_dtype()),
            " tensors is not supported (only bool)");
  return Value::tensor(c.b.op(op, {c.as_tensor(x, DType::Bool), c.as_tensor(y, DType::Bool)}));
}

Value logical(LowerCtx& c, Op op) {
  NodeId a = c.tensor(0, "self");
  if (op == Op::LogicalNot) return Value::tensor(c.b.unary(op, a));
  return Value::tensor(c.b.op(op, {a, c.tensor(1, "other")}));
}

}  // namespace

void register_elementwise(Registry& r) {
  r.add("aten.add", [](LowerCtx& c) { return add_sub(c, Op::Add); });
  r.add("aten.sub", [](LowerCtx& c) { return add_sub(c, Op::Sub); });
  r.add("aten.rsub", [](LowerCtx& c) { return add_sub(c, Op::Sub, true); });
  r.add("aten.mul", [](LowerCtx& c) { return arith(c, Op::Mul); });
  r.add("aten.div", div);
  r.add("aten.true_divide", div);
  r.add("aten.floor_divide", [](LowerCtx& c) {
    const Value &x = operand_value(c, 0, "self"), &y = operand_value(c, 1, "other");
    DType t = c.out_dtype();
    return Value::tensor(c.b.op(Op::Div, {c.as_tensor(x, t), c.as_tensor(y, t)},
                                {{"rounding", std::string("floor")}}));
  });
  r.add("aten.maximum", [](LowerCtx& c) { return arith(c, Op::Max); });
  r.add("aten.minimum", [](LowerCtx& c) { return arith(c, Op::Min); });
  r.add("aten.remainder", [](LowerCtx& c) { return arith(c, Op::Mod); });
  r.add("aten.fmod", [](LowerCtx& c) { return arith(c, Op::Fmod); });
  r.add("aten.pow", pow);
  for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{{"add", Op::Add},
                                                                           {"sub", Op::Sub},
                                                                           {"mul", Op::Mul},
                                                                           {"div", Op::Div},
                                                                           {"maximum", Op::Max},
                                                                           {"minimum", Op::Min},
                                                                           {"pow", Op::Pow},
                                                                           {"remainder", Op::Mod},
                                                                           {"fmod", Op::Fmod}})
    r.add(std::string("prims.") + name, [op = op](LowerCtx& c) { return arith(c, op); });

  for (auto [name, op] : std::initializer_list<std::pair<const char*, Op>>{{"eq", Op::Eq},
                                                                           {"ne", Op::Ne},
                                                                           {"lt", Op::Lt},
                                                                           {"le", Op::Le},
                                                                           {"gt", Op::Gt},
                                                                           {"ge", Op::Ge}}) {
    r.add(std::string("aten.") + name, [op = op](LowerCtx& c) { return compare(c, op); });
    r.add(std::string("prims.") + name, [op = op](LowerCtx& c) { return compare(c, op); });
  }
  r.add("aten.logical_and", [](LowerCtx& c) { return logical(c, Op::LogicalAnd); });
  r.add("aten.logical_or", [](LowerCtx& c) { return logical(c, Op::LogicalOr); });
  r.add("aten.logical_not", [](LowerCtx& c) { return logical(c, Op::LogicalNot); });
  r.add("aten.bitwise_and", [](LowerCtx& c) { return bitwise_bool(c, Op::LogicalAnd); });
  r.add("aten.bitwise_or", [](LowerCtx& c) { return bitwise_bool(c, Op::LogicalOr); });
  r.add("aten.bitwise_xor", [](LowerCtx& c) { return bitwise_bool(c, Op::Ne); });
  r.add("aten.bitwise_not",
        [](LowerCtx& c) { return Value::tensor(c.b.unary(Op::BitwiseNot, c.tensor(0))); });
  r.add("aten.where", where);
  r.add("prims.where", where);
  r.add("aten.masked_fill", masked_fill);

  for (auto [name, op] :
       std::initializer_list<std::pair<const char*, Op>>{{"relu", Op::Relu},
                                                         {"silu", Op::Silu},
                                                         {"sigmoid", Op::Sigmoid},
                                                         {"tanh", Op::Tanh},
                                                         {"exp", Op::Exp},
                                                         {"log", Op::Log},
                                                         {"sqrt", Op::Sqrt},
                                                         {"rsqrt", Op::Rsqrt},
                                                         {"neg", Op::Neg},
                                                         {"abs", Op::Abs},
                                                         {"sin", Op::Sin},
                                                         {"cos", Op::Cos},
                                                         {"tan", Op::Tan},
                                                         {"atan", Op::Atan},
                                                         {"erf", Op::Erf},
                                                         {"reciprocal", Op::Reciprocal},
                                                         {"floor", Op::Floor},
                                                         {"ceil", Op::Ceil},
                                                         {"round", Op::Round},
                                                         {"sign", Op::Sign},
                                                         {"hardswish", Op::HardSwish},
                                                         {"mish", Op::Mish}}) {
    r.add(std::string("aten.") + name, [op = op](LowerCtx& c) { return unary(c, op); });
    r.add(std::string("prims.") + name, [op = op](LowerCtx& c) { return unary(c, op); });
  }
  // logaddexp(a, b) = max + log1p(exp(-|a - b|)); equal operands (two infinities
  // of one sign too, where a - b is NaN) give max + log 2.
  r.add("aten.logaddexp", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId a = c.cast(c.tensor(0, "self"), t), b = c.cast(c.tensor(1, "other"), t);
    const NodeId gap = c.b.op(Op::Where, {c.b.op(Op::Eq, {a, b}), c.scalar(0, t),
                                          c.b.unary(Op::Neg, c.b.unary(Op::Abs, c.b.sub(a, b)))});
    const NodeId e = c.b.unary(Op::Exp, gap);  // in (0, 1]: log(1 + e) loses nothing that matters
    return Value::tensor(
        c.b.add(c.b.binary(Op::Max, a, b), c.b.unary(Op::Log, c.b.add(c.scalar(1, t), e))));
  });
  // prelu(x, w): x where x > 0, else w x, w one value or one per channel (dim 1).
  r.add("aten.prelu", [](LowerCtx& c) {
    const DType t = c.out_dtype();
    const NodeId x = c.cast(c.tensor(0, "self"), t);
    NodeId w = c.cast(c.tensor(1, "weight"), t);
    const int r = c.rank(x);
    if (r >= 2 && numel(c.dims(w)) > 1) {
      std::vector<int64_t> per_channel(size_t(r - 1), 1);  // [C, 1, ...] against [N, C, ...]
      per_channel[0] = numel(c.dims(w));
      w = c.b.reshape(w, per_channel);
    }
    const NodeId pos = c.b.op(Op::Gt, {x, c.scalar(0, t)});
    return Value::tensor(c.b.op(Op::Where, {pos, x, c.b.mul(w, x)}));
  });
  r.add("aten.isnan", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    return Value::tensor(c.b.op(Op::Ne, {x, x}));  // only NaN differs from itself
  });
  // round(x, decimals): PyTorch scales by 10^|d|, rounds half to even, scales back.
  r.add("aten.round.decimals", [](LowerCtx& c) {
    int64_t d = c.i(1, "decimals", 0);
    DType t = c.out_dtype();
    NodeId x = c.cast(c.tensor(0, "self"), t);
    if (d == 0) return Value::tensor(c.b.unary(Op::Round, x));
    NodeId ten = c.scalar(std::pow(10.0, double(d < 0 ? -d : d)), t);
    if (d > 0) return Value::tensor(c.b.div(c.b.unary(Op::Round, c.b.mul(x, ten)), ten));
    return Value::tensor(c.b.mul(c.b.unary(Op::Round, c.b.div(x, ten)), ten));
  });
  r.add("aten.gelu", [](LowerCtx& c) {
    return unary(c, c.str(1, "approximate", "none") == "tanh" ? Op::GeluTanh : Op::Gelu);
  });
  r.add("aten.leaky_relu", [](LowerCtx& c) {
    return unary(c, Op::LeakyRelu, {{"slope", c.f(1, "negative_slope", 0.01)}});
  });
  // rrelu_with_noise(x, noise, lower, upper, training, generator): in eval mode a
  // leaky relu with the mean slope; training mode draws slopes at random.
  r.add("aten.rrelu_with_noise", [](LowerCtx& c) {
    RLX_CHECK(!c.flag(4, "training", false),
              "rrelu in training mode is random; only eval is supported");
    const double slope = (c.f(2, "lower", 1.0 / 8) + c.f(3, "upper", 1.0 / 3)) / 2;
    return unary(c, Op::LeakyRelu, {{"slope", slope}});
  });
  r.add("aten.elu", [](LowerCtx& c) {
    double alpha = c.f(1, "alpha", 1), scale = c.f(2, "scale", 1),
           in_scale = c.f(3, "input_scale", 1);
    NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
    if (in_scale != 1) x = c.b.mul(x, c.scalar(in_scale, c.out_dtype()));
    NodeId y = c.b.unary(Op::Elu, x, {{"alpha", alpha}});
    if (scale != 1) y = c.b.mul(y, c.scalar(scale, c.out_dtype()));
    return Value::tensor(y);
  });
  r.add("aten.celu", [](LowerCtx& c) {  // celu(x, a) = a * elu(x / a)
    double alpha = c.f(1, "alpha", 1);
    DType t = c.out_dtype();
    NodeId x = c.b.div(c.cast(c.tensor(0, "self"), t), c.scalar(alpha, t));
    return Value::tensor(c.b.mul(c.b.unary(Op::Elu, x, {{"alpha", 1.0}}), c.scalar(alpha, t)));
  });
  r.add("aten.softplus", [](LowerCtx& c) {
    return unary(c, Op::Softplus,
                 {{"beta", c.f(1, "beta", 1)}, {"threshold", c.f(2, "threshold", 20)}});
  });
  r.add("aten.hardsigmoid", [](LowerCtx& c) { return unary(c, Op::HardSigmoid); });
  r.add("aten.hardtanh", [](LowerCtx& c) {
    return unary(c, Op::Clamp, {{"min", c.f(1, "min_val", -1)}, {"max", c.f(2, "max_val", 1)}});
  });
  r.add("aten.relu6", [](LowerCtx& c) {
    return unary(c, Op::Clamp, {{"min", 0.0}, {"max", 6.0}});
  });
  r.add("aten.clamp", [](LowerCtx& c) { return clamp(c, "min", "max", true, true); });
  r.add("aten.clip", [](LowerCtx& c) { return clamp(c, "min", "max", true, true); });
  r.add("aten.clamp_min", [](LowerCtx& c) { return clamp(c, "min", nullptr, true, false); });
  r.add("aten.clamp_max", [](LowerCtx& c) { return clamp(c, nullptr, "max", false, true); });
}

}  // namespace rlx::torch_ir
