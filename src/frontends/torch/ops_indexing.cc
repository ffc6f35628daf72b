// Indexing: gather, index_select and advanced indexing (aten.index.Tensor).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

NodeId as_index(LowerCtx& c, NodeId i) {
  DType t = c.shape(i).dtype;
  RLX_CHECK(t != DType::Bool && t != DType::U8,
            "a boolean mask among several indices is not supported (one mask alone is)");
  return t == DType::I32 ? i : c.cast(i, DType::I64);
}

bool is_mask(LowerCtx& c, NodeId i) {
  const DType t = c.shape(i).dtype;
  return t == DType::Bool || t == DType::U8;
}

// x[..., mask, ...] for a mask over dims p .. p+k-1 of x: those dims become one of the mask's
// true-element count, at p (PyTorch expands the mask to its nonzero indices).
NodeId masked(LowerCtx& c, NodeId x, std::pair<int, NodeId> at) {
  const auto [p, mask] = at;
  const int r = c.rank(x), k = c.rank(mask);
  RLX_CHECK(p + k <= r, "index: a mask of rank ", k, " at dim ", p, " does not fit ",
            c.shape(x).str());
  std::vector<int64_t> perm;
  for (int d = 0; d < k; ++d) perm.push_back(p + d);
  for (int d = 0; d < r; ++d)
    if (d < p || d >= p + k) perm.push_back(d);
  const NodeId xt = p == 0 ? x : c.b.transpose(x, perm);
  NodeId y = c.b.op(Op::GatherND, {xt, nonzero_of(c, c.cast(mask, DType::Bool))},
                    {{"batch_dims", int64_t(0)}});
  if (p == 0) return y;
  std::vector<int64_t> back;  // y is [count, x's dims before p..., after...]
  for (int d = 1; d <= p; ++d) back.push_back(d);
  back.push_back(0);
  for (int d = p + 1; d < c.rank(y); ++d) back.push_back(d);
  return c.b.transpose(y, back);
}

// x[i0, i1, ...] with None for full slices. Index tensors broadcast together;
// the result's indexed dims go where the first index was when the indexed
// dims are adjacent, else to the front (NumPy/PyTorch rule).
Value index_tensor(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  const Value* list = c.arg(1, "indices");
  RLX_CHECK(list && list->kind == Value::List, "index: indices must be a list");
  std::vector<std::pair<int, NodeId>> idx;
  for (size_t k = 0; k < list->items.size(); ++k)
    if (list->items[k].kind == Value::Tensor) {
      const NodeId i = list->items[k].id;
      idx.push_back({int(k), is_mask(c, i) ? i : as_index(c, i)});
    }
  RLX_CHECK(!idx.empty(), "index with no index tensors");
  if (idx.size() == 1 && is_mask(c, idx[0].second)) return Value::tensor(masked(c, x, idx[0]));
  if (idx.size() == 1)
    return Value::tensor(c.b.op(Op::Gather, {x, idx[0].second}, {{"axis", int64_t(idx[0].first)}}));
  const int r = c.rank(x);
  bool adjacent = true;
  for (size_t k = 1; k < idx.size(); ++k) adjacent &= idx[k].first == idx[k - 1].first + 1;
  // Move indexed dims to the front, gather_nd over them with a stacked index.
  std::vector<int64_t> perm;
  for (auto& [d, t] : idx) perm.push_back(d);
  for (int d = 0; d < r; ++d)
    if (std::find(perm.begin(), perm.end(), d) == perm.end()) perm.push_back(d);
  NodeId xt = c.b.transpose(x, perm);
  // Broadcast the index tensors to one shape: add zeros of the common shape.
  NodeId zero = -1;
  for (auto& [d, t] : idx) {
    NodeId z = c.b.mul(t, c.scalar(0, c.shape(t).dtype));
    zero = zero < 0 ? z : c.b.add(c.cast(zero, DType::I64), c.cast(z, DType::I64));
  }
  std::vector<NodeId> cols;
  Dims bshape = c.dims(zero);
  Dims col_shape = bshape;
  col_shape.push_back(1);
  for (auto& [d, t] : idx)
    cols.push_back(c.b.reshape(c.b.add(c.cast(t, DType::I64), zero), col_shape));
  NodeId stacked = c.b.concat(cols, int64_t(bshape.size()));
  NodeId y = c.b.op(Op::GatherND, {xt, stacked}, {{"batch_dims", int64_t(0)}});
  if (adjacent && idx[0].first > 0) {
    // y is [bshape..., rest...]; rest = dims before the first index, then after the last.
    int nb = int(bshape.size()), before = idx[0].first, after = r - int(idx.size()) - before;
    std::vector<int64_t> p;
    for (int k = 0; k < before; ++k) p.push_back(nb + k);
    for (int k = 0; k < nb; ++k) p.push_back(k);
    for (int k = 0; k < after; ++k) p.push_back(nb + before + k);
    y = c.b.transpose(y, p);
  }
  return Value::tensor(y);
}

