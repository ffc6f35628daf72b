// Building blocks of the vjp rules: typed helpers that append backward nodes
// to the graph being differentiated, each tagged with the forward node it
// comes from. Shapes are returned by value: every helper appends to the
// graph, which may move its nodes.
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::opt::ad {

class Emit {
 public:
  explicit Emit(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }
  void set_origin(std::string origin) { origin_ = std::move(origin); }

  Shape shape(NodeId id) const { return g_.node(id).shape; }
  DType dtype(NodeId id) const { return g_.node(id).shape.dtype; }
  int rank(NodeId id) const { return g_.node(id).shape.rank(); }
  // Static dims of `id`; throws naming the node when one is symbolic (`what`
  // says which rule needs them).
  Dims dims(NodeId id, const char* what) const;

  NodeId op(Op op, std::vector<NodeId> in, const Attrs& attrs = {});
  template <AttrStruct A>
  NodeId op(Op op, std::vector<NodeId> in, A attrs) {
    return g_.add(op, std::move(in), std::move(attrs), {}, origin_);
  }
  // A multi-output op's result nodes.
  template <AttrStruct A>
  std::vector<NodeId> results(Op op, std::vector<NodeId> in, A attrs) {
    const NodeId id = this->op(op, std::move(in), std::move(attrs));
    std::vector<NodeId> r;
    for (size_t i = 0; i < g_.node(id).results.size(); ++i) r.push_back(g_.result(id, int(i)));
    return r;
  }

  NodeId scalar(double v, DType t);  // a rank-0 full
  NodeId full(const Shape& s, double v);
  NodeId zeros(const Shape& s) { return full(s, 0); }
  NodeId constant(Tensor t) { return g_.constant(std::move(t)); }

  NodeId add(NodeId a, NodeId b) { return op(Op::Add, {a, b}); }
  NodeId sub(NodeId a, NodeId b) { return op(Op::Sub, {a, b}); }
  NodeId mul(NodeId a, NodeId b) { return op(Op::Mul, {a, b}); }
  NodeId div(NodeId a, NodeId b) { return op(Op::Div, {a, b}); }
  NodeId neg(NodeId a) { return op(Op::Neg, {a}); }
  NodeId mul(NodeId a, double s) { return s == 1 ? a : mul(a, scalar(s, dtype(a))); }
  NodeId cast(NodeId x, DType t);
  NodeId where(NodeId c, NodeId a, NodeId b) { return op(Op::Where, {c, a, b}); }
  // dy where `c`, zero elsewhere.
  NodeId mask(NodeId c, NodeId dy) { return where(c, dy, scalar(0, dtype(dy))); }
  NodeId compare(Op cmp, NodeId a, NodeId b) { return op(cmp, {a, b}); }

  NodeId sum(NodeId x, std::vector<int64_t> axes, bool keepdims);
  NodeId reshape(NodeId x, const std::vector<Dim>& dims);  // no node when already so
  NodeId expand(NodeId x, const std::vector<Dim>& dims);   // no node when already so
  NodeId transpose(NodeId x, std::vector<int64_t> perm);   // no node for the identity
  NodeId matmul(NodeId a, NodeId b, bool ta = false, bool tb = false);
  NodeId slice(NodeId x, int64_t axis, int64_t start, int64_t end, int64_t step = 1);
  NodeId pad(NodeId x, std::vector<int64_t> pads);  // constant zeros; negative pads crop
  NodeId concat(std::vector<NodeId> xs, int64_t axis);
  NodeId flip(NodeId x, std::vector<int64_t> axes);

  // Undoes NumPy broadcasting: sums `x` over the axes `target` was broadcast
  // along and reshapes to target's dims.
  NodeId sum_to(NodeId x, const Shape& target);
  // `x` (dims that broadcast to `target`'s) expanded to `target`.
  NodeId broadcast_to(NodeId x, const Shape& target) { return expand(x, target.dims); }

 private:
  Graph& g_;
  std::string origin_;
};

// Target of a reshape node for `dims`: static extents, one symbolic dim as -1;
// throws when several dims are symbolic.
std::vector<int64_t> reshape_target(const std::vector<Dim>& dims);

}  // namespace rlx::opt::ad
