#include "frontends/onnx/context.h"

#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {

bool IntList::is_static() const {
  for (const auto& d : v)
    if (!d.is_static()) return false;
  return true;
}

Dims IntList::values() const {
  Dims r;
  for (const auto& d : v) {
    RLX_CHECK(d.is_static(), "needs a static value, got ",
              d.sym[0] == '%' ? "a dim computed at run time (" + d.sym + ": node:axis)"
                              : "the symbolic dim '" + d.sym + "'",
              " (rlx cannot compute shapes at run time; give the input static dims)");
    r.push_back(d.value);
  }
  return r;
}

Val tensor_val(Tensor t) {
  Val v;
  v.konst = std::move(t);
  return v;
}

Tensor to_tensor(const IntList& l) {
  const Dims vals = l.values();
  Tensor t = Tensor::from_vector<int64_t>(l.dims, vals, DType::I64);
  return l.dtype == DType::I64 ? t : t.to(l.dtype);
}

std::optional<IntList> to_int_list(const Tensor& t) {
  if (!(is_integer(t.dtype()) || t.dtype() == DType::Bool) || t.numel() > kMaxFoldElements)
    return std::nullopt;
  IntList l{t.dims(), t.dtype(), {}};
  const Tensor c = t.to(DType::I64).contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t k = 0; k < t.numel(); ++k) l.v.emplace_back(p[k]);
  return l;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> r;
  for (const auto& [k, v] : fns_) r.push_back(k);
  return r;
}

const Registry& registry() {
  static const Registry r = [] {
    Registry x;
    register_elementwise(x);
    register_shape(x);
    register_nn(x);
    register_reduce(x);
    register_indexing(x);
    register_math(x);
    register_resize(x);
    register_recurrent(x);
    register_control(x);
    register_einsum(x);
    register_composed(x);
    register_data_dependent(x);
    register_microsoft(x);
    register_training(x);
    return x;
  }();
  return r;
}

Val& Ctx::val(size_t i) {
  RLX_CHECK(has(i), "input ", i, " is required");
  Val* v = s_.find(node.inputs[i]);
  RLX_CHECK(v, "input ", i, " '", node.inputs[i],
            "' is not produced by any earlier node, initializer or graph input");
  return *v;
}

Val* ImportState::find(const std::string& name) {
  for (ImportState* s = this; s; s = s->parent) {
    if (auto it = s->env.find(name); it != s->env.end()) return &it->second;
    if (s->region) return capture(*s->region, *s, name);
  }
  return nullptr;
}

bool Ctx::has(size_t i) const { return i < node.inputs.size() && !node.inputs[i].empty(); }

NodeId Ctx::in(size_t i) {
  return node_of(val(i), "input " + std::to_string(i) + " '" + node.inputs[i] + "'");
}

NodeId Ctx::node_of(Val& v, const std::string& what) {
  if (v.id >= 0) return v.id;
  if (!v.param.empty()) {
    v.id = g().param(v.param, v.konst.shape());
    s_.weights[v.param] = v.konst;
  } else if (v.konst.defined()) {
    v.id = g().constant(v.konst);
  } else if (v.ints) {
    try {
      v.id = g().constant(to_tensor(*v.ints));
    } catch (const Error& e) {
      throw e.with_context(what);
    }
  } else {
    throw make_error(what, " has no value");
  }
  return v.id;
}

const Tensor* Ctx::known(size_t i) {
  if (!has(i)) return nullptr;
  Val& v = val(i);
  if (!v.konst.defined() && v.ints && v.ints->is_static()) v.konst = to_tensor(*v.ints);
  return v.konst.defined() ? &v.konst : nullptr;
}

std::optional<IntList> Ctx::ints(size_t i) {
  if (!has(i)) return std::nullopt;
  Val& v = val(i);
  if (v.ints) return v.ints;
  if (v.konst.defined()) return to_int_list(v.konst);
  return std::nullopt;
}

Dims Ctx::static_ints(size_t i, const char* what) {
  auto l = ints(i);
  RLX_CHECK(l, what, " (input ", i, " '", has(i) ? node.inputs[i] : "", "') must be a constant ",
            "integer tensor known at import (rlx cannot compute shapes at run time)");
  try {
    return l->values();
  } catch (const Error& e) {
    throw e.with_context(what);
  }
}