// index_put(self, indices, values, accumulate): x[indices] = values (or +=).
// A boolean mask becomes a where(); integer indices become a scatter_nd over
// the indexed dims moved to the front (values must then broadcast to
// [index shape..., remaining dims...], which holds for leading indices and
// for scalar values).
Value index_put(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  DType t = c.shape(x).dtype;
  const Value* list = c.arg(1, "indices");
  RLX_CHECK(list && list->kind == Value::List, "index_put: indices must be a list");
  NodeId v = c.cast(c.tensor(2, "values"), t);
  bool acc = c.flag(3, "accumulate", false);
  const int r = c.rank(x);
  std::vector<std::pair<int, NodeId>> idx;
  for (size_t k = 0; k < list->items.size(); ++k)
    if (list->items[k].kind == Value::Tensor) idx.push_back({int(k), list->items[k].id});
  RLX_CHECK(!idx.empty(), "index_put with no index tensors");
  DType it = c.shape(idx[0].second).dtype;
  if (it == DType::Bool || it == DType::U8) {
    RLX_CHECK(idx.size() == 1, "index_put: a boolean mask must be the only index");
    NodeId m = c.cast(idx[0].second, DType::Bool);
    Dims md = c.dims(m);
    if (numel(c.dims(v)) != 1) {  // one value per selected element: a scatter at the mask's
      RLX_CHECK(idx[0].first == 0, "index_put: tensor values with a mask after a full slice are ",
                "not supported");
      const NodeId at = nonzero_of(c, m);  // [count, k]
      // v broadcast to [count, x's dims after the mask]: add zeros of [count, 1, ...].
      Dims zd(size_t(r - int(md.size())) + 1, 1);
      zd[0] = -1;
      NodeId zeros = c.b.reduce(Op::ReduceSum, c.b.mul(at, c.scalar(0, DType::I64)), {1}, true);
      v = c.b.add(v, c.cast(c.b.reshape(zeros, zd), t));
      return Value::tensor(
          c.b.op(Op::ScatterND, {x, at, v}, {{"reduction", std::string(acc ? "add" : "none")}}));
    }
    Dims d(size_t(idx[0].first), 1);  // mask dims sit at the index position
    d.insert(d.end(), md.begin(), md.end());
    d.resize(size_t(r), 1);
    m = c.b.reshape(m, d);
    v = c.b.reshape(v, {});
    if (acc) return Value::tensor(c.b.add(x, c.b.op(Op::Where, {m, v, c.scalar(0, t)})));
    return Value::tensor(c.b.op(Op::Where, {m, v, x}));
  }
  bool leading = true;
  for (size_t k = 0; k < idx.size(); ++k) leading &= idx[k].first == int(k);
  RLX_CHECK(leading || numel(c.dims(v)) == 1,
            "index_put: tensor values with indices after a full slice are not supported");
  std::vector<int64_t> perm;
  for (auto& [d, i] : idx) perm.push_back(d);
  for (int d = 0; d < r; ++d)
    if (std::find(perm.begin(), perm.end(), d) == perm.end()) perm.push_back(d);
  NodeId xt = leading ? x : c.b.transpose(x, perm);
  Dims xd = c.dims(x);
  // Normalize negative indices and broadcast the index tensors together.
  NodeId zero = -1;
  std::vector<NodeId> norm;
  for (auto& [d, i] : idx) {
    NodeId ii = c.cast(as_index(c, i), DType::I64);
    NodeId neg = c.b.binary(Op::Lt, ii, c.scalar(0, DType::I64));
    ii = c.b.op(Op::Where, {neg, c.b.add(ii, c.scalar(double(xd[size_t(d)]), DType::I64)), ii});
    norm.push_back(ii);
    NodeId z = c.b.mul(ii, c.scalar(0, DType::I64));
    zero = zero < 0 ? z : c.b.add(zero, z);
  }
  Dims bshape = c.dims(zero), col = bshape;
  col.push_back(1);
  std::vector<NodeId> cols;
  for (NodeId ii : norm) cols.push_back(c.b.reshape(c.b.add(ii, zero), col));
  NodeId stacked = c.b.concat(cols, int64_t(bshape.size()));
  Dims ud = bshape;
  for (size_t k = idx.size(); k < size_t(r); ++k) ud.push_back(c.dims(xt)[k]);
  if (c.dims(v) != ud) v = c.b.op(Op::Expand, {v}, {{"shape", ud}});
  NodeId y =
      c.b.op(Op::ScatterND, {xt, stacked, v}, {{"reduction", std::string(acc ? "add" : "none")}});
  if (!leading) {
    std::vector<int64_t> inv(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) inv[size_t(perm[k])] = int64_t(k);
    y = c.b.transpose(y, inv);
  }
  return Value::tensor(y);
}

