// Algebraic simplification: identities that drop a node or merge a few. One
// linear walk in topological order over the rewritten graph, so chains
// (transpose of transpose of transpose) collapse completely.
#include <climits>
#include <optional>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {

// Equal shapes where every dim is known to be equal: static, or the same
// named symbol (bound once per run). "?" dims prove nothing.
bool same_shape(const Shape& a, const Shape& b) {
  if (!(a == b)) return false;
  for (const Dim& d : a.dims)
    if (d.sym == "?") return false;
  return true;
}

// Whether every element of a constant-like node equals `v`.
bool is_splat(const Node& n, double v) {
  if (n.op == Op::Full) return n.attrs_as<FullAttrs>().value == v;
  if (n.op != Op::Constant || !n.value.defined()) return false;
  for (int64_t i = 0, e = n.value.numel(); i < e; ++i)
    if (n.value.item_as_double(i) != v) return false;
  return true;
}

// Every value of `from` is exactly representable in `to`.
bool lossless_cast(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  switch (from) {
    case DType::U8:
    case DType::I8:
      return to == DType::I16 || to == DType::I32 || to == DType::I64 || is_float(to);
    case DType::I16:
      return to == DType::I32 || to == DType::I64 || to == DType::F32 || to == DType::F64;
    case DType::I32:
      return to == DType::I64 || to == DType::F64;
    case DType::F16:
    case DType::BF16:
      return to == DType::F32 || to == DType::F64;
    case DType::F32:
      return to == DType::F64;
    default:
      return false;
  }
}

class Simplifier {
 public:
  explicit Simplifier(const Graph& g) : g_(g), rw_(g), is_output_(g.size(), false) {
    for (const auto& o : g.outputs()) is_output_[size_t(o.node)] = true;
  }

  Graph run() {
    for (const Node& n : g_.nodes()) {
      if (is_leaf(n.op) || !simplify(n)) rw_.copy(n.id);
    }
    return rw_.finish();
  }

 private:
  // Input k of a source node, in the new graph.
  const Node& in(const Node& n, size_t k) { return rw_.out().node(rw_.mapped(n.inputs[k])); }
  // Input k of a node already in the new graph (its inputs are new ids).
  const Node& arg(const Node& x, size_t k) { return rw_.out().node(x.inputs[k]); }

  // `n` becomes `x` (already in the new graph). Graph outputs are never
  // forwarded: they keep their own node, name and origin.
  bool forward(const Node& n, const Node& x) {
    if (is_output_[size_t(n.id)] || !same_shape(n.shape, x.shape)) return false;
    rw_.map(n.id, x.id);
    return true;
  }
  // A node `op(xs..., attrs)` (xs in the new graph) with n's origin, its shape
  // inferred; nullopt when inference refuses it.
  std::optional<Node> build(const Node& n, Op op, std::vector<const Node*> xs, OpAttrs attrs) {
    Node m;
    m.op = op;
    std::vector<const Shape*> shapes;
    for (const Node* x : xs) {
      m.inputs.push_back(x->id);
      shapes.push_back(&x->shape);
    }
    m.attrs = std::move(attrs);
    m.origin = n.origin;
    try {
      m.shape = infer_shape(m, shapes);
    } catch (const Error&) {
      return std::nullopt;
    }
    return m;
  }
  // `n` becomes a new node `op(xs..., attrs)` with n's name and origin, if it
  // infers to exactly n's shape.
  bool replace(const Node& n, Op op, std::vector<const Node*> xs, OpAttrs attrs) {
    std::optional<Node> m = build(n, op, std::move(xs), std::move(attrs));
    if (!m || !(m->shape == n.shape)) return false;
    m->name = n.name;
    rw_.map(n.id, rw_.out().append_raw(std::move(*m)));
    return true;
  }
  bool replace(const Node& n, Op op, const Node& x, OpAttrs attrs) {
    return replace(n, op, std::vector<const Node*>{&x}, std::move(attrs));
  }

  bool simplify(const Node& n) {
    switch (n.op) {
      case Op::Add:
        return (is_splat(in(n, 1), 0) && forward(n, in(n, 0))) ||
               (is_splat(in(n, 0), 0) && forward(n, in(n, 1)));
      case Op::Mul:
        return (is_splat(in(n, 1), 1) && forward(n, in(n, 0))) ||
               (is_splat(in(n, 0), 1) && forward(n, in(n, 1)));
      case Op::Sub:
        return is_splat(in(n, 1), 0) && forward(n, in(n, 0));
      case Op::Div:  // x / 1 is x unless it also rounds a float (floor(x / 1) != x)
        return ((n.attrs_as<DivAttrs>().rounding == DivRounding::none ||
                 is_integer(n.shape.dtype)) &&
                is_splat(in(n, 1), 1) && forward(n, in(n, 0))) ||
               simplify_hard_swish(n);
      case Op::Pow:
        return simplify_pow(n);
      case Op::Transpose:
        return simplify_transpose(n);
      case Op::MatMul:
        return simplify_matmul(n);
      case Op::Attention:
        return simplify_attention(n);
      case Op::Reshape: {
        const Node& x = in(n, 0);
        if (forward(n, x)) return true;  // to its own shape
        if (x.op != Op::Reshape) return false;
        const Node& y = arg(x, 0);  // a chain: back to y's own shape, or one reshape of y
        return forward(n, y) ||
               replace(n, Op::Reshape, y, ReshapeAttrs{n.attrs_as<ReshapeAttrs>()});
      }
      case Op::Cast:
        return simplify_cast(n);
      case Op::Expand:
        return forward(n, in(n, 0));  // same shape: nothing broadcast
      case Op::Slice:
        return simplify_slice(n);
      default:
        return false;
    }
  }

