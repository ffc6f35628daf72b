// Leaves and element-wise ops.
#include <cmath>
#include <limits>

#include "lower.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

Val lower_param(Lowering& L, const Node& n) {
  auto it = L.weights.find(n.name);
  RLX_CHECK(it != L.weights.end(), "coreml: no weight bound to param '", n.name, "'");
  // Quantized bytes read by dequant ops are dequantized there; no u8 const is emitted.
  if (it->second.dtype() == DType::U8 && only_dequant_uses(L.g, n.id)) return Val{};
  // A QAT weight stored as int8 by its fake_quantize: no float copy.
  if (only_int8_weight_uses(L.g, L.weights, n.id, L.opset())) return Val{};
  return L.b.constant(it->second, L.dtype(it->second.dtype()), n.name);
}

Val lower_constant(Lowering& L, const Node& n) {
  return L.b.constant(n.value, L.dtype(n.value.dtype()), n.name.empty() ? L.hint(n) : n.name);
}

Tensor static_tensor(const Node& n) {
  RLX_CHECK(n.shape.is_static(), "coreml: ", op_name(n.op), " needs a static shape, got ",
            n.shape.str());
  return Tensor(n.shape.concrete(), DType::F64);
}

Val lower_full(Lowering& L, const Node& n) {
  Tensor t = static_tensor(n);
  const double value = n.attrs_as<FullAttrs>().value;
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = value;
  return L.b.constant(t, L.dtype(n.shape.dtype), L.hint(n));
}

Val lower_arange(Lowering& L, const Node& n) {
  Tensor t = static_tensor(n);
  const auto& a = n.attrs_as<ArangeAttrs>();
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = a.start + double(i) * a.step;
  return L.b.constant(t, L.dtype(n.shape.dtype), L.hint(n));
}

// One-to-one unary ops.
template <const char* Name>
Val simple_unary(Lowering& L, const Node& n) {
  return L.b.op(Name, {{"x", L.in(n, 0)}}, L.type_of(n), L.hint(n));
}

#define UNARY(sym, mil) constexpr char sym[] = mil;
UNARY(kRelu, "relu")
UNARY(kSilu, "silu")
UNARY(kSigmoid, "sigmoid")
UNARY(kTanh, "tanh")
UNARY(kExp, "exp")
UNARY(kSqrt, "sqrt")
UNARY(kAbs, "abs")
UNARY(kSin, "sin")
UNARY(kCos, "cos")
UNARY(kTan, "tan")
UNARY(kAtan, "atan")
UNARY(kErf, "erf")
UNARY(kRound, "round")
UNARY(kFloor, "floor")
UNARY(kCeil, "ceil")
UNARY(kSign, "sign")
UNARY(kLogicalNot, "logical_not")
#undef UNARY

Val with_eps(Lowering& L, const Node& n, const char* type, double eps) {
  const Val& x = L.in(n, 0);
  return L.b.op(type, {{"x", x}, {"epsilon", L.scalar_like(eps, x, L.hint(n) + "_eps")}},
                L.type_of(n), L.hint(n));
}
// IR log/rsqrt/reciprocal are exact, so MIL's default epsilons are overridden.
Val lower_log(Lowering& L, const Node& n) { return with_eps(L, n, "log", 0); }
Val lower_rsqrt(Lowering& L, const Node& n) { return with_eps(L, n, "rsqrt", 0); }
Val lower_reciprocal(Lowering& L, const Node& n) { return with_eps(L, n, "inverse", 0); }

Val gelu(Lowering& L, const Node& n, const char* mode) {
  return L.b.op("gelu", {{"x", L.in(n, 0)}, {"mode", L.b.string(mode, L.hint(n) + "_mode")}},
                L.type_of(n), L.hint(n));
}
Val lower_gelu(Lowering& L, const Node& n) { return gelu(L, n, "EXACT"); }
Val lower_gelu_tanh(Lowering& L, const Node& n) { return gelu(L, n, "TANH_APPROXIMATION"); }

Val lower_neg(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  return L.b.op("mul", {{"x", x}, {"y", L.scalar_like(-1, x, L.hint(n) + "_m1")}}, L.type_of(n),
                L.hint(n));
}

Val lower_bitwise_not(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  if (x.type.dt == pb::BOOL) return L.b.op("logical_not", {{"x", x}}, L.type_of(n), L.hint(n));
  // ~x == -x - 1 for two's complement integers.
  Val neg = L.binary("mul", x, L.scalar_like(-1, x, L.hint(n) + "_m1"), L.hint(n) + "_neg");
  return L.b.op("sub", {{"x", neg}, {"y", L.scalar_like(1, x, L.hint(n) + "_one")}}, L.type_of(n),
                L.hint(n));
}

Val alpha_op(Lowering& L, const Node& n, const char* type, double alpha) {
  const Val& x = L.in(n, 0);
  return L.b.op(type, {{"x", x}, {"alpha", L.scalar_like(alpha, x, L.hint(n) + "_alpha")}},
                L.type_of(n), L.hint(n));
}
Val lower_elu(Lowering& L, const Node& n) {
  return alpha_op(L, n, "elu", n.attrs_as<EluAttrs>().alpha);
}
Val lower_leaky_relu(Lowering& L, const Node& n) {
  return alpha_op(L, n, "leaky_relu", n.attrs_as<LeakyReluAttrs>().slope);
}

