// Element-wise ops: activations, math, binary arithmetic with broadcasting,
// comparisons, logic, select and cast. Floats compute in f32, integer
// arithmetic in int64 (stored as int32), following MIL's dtype rules.
#include <cmath>

#include "value.h"

namespace rlx::coreml::interp {
namespace {

using F1 = float (*)(float);

Value map_float(const OpCtx& c, const Value& x, const std::function<float(float)>& fn) {
  if (!x.is_float()) c.fail("x must be a float tensor, got ", x.str());
  Value r = Value::floats(x.dims, x.dt);
  for (size_t k = 0; k < x.f.size(); ++k) r.f[k] = fn(x.f[k]);
  return r;
}

float gelu_exact(float x) { return 0.5f * x * (1.0f + std::erf(x / std::sqrt(2.0f))); }
float gelu_tanh(float x) {
  const float k = std::sqrt(2.0f / float(M_PI));
  return 0.5f * x * (1.0f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

void add_unary(OpTable& t, const std::string& name, std::function<float(float)> fn) {
  t[name] = [fn](const OpCtx& c) { return map_float(c, c.x("x"), fn); };
}

// Unary ops that also accept integers (abs, sign): computed exactly.
void add_int_unary(OpTable& t, const std::string& name, float (*ff)(float),
                   int64_t (*fi)(int64_t)) {
  t[name] = [ff, fi](const OpCtx& c) {
    const Value& x = c.x("x");
    if (x.is_float()) return map_float(c, x, ff);
    Value r = Value::ints(x.dims, x.dt);
    for (size_t k = 0; k < x.i.size(); ++k) r.i[k] = int32_t(fi(x.i[k]));
    return r;
  };
}

struct BinFn {
  float (*f)(float, float);
  int64_t (*i)(int64_t, int64_t);  // null: integers computed as floats
  bool to_bool = false;            // comparisons and logic produce bool
};

Value binary(const OpCtx& c, const Value& x, const Value& y, const BinFn& fn) {
  if (x.is_string() || y.is_string()) c.fail("string operands");
  auto dims = broadcast_dims(c, x.dims, y.dims);
  auto ox = broadcast_offsets(x.dims, dims), oy = broadcast_offsets(y.dims, dims);
  const bool flt = x.is_float() || y.is_float() || !fn.i;
  pb::DataType dt = fn.to_bool ? pb::BOOL : x.is_float() ? x.dt : y.is_float() ? y.dt : x.dt;
  if (!fn.to_bool && flt && !is_float_dt(dt)) dt = pb::FLOAT32;
  Value r = (!fn.to_bool && flt) ? Value::floats(dims, dt) : Value::ints(dims, dt);
  for (size_t k = 0; k < ox.size(); ++k) {
    if (flt) {
      float v = fn.f(x.fget(ox[k]), y.fget(oy[k]));
      if (fn.to_bool)
        r.i[k] = v != 0.0f;
      else
        r.f[k] = v;
    } else {
      int64_t v = fn.i(x.i[size_t(ox[k])], y.i[size_t(oy[k])]);
      r.i[k] = fn.to_bool ? v != 0 : int32_t(v);
    }
  }
  return r;
}

void add_binary(OpTable& t, const std::string& name, BinFn fn) {
  t[name] = [fn](const OpCtx& c) { return binary(c, c.x("x"), c.x("y"), fn); };
}

int64_t ifloor_div(int64_t a, int64_t b) {
  if (b == 0) return 0;  // undefined in MIL; keep it defined here
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
int64_t imod(int64_t a, int64_t b) { return b == 0 ? 0 : a - ifloor_div(a, b) * b; }
float fmod_floor(float a, float b) { return a - std::floor(a / b) * b; }

}  // namespace

void register_elementwise(OpTable& t) {
  add_unary(t, "relu", [](float x) { return x > 0 ? x : 0.0f; });
  add_unary(t, "relu6", [](float x) { return std::min(std::max(x, 0.0f), 6.0f); });
  add_unary(t, "sigmoid", sigmoid);
  add_unary(t, "silu", [](float x) { return x * sigmoid(x); });
  add_unary(t, "tanh", [](float x) { return std::tanh(x); });
  add_unary(t, "exp", [](float x) { return std::exp(x); });
  add_unary(t, "exp2", [](float x) { return std::exp2(x); });
  add_unary(t, "sqrt", [](float x) { return std::sqrt(x); });
  add_unary(t, "square", [](float x) { return x * x; });
  add_unary(t, "sin", [](float x) { return std::sin(x); });
  add_unary(t, "cos", [](float x) { return std::cos(x); });
  add_unary(t, "tan", [](float x) { return std::tan(x); });
  add_unary(t, "atan", [](float x) { return std::atan(x); });
  add_unary(t, "erf", [](float x) { return std::erf(x); });
  // MIL round: to nearest, ties to even (numpy semantics).
  add_unary(t, "round", [](float x) { return std::nearbyint(x); });
  add_unary(t, "floor", [](float x) { return std::floor(x); });
  add_unary(t, "ceil", [](float x) { return std::ceil(x); });
  add_unary(t, "softplus", softplus);
  add_int_unary(
      t, "abs", [](float x) { return std::abs(x); }, [](int64_t x) { return x < 0 ? -x : x; });
  add_int_unary(
      t, "sign", [](float x) { return x > 0   ? 1.0f
                                      : x < 0 ? -1.0f
                                              : 0.0f; },
      [](int64_t x) { return int64_t(x > 0) - int64_t(x < 0); });

  // Ops with an epsilon: log(x + eps), rsqrt(x + eps), 1 / (x + eps).
  auto with_eps = [&t](const std::string& name, float def, float (*fn)(float)) {
    t[name] = [def, fn](const OpCtx& c) {
      const float eps = c.f("epsilon", def);
      return map_float(c, c.x("x"), [eps, fn](float x) { return fn(x + eps); });
    };
  };
  with_eps("log", 1e-45f, [](float x) { return std::log(x); });
  with_eps("rsqrt", 1e-12f, [](float x) { return 1.0f / std::sqrt(x); });
  with_eps("inverse", 1e-4f, [](float x) { return 1.0f / x; });

  t["gelu"] = [](const OpCtx& c) {
    const std::string mode = c.s("mode", "EXACT");
    if (mode == "EXACT") return map_float(c, c.x("x"), gelu_exact);
    if (mode == "TANH_APPROXIMATION") return map_float(c, c.x("x"), gelu_tanh);
    if (mode == "SIGMOID_APPROXIMATION")
      return map_float(c, c.x("x"), [](float x) { return x * sigmoid(1.702f * x); });
    c.fail("unknown gelu mode '", mode, "'");
  };
  t["elu"] = [](const OpCtx& c) {
    const float a = c.f("alpha", 1.0f);
    return map_float(c, c.x("x"), [a](float x) { return x > 0 ? x : a * (std::exp(x) - 1.0f); });
  };
  t["leaky_relu"] = [](const OpCtx& c) {
    const float a = c.f("alpha", 0.01f);
    return map_float(c, c.x("x"), [a](float x) { return x >= 0 ? x : a * x; });
  };
  t["sigmoid_hard"] = [](const OpCtx& c) {
    const float a = c.f("alpha", 0.2f), b = c.f("beta", 0.5f);
    return map_float(c, c.x("x"),
                     [a, b](float x) { return std::min(std::max(a * x + b, 0.0f), 1.0f); });
  };
  t["clip"] = [](const OpCtx& c) {
    const float lo = c.f("alpha", 0.0f), hi = c.f("beta", 1.0f);
    return map_float(c, c.x("x"), [lo, hi](float x) { return std::min(std::max(x, lo), hi); });
  };

  t["identity"] = [](const OpCtx& c) { return c.x("x"); };
  t["cast"] = [](const OpCtx& c) {
    const std::string d = c.s("dtype", "");
    static const std::map<std::string, pb::DataType> names{
        {"fp32", pb::FLOAT32}, {"fp16", pb::FLOAT16}, {"fp64", pb::FLOAT64},
        {"int32", pb::INT32},  {"int64", pb::INT64},  {"int16", pb::INT16},
        {"int8", pb::INT8},    {"uint8", pb::UINT8},  {"bool", pb::BOOL}};
    auto it = names.find(d);
    if (it == names.end()) c.fail("unknown cast dtype '", d, "'");
    return cast_value(c.x("x"), it->second);
  };
  t["logical_not"] = [](const OpCtx& c) {
    const Value& x = c.x("x");
    if (x.dt != pb::BOOL) c.fail("x must be bool, got ", x.str());
    Value r = Value::ints(x.dims, pb::BOOL);
    for (size_t k = 0; k < x.i.size(); ++k) r.i[k] = !x.i[k];
    return r;
  };

  add_binary(t, "add",
             {[](float a, float b) { return a + b; }, [](int64_t a, int64_t b) { return a + b; }});
  add_binary(t, "sub",
             {[](float a, float b) { return a - b; }, [](int64_t a, int64_t b) { return a - b; }});
  add_binary(t, "mul",
             {[](float a, float b) { return a * b; }, [](int64_t a, int64_t b) { return a * b; }});
  add_binary(t, "real_div", {[](float a, float b) { return a / b; }, nullptr});
  add_binary(t, "floor_div", {[](float a, float b) { return std::floor(a / b); }, ifloor_div});
  add_binary(t, "mod", {fmod_floor, imod});
  add_binary(t, "pow", {[](float a, float b) { return std::pow(a, b); }, nullptr});
  add_binary(t, "maximum",
             {[](float a, float b) { return std::isnan(a) ? a : std::max(a, b); },
              [](int64_t a, int64_t b) { return std::max(a, b); }});
  add_binary(t, "minimum",
             {[](float a, float b) { return std::isnan(a) ? a : std::min(a, b); },
              [](int64_t a, int64_t b) { return std::min(a, b); }});
  auto cmp = [&](const std::string& name, float (*f)(float, float),
                 int64_t (*i)(int64_t, int64_t)) {
    add_binary(t, name, {f, i, true});
  };
  cmp(
      "equal", [](float a, float b) { return float(a == b); },
      [](int64_t a, int64_t b) { return int64_t(a == b); });
  cmp(
      "not_equal", [](float a, float b) { return float(a != b); },
      [](int64_t a, int64_t b) { return int64_t(a != b); });
  cmp(
      "less", [](float a, float b) { return float(a < b); },
      [](int64_t a, int64_t b) { return int64_t(a < b); });
  cmp(
      "less_equal", [](float a, float b) { return float(a <= b); },
      [](int64_t a, int64_t b) { return int64_t(a <= b); });
  cmp(
      "greater", [](float a, float b) { return float(a > b); },
      [](int64_t a, int64_t b) { return int64_t(a > b); });
  cmp(
      "greater_equal", [](float a, float b) { return float(a >= b); },
      [](int64_t a, int64_t b) { return int64_t(a >= b); });
  auto logic = [&](const std::string& name, int64_t (*i)(int64_t, int64_t)) {
    t[name] = [i](const OpCtx& c) {
      const Value &x = c.x("x"), &y = c.x("y");
      if (x.dt != pb::BOOL || y.dt != pb::BOOL) c.fail("operands must be bool");
      return binary(c, x, y, {nullptr, i, true});
    };
  };
  logic("logical_and", [](int64_t a, int64_t b) { return int64_t(a && b); });
  logic("logical_or", [](int64_t a, int64_t b) { return int64_t(a || b); });
  logic("logical_xor", [](int64_t a, int64_t b) { return int64_t((a != 0) != (b != 0)); });

  t["select"] = [](const OpCtx& c) {
    const Value &cond = c.x("cond"), &a = c.x("a"), &b = c.x("b");
    if (a.is_float() != b.is_float()) c.fail("a ", a.str(), " and b ", b.str(), " differ in dtype");
    auto dims = broadcast_dims(c, broadcast_dims(c, cond.dims, a.dims), b.dims);
    auto oc = broadcast_offsets(cond.dims, dims), oa = broadcast_offsets(a.dims, dims),
         ob = broadcast_offsets(b.dims, dims);
    Value r = a.is_float() ? Value::floats(dims, a.dt) : Value::ints(dims, a.dt);
    for (size_t k = 0; k < oc.size(); ++k) {
      const bool p = cond.fget(oc[k]) != 0.0f;
      if (a.is_float())
        r.f[k] = p ? a.f[size_t(oa[k])] : b.f[size_t(ob[k])];
      else
        r.i[k] = p ? a.i[size_t(oa[k])] : b.i[size_t(ob[k])];
    }
    return r;
  };
}

}  // namespace rlx::coreml::interp