// repeat_interleave(repeats): i repeated repeats[i] times, for a 1-d repeats
// known only at run time; the length is the node's recorded output size (or
// output_size). Output position p takes the number of inclusive cumulative
// counts <= p, which is the i whose run holds p.
Value repeat_interleave_indices(LowerCtx& c) {
  NodeId rep = as_index(c, c.tensor(0, "repeats"));
  RLX_CHECK(c.rank(rep) == 1, "repeat_interleave: repeats must be 1-d, got ", c.shape(rep).str());
  const Dims& o = c.out().shape;
  RLX_CHECK(o.size() == 1, "repeat_interleave: expected a 1-d output, got rank ", o.size());
  const int64_t L = c.i(1, "output_size", o[0]);
  NodeId ends = c.b.op(Op::CumSum, {c.cast(rep, DType::I64)}, {{"axis", int64_t(0)}});
  NodeId pos = c.b.reshape(c.b.arange(L), {L, 1});
  NodeId passed =
      c.cast(c.b.binary(Op::Ge, pos, c.b.reshape(ends, {1, c.dims(rep)[0]})), DType::I64);
  return Value::tensor(c.b.reduce(Op::ReduceSum, passed, {1}));
}

// scatter_reduce(self, dim, index, src, reduce, include_self): sum / prod /
// amax / amin as a reducing scatter; without include_self the touched places
// first take the reduction's identity. mean sums, then divides by how many
// values reached each place (floor division for integers, as PyTorch does);
// untouched places keep self.
NodeId scatter_reduce_into(LowerCtx& c, NodeId x, int64_t axis, NodeId idx, NodeId src,
                           const std::string& reduce, bool include_self) {
  const DType t = c.shape(x).dtype;
  src = c.cast(src, t);
  auto scatter = [&](NodeId into, NodeId upd, const char* how) {
    return c.b.op(Op::ScatterElements, {into, idx, upd},
                  {{"axis", axis}, {"reduction", std::string(how)}});
  };
  const bool integer = is_integer(t);
  double identity = 0;
  const char* how = "add";
  if (reduce == "prod") {
    identity = 1, how = "mul";
  } else if (reduce == "amax") {
    identity = integer ? -std::pow(2.0, 8.0 * double(dtype_size(t)) - 1) : -INFINITY, how = "max";
  } else if (reduce == "amin") {
    identity = integer ? std::pow(2.0, 8.0 * double(dtype_size(t)) - 1) - 1 : INFINITY, how = "min";
  } else {
    RLX_CHECK(reduce == "sum" || reduce == "mean", "scatter_reduce: unknown reduce '", reduce, "'");
  }
  if (t == DType::U8 && (reduce == "amax" || reduce == "amin"))
    identity = reduce == "amax" ? 0 : 255;
  NodeId base = include_self ? x : scatter(x, c.b.full(c.dims(idx), identity, t), "none");
  NodeId y = scatter(base, src, how);
  if (reduce != "mean") return y;
  NodeId count =
      scatter(c.b.full(c.dims(x), include_self ? 1 : 0, t), c.b.full(c.dims(idx), 1, t), "add");
  NodeId touched = c.b.op(Op::Gt, {count, c.scalar(0, t)});
  NodeId safe = c.b.op(Op::Max, {count, c.scalar(1, t)});
  Attrs div;
  if (integer) div.set("rounding", std::string("floor"));
  return c.b.op(Op::Where, {touched, c.b.op(Op::Div, {y, safe}, div), x});
}

