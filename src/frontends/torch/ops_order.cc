// Order statistics and running reductions composed from a full sort (topk of
// every element, NaN above all, ties in index order) or from an n x n prefix
// mask: quantile, nanquantile, mode, median, nanmedian, kthvalue, cummax, cummin, logcumsumexp.
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

// quantile / nanquantile(x, q, dim, keepdim, interpolation): per slice along dim (all of x
// when dim is None), the value at rank q (m - 1) of the sorted slice, m its length (nanquantile:
// its non-NaN count), interpolated as asked; NaN when the slice holds a NaN (quantile) or
// nothing else (nanquantile). A 1-d q adds a leading dim of its length.
Value quantile(LowerCtx& c, bool ignore_nan) {
  NodeId x = c.tensor(0, "self");
  const DType t = c.shape(x).dtype;
  const Dims in = c.dims(x);
  const Value* qv = c.arg(1, "q");
  RLX_CHECK(qv, c.node.op, ": q is required");
  NodeId q = qv->kind == Value::Tensor ? c.cast(qv->id, t) : c.scalar(qv->number(), t);
  const bool q_vector = c.rank(q) == 1;
  RLX_CHECK(c.rank(q) <= 1, c.node.op, ": q must be a scalar or 1-d, got ", c.shape(q).str());
  const bool keep = c.flag(3, "keepdim", false);
  const std::string how = c.str(4, "interpolation", "linear");
  RLX_CHECK(
      how == "linear" || how == "lower" || how == "higher" || how == "midpoint" || how == "nearest",
      c.node.op, ": unknown interpolation '", how, "'");
  // The slices as the last dim of [rest..., n].
  Dims out_dims;  // the reduced shape, keepdim applied
  int64_t axis;
  if (!c.has(2, "dim")) {
    x = c.b.reshape(x, {numel(in)});
    axis = 0;
    if (keep) out_dims.assign(in.size(), 1);
  } else {
    axis = normalize_axis(c.i(2, "dim"), int(std::max<size_t>(in.size(), 1)));
    if (in.empty()) x = c.b.reshape(x, {1});
    out_dims = in;
    if (!in.empty()) {
      if (keep)
        out_dims[size_t(axis)] = 1;
      else
        out_dims.erase(out_dims.begin() + axis);
    }
  }
  const int r = c.rank(x);
  std::vector<int64_t> perm;
  for (int k = 0; k < r; ++k)
    if (k != axis) perm.push_back(k);
  perm.push_back(axis);
  x = c.b.transpose(x, perm);
  const Dims xd = c.dims(x);
  const int64_t n = xd.back();
  RLX_CHECK(n > 0, c.node.op, ": quantile of an empty slice");
  const NodeId sorted = sort_up(c, x, r - 1).first;
  const NodeId nans = c.cast(nan_count(c, x, r - 1), t);  // [rest..., 1]
  const NodeId m = ignore_nan ? c.b.sub(c.scalar(double(n), t), nans) : c.scalar(double(n), t);
  // rank [Q, rest..., 1] from q [Q] (a scalar q: Q = 1, dropped at the end)
  const int64_t Q = q_vector ? c.dims(q)[0] : 1;
  Dims qd(size_t(r) + 1, 1);
  qd[0] = Q;
  NodeId rank = c.b.mul(c.b.reshape(q, qd), c.b.sub(m, c.scalar(1, t)));
  rank = c.b.binary(Op::Max, rank, c.scalar(0, t));  // nanquantile of an all-NaN slice
  Dims big = xd;
  big.insert(big.begin(), Q);
  const NodeId vals = c.b.op(Op::Expand, {sorted}, {{"shape", big}});
  Dims idx_dims = big;
  idx_dims.back() = 1;
  auto at = [&](NodeId pos) {
    const NodeId i = c.b.op(Op::Expand, {c.cast(pos, DType::I64)}, {{"shape", idx_dims}});
    return c.b.op(Op::GatherElements, {vals, i}, {{"axis", int64_t(r)}});
  };
  const NodeId lo = c.b.unary(Op::Floor, rank), hi = c.b.unary(Op::Ceil, rank);
  NodeId y;
  if (how == "lower") {
    y = at(lo);
  } else if (how == "higher") {
    y = at(hi);
  } else if (how == "nearest") {
    y = at(c.b.unary(Op::Round, rank));  // half to even, as PyTorch rounds
  } else {
    const NodeId a = at(lo), b = at(hi);
    const NodeId w = how == "midpoint" ? c.scalar(0.5, t) : c.b.sub(rank, lo);
    y = c.b.add(a, c.b.mul(w, c.b.sub(b, a)));
  }
  const NodeId bad =
      ignore_nan ? c.b.op(Op::Eq, {m, c.scalar(0, t)}) : c.b.op(Op::Gt, {nans, c.scalar(0, t)});
  y = c.b.op(Op::Where, {bad, c.scalar(NAN, t), y});
  Dims final_dims = out_dims;
  if (q_vector) final_dims.insert(final_dims.begin(), Q);
  return Value::tensor(c.b.reshape(y, final_dims));
}

// mode(x, dim, keepdim) -> (values, indices): the most frequent value of each slice (the smallest
// of a tie) and the last index holding it, over an n x n equality mask.
Value mode(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  if (c.rank(x) == 0) return pair(x, c.b.full({}, 0, DType::I64));
  const DType t = c.shape(x).dtype;
  const Dims in = c.dims(x);
  const int r = c.rank(x);
  const int64_t axis = normalize_axis(c.i(1, "dim", -1), r), n = in[size_t(axis)];
  RLX_CHECK(n > 0, c.node.op, ": mode of an empty slice");
  std::vector<int64_t> perm;
  for (int k = 0; k < r; ++k)
    if (k != axis) perm.push_back(k);
  perm.push_back(axis);
  x = c.b.transpose(x, perm);
  Dims row = c.dims(x), col = row;
  row.insert(row.end() - 1, 1);  // [R..., 1, n]
  col.push_back(1);              // [R..., n, 1]
  const NodeId same = c.b.op(Op::Eq, {c.b.reshape(x, col), c.b.reshape(x, row)});
  const NodeId count = c.b.reduce(Op::ReduceSum, c.cast(same, DType::I64), {r});  // [R..., n]
  const NodeId top = c.b.reduce(Op::ReduceMax, count, {r - 1}, true);
  const NodeId cand = c.b.op(Op::Eq, {count, top});
  const NodeId v =
      c.b.reduce(Op::ReduceMin, c.b.op(Op::Where, {cand, x, c.scalar(INFINITY, t)}), {r - 1}, true);
  const NodeId i = c.b.reduce(
      Op::ReduceMax,
      c.b.op(Op::Where, {c.b.op(Op::Eq, {x, v}), c.b.arange(n), c.scalar(-1, DType::I64)}), {r - 1},
      true);
  Dims out = in;
  if (c.flag(2, "keepdim", false))
    out[size_t(axis)] = 1;
  else
    out.erase(out.begin() + axis);
  return pair(c.b.reshape(v, out), c.b.reshape(i, out));
}

}  // namespace

void register_order(Registry& r) {
  r.add("aten.quantile", [](LowerCtx& c) { return quantile(c, false); });
  r.add("aten.mode", mode);
  r.add("aten.nanquantile", [](LowerCtx& c) { return quantile(c, true); });
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