  // pow(x, c) for the constant exponents PyTorch's CPU kernel computes
  // without pow (pow_tensor_scalar_optimized_kernel), in its order: x * x,
  // (x * x) * x, sqrt, rsqrt, reciprocal. GPT-2's gelu_new cubes this way.
  bool simplify_pow(const Node& n) {
    const Node& x = in(n, 0);
    const Node& e = in(n, 1);
    if (!is_float(n.shape.dtype) || !same_shape(x.shape, n.shape)) return false;
    if (is_splat(e, 2)) return replace(n, Op::Mul, {&x, &x}, OpAttrs{});
    if (is_splat(e, 0.5)) return replace(n, Op::Sqrt, x, OpAttrs{});
    if (is_splat(e, -0.5)) return replace(n, Op::Rsqrt, x, OpAttrs{});
    if (is_splat(e, -1)) return replace(n, Op::Reciprocal, x, OpAttrs{});
    if (!is_splat(e, 3)) return false;
    std::optional<Node> square = build(n, Op::Mul, {&x, &x}, OpAttrs{});
    if (!square) return false;
    const NodeId xid = x.id;  // taken first: appending may move the new graph's nodes
    const NodeId sq = rw_.out().append_raw(std::move(*square));
    return replace(n, Op::Mul, {&rw_.out().node(sq), &rw_.out().node(xid)}, OpAttrs{});
  }

  // x * clamp(x + 3, 0, 6) / 6, how Paddle and older torch.onnx exports
  // write hardswish, is one hard_swish node, which computes it in this order.
  bool simplify_hard_swish(const Node& div) {
    if (!is_float(div.shape.dtype) || div.attrs_as<DivAttrs>().rounding != DivRounding::none ||
        !is_splat(in(div, 1), 6))
      return false;
    const Node& mul = in(div, 0);
    if (mul.op != Op::Mul) return false;
    for (size_t k = 0; k < 2; ++k) {
      const Node& x = arg(mul, k);
      const Node& clamp = arg(mul, 1 - k);
      if (clamp.op != Op::Clamp || clamp.attrs_as<ClampAttrs>().min != 0 ||
          clamp.attrs_as<ClampAttrs>().max != 6)
        continue;
      const Node& add = arg(clamp, 0);
      if (add.op != Op::Add) continue;
      const bool plus3 = (arg(add, 0).id == x.id && is_splat(arg(add, 1), 3)) ||
                         (arg(add, 1).id == x.id && is_splat(arg(add, 0), 3));
      if (plus3 && replace(div, Op::HardSwish, x, OpAttrs{})) return true;
    }
    return false;
  }

  bool simplify_transpose(const Node& n) {
    const Node& x = in(n, 0);
    const int r = x.shape.rank();
    std::vector<int64_t> perm;
    for (int64_t p : n.attrs_as<TransposeAttrs>().perm) perm.push_back(normalize_axis(p, r));
    const Node* src = &x;
    if (x.op == Op::Transpose) {  // t2(t1(y))[i] = y[p1[p2[i]]]
      const auto& inner = x.attrs_as<TransposeAttrs>().perm;
      for (int64_t& p : perm) p = normalize_axis(inner[size_t(p)], r);
      src = &arg(x, 0);
    }
    bool identity = true;
    for (int i = 0; i < r; ++i) identity = identity && perm[size_t(i)] == i;
    // An identity: forwarded, or for a graph output (kept as a node) a copy of y.
    if (identity)
      return forward(n, *src) || (src != &x && n.shape.is_static() &&
                                  replace(n, Op::Reshape, *src, ReshapeAttrs{n.shape.concrete()}));
    return src != &x && replace(n, Op::Transpose, *src, TransposeAttrs{std::move(perm)});
  }

  // A transpose of exactly the permutation `want` (its rank's).
  static bool transposes_as(const Node& t, const std::vector<int64_t>& want) {
    if (t.op != Op::Transpose || t.shape.rank() != int(want.size())) return false;
    const auto& perm = t.attrs_as<TransposeAttrs>().perm;
    for (size_t i = 0; i < want.size(); ++i)
      if (normalize_axis(perm[i], t.shape.rank()) != want[i]) return false;
    return true;
  }