Value scatter_reduce(LowerCtx& c) {
  return Value::tensor(scatter_reduce_into(
      c, c.tensor(0, "self"), c.i(1, "dim"), as_index(c, c.tensor(2, "index")), c.tensor(3, "src"),
      c.str(4, "reduce", ""), c.flag(5, "include_self", true)));
}

// index_* (self, dim, index [K], source): index laid along dim and expanded to
// source's shape, for a scatter along dim. A 0-d self (and source) is [1].
struct IndexAlong {
  NodeId x, idx, src;
  int64_t axis;
  bool scalar;
};
IndexAlong index_along(LowerCtx& c, NodeId x, NodeId src) {
  NodeId idx = as_index(c, c.tensor(2, "index"));
  const bool scalar = c.rank(x) == 0;
  if (scalar) x = c.b.reshape(x, {1});
  if (c.rank(idx) == 0) idx = c.b.reshape(idx, {1});
  const int64_t axis = normalize_axis(c.i(1, "dim"), c.rank(x));
  Dims sd = c.dims(x);
  sd[size_t(axis)] = c.dims(idx)[0];
  src = c.b.reshape(c.cast(src, c.shape(x).dtype), sd);
  Dims lay(sd.size(), 1);
  lay[size_t(axis)] = sd[size_t(axis)];
  idx = c.b.op(Op::Expand, {c.b.reshape(idx, lay)}, {{"shape", sd}});
  return {x, idx, src, axis, scalar};
}

Value index_scatter(LowerCtx& c, const IndexAlong& a, NodeId y) {
  return Value::tensor(a.scalar ? c.b.reshape(y, {}) : y);
}

// take(self, index): self flattened, gathered at index (any shape).
Value take(LowerCtx& c) {
  NodeId x = c.b.reshape(c.tensor(0, "self"), {-1});
  return Value::tensor(
      c.b.op(Op::Gather, {x, as_index(c, c.tensor(1, "index"))}, {{"axis", int64_t(0)}}));
}

// put(self, index, source, accumulate): a scatter into self flattened (added
// when accumulating), back in self's shape.
Value put(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  NodeId flat_idx = c.b.reshape(as_index(c, c.tensor(1, "index")), {-1});
  NodeId src = c.b.reshape(c.tensor(2, "source"), {-1});
  const bool acc = c.flag(3, "accumulate", false);
  NodeId y = c.b.op(Op::ScatterElements, {c.b.reshape(x, {-1}), flat_idx, src},
                    {{"axis", int64_t(0)}, {"reduction", std::string(acc ? "add" : "none")}});
  return Value::tensor(c.b.reshape(y, c.dims(x)));
}