std::optional<double> Ctx::scalar(size_t i) {
  const Tensor* t = known(i);
  if (!t || t->numel() != 1) return std::nullopt;
  return t->item_as_double(0);
}

std::optional<int64_t> Ctx::scalar_int(size_t i, const char* what) {
  const std::optional<double> v = scalar(i);
  if (!v) return std::nullopt;
  RLX_CHECK(std::isfinite(*v) && std::abs(*v) < 0x1p62, what, " ", *v,
            " is not an integer in range");
  return int64_t(*v);
}

Shape Ctx::shape(size_t i) {
  Val& v = val(i);
  if (v.id >= 0) return shape_of(v.id);
  if (v.konst.defined()) return v.konst.shape();
  if (v.ints) return Shape(v.ints->dims, v.ints->dtype);
  throw make_error("input ", i, " has no shape");
}

namespace {
const Attribute& need(const Node& n, const char* name, Attribute::Kind kind) {
  const Attribute* a = n.attr(name);
  RLX_CHECK(a, "attribute '", name, "' is required");
  Attribute want;
  want.kind = kind;
  RLX_CHECK(a->kind == kind, "attribute '", name, "' is ", a->kind_name(), ", expected ",
            want.kind_name());
  return *a;
}
}  // namespace

int64_t Ctx::i(const char* name, int64_t def) const { return has_attr(name) ? i(name) : def; }
int64_t Ctx::i(const char* name) const { return need(node, name, Attribute::Int).i; }
double Ctx::f(const char* name, double def) const {
  const Attribute* a = node.attr(name);
  if (!a) return def;
  if (a->kind == Attribute::Int) return double(a->i);
  return need(node, name, Attribute::Float).f;
}
std::string Ctx::s(const char* name, const std::string& def) const {
  return has_attr(name) ? need(node, name, Attribute::String).s : def;
}
std::vector<int64_t> Ctx::ints_attr(const char* name, std::vector<int64_t> def) const {
  return has_attr(name) ? need(node, name, Attribute::Ints).ints : def;
}
std::vector<int64_t> Ctx::window_attr(const char* name, size_t count, int64_t fill,
                                      int64_t lo) const {
  std::vector<int64_t> v = ints_attr(name, std::vector<int64_t>(count, fill));
  constexpr int64_t hi = int64_t(1) << 31;
  bool ok = v.size() == count;
  for (int64_t e : v) ok = ok && e >= lo && e < hi;
  RLX_CHECK(ok, "attribute '", name, "' needs ", count, " values in [", lo, ", 2^31), got ",
            short_dims_str(v));
  return v;
}
std::vector<double> Ctx::floats_attr(const char* name) const {
  return need(node, name, Attribute::Floats).floats;
}
const Tensor& Ctx::tensor_attr(const char* name) const {
  return need(node, name, Attribute::TensorK).t;
}

void Ctx::unsupported(const std::string& what) const {
  throw make_error("unsupported: ", what, " (opset ", opset, ")");
}

NodeId Ctx::scalar_const(double v, DType t) {
  Tensor s({}, DType::F64);
  *s.data<double>() = v;
  return g().constant(s.to(t));
}

int64_t norm_axis(int64_t axis, int64_t rank, const char* what) {
  RLX_CHECK(axis >= -rank && axis < rank, what, ": axis ", axis, " out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

std::vector<Dim> broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<Dim> out(r);
  for (size_t k = 0; k < r; ++k) {
    const Dim x = k + a.size() >= r ? a[k + a.size() - r] : Dim(1);
    const Dim y = k + b.size() >= r ? b[k + b.size() - r] : Dim(1);
    if (x.is_static() && x.value == 1)
      out[k] = y;
    else if (y.is_static() && y.value == 1)
      out[k] = x;
    else {
      RLX_CHECK(!(x.is_static() && y.is_static()) || x.value == y.value, "cannot broadcast dim ",
                x.str(), " with ", y.str());
      out[k] = x.is_static() ? x : y;
    }
  }
  return out;
}

}  // namespace rlx::onnx
