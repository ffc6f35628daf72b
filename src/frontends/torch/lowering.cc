#include "frontends/torch/lowering.h"

#include <set>

#include "rlx/checked.h"
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

int64_t LowerCtx::static_dim(NodeId id, int axis) const {
  const Shape& s = shape(id);
  RLX_CHECK(axis >= 0 && axis < s.rank(), "dim ", axis, " of ", s.str(), " does not exist");
  const Dim& d = s.dims[size_t(axis)];
  RLX_CHECK(d.is_static(), "dim ", axis, " of ", s.str(), " must be static here, not '", d.sym,
            "'");
  return d.value;
}

// The recorded output shape `example` (as the export's example inputs gave
// it) as a reshape target for `in`, which has one symbolic dim: that dim's
// example size is what the static dims leave of the example's elements. The
// output dims its elements land in must start and end on its boundaries
// (static neighbours may merge into it: [batch, 512, 1, 1] -> [-1, 512]).
// One such dim becomes the target's -1. Several (a 3-d Linear's [b*t, 96]
// viewed back as [b, t, 96]) are resolved only in a model with one symbolic
// dim: the -1 goes to the one output dim that is a multiple of its example
// size, the others being static.
namespace {

Dims symbolic_target(const Shape& in, const Dims& example, const LowerCtx::Symbols& symbols) {
  int sym = -1, n_sym = 0;
  int64_t static_in = 1, before = 1;
  for (int k = 0; k < in.rank(); ++k) {
    const Dim& d = in.dims[size_t(k)];
    if (!d.is_static()) {
      sym = k, ++n_sym;
      continue;
    }
    static_in = checked_mul(static_in, d.value, "view");
    if (sym < 0) before = checked_mul(before, d.value, "view");
  }
  const std::string what = "a view of " + in.str() + " to " + dims_str(example);
  RLX_CHECK(n_sym == 1, what, ": rlx reshapes tensors with one symbolic dim, not ", n_sym);
  const int64_t total = checked_numel(example, "view");
  RLX_CHECK(static_in > 0 && total % static_in == 0, what,
            ": the static dims do not divide the recorded size");
  const int64_t e = total / static_in, span = checked_mul(before, e, "view");
  RLX_CHECK(e >= 2, what, ": export dynamic dims with an example size of 2 or more");
  // Output dims [j0, j1] cover the elements (before, span] of the product.
  std::vector<size_t> cover;
  int64_t prefix = 1, first = 1, last = 1;
  for (size_t j = 0; j < example.size() && prefix < span; ++j) {
    const int64_t next = checked_mul(prefix, example[j], "view");
    if (next > before) {
      if (cover.empty()) first = prefix;
      cover.push_back(j);
      last = next;
    }
    prefix = next;
  }
  RLX_CHECK(!cover.empty() && before % first == 0 && last % span == 0, what, ": the symbolic dim '",
            in.dims[size_t(sym)].sym, "' does not map onto whole output dims");
  size_t at = cover[0];
  if (cover.size() > 1) {
    RLX_CHECK(symbols.size() == 1, what, " splits the symbolic dim '", in.dims[size_t(sym)].sym,
              "' over several dims, which rlx resolves only in models with one dynamic dim");
    // The one dim that is a multiple of the symbol's example size; with
    // several, guessing could be silently wrong, so it is an error.
    const int64_t es = symbols.begin()->second.example;
    int found = 0;
    for (size_t j : cover)
      if (example[j] % es == 0) at = j, ++found;
    RLX_CHECK(found == 1, what, ": cannot tell which dim is '", symbols.begin()->first,
              "' (example size ", es,
              "); export with an example size no other dim is a multiple of");
  }
  Dims target = example;
  target[at] = -1;
  return target;
}

// A view of `in` with several symbolic dims (or a merge of them, "?") to the
// recorded `example` shape. Input and output dims are grouped where their
// example sizes' running products meet (a merge, a split or a dim kept). A
// group without symbols keeps its static sizes; a merge becomes the one -1; a
// split gives each output dim whose example size is that of exactly one of the
// group's symbols that symbol, read at run time from the graph input it comes
// from (reshape_like), and its other dims stay static. Anything ambiguous is
// an error, never a guess.
struct SymbolicView {
  Dims target;       // sizes, -1, and -2 - axis for a dim of `like`
  NodeId like = -1;  // the graph input the symbols are read from
};

SymbolicView multi_symbolic_target(const Shape& in, const Dims& example,
                                   const LowerCtx::Symbols& symbols) {
  const std::string what = "a view of " + in.str() + " to " + dims_str(example);
  const int64_t total = checked_numel(example, "view");
  Dims ex(size_t(in.rank()));
  int unknown = -1;
  int64_t known = 1;
  for (int k = 0; k < in.rank(); ++k) {
    const Dim& d = in.dims[size_t(k)];
    if (d.is_static()) {
      ex[size_t(k)] = d.value;
    } else if (auto it = symbols.find(d.sym); it != symbols.end()) {
      ex[size_t(k)] = it->second.example;
    } else {
      RLX_CHECK(unknown < 0, what, ": more than one dim of unknown size");
      unknown = k;
      continue;
    }
    known = checked_mul(known, ex[size_t(k)], "view");
  }
  RLX_CHECK(known > 0 && total % known == 0, what, ": the dims do not divide the recorded size");
  if (unknown >= 0) ex[size_t(unknown)] = total / known;
  RLX_CHECK(unknown >= 0 || known == total, what, ": the element counts differ");
  SymbolicView v;
  v.target = example;
  int merges = 0;
  auto refer = [&](const std::string& sym) {
    const LowerCtx::Symbol& s = symbols.at(sym);
    RLX_CHECK(v.like < 0 || v.like == s.input, what,
              ": its symbolic dims come from different inputs, which rlx cannot combine");
    v.like = s.input;
    return int64_t(-2 - s.axis);
  };
  size_t i = 0, j = 0;
  const size_t nin = ex.size(), nout = example.size();
  while (i < nin || j < nout) {
    const size_t i0 = i, j0 = j;
    int64_t pi = 1, pj = 1;
    do {
      if (j >= nout || (i < nin && pi <= pj))
        pi = checked_mul(pi, ex[i++], "view");
      else
        pj = checked_mul(pj, example[j++], "view");
    } while ((pi != pj || i == i0 || j == j0) && (i < nin || j < nout));
    RLX_CHECK(pi == pj, what, ": the dims do not line up");
    // The group's symbols (a "?" dim stands for any of the model's).
    std::vector<std::string> syms;
    bool any = false;
    for (size_t k = i0; k < i; ++k) {
      const Dim& d = in.dims[k];
      if (d.is_static()) continue;
      if (int(k) == unknown)
        any = true;
      else
        syms.push_back(d.sym);
    }
    if (any)
      for (const auto& [name, s] : symbols) syms.push_back(name);
    if (syms.empty()) continue;  // static: the recorded sizes
    if (j - j0 == 1) {
      if (i - i0 == 1 && !any) {
        v.target[j0] = refer(syms[0]);  // a symbolic dim kept as it is
      } else {
        RLX_CHECK(++merges == 1, what, ": more than one output dim merges symbolic dims");
        v.target[j0] = -1;
      }
      continue;
    }
    // Several output dims: each symbol lands in the one dim its example size
    // divides (none of the others may: that is ambiguous); a dim that is one
    // symbol's size is that symbol, a dim holding more (batch * heads) is the
    // -1, and a dim holding none is static.
    std::vector<std::vector<std::string>> held(j - j0);
    for (const std::string& sym : std::set<std::string>(syms.begin(), syms.end())) {
      const int64_t es = symbols.at(sym).example;
      std::vector<size_t> cands;
      for (size_t k = j0; k < j; ++k)
        if (example[k] % es == 0) cands.push_back(k);
      RLX_CHECK(cands.size() == 1 || (any && cands.empty()), what, ": cannot tell which dim is '",
                sym, "' (example size ", es,
                "); export with example sizes that divide no other dim of the view");
      if (!cands.empty()) held[cands[0] - j0].push_back(sym);
    }
    for (size_t k = j0; k < j; ++k) {
      const auto& h = held[k - j0];
      if (h.empty()) continue;
      if (h.size() == 1 && symbols.at(h[0]).example == example[k]) {
        v.target[k] = refer(h[0]);
      } else {
        RLX_CHECK(++merges == 1, what, ": more than one output dim merges symbolic dims");
        v.target[k] = -1;
      }
    }
  }
  return v;
}

}  // namespace