// max_unpool2d / 3d(self, indices, output_size[, stride, padding]): each value
// put at its flat index in a zero plane of output_size (the indices max_pool
// returned), as a scatter along the flattened spatial dims.
Value max_unpool(LowerCtx& c) {
  NodeId x = c.tensor(0, "self"), idx = as_index(c, c.tensor(1, "indices"));
  const std::vector<int64_t> size = c.ints(2, "output_size");
  const Dims d = c.dims(x);
  const size_t sp = size.size(), lead = d.size() - std::min(d.size(), sp);
  RLX_CHECK(d.size() >= sp && c.dims(idx) == d, "max_unpool: self ", dims_str(d), " and indices ",
            dims_str(c.dims(idx)), " must match and have ", sp, " spatial dims");
  Dims flat(d.begin(), d.begin() + int64_t(lead)), out = flat;
  int64_t in_plane = 1, out_plane = 1;
  for (size_t i = 0; i < sp; ++i) {
    in_plane *= d[lead + i];
    out_plane *= size[i];
    out.push_back(size[i]);
  }
  Dims zeros = flat;
  flat.push_back(in_plane);
  zeros.push_back(out_plane);
  NodeId y =
      c.b.op(Op::ScatterElements,
             {c.b.full(zeros, 0, c.shape(x).dtype), c.b.reshape(idx, flat), c.b.reshape(x, flat)},
             {{"axis", int64_t(lead)}});
  return Value::tensor(c.b.reshape(y, out));
}

}  // namespace