  // A transpose that swaps only the last two dims.
  static bool swaps_last_two(const Node& t) {
    const int r = t.shape.rank();
    if (r < 2) return false;
    std::vector<int64_t> want(static_cast<size_t>(r));
    for (int i = 0; i < r; ++i) want[size_t(i)] = i;
    std::swap(want[size_t(r - 2)], want[size_t(r - 1)]);
    return transposes_as(t, want);
  }

  // matmul(transpose(y), ...) with a last-two-dims transpose reads y in place
  // (transpose_a/b), so x @ w^T never copies w: not at run time, and not at
  // load time either, since this runs before fold. The transpose stays for
  // its other users; dce drops it when there are none.
  bool simplify_matmul(const Node& n) {
    MatMulAttrs a = n.attrs_as<MatMulAttrs>();
    std::vector<const Node*> xs = {&in(n, 0), &in(n, 1)};
    bool changed = false;
    for (size_t k = 0; k < 2; ++k) {
      if (!swaps_last_two(*xs[k])) continue;
      bool& flag = k == 0 ? a.transpose_a : a.transpose_b;
      flag = !flag;
      xs[k] = &arg(*xs[k], 0);
      changed = true;
    }
    for (size_t k = 2; k < n.inputs.size(); ++k) xs.push_back(&in(n, k));  // bias, residual stay
    return changed && replace(n, Op::MatMul, xs, a);
  }

  // attention(transpose(q), transpose(k), transpose(v)) of [B, S, H, D]
  // projections reads them in place (layout bshd); its [B, S, H, D] output
  // goes through one transpose back, which the usual transpose after
  // attention cancels. BERT's 48 transposes were 2% of its time.
  bool simplify_attention(const Node& n) {
    AttentionAttrs a = n.attrs_as<AttentionAttrs>();
    if (a.layout != AttentionLayout::bhsd) return false;
    const std::vector<int64_t> heads{0, 2, 1, 3};  // [B, S, H, D] <-> [B, H, S, D]
    std::vector<const Node*> xs;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Node& x = in(n, k);
      if (k < 3 && !transposes_as(x, heads)) return false;
      xs.push_back(k < 3 ? &arg(x, 0) : &x);  // the bias stays
    }
    a.layout = AttentionLayout::bshd;
    std::optional<Node> m = build(n, Op::Attention, std::move(xs), a);
    if (!m) return false;
    const NodeId att = rw_.out().append_raw(std::move(*m));
    return replace(n, Op::Transpose, rw_.out().node(att), TransposeAttrs{heads});
  }

  bool simplify_cast(const Node& n) {
    const Node& x = in(n, 0);
    const DType to = n.attrs_as<CastAttrs>().dtype;
    if (x.shape.dtype == to) return forward(n, x);
    // cast(cast(y, mid), to) == cast(y, to) when y -> mid loses nothing.
    if (x.op != Op::Cast) return false;
    const Node& y = arg(x, 0);
    if (!lossless_cast(y.shape.dtype, x.shape.dtype)) return false;
    if (y.shape.dtype == to) return forward(n, y);
    return replace(n, Op::Cast, y, CastAttrs{to});
  }

  bool simplify_slice(const Node& n) {
    const Node& x = in(n, 0);
    const auto& a = n.attrs_as<SliceAttrs>();
    if (a.step != 1 || x.shape.rank() == 0) return false;
    const Dim& len = x.shape.dims[size_t(normalize_axis(a.axis, x.shape.rank()))];
    const int64_t start = slice_start(a), end = slice_end(a);
    // Python slicing clamps: a start at or before -len is 0, an end past len is len.
    const bool whole = len.is_static() ? (start == 0 || start <= -len.value) && end >= len.value
                                       : start == 0 && end == INT64_MAX;
    return whole && forward(n, x);
  }

  const Graph& g_;
  Rewriter rw_;
  std::vector<bool> is_output_;
};

class SimplifyPass final : public Pass {
 public:
  std::string_view name() const override { return "simplify"; }
  std::string_view description() const override {
    return "algebraic identities: x*1, x+0, x-0, x/1, pow by 2, 3, 0.5, -0.5, -1 as PyTorch "
           "computes them, transpose/reshape/cast chains, "
           "transposes folded into matmul and attention, no-op reshape/cast/expand/slice";
  }
  Graph run(const Graph& g, const PassContext&) const override { return simplify_algebra(g); }
};

}  // namespace

Graph simplify_algebra(const Graph& g) { return Simplifier(g).run(); }

std::unique_ptr<Pass> make_simplify_pass() { return std::make_unique<SimplifyPass>(); }

}  // namespace rlx::opt