NodeId LowerCtx::reshape_to_out(NodeId x) {
  const Dims& target = out().shape;
  const Shape& s = shape(x);
  if (s.is_static()) return s.concrete() == target ? x : b.reshape(x, target);
  int n_sym = 0;
  for (const Dim& d : s.dims) n_sym += !d.is_static();
  if (n_sym == 1 && symbols.size() == 1) return b.reshape(x, symbolic_target(s, target, symbols));
  const SymbolicView v = multi_symbolic_target(s, target, symbols);
  if (v.like < 0) return b.reshape(x, v.target);
  return b.op(Op::ReshapeLike, {x, v.like}, {{"shape", v.target}});
}

Dims LowerCtx::reshape_dims(NodeId id) const {
  const Shape& s = shape(id);
  Dims d;
  int n_sym = 0;
  for (const Dim& k : s.dims) {
    n_sym += !k.is_static();
    d.push_back(k.is_static() ? k.value : -1);
  }
  RLX_CHECK(n_sym <= 1, "a reshape of ", s.str(), ": rlx reshapes tensors with one symbolic dim");
  return d;
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
    register_math(r);
    register_special(r);
    register_data_dependent(r);
    register_linalg(r);
    register_linalg_decompositions(r);
    register_segment(r);
    register_histogram(r);
    register_nn_pointwise(r);
    register_order(r);
    register_pool(r);
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
