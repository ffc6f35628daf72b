// vjp rules of the indexing ops: a gather's adjoint is a scatter-add of the
// gradient into zeros, a scatter's is a gather. Index inputs carry none.
#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {
namespace {

NodeId index_i64(Emit& e, NodeId idx) { return e.cast(idx, DType::I64); }

// An i64 arange of `count` reshaped to `dims` (one id per element).
NodeId ids(Emit& e, int64_t count, const std::vector<Dim>& dims) {
  const NodeId a = e.op(Op::Arange, {}, ArangeAttrs{.count = count});
  return e.reshape(a, dims);
}

// Scatter and its adjoint gather over the same indices: scatter_elements /
// gather_elements along an axis, or scatter_nd / gather_nd.
struct Scatter {
  Emit& e;
  Op op;
  NodeId idx;
  int64_t axis;  // scatter_elements only

  NodeId scatter(NodeId data, NodeId upd, ScatterReduction r) const {
    if (op == Op::ScatterElements)
      return e.op(op, {data, idx, upd}, ScatterElementsAttrs{.axis = axis, .reduction = r});
    return e.op(op, {data, idx, upd}, ScatterNDAttrs{.reduction = r});
  }
  NodeId gather(NodeId src) const {
    if (op == Op::ScatterElements)
      return e.op(Op::GatherElements, {src, idx}, AxisAttrs{.axis = axis});
    return e.op(Op::GatherND, {src, idx}, GatherNDAttrs{});
  }
  // Per update element: whether it is the one a "none" scatter keeps (the
  // last write to its destination wins).
  NodeId kept(const Shape& data, const Shape& upd) const {
    std::vector<Dim> wdims = upd.dims;
    int64_t writers = 1;
    if (op == Op::ScatterND) {  // one writer per index row
      const Shape ix = e.shape(idx);
      for (int i = 0; i + 1 < ix.rank(); ++i) writers *= ix.dims[size_t(i)].value;
      for (int i = ix.rank() - 1; i < upd.rank(); ++i) wdims[size_t(i)] = Dim(1);
    } else {
      writers = upd.numel();
    }
    const NodeId mine = e.expand(ids(e, writers, wdims), upd.dims);
    const NodeId winner =
        scatter(e.full(Shape(data.dims, DType::I64), -1), mine, ScatterReduction::none);
    return e.compare(Op::Eq, gather(winner), mine);
  }
};

// d out / d v for a product reduction over {data, updates}: the product of
// the other factors at v's destination, computed without dividing by zero
// from P (product of the nonzero factors) and Z (count of zero factors).
NodeId product_of_others(Emit& e, NodeId v, NodeId p, NodeId z) {
  const DType t = e.dtype(v);
  const NodeId zero = e.scalar(0, t), one = e.scalar(1, t);
  const NodeId at_zero = e.where(e.compare(Op::Eq, z, one), p, zero);
  const NodeId safe = e.where(e.compare(Op::Eq, v, zero), one, v);
  const NodeId at_nonzero = e.where(e.compare(Op::Eq, z, zero), e.div(p, safe), zero);
  return e.where(e.compare(Op::Eq, v, zero), at_zero, at_nonzero);
}

void vjp_scatter(VjpCall& c, const Scatter& s, ScatterReduction r) {
  Emit& e = c.e;
  const NodeId data = c.in(0), upd = c.in(2), dy = c.grad(), y = c.n.id;
  const Shape ds = c.in_shape(0), us = c.in_shape(2);
  RLX_CHECK(ds.is_static() && us.is_static() && e.shape(s.idx).is_static(),
            "a scatter's gradient needs static shapes");
  const DType t = ds.dtype;
  switch (r) {
    case ScatterReduction::none:
      // Overwritten positions of data get nothing; only the kept update of each destination does.
      if (c.needs(0)) c.dx[0] = s.scatter(dy, e.zeros(us), ScatterReduction::none);
      if (c.needs(2)) c.dx[2] = e.mask(s.kept(ds, us), s.gather(dy));
      return;
    case ScatterReduction::add:
      if (c.needs(0)) c.dx[0] = dy;
      if (c.needs(2)) c.dx[2] = s.gather(dy);
      return;
    case ScatterReduction::max:
    case ScatterReduction::min: {
      // Every factor equal to the result shares the gradient evenly (scatter_reduce amax/amin).
      const NodeId hit_d = e.cast(e.compare(Op::Eq, data, y), t);
      const NodeId hit_u = e.cast(e.compare(Op::Eq, upd, s.gather(y)), t);
      const NodeId share = e.div(dy, s.scatter(hit_d, hit_u, ScatterReduction::add));
      if (c.needs(0)) c.dx[0] = e.mul(share, hit_d);
      if (c.needs(2)) c.dx[2] = e.mul(s.gather(share), hit_u);
      return;
    }
    case ScatterReduction::mul: {
      const NodeId zero = e.scalar(0, t), one = e.scalar(1, t);
      const NodeId zd = e.compare(Op::Eq, data, zero), zu = e.compare(Op::Eq, upd, zero);
      const NodeId p =
          s.scatter(e.where(zd, one, data), e.where(zu, one, upd), ScatterReduction::mul);
      const NodeId z = s.scatter(e.cast(zd, t), e.cast(zu, t), ScatterReduction::add);
      if (c.needs(0)) c.dx[0] = e.mul(dy, product_of_others(e, data, p, z));
      if (c.needs(2))
        c.dx[2] = e.mul(s.gather(dy), product_of_others(e, upd, s.gather(p), s.gather(z)));
      return;
    }
  }
}

}  // namespace

