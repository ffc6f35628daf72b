#include "frontends/torch/lowering.h"

#include "rlx/error.h"

namespace rlx::torch_ir {

const Value* LowerCtx::arg(size_t pos, const char* name) const {
  const Value* v = nullptr;
  if (pos < args_.size()) {
    v = &args_[pos];
  } else if (name) {
    auto it = kwargs_.find(name);
    if (it != kwargs_.end()) v = &it->second;
  }
  return v && v->kind != Value::None ? v : nullptr;
}

namespace {
std::string arg_label(size_t pos, const char* name) {
  return name ? std::string("argument '") + name + "'" : "argument " + std::to_string(pos);
}
}  // namespace

NodeId LowerCtx::tensor(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  RLX_CHECK(v && v->kind == Value::Tensor, arg_label(pos, name), " must be a tensor");
  return v->id;
}

std::vector<NodeId> LowerCtx::tensors(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  RLX_CHECK(v && (v->kind == Value::List || v->kind == Value::Tuple), arg_label(pos, name),
            " must be a list of tensors");
  std::vector<NodeId> out;
  for (const Value& e : v->items) {
    RLX_CHECK(e.kind == Value::Tensor, arg_label(pos, name), " must hold only tensors");
    out.push_back(e.id);
  }
  return out;
}

int64_t LowerCtx::i(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  RLX_CHECK(v && (v->kind == Value::Int || v->kind == Value::Bool), arg_label(pos, name),
            " must be an int");
  return v->i;
}
int64_t LowerCtx::i(size_t pos, const char* name, int64_t def) const {
  return has(pos, name) ? i(pos, name) : def;
}

double LowerCtx::f(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  RLX_CHECK(v && v->is_number(), arg_label(pos, name), " must be a number");
  return v->number();
}
double LowerCtx::f(size_t pos, const char* name, double def) const {
  return has(pos, name) ? f(pos, name) : def;
}

bool LowerCtx::flag(size_t pos, const char* name, bool def) const {
  return has(pos, name) ? i(pos, name) != 0 : def;
}

std::string LowerCtx::str(size_t pos, const char* name, const std::string& def) const {
  const Value* v = arg(pos, name);
  if (!v) return def;
  RLX_CHECK(v->kind == Value::Str, arg_label(pos, name), " must be a string");
  return v->s;
}

std::vector<int64_t> LowerCtx::ints(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  RLX_CHECK(v, arg_label(pos, name), " is missing");
  if (v->kind == Value::Int) return {v->i};
  RLX_CHECK(v->kind == Value::List || v->kind == Value::Tuple, arg_label(pos, name),
            " must be a list of ints");
  std::vector<int64_t> out;
  for (const Value& e : v->items) {
    RLX_CHECK(e.kind == Value::Int, arg_label(pos, name),
              " must hold only concrete ints (symbolic sizes are not supported here)");
    out.push_back(e.i);
  }
  return out;
}
std::vector<int64_t> LowerCtx::ints(size_t pos, const char* name, std::vector<int64_t> def) const {
  return has(pos, name) ? ints(pos, name) : def;
}

std::optional<DType> LowerCtx::dtype(size_t pos, const char* name) const {
  const Value* v = arg(pos, name);
  if (!v) return std::nullopt;
  RLX_CHECK(v->kind == Value::DTypeV, arg_label(pos, name), " must be a dtype");
  RLX_CHECK(v->s != "c64", "complex dtypes are not supported");
  return parse_dtype(v->s);
}

const TensorMeta& LowerCtx::out() const {
  RLX_CHECK(node.out.kind == Out::Tensor, "expected a single tensor output");
  RLX_CHECK(!node.out.tensor.complex, "complex outputs are not supported");
  return node.out.tensor;
}

NodeId LowerCtx::cast(NodeId x, DType t) const { return shape(x).dtype == t ? x : b.cast(x, t); }

NodeId LowerCtx::scalar(double v, DType t) const {
  Tensor s({}, DType::F64);
  *s.data<double>() = v;
  return b.constant(s.to(t));
}

NodeId LowerCtx::as_tensor(const Value& v, DType t) const {
  if (v.kind == Value::Tensor) return cast(v.id, t);
  RLX_CHECK(v.is_number(), "expected a tensor or a number");
  return scalar(v.number(), t);
}

void Registry::add(const std::string& name, LowerFn fn) { fns_[name] = std::move(fn); }
void Registry::alias(const std::string& name, const std::string& existing) {
  fns_[name] = fns_.at(existing);
}

const LowerFn* Registry::find(const std::string& op) const {
  auto it = fns_.find(op);
  if (it != fns_.end()) return &it->second;
  // "aten.add.Tensor" -> "aten.add"
  auto dot = op.rfind('.');
  if (dot != std::string::npos && dot > op.find('.')) {
    it = fns_.find(op.substr(0, dot));
    if (it != fns_.end()) return &it->second;
  }
  return nullptr;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, v] : fns_) out.push_back(k);
  return out;
}

const Registry& registry() {
  static const Registry r = [] {
    Registry r;
    register_creation(r);
    register_elementwise(r);
    register_shape_ops(r);
    register_reductions(r);
    register_indexing(r);
    register_nn(r);
    register_quant(r);
    register_recurrent(r);
    return r;
  }();
  return r;
}

namespace {
// 0: bool, 1: integer, 2: float
int category(DType t) { return t == DType::Bool ? 0 : is_float(t) ? 2 : 1; }
int rank_of(const LowerCtx& c, const Value& v) {
  return v.kind == Value::Tensor ? (c.rank(v.id) > 0 ? 2 : 1) : 0;
}
DType dtype_of(const LowerCtx& c, const Value& v) {
  if (v.kind == Value::Tensor) return c.shape(v.id).dtype;
  if (v.kind == Value::Float) return DType::F32;  // torch's default float
  if (v.kind == Value::Bool) return DType::Bool;
  return DType::I64;
}
DType wider(DType a, DType b) {
  if (a == b) return a;
  if (category(a) != category(b)) return category(a) > category(b) ? a : b;
  if (is_float(a)) {
    if (a == DType::F64 || b == DType::F64) return DType::F64;
    if (a == DType::F32 || b == DType::F32) return DType::F32;
    return DType::F32;  // f16 with bf16 -> f32, as in PyTorch
  }
  if (a == DType::U8 || b == DType::U8) {
    DType o = a == DType::U8 ? b : a;
    return o == DType::I8 ? DType::I16 : o;
  }
  return dtype_size(a) >= dtype_size(b) ? a : b;
}
}  // namespace

DType promote(const LowerCtx& c, const Value& a, const Value& b) {
  DType ta = dtype_of(c, a), tb = dtype_of(c, b);
  int ra = rank_of(c, a), rb = rank_of(c, b);
  if (ra == rb) return wider(ta, tb);
  bool a_high = ra > rb;
  DType th = a_high ? ta : tb, tl = a_high ? tb : ta;
  int rl = a_high ? rb : ra;
  if (category(tl) <= category(th)) return th;
  // A lower-priority operand of a higher category decides the category: a
  // Python number brings its category's default dtype, a 0-d tensor its own.
  if (rl == 0) return category(tl) == 2 ? DType::F32 : DType::I64;
  return tl;
}

}  // namespace rlx::torch_ir