Val hard_sigmoid(Lowering& L, const Val& x, double a, double b, const std::string& h) {
  return L.b.op("sigmoid_hard",
                {{"x", x},
                 {"alpha", L.scalar_like(a, x, h + "_alpha")},
                 {"beta", L.scalar_like(b, x, h + "_beta")}},
                x.type, h);
}
Val lower_hard_sigmoid(Lowering& L, const Node& n) {
  const auto& a = n.attrs_as<HardSigmoidAttrs>();
  return hard_sigmoid(L, L.in(n, 0), a.alpha, a.beta, L.hint(n));
}
Val lower_hard_swish(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  Val s = hard_sigmoid(L, x, 1.0 / 6, 0.5, L.hint(n) + "_hs");
  return L.b.op("mul", {{"x", x}, {"y", s}}, L.type_of(n), L.hint(n));
}

// softplus with beta: softplus(beta * x) / beta (threshold only guards overflow on the CPU).
Val lower_softplus(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const double beta = n.attrs_as<SoftplusAttrs>().beta;
  if (beta == 1.0) return L.b.op("softplus", {{"x", x}}, L.type_of(n), L.hint(n));
  Val bx = L.binary("mul", x, L.scalar_like(beta, x, L.hint(n) + "_beta"), L.hint(n) + "_bx");
  Val sp = L.unary("softplus", bx, L.hint(n) + "_sp");
  return L.b.op("real_div", {{"x", sp}, {"y", L.scalar_like(beta, x, L.hint(n) + "_beta")}},
                L.type_of(n), L.hint(n));
}

Val lower_mish(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  Val t = L.unary("tanh", L.unary("softplus", x, L.hint(n) + "_sp"), L.hint(n) + "_tanh");
  return L.b.op("mul", {{"x", x}, {"y", t}}, L.type_of(n), L.hint(n));
}

Val lower_clamp(Lowering& L, const Node& n) {
  Val x = L.in(n, 0);
  const auto& a = n.attrs_as<ClampAttrs>();
  const double lo = a.min, hi = a.max;
  if (std::isfinite(lo) && std::isfinite(hi) && is_float(n.shape.dtype))
    return L.b.op("clip",
                  {{"x", x},
                   {"alpha", L.scalar_like(lo, x, L.hint(n) + "_lo")},
                   {"beta", L.scalar_like(hi, x, L.hint(n) + "_hi")}},
                  L.type_of(n), L.hint(n));
  if (std::isfinite(lo))
    x = L.binary("maximum", x, L.scalar_like(lo, x, L.hint(n) + "_lo"), L.hint(n) + "_max");
  if (std::isfinite(hi))
    x = L.binary("minimum", x, L.scalar_like(hi, x, L.hint(n) + "_hi"), L.hint(n) + "_min");
  return L.b.op("identity", {{"x", x}}, L.type_of(n), L.hint(n));
}

// ---- binary

template <const char* Name>
Val simple_binary(Lowering& L, const Node& n) {
  return L.b.op(Name, {{"x", L.in(n, 0)}, {"y", L.in(n, 1)}}, L.type_of(n), L.hint(n));
}
#define BINARY(sym, mil) constexpr char sym[] = mil;
BINARY(kAdd, "add")
BINARY(kSub, "sub")
BINARY(kMul, "mul")
BINARY(kMaximum, "maximum")
BINARY(kMinimum, "minimum")
BINARY(kPow, "pow")
BINARY(kMod, "mod")
BINARY(kAnd, "logical_and")
BINARY(kOr, "logical_or")
BINARY(kEqual, "equal")
BINARY(kNotEqual, "not_equal")
BINARY(kLess, "less")
BINARY(kLessEqual, "less_equal")
BINARY(kGreater, "greater")
BINARY(kGreaterEqual, "greater_equal")
#undef BINARY

// trunc(v) = sign(v) * floor(|v|)
Val trunc(Lowering& L, const Val& v, const std::string& h) {
  Val fl = L.unary("floor", L.unary("abs", v, h + "_abs"), h + "_floor");
  return L.binary("mul", L.unary("sign", v, h + "_sign"), fl, h + "_trunc");
}

Val lower_div(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &y = L.in(n, 1);
  const bool integer = x.type.dt == pb::INT32;
  switch (n.attrs_as<DivAttrs>().rounding) {
    case DivRounding::floor:
      return L.b.op("floor_div", {{"x", x}, {"y", y}}, L.type_of(n), L.hint(n));
    case DivRounding::none:
      if (!integer) return L.b.op("real_div", {{"x", x}, {"y", y}}, L.type_of(n), L.hint(n));
      break;
    case DivRounding::trunc:
      break;
  }
  // Truncating division (and integer "/", which truncates in the CPU backend).
  Val fx = integer ? L.cast(x, pb::FLOAT32, L.hint(n) + "_fx") : x;
  Val fy = integer ? L.cast(y, pb::FLOAT32, L.hint(n) + "_fy") : y;
  Val q = trunc(L, L.binary("real_div", fx, fy, L.hint(n) + "_q"), L.hint(n));
  if (integer)
    return L.b.op("cast", {{"x", q}, {"dtype", L.b.string("int32", L.hint(n) + "_dt")}},
                  L.type_of(n), L.hint(n));
  return L.b.op("identity", {{"x", q}}, L.type_of(n), L.hint(n));
}

