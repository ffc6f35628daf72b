// Order statistics and running reductions composed from a full sort (topk of
// every element, NaN above all, ties in index order) or from an n x n prefix
// mask: median, nanmedian, kthvalue, cummax, cummin, logcumsumexp.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

Value pair(NodeId a, NodeId b) { return Value::tuple({a, b}); }

// x sorted ascending along axis: (values, indices).
std::pair<NodeId, NodeId> sort_up(LowerCtx& c, NodeId x, int64_t axis) {
  const int64_t n = c.dims(x)[size_t(axis)];
  auto r =
      c.b.results(Op::TopK, {x}, {{"k", n}, {"axis", axis}, {"largest", false}, {"sorted", true}});
  return {r[0], r[1]};
}

// The NaN count of each slice along axis, kept as a size-1 dim (i64).
NodeId nan_count(LowerCtx& c, NodeId x, int64_t axis) {
  return c.b.reduce(Op::ReduceSum, c.cast(c.b.op(Op::Ne, {x, x}), DType::I64), {axis}, true);
}

// median / nanmedian over one dim: the sorted values and indices at a
// per-slice position. median: (n - 1) / 2, or the first NaN when the slice
// holds one (PyTorch's median propagates NaN, with the first NaN's index);
// nanmedian: (m - 1) / 2 of the m non-NaN values ((n - 1) / 2 when all are NaN).
std::pair<NodeId, NodeId> median_along(LowerCtx& c, NodeId x, int64_t axis, bool keep,
                                       bool ignore_nan) {
  const int64_t n = c.dims(x)[size_t(axis)];
  auto [vals, idx] = sort_up(c, x, axis);
  const NodeId nans = nan_count(c, x, axis);
  const NodeId total = c.scalar(double(n), DType::I64);
  NodeId pos;
  const NodeId middle = c.scalar(double((n - 1) / 2), DType::I64);
  if (ignore_nan) {  // a slice all NaN: the middle one, as PyTorch picks
    const NodeId m = c.b.sub(total, nans);
    const NodeId half =
        c.b.op(Op::Div, {c.b.sub(m, c.scalar(1, DType::I64)), c.scalar(2, DType::I64)},
               {{"rounding", std::string("floor")}});
    pos = c.b.op(Op::Where, {c.b.op(Op::Gt, {m, c.scalar(0, DType::I64)}), half, middle});
  } else {
    pos = c.b.op(Op::Where,
                 {c.b.op(Op::Gt, {nans, c.scalar(0, DType::I64)}), c.b.sub(total, nans), middle});
  }
  NodeId v = c.b.op(Op::GatherElements, {vals, pos}, {{"axis", axis}});
  NodeId i = c.b.op(Op::GatherElements, {idx, pos}, {{"axis", axis}});
  if (!keep) {
    Dims d = c.dims(v);
    d.erase(d.begin() + axis);
    v = c.b.reshape(v, d);
    i = c.b.reshape(i, d);
  }
  return {v, i};
}

Value median(LowerCtx& c, bool ignore_nan) {
  NodeId x = c.tensor(0, "self");
  const bool whole = c.node.op.rfind(".default") == c.node.op.size() - 8 || !c.has(1, "dim");
  if (whole) {  // the median of every element: a value only
    if (numel(c.dims(x)) == 0) return Value::tensor(c.b.full({}, NAN, c.shape(x).dtype));
    x = c.b.reshape(x, {-1});
    return Value::tensor(c.b.reshape(median_along(c, x, 0, false, ignore_nan).first, {}));
  }
  if (c.rank(x) == 0) return pair(x, c.b.full({}, 0, DType::I64));
  const int64_t axis = normalize_axis(c.i(1, "dim"), c.rank(x));
  auto [v, i] = median_along(c, x, axis, c.flag(2, "keepdim", false), ignore_nan);
  return pair(v, i);
}