void register_indexing(Registry& r) {
  r.add("aten.repeat_interleave.Tensor", repeat_interleave_indices);
  r.add("aten.index_put", index_put);
  r.add("aten.gather", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self"), idx = as_index(c, c.tensor(2, "index"));
    // A 0-d self or index (PyTorch lets either stand for one element of a 1-d one) reads as [1];
    // the result has index's shape.
    if (c.rank(x) == 0 || (c.rank(idx) == 0 && c.rank(x) == 1)) {
      const Dims d = c.dims(idx);
      const NodeId y = c.b.op(Op::GatherElements, {c.b.reshape(x, {-1}), c.b.reshape(idx, {-1})},
                              {{"axis", int64_t(0)}});
      return Value::tensor(c.b.reshape(y, d));
    }
    return Value::tensor(c.b.op(Op::GatherElements, {x, idx}, {{"axis", c.i(1, "dim")}}));
  });
  // isin(elements, test_elements, assume_unique, invert): each element compared
  // with every test element.
  r.add("aten.isin", [](LowerCtx& c) {
    const Value* e = c.arg(0, "elements");
    const Value* t = c.arg(1, "test_elements");
    RLX_CHECK(e && t, "isin needs elements and test_elements");
    const DType dt = promote(c, *e, *t);
    const NodeId x = c.as_tensor(*e, dt), tests = c.b.reshape(c.as_tensor(*t, dt), {-1});
    const bool invert = c.flag(3, "invert", false);
    const int64_t n = c.dims(tests)[0];
    if (n == 0) return Value::tensor(c.b.full(c.dims(x), invert ? 1 : 0, DType::Bool));
    Dims d = c.dims(x);
    d.push_back(1);
    const NodeId hits = c.b.reduce(
        Op::ReduceSum, c.cast(c.b.op(Op::Eq, {c.b.reshape(x, d), tests}), DType::I64), {-1});
    return Value::tensor(c.b.op(invert ? Op::Eq : Op::Gt, {hits, c.scalar(0, DType::I64)}));
  });
  // searchsorted(seq, values, *, out_int32, right, side, sorter) and
  // bucketize(values, boundaries, *, out_int32, right): how many sequence
  // elements are < v (left) or <= v (right), counted over the last dim.
  for (const bool bucket : {false, true}) {
    r.add(bucket ? "aten.bucketize" : "aten.searchsorted", [bucket](LowerCtx& c) {
      NodeId seq = c.tensor(bucket ? 1 : 0, bucket ? "boundaries" : "sorted_sequence");
      const Value* vv = c.arg(bucket ? 0 : 1, "self");
      RLX_CHECK(vv, c.node.op, " needs values");
      const DType dt = promote(c, Value::tensor(seq), *vv);
      NodeId v = c.as_tensor(*vv, dt);
      seq = c.cast(seq, dt);
      bool right = c.flag(99, "right", false);
      if (!bucket && c.str(99, "side", "") == "right") right = true;
      if (!bucket && c.has(99, "sorter"))
        seq = c.b.op(Op::GatherElements, {seq, as_index(c, c.tensor(99, "sorter"))},
                     {{"axis", int64_t(-1)}});
      const Dims vd = c.dims(v);
      Dims vcol = vd;
      vcol.push_back(1);
      NodeId s = seq;
      if (c.rank(seq) > 1) {  // [..., M] against [..., K]: seq as [..., 1, M]
        Dims sd = c.dims(seq);
        sd.insert(sd.end() - 1, 1);
        s = c.b.reshape(seq, sd);
      }
      const NodeId below = c.b.op(right ? Op::Le : Op::Lt, {s, c.b.reshape(v, vcol)});
      const NodeId n = c.b.reduce(Op::ReduceSum, c.cast(below, DType::I64), {-1});
      return Value::tensor(c.cast(n, c.out_dtype()));
    });
  }
  // masked_scatter(self, mask, source): source's elements, in order, where the
  // mask (broadcast to self) is true: the k-th true place takes source[k], k
  // from a running count of the mask.
  r.add("aten.masked_scatter", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const Dims od = c.out().shape;
    NodeId m = c.cast(c.tensor(1, "mask"), DType::Bool);
    if (c.dims(m) != od) m = c.b.op(Op::Expand, {m}, {{"shape", od}});
    const NodeId xs = c.dims(x) == od ? x : c.b.op(Op::Expand, {x}, {{"shape", od}});
    const NodeId src = c.b.reshape(c.cast(c.tensor(2, "source"), c.shape(x).dtype), {-1});
    if (numel(od) == 0 || numel(c.dims(src)) == 0) return Value::tensor(xs);
    const NodeId flat = c.b.reshape(m, {-1});
    NodeId k = c.b.op(Op::CumSum, {c.cast(flat, DType::I64)}, {{"axis", int64_t(0)}});
    k = c.b.op(Op::Min,
               {c.b.op(Op::Max, {c.b.sub(k, c.scalar(1, DType::I64)), c.scalar(0, DType::I64)}),
                c.scalar(double(numel(c.dims(src)) - 1), DType::I64)});
    const NodeId taken = c.b.reshape(c.b.op(Op::Gather, {src, k}, {{"axis", int64_t(0)}}), od);
    return Value::tensor(c.b.op(Op::Where, {m, taken, xs}));
  });
  r.add("aten.index_select", [](LowerCtx& c) {
    // PyTorch treats a 0-d index as [1] and a 0-d self as [1] whose result
    // is 0-d again; gather itself needs data of rank >= 1.
    NodeId x = c.tensor(0, "self"), idx = as_index(c, c.tensor(2, "index"));
    RLX_CHECK(c.rank(idx) <= 1, "index_select: index must be 0-d or 1-d, got ", c.shape(idx).str());
    if (c.rank(idx) == 0) idx = c.b.reshape(idx, {1});
    const bool scalar = c.rank(x) == 0;
    if (scalar) x = c.b.reshape(x, {1});
    NodeId y = c.b.op(Op::Gather, {x, idx}, {{"axis", c.i(1, "dim")}});
    return Value::tensor(scalar ? c.b.reshape(y, {}) : y);
  });
  r.add("aten.index", index_tensor);
  r.add("aten.scatter_reduce", scatter_reduce);
  r.add("aten.take", take);
  // index_add(self, dim, index, source, alpha): source (times alpha) added at index along dim.
  r.add("aten.index_add", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    NodeId src = c.cast(c.tensor(3, "source"), c.shape(x).dtype);
    if (c.has(4, "alpha") && c.f(4, "alpha") != 1)
      src = c.b.mul(src, c.scalar(c.f(4, "alpha"), c.shape(x).dtype));
    const IndexAlong a = index_along(c, x, src);
    return index_scatter(c, a,
                         c.b.op(Op::ScatterElements, {a.x, a.idx, a.src},
                                {{"axis", a.axis}, {"reduction", std::string("add")}}));
  });
  r.add("aten.index_copy", [](LowerCtx& c) {
    const IndexAlong a = index_along(c, c.tensor(0, "self"), c.tensor(3, "source"));
    return index_scatter(c, a,
                         c.b.op(Op::ScatterElements, {a.x, a.idx, a.src}, {{"axis", a.axis}}));
  });
  // index_reduce(self, dim, index, source, reduce, include_self): scatter_reduce
  // with the index expanded along dim.
  r.add("aten.index_reduce", [](LowerCtx& c) {
    const IndexAlong a = index_along(c, c.tensor(0, "self"), c.tensor(3, "source"));
    return index_scatter(c, a,
                         scatter_reduce_into(c, a.x, a.axis, a.idx, a.src, c.str(4, "reduce", ""),
                                             c.flag(5, "include_self", true)));
  });
  // index_fill(self, dim, index, value): value wherever dim's position is in index.
  r.add("aten.index_fill", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    NodeId idx = as_index(c, c.tensor(2, "index"));
    const DType t = c.shape(x).dtype;
    const bool scalar = c.rank(x) == 0;
    if (scalar) x = c.b.reshape(x, {1});
    idx = c.b.reshape(idx, {-1});
    const int64_t axis = normalize_axis(c.i(1, "dim"), c.rank(x));
    const int64_t n = c.dims(x)[size_t(axis)];
    const NodeId hit =
        c.b.op(Op::ScatterElements,
               {c.b.full({n}, 0, DType::I64), idx, c.b.full(c.dims(idx), 1, DType::I64)},
               {{"axis", int64_t(0)}});
    Dims lay(size_t(c.rank(x)), 1);
    lay[size_t(axis)] = n;
    const NodeId mask = c.b.reshape(c.b.op(Op::Gt, {hit, c.scalar(0, DType::I64)}), lay);
    const Value* v = c.arg(3, "value");
    RLX_CHECK(v, "index_fill needs a value");
    NodeId val = c.as_tensor(*v, t);
    if (c.rank(val) > 0) val = c.b.reshape(val, {});
    const NodeId y = c.b.op(Op::Where, {mask, val, x});
    return Value::tensor(scalar ? c.b.reshape(y, {}) : y);
  });
  // scatter_add(self, dim, index, src): src cut to index's shape, added at index.
  r.add("aten.scatter_add", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self"), idx = as_index(c, c.tensor(2, "index"));
    NodeId src = c.cast(c.tensor(3, "src"), c.shape(x).dtype);
    if (numel(c.dims(idx)) == 0) return Value::tensor(x);
    if (c.rank(x) == 0) {  // 0-d self, index and src: one element at [0]
      auto one = [&](NodeId v) { return c.b.reshape(v, {1}); };
      return Value::tensor(
          c.b.reshape(c.b.op(Op::ScatterElements, {one(x), one(idx), one(src)},
                             {{"axis", int64_t(0)}, {"reduction", std::string("add")}}),
                      {}));
    }
    const Dims id = c.dims(idx), sd = c.dims(src);
    for (size_t k = 0; k < id.size(); ++k)
      if (sd[k] != id[k])
        src =
            c.b.op(Op::Slice, {src}, {{"axis", int64_t(k)}, {"start", int64_t(0)}, {"end", id[k]}});
    return Value::tensor(c.b.op(Op::ScatterElements, {x, idx, src},
                                {{"axis", c.i(1, "dim")}, {"reduction", std::string("add")}}));
  });
  r.add("aten.put", put);
  r.add("aten.max_unpool2d", max_unpool);
  r.add("aten.max_unpool3d", max_unpool);
  r.add("aten.scatter", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    const Value* src = c.arg(3, "src");
    RLX_CHECK(src, "scatter needs src or value");
    NodeId idx = as_index(c, c.tensor(2, "index"));
    NodeId upd = src->kind == Value::Tensor
                     ? src->id
                     : c.b.full(c.dims(idx), src->number(), c.shape(x).dtype);
    std::string reduce = c.str(4, "reduce", "none");
    if (reduce == "multiply") reduce = "mul";
    if (c.rank(x) == 0) {  // 0-d self, index and src: one element at [0]
      auto one = [&](NodeId v) { return c.b.reshape(v, {1}); };
      return Value::tensor(c.b.reshape(c.b.op(Op::ScatterElements, {one(x), one(idx), one(upd)},
                                              {{"axis", int64_t(0)}, {"reduction", reduce}}),
                                       {}));
    }
    return Value::tensor(c.b.op(Op::ScatterElements, {x, idx, upd},
                                {{"axis", c.i(1, "dim")}, {"reduction", reduce}}));
  });
}

}  // namespace rlx::torch_ir