// fmod(x, y) = x - y * trunc(x / y)
Val lower_fmod(Lowering& L, const Node& n) {
  const Val &x = L.in(n, 0), &y = L.in(n, 1);
  RLX_CHECK(x.type.dt != pb::INT32, "coreml: integer fmod is not lowered");
  Val q = trunc(L, L.binary("real_div", x, y, L.hint(n) + "_q"), L.hint(n));
  Val p = L.binary("mul", y, q, L.hint(n) + "_p");
  return L.b.op("sub", {{"x", x}, {"y", p}}, L.type_of(n), L.hint(n));
}

Val lower_where(Lowering& L, const Node& n) {
  return L.b.op("select", {{"cond", L.in(n, 0)}, {"a", L.in(n, 1)}, {"b", L.in(n, 2)}},
                L.type_of(n), L.hint(n));
}

Val lower_cast(Lowering& L, const Node& n) {
  Type t = L.type_of(n);
  if (t.dt == L.in(n, 0).type.dt) return L.b.op("identity", {{"x", L.in(n, 0)}}, t, L.hint(n));
  return L.b.op(
      "cast",
      {{"x", L.in(n, 0)}, {"dtype", L.b.string(mil_dtype_name(t.dt), L.hint(n) + "_dtype")}}, t,
      L.hint(n));
}

}  // namespace

void register_elementwise(LowerTable& t) {
  auto set = [&](Op op, LowerFn f) { t.one[size_t(op)] = f; };
  set(Op::Param, lower_param);
  set(Op::Constant, lower_constant);
  set(Op::Full, lower_full);
  set(Op::Arange, lower_arange);
  set(Op::Relu, simple_unary<kRelu>);
  set(Op::Gelu, lower_gelu);
  set(Op::GeluTanh, lower_gelu_tanh);
  set(Op::Silu, simple_unary<kSilu>);
  set(Op::Sigmoid, simple_unary<kSigmoid>);
  set(Op::Tanh, simple_unary<kTanh>);
  set(Op::Exp, simple_unary<kExp>);
  set(Op::Log, lower_log);
  set(Op::Sqrt, simple_unary<kSqrt>);
  set(Op::Rsqrt, lower_rsqrt);
  set(Op::Neg, lower_neg);
  set(Op::Abs, simple_unary<kAbs>);
  set(Op::Sin, simple_unary<kSin>);
  set(Op::Cos, simple_unary<kCos>);
  set(Op::Tan, simple_unary<kTan>);
  set(Op::Atan, simple_unary<kAtan>);
  set(Op::Erf, simple_unary<kErf>);
  set(Op::Reciprocal, lower_reciprocal);
  set(Op::Round, simple_unary<kRound>);
  set(Op::Floor, simple_unary<kFloor>);
  set(Op::Ceil, simple_unary<kCeil>);
  set(Op::Sign, simple_unary<kSign>);
  set(Op::Softplus, lower_softplus);
  set(Op::Elu, lower_elu);
  set(Op::LeakyRelu, lower_leaky_relu);
  set(Op::HardSigmoid, lower_hard_sigmoid);
  set(Op::HardSwish, lower_hard_swish);
  set(Op::Mish, lower_mish);
  set(Op::Clamp, lower_clamp);
  set(Op::LogicalNot, simple_unary<kLogicalNot>);
  set(Op::BitwiseNot, lower_bitwise_not);
  set(Op::Add, simple_binary<kAdd>);
  set(Op::Sub, simple_binary<kSub>);
  set(Op::Mul, simple_binary<kMul>);
  set(Op::Div, lower_div);
  set(Op::Max, simple_binary<kMaximum>);
  set(Op::Min, simple_binary<kMinimum>);
  set(Op::Pow, simple_binary<kPow>);
  set(Op::Mod, simple_binary<kMod>);
  set(Op::Fmod, lower_fmod);
  set(Op::LogicalAnd, simple_binary<kAnd>);
  set(Op::LogicalOr, simple_binary<kOr>);
  set(Op::Eq, simple_binary<kEqual>);
  set(Op::Ne, simple_binary<kNotEqual>);
  set(Op::Lt, simple_binary<kLess>);
  set(Op::Le, simple_binary<kLessEqual>);
  set(Op::Gt, simple_binary<kGreater>);
  set(Op::Ge, simple_binary<kGreaterEqual>);
  set(Op::Where, lower_where);
  set(Op::Cast, lower_cast);
}

}  // namespace rlx::coreml
