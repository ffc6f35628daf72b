// Runs function `main`: binds inputs, evaluates operations in block order,
// checks each result against its declared type and returns the block outputs.
#include <algorithm>
#include <unordered_map>

#include "interp.h"
#include "package.h"

namespace rlx::coreml {
namespace interp {

const OpTable& op_table() {
  static const OpTable t = [] {
    OpTable t;
    register_elementwise(t);
    register_shape(t);
    register_nn(t);
    register_indexing(t);
    return t;
  }();
  return t;
}

namespace {

Value from_tensor(const Tensor& t, pb::DataType dt) {
  const Tensor c = t.contiguous();
  Value v;
  v.dt = dt;
  v.dims = c.dims();
  const int64_t n = c.numel();
  if (is_float_dt(dt)) {
    v.f.resize(size_t(n));
    cast_elements(c.raw(), c.dtype(), v.f.data(), DType::F32, n);
    if (dt == pb::FLOAT16)
      for (auto& x : v.f) x = round_f16(x);
  } else {
    v.i.resize(size_t(n));
    cast_elements(c.raw(), c.dtype(), v.i.data(), DType::I32, n);
    if (dt == pb::BOOL)
      for (auto& x : v.i) x = x != 0;
  }
  return v;
}

Tensor to_tensor(const Value& v) {
  RLX_CHECK(!v.is_string(), "mil interp: a string value cannot be an output");
  if (v.is_float()) {
    Tensor t = Tensor::from_vector(v.dims, v.f, DType::F32);
    return v.dt == pb::FLOAT16 ? t.to(DType::F16) : t;
  }
  Tensor t = Tensor::from_vector(v.dims, v.i, DType::I32);
  return v.dt == pb::BOOL ? t.to(DType::Bool) : t;
}

int dtype_class(pb::DataType dt) {
  return dt == pb::BOOL ? 2 : dt == pb::STRING ? 3 : is_float_dt(dt) ? 0 : 1;
}

// Checks `v` against the declared type and converts it to the declared dtype
// (rounding to fp16 when declared fp16).
Value conform(const OpCtx& c, Value v, bool check) {
  const Type& t = c.out;
  if (check) {
    bool ok = t.rank() == v.rank();
    for (int k = 0; ok && k < t.rank(); ++k)
      ok = t.dims[size_t(k)] < 0 || t.dims[size_t(k)] == v.dims[size_t(k)];
    if (!ok) c.fail("computed ", v.str(), " but the op declares ", type_str(t));
    if (dtype_class(v.dt) != dtype_class(t.dt))
      c.fail("computed ", v.str(), " but the op declares ", type_str(t));
  }
  if (v.dt != t.dt && !v.is_string()) v = cast_value(v, t.dt);
  return v;
}

// constexpr_affine_dequantize: (quantized_data - zero_point) * scale, zero_point and scale
// scalars or vectors along `axis`; every parameter is an attribute (a constant).
Value affine_dequantize(const Package& p, const OpCtx& c) {
  auto attr = [&](const char* k) {
    auto a = c.op.attributes().find(k);
    if (a == c.op.attributes().end()) c.fail("constexpr_affine_dequantize without '", k, "'");
    return decode_value(p, a->second, get_type(a->second.type()), c.out_name + "." + k);
  };
  const Value q = attr("quantized_data"), z = attr("zero_point"), s = attr("scale"),
              ax = attr("axis");
  if (q.dt != pb::INT8 && q.dt != pb::UINT8) c.fail("quantized_data must be int8 or uint8");
  if (!s.is_float()) c.fail("scale must be fp16 or fp32");
  if (ax.numel() != 1) c.fail("axis must be a scalar");
  const int rank = q.rank();
  const int64_t a = ax.i[0] < 0 ? ax.i[0] + rank : ax.i[0];
  if (a < 0 || a >= rank) c.fail("axis ", ax.i[0], " out of range for rank ", rank);
  const int64_t ch = q.dims[size_t(a)];
  for (const Value* v : {&z, &s})
    if (v->numel() != 1 && !(v->rank() == 1 && v->dims[0] == ch))
      c.fail("zero_point and scale must be scalars or [", ch, "] along axis ", a);
  int64_t inner = 1;
  for (int k = int(a) + 1; k < rank; ++k) inner *= q.dims[size_t(k)];
  Value r;
  r.dt = s.dt;
  r.dims = q.dims;
  r.f.resize(size_t(q.numel()));
  for (int64_t k = 0; k < q.numel(); ++k) {
    const int64_t j = (k / inner) % ch;
    const float zk = z.fget(z.numel() == 1 ? 0 : j), sk = s.fget(s.numel() == 1 ? 0 : j);
    r.f[size_t(k)] = (float(q.i[size_t(k)]) - zk) * sk;
  }
  return r;
}

}  // namespace
}  // namespace interp

std::vector<std::string> interp_op_names() {
  std::vector<std::string> r{"const", "constexpr_affine_dequantize"};
  for (const auto& [k, f] : interp::op_table()) r.push_back(k);
  std::sort(r.begin(), r.end());
  return r;
}

TensorMap run_package(const std::string& dir, const TensorMap& inputs, const InterpOptions& opts) {
  return interp::run_program(interp::load_package(dir), inputs, opts);
}

TensorMap interp::run_program(const Package& p, const TensorMap& inputs,
                              const InterpOptions& opts) {
  using namespace interp;
  const ElementLimit limit(opts.max_elements);
  const auto& fns = p.model.mlprogram().functions();
  auto fit = fns.find("main");
  RLX_CHECK(fit != fns.end(), "mil interp: the program has no function 'main'");
  const pb::Function& fn = fit->second;
  auto bit = fn.block_specializations().find(fn.opset());
  RLX_CHECK(bit != fn.block_specializations().end(), "mil interp: function main has no block for ",
            "its opset '", fn.opset(), "'");
  const pb::Block& block = bit->second;

  std::unordered_map<std::string, Value> env;
  for (const auto& in : fn.inputs()) {
    const Type t = get_type(in.type());
    auto it = inputs.find(in.name());
    RLX_CHECK(it != inputs.end(), "mil interp: missing input '", in.name(), "' (", type_str(t),
              ")");
    const Tensor& x = it->second;
    bool ok = int(x.dims().size()) == t.rank();
    for (int k = 0; ok && k < t.rank(); ++k)
      ok = t.dims[size_t(k)] < 0 || t.dims[size_t(k)] == x.dims()[size_t(k)];
    RLX_CHECK(ok, "mil interp: input '", in.name(), "' has dims ", type_str(Type{t.dt, x.dims()}),
              ", the function declares ", type_str(t));
    env[in.name()] = from_tensor(x, t.dt);
  }

  const OpTable& table = op_table();
  for (const pb::Operation& op : block.operations()) {
    RLX_CHECK(op.outputs_size() == 1, "mil interp: op ", op.type(), " has ", op.outputs_size(),
              " outputs; only single-output ops are supported");
    const std::string& out = op.outputs(0).name();
    OpCtx c{op, out, get_type(op.outputs(0).type()), {}};
    if (op.blocks_size() != 0) c.fail("ops with nested blocks are not supported");
    Value result;
    if (op.type() == "const") {
      auto a = op.attributes().find("val");
      if (a == op.attributes().end()) c.fail("const without a 'val' attribute");
      result = decode_value(p, a->second, c.out, "const '" + out + "'");
    } else if (op.type() == "constexpr_affine_dequantize") {
      result = affine_dequantize(p, c);
    } else {
      auto f = table.find(op.type());
      if (f == table.end()) c.fail("unknown op type '", op.type(), "'");
      std::vector<Value> immediates;  // bindings given inline, kept alive for the call
      size_t nimm = 0;
      for (const auto& [k, arg] : op.inputs())
        for (const auto& b : arg.arguments()) nimm += !b.has_name();
      immediates.reserve(nimm);
      for (const auto& [k, arg] : op.inputs()) {
        auto& vs = c.in[k];
        for (const auto& b : arg.arguments()) {
          if (b.has_name()) {
            auto e = env.find(b.name());
            if (e == env.end())
              c.fail("input '", k, "' names '", b.name(), "', not defined before");
            vs.push_back(&e->second);
          } else {
            immediates.push_back(decode_value(p, b.value(), get_type(b.value().type()),
                                              out + "." + k + " (immediate)"));
            vs.push_back(&immediates.back());
          }
        }
      }
      result = f->second(c);
    }
    result = conform(c, std::move(result), opts.check_types);
    RLX_CHECK(env.count(out) == 0, "mil interp: '", out, "' is defined twice");
    env[out] = std::move(result);
  }

  TensorMap outs;
  for (const auto& name : block.outputs()) {
    auto e = env.find(name);
    RLX_CHECK(e != env.end(), "mil interp: block output '", name, "' is never defined");
    outs[name] = to_tensor(e->second);
  }
  return outs;
}

}  // namespace rlx::coreml