// cummax / cummin(x, dim): over an n x n mask of j <= i; the value is the
// prefix max (NaN once a NaN was seen), the index the last j <= i holding it
// (PyTorch's >= / <= update, NaN matching NaN).
Value cum_extreme(LowerCtx& c, bool max) {
  const NodeId x = c.tensor(0, "self");
  if (c.rank(x) == 0) return pair(x, c.b.full({}, 0, DType::I64));
  const int r = c.rank(x);
  const int64_t axis = normalize_axis(c.i(1, "dim"), r);
  const int64_t n = c.dims(x)[size_t(axis)];
  const DType t = c.shape(x).dtype;
  // xi: x along axis at position i (dim axis), xj: at j (a new dim after it).
  Dims dj = c.dims(x);
  dj.insert(dj.begin() + axis, 1);
  const NodeId xj = c.b.reshape(x, dj);
  Dims lay(size_t(r + 1), 1);
  lay[size_t(axis)] = n;
  const NodeId iv = c.b.reshape(c.b.arange(n), lay);
  lay[size_t(axis)] = 1;
  lay[size_t(axis + 1)] = n;
  const NodeId jv = c.b.reshape(c.b.arange(n), lay);
  const NodeId in = c.b.op(Op::Le, {jv, iv});  // [.., n, n, ..]: j <= i
  const double fill = max ? -INFINITY : INFINITY;
  const NodeId masked = c.b.op(Op::Where, {in, xj, c.scalar(fill, t)});
  NodeId v = c.b.reduce(max ? Op::ReduceMax : Op::ReduceMin, masked, {axis + 1}, true);
  const NodeId nan_seen = c.b.reduce(
      Op::ReduceMax, c.cast(c.b.op(Op::LogicalAnd, {in, c.b.op(Op::Ne, {xj, xj})}), DType::I64),
      {axis + 1}, true);
  v = c.b.op(Op::Where, {c.b.op(Op::Gt, {nan_seen, c.scalar(0, DType::I64)}), c.scalar(NAN, t), v});
  const NodeId same = c.b.op(
      Op::LogicalOr, {c.b.op(Op::Eq, {xj, v}),
                      c.b.op(Op::LogicalAnd, {c.b.op(Op::Ne, {xj, xj}), c.b.op(Op::Ne, {v, v})})});
  const NodeId hit = c.b.op(Op::LogicalAnd, {in, same});
  const NodeId j_or_none =
      c.b.op(Op::Where,
             {hit, c.b.op(Op::Expand, {jv}, {{"shape", c.dims(hit)}}), c.scalar(-1, DType::I64)});
  const NodeId i = c.b.reduce(Op::ReduceMax, j_or_none, {axis + 1}, false);
  return pair(c.b.reshape(v, c.dims(x)), i);
}

// logcumsumexp(x, dim): the logsumexp of each prefix, over an n x n mask
// (-inf outside), shifted by the prefix max unless that is infinite.
Value logcumsumexp(LowerCtx& c) {
  const NodeId x = c.cast(c.tensor(0, "self"), c.out_dtype());
  if (c.rank(x) == 0) return Value::tensor(x);
  const int r = c.rank(x);
  const int64_t axis = normalize_axis(c.i(1, "dim"), r);
  const int64_t n = c.dims(x)[size_t(axis)];
  const DType t = c.shape(x).dtype;
  Dims dj = c.dims(x);
  dj.insert(dj.begin() + axis, 1);
  const NodeId xj = c.b.reshape(x, dj);
  Dims lay(size_t(r + 1), 1);
  lay[size_t(axis)] = n;
  const NodeId iv = c.b.reshape(c.b.arange(n), lay);
  lay[size_t(axis)] = 1;
  lay[size_t(axis + 1)] = n;
  const NodeId jv = c.b.reshape(c.b.arange(n), lay);
  const NodeId masked = c.b.op(Op::Where, {c.b.op(Op::Le, {jv, iv}), xj, c.scalar(-INFINITY, t)});
  NodeId m = c.b.reduce(Op::ReduceMax, masked, {axis + 1}, true);
  const NodeId inf = c.b.op(Op::Eq, {c.b.unary(Op::Abs, m), c.scalar(INFINITY, t)});
  m = c.b.op(Op::Where, {inf, c.scalar(0, t), m});
  const NodeId s =
      c.b.reduce(Op::ReduceSum, c.b.unary(Op::Exp, c.b.sub(masked, m)), {axis + 1}, true);
  return Value::tensor(c.b.reshape(c.b.add(c.b.unary(Op::Log, s), m), c.dims(x)));
}

}  // namespace

void register_order(Registry& r) {
  r.add("aten.median", [](LowerCtx& c) { return median(c, false); });
  r.add("aten.nanmedian", [](LowerCtx& c) { return median(c, true); });
  // kthvalue(x, k, dim, keepdim): the k-th smallest (NaN largest) and its index.
  r.add("aten.kthvalue", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const int64_t k = c.i(1, "k");
    if (c.rank(x) == 0) {
      RLX_CHECK(k == 1, "kthvalue: k = ", k, " is out of range for a 0-d tensor");
      return pair(x, c.b.full({}, 0, DType::I64));
    }
    const int64_t axis = normalize_axis(c.i(2, "dim", -1), c.rank(x));
    const int64_t n = c.dims(x)[size_t(axis)];
    RLX_CHECK(k >= 1 && k <= n, "kthvalue: k = ", k, " is out of range for a dim of ", n);
    auto [vals, idx] = sort_up(c, x, axis);
    auto at = [&](NodeId v) {
      NodeId s = c.b.op(Op::Slice, {v}, {{"axis", axis}, {"start", k - 1}, {"end", k}});
      if (c.flag(3, "keepdim", false)) return s;
      Dims d = c.dims(s);
      d.erase(d.begin() + axis);
      return c.b.reshape(s, d);
    };
    return pair(at(vals), at(idx));
  });
  r.add("aten.cummax", [](LowerCtx& c) { return cum_extreme(c, true); });
  r.add("aten.cummin", [](LowerCtx& c) { return cum_extreme(c, false); });
  r.add("aten.logcumsumexp", logcumsumexp);
}

}  // namespace rlx::torch_ir