void vjp_gather(VjpCall& c) {
  // out = data[:a] + idx + data[a+1:]: flatten idx to m entries and scatter-add
  // the gradient's rows back along the axis.
  Emit& e = c.e;
  const Dims data = e.dims(c.in(0), "gather's gradient");
  const Dims idx = e.dims(c.in(1), "gather's gradient");
  const int ax = normalize_axis(c.n.attrs_as<GatherAttrs>().axis, int(data.size()));
  const int64_t m = numel(idx);
  std::vector<Dim> rows(data.begin(), data.end()), at(data.size(), Dim(1));
  rows[size_t(ax)] = at[size_t(ax)] = Dim(m);
  const NodeId ix = e.expand(e.reshape(index_i64(e, c.in(1)), at), rows);
  c.dx[0] = e.op(Op::ScatterElements, {e.zeros(c.in_shape(0)), ix, e.reshape(c.grad(), rows)},
                 ScatterElementsAttrs{.axis = ax, .reduction = ScatterReduction::add});
}

void vjp_gather_elements(VjpCall& c) {
  const int64_t ax = c.n.attrs_as<AxisAttrs>().axis;
  c.dx[0] = c.e.op(Op::ScatterElements, {c.e.zeros(c.in_shape(0)), c.in(1), c.grad()},
                   ScatterElementsAttrs{.axis = ax, .reduction = ScatterReduction::add});
}

void vjp_gather_nd(VjpCall& c) {
  Emit& e = c.e;
  const int64_t b = c.n.attrs_as<GatherNDAttrs>().batch_dims;
  NodeId idx = c.in(1);
  if (b > 0) {
    // scatter_nd has no batch dims: prepend each batch coordinate to the index rows.
    idx = index_i64(e, idx);
    const Dims id = e.dims(idx, "gather_nd's gradient");
    std::vector<Dim> rows(id.begin(), id.end());
    rows.back() = Dim(1);
    std::vector<NodeId> parts;
    for (int64_t j = 0; j < b; ++j) {
      std::vector<Dim> at(rows.size(), Dim(1));
      at[size_t(j)] = Dim(id[size_t(j)]);
      parts.push_back(e.expand(ids(e, id[size_t(j)], at), rows));
    }
    parts.push_back(idx);
    idx = e.concat(parts, -1);
  }
  c.dx[0] = e.op(Op::ScatterND, {e.zeros(c.in_shape(0)), idx, c.grad()},
                 ScatterNDAttrs{.reduction = ScatterReduction::add});
}

void vjp_scatter_elements(VjpCall& c) {
  const auto& a = c.n.attrs_as<ScatterElementsAttrs>();
  vjp_scatter(c, Scatter{c.e, Op::ScatterElements, c.in(1), a.axis}, a.reduction);
}

void vjp_scatter_nd(VjpCall& c) {
  vjp_scatter(c, Scatter{c.e, Op::ScatterND, c.in(1), 0}, c.n.attrs_as<ScatterNDAttrs>().reduction);
}

void vjp_topk(VjpCall& c) {
  // The values' gradient goes back to the positions the indices output names.
  if (c.dy[0] < 0) return;
  const int64_t ax = c.n.attrs_as<TopKAttrs>().axis;
  const NodeId indices = c.e.graph().result(c.n.id, 1);
  c.dx[0] = c.e.op(Op::ScatterElements, {c.e.zeros(c.in_shape(0)), indices, c.dy[0]},
                   ScatterElementsAttrs{.axis = ax, .reduction = ScatterReduction::add});
}

void vjp_embedding(VjpCall& c) {
  // Rows of the gradient added into the table rows the ids name.
  Emit& e = c.e;
  const Dims table = e.dims(c.in(0), "embedding's gradient");
  const int64_t m = numel(e.dims(c.in(1), "embedding's gradient"));
  const NodeId ids_col = e.reshape(c.in(1), {Dim(m), Dim(1)});
  const NodeId rows = e.reshape(c.grad(), {Dim(m), Dim(table[1])});
  c.dx[0] = e.op(Op::ScatterND, {e.zeros(c.in_shape(0)), ids_col, rows},
                 ScatterNDAttrs{.reduction = ScatterReduction::add});
}

}  // namespace rlx::opt::ad
