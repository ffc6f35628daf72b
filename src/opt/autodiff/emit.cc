#include "opt/autodiff/emit.h"

#include "rlx/error.h"

namespace rlx::opt::ad {

std::vector<int64_t> reshape_target(const std::vector<Dim>& dims) {
  std::vector<int64_t> t;
  bool inferred = false;
  for (const Dim& d : dims) {
    if (d.is_static()) {
      t.push_back(d.value);
      continue;
    }
    RLX_CHECK(!inferred, "cannot reshape to ", Shape(dims, DType::F32).str(),
              ": more than one symbolic dim (specialize the graph to input dims first)");
    inferred = true;
    t.push_back(-1);
  }
  return t;
}

Dims Emit::dims(NodeId id, const char* what) const {
  const Node& n = g_.node(id);
  RLX_CHECK(n.shape.is_static(), what, " needs static dims, ", n.label(), " has ", n.shape.str(),
            " (specialize the graph to input dims first)");
  return n.shape.concrete();
}

NodeId Emit::op(Op op, std::vector<NodeId> in, const Attrs& attrs) {
  return g_.add(op, std::move(in), attrs, {}, origin_);
}

NodeId Emit::scalar(double v, DType t) { return full(Shape(Dims{}, t), v); }

NodeId Emit::full(const Shape& s, double v) {
  RLX_CHECK(s.is_static(), "a constant of ", s.str(),
            " needs static dims (specialize the graph to input dims first)");
  return op(Op::Full, {}, FullAttrs{.shape = s.concrete(), .value = v, .dtype = s.dtype});
}

NodeId Emit::cast(NodeId x, DType t) {
  return dtype(x) == t ? x : op(Op::Cast, {x}, CastAttrs{.dtype = t});
}

NodeId Emit::sum(NodeId x, std::vector<int64_t> axes, bool keepdims) {
  if (axes.empty()) return x;  // an empty list would mean every axis
  return op(Op::ReduceSum, {x}, ReduceAttrs{.axes = std::move(axes), .keepdims = keepdims});
}

NodeId Emit::reshape(NodeId x, const std::vector<Dim>& dims) {
  if (shape(x).dims == dims) return x;
  return op(Op::Reshape, {x}, ReshapeAttrs{.shape = reshape_target(dims)});
}

NodeId Emit::expand(NodeId x, const std::vector<Dim>& dims) {
  const Shape s = shape(x);
  if (s.dims == dims) return x;
  std::vector<int64_t> t;
  const size_t lead = dims.size() - std::min(dims.size(), s.dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i].is_static()) {
      t.push_back(dims[i].value);
      continue;
    }
    // expand's -1 keeps the input's dim: right when the input already has it.
    RLX_CHECK(i >= lead && s.dims[i - lead] == dims[i], "cannot expand ", s.str(), " to ",
              Shape(dims, s.dtype).str(), " (specialize the graph to input dims first)");
    t.push_back(-1);
  }
  return op(Op::Expand, {x}, ExpandAttrs{.shape = std::move(t)});
}

NodeId Emit::transpose(NodeId x, std::vector<int64_t> perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == int64_t(i);
  if (identity) return x;
  return op(Op::Transpose, {x}, TransposeAttrs{.perm = std::move(perm)});
}

NodeId Emit::matmul(NodeId a, NodeId b, bool ta, bool tb) {
  return op(Op::MatMul, {a, b}, MatMulAttrs{.transpose_a = ta, .transpose_b = tb});
}

NodeId Emit::slice(NodeId x, int64_t axis, int64_t start, int64_t end, int64_t step) {
  const Shape s = shape(x);
  const int ax = normalize_axis(axis, s.rank());
  const Dim& len = s.dims[size_t(ax)];
  if (step == 1 && start == 0 && len.is_static() && end == len.value) return x;
  return op(Op::Slice, {x}, SliceAttrs{.axis = ax, .start = start, .end = end, .step = step});
}

NodeId Emit::pad(NodeId x, std::vector<int64_t> pads) {
  bool none = true;
  for (int64_t p : pads) none = none && p == 0;
  if (none) return x;
  return op(Op::Pad, {x}, PadAttrs{.pads = std::move(pads)});
}

NodeId Emit::concat(std::vector<NodeId> xs, int64_t axis) {
  if (xs.size() == 1) return xs[0];
  return op(Op::Concat, std::move(xs), AxisAttrs{.axis = axis});
}

NodeId Emit::flip(NodeId x, std::vector<int64_t> axes) {
  return op(Op::Flip, {x}, FlipAttrs{.axes = std::move(axes)});
}

NodeId Emit::sum_to(NodeId x, const Shape& target) {
  const Shape s = shape(x);
  if (s.dims == target.dims) return x;
  const int R = s.rank(), r = target.rank();
  RLX_CHECK(r <= R, "cannot sum a gradient of ", s.str(), " to ", target.str());
  std::vector<int64_t> axes;
  for (int i = 0; i < R; ++i) {
    if (i < R - r) {
      axes.push_back(i);
      continue;
    }
    const Dim &t = target.dims[size_t(i - (R - r))], &d = s.dims[size_t(i)];
    if (t == d) continue;
    RLX_CHECK(t.is_static() && t.value == 1, "cannot tell how ", target.str(), " was broadcast to ",
              s.str(), " (dim ", i, "); specialize the graph to input dims first");
    axes.push_back(i);
  }
  return reshape(sum(x, std::move(axes), true), target.dims);
}

}  // namespace rlx::opt::ad
