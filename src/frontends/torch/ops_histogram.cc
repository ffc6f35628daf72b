// histogram and histogramdd as PyTorch's kernel bins them: equal-width edges placed as
// torch.linspace places them (or edges given, in any order), each value's bin found by the same
// binary search (std::upper_bound), values outside the outer edges (and NaN) in no bin, the last
// edge in the last bin; weights and density. One-hot cells summed: for the small bin counts
// these functions are used with.
#include <cmath>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

NodeId i64(LowerCtx& c, double v) { return c.scalar(v, DType::I64); }

NodeId edges_slice(LowerCtx& c, NodeId v, int64_t a, int64_t b) {
  return c.b.op(Op::Slice, {v}, {{"axis", int64_t(0)}, {"start", a}, {"end", b}});
}

// Edges of `bins` equal bins over [lo, hi] (0-d tensors), torch.linspace's way: from the left
// end for the first half, from the right end after.
NodeId linspace_edges(LowerCtx& c, NodeId lo, NodeId hi, int64_t bins, DType t) {
  const NodeId k = c.b.arange(bins + 1, 0, 1, t);
  const NodeId step = c.b.div(c.b.sub(hi, lo), c.scalar(double(bins), t));
  const NodeId left = c.b.add(lo, c.b.mul(step, k));
  const NodeId right = c.b.sub(hi, c.b.mul(step, c.b.sub(c.scalar(double(bins), t), k)));
  return c.b.op(Op::Where, {c.b.op(Op::Lt, {k, c.scalar(double((bins + 1) / 2), t)}), left, right});
}

// The outer edges of column x [n] (or the given range): its min and max, widened by 0.5 each
// way when equal, [0, 1] for no values.
std::pair<NodeId, NodeId> outer_edges(LowerCtx& c, NodeId x, const double* range, DType t) {
  if (range) {
    RLX_CHECK(range[0] <= range[1], c.node.op, ": range must be increasing, got ", range[0],
              " and ", range[1]);
    const double pad = range[0] == range[1] ? 0.5 : 0;
    return {c.scalar(range[0] - pad, t), c.scalar(range[1] + pad, t)};
  }
  if (numel(c.dims(x)) == 0) return {c.scalar(0, t), c.scalar(1, t)};
  NodeId lo = c.b.reduce(Op::ReduceMin, x, {0}, false);
  NodeId hi = c.b.reduce(Op::ReduceMax, x, {0}, false);
  const NodeId same = c.b.op(Op::Eq, {lo, hi});
  lo = c.b.op(Op::Where, {same, c.b.sub(lo, c.scalar(0.5, t)), lo});
  hi = c.b.op(Op::Where, {same, c.b.add(hi, c.scalar(0.5, t)), hi});
  return {lo, hi};
}

// Each value of x [n, 1]'s bin among edges [B + 1] ([n, 1], i64) and whether it is in one.
std::pair<NodeId, NodeId> bin_of(LowerCtx& c, NodeId x, NodeId edges) {
  const int64_t n = c.dims(x)[0], E = c.dims(edges)[0], B = E - 1;
  RLX_CHECK(B >= 1, c.node.op, ": needs at least 2 bin edges, got ", c.shape(edges).str());
  const NodeId inside = c.b.op(Op::LogicalAnd, {c.b.op(Op::Ge, {x, edges_slice(c, edges, 0, 1)}),
                                                c.b.op(Op::Le, {x, edges_slice(c, edges, B, E)})});
  // std::upper_bound, step by step: first / count per value.
  NodeId first = c.b.full({n, 1}, 0, DType::I64), count = c.b.full({n, 1}, double(E), DType::I64);
  for (int64_t left = E; left > 0; left /= 2) {
    const NodeId half = c.b.op(Op::Div, {count, i64(c, 2)}, {{"rounding", std::string("floor")}});
    const NodeId mid = c.b.add(first, half);
    const NodeId at = c.b.op(Op::Gather, {edges, c.b.binary(Op::Min, mid, i64(c, double(B)))},
                             {{"axis", int64_t(0)}});
    const NodeId right =
        c.b.op(Op::LogicalAnd, {c.b.op(Op::Le, {at, x}), c.b.op(Op::Gt, {count, i64(c, 0)})});
    first = c.b.op(Op::Where, {right, c.b.add(mid, i64(c, 1)), first});
    count = c.b.op(Op::Where, {right, c.b.sub(c.b.sub(count, half), i64(c, 1)), half});
  }
  return {c.b.binary(Op::Min, c.b.sub(first, i64(c, 1)), i64(c, double(B - 1))), inside};
}

// The histogram of the rows of x [n, D] over per-dim edges: [B_0, ..., B_{D-1}].
NodeId histogram_dd(LowerCtx& c, NodeId x, const std::vector<NodeId>& edges, size_t weight_at,
                    size_t density_at) {
  const DType t = c.shape(x).dtype;
  const int64_t n = c.dims(x)[0];
  Dims bins;
  NodeId cell = c.b.full({n, 1}, 0, DType::I64), inside = -1;
  for (size_t k = 0; k < edges.size(); ++k) {
    const NodeId col = c.b.op(
        Op::Slice, {x}, {{"axis", int64_t(1)}, {"start", int64_t(k)}, {"end", int64_t(k + 1)}});
    auto [bin, in] = bin_of(c, col, edges[k]);
    bins.push_back(c.dims(edges[k])[0] - 1);
    cell = c.b.add(c.b.mul(cell, i64(c, double(bins.back()))), bin);
    inside = inside < 0 ? in : c.b.op(Op::LogicalAnd, {inside, in});
  }
  const int64_t cells = numel(bins);
  RLX_CHECK(cells <= 65536, c.node.op, ": ", cells, " bins is more than this composition allows");
  NodeId w = c.cast(c.b.op(Op::LogicalAnd, {inside, c.b.op(Op::Eq, {cell, c.b.arange(cells)})}),
                    t);  // [n, cells]
  if (c.has(weight_at, "weight"))
    w = c.b.mul(w, c.b.reshape(c.cast(c.tensor(weight_at, "weight"), t), {n, 1}));
  NodeId hist = c.b.reshape(c.b.reduce(Op::ReduceSum, w, {0}), bins);
  if (c.flag(density_at, "density", false)) {
    hist = c.b.div(hist, c.b.reduce(Op::ReduceSum, hist, {}, false));
    for (size_t k = 0; k < edges.size(); ++k) {
      const int64_t B = bins[k];
      Dims shape(bins.size(), 1);
      shape[k] = B;
      const NodeId width =
          c.b.sub(edges_slice(c, edges[k], 1, B + 1), edges_slice(c, edges[k], 0, B));
      hist = c.b.div(hist, c.b.reshape(width, shape));
    }
  }
  return hist;
}

// x as rows [n, D] of D-dim points (histogramdd's input [..., D]; histogram's flattened, D = 1).
NodeId points(LowerCtx& c, NodeId x, bool one_dim) {
  const Dims d = c.dims(x);
  const int64_t D = one_dim || d.empty() ? 1 : d.back();
  return c.b.reshape(x, {numel(d) / std::max<int64_t>(D, 1), D});
}

// Equal-width edges per dim for bins[k] bins over range (pairs lo, hi per dim) or the data.
std::vector<NodeId> equal_edges(LowerCtx& c, NodeId pts, const std::vector<int64_t>& bins,
                                size_t range_at) {
  const DType t = c.shape(pts).dtype;
  std::vector<double> range;
  if (const Value* r = c.arg(range_at, "range"); r && r->kind == Value::List)
    for (const Value& v : r->items) range.push_back(v.number());
  RLX_CHECK(range.empty() || range.size() == 2 * bins.size(), c.node.op, ": range needs ",
            2 * bins.size(), " values, got ", range.size());
  std::vector<NodeId> edges;
  for (size_t k = 0; k < bins.size(); ++k) {
    RLX_CHECK(bins[k] > 0, c.node.op, ": bins must be positive, got ", bins[k]);
    const NodeId col =
        c.b.reshape(c.b.op(Op::Slice, {pts},
                           {{"axis", int64_t(1)}, {"start", int64_t(k)}, {"end", int64_t(k + 1)}}),
                    {-1});
    auto [lo, hi] = outer_edges(c, col, range.empty() ? nullptr : &range[2 * k], t);
    edges.push_back(linspace_edges(c, lo, hi, bins[k], t));
  }
  return edges;
}

// bins as histogramdd's int[]: one per dim (a single value for every dim).
std::vector<int64_t> bins_per_dim(LowerCtx& c, NodeId pts) {
  std::vector<int64_t> bins = c.ints(1, "bins");
  const int64_t D = c.dims(pts)[1];
  if (bins.size() == 1) bins.assign(size_t(D), bins[0]);
  RLX_CHECK(int64_t(bins.size()) == D, c.node.op, ": ", bins.size(), " bin counts for ", D,
            "-d points");
  return bins;
}

}  // namespace

void register_histogram(Registry& r) {
  // histogram.bins_tensor(x, bins: edges, *, weight, density) -> (hist, edges)
  r.add("aten.histogram.bins_tensor", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const NodeId edges = c.cast(c.tensor(1, "bins"), c.shape(x).dtype);
    return Value::tuple({histogram_dd(c, points(c, x, true), {edges}, 2, 3), edges});
  });
  // histogram.bin_ct(x, bins, *, range, weight, density) -> (hist, edges)
  r.add("aten.histogram.bin_ct", [](LowerCtx& c) {
    const NodeId pts = points(c, c.tensor(0, "self"), true);
    const auto edges = equal_edges(c, pts, {c.i(1, "bins", 100)}, 2);
    return Value::tuple({histogram_dd(c, pts, edges, 3, 4), edges[0]});
  });
  // histogramdd's pieces: the edges, and the histogram for bin counts or for edges.
  r.add("aten._histogramdd_bin_edges", [](LowerCtx& c) {  // (x, bins, *, range, weight, density)
    const NodeId pts = points(c, c.tensor(0, "self"), false);
    return Value::tuple(equal_edges(c, pts, bins_per_dim(c, pts), 2));
  });
  r.add("aten._histogramdd_from_bin_cts", [](LowerCtx& c) {  // (x, bins, *, range, weight, density)
    const NodeId pts = points(c, c.tensor(0, "self"), false);
    return Value::tensor(histogram_dd(c, pts, equal_edges(c, pts, bins_per_dim(c, pts), 2), 3, 4));
  });
  r.add("aten._histogramdd_from_bin_tensors", [](LowerCtx& c) {  // (x, bins[], *, weight, density)
    const NodeId pts = points(c, c.tensor(0, "self"), false);
    std::vector<NodeId> edges;
    for (NodeId e : c.tensors(1, "bins")) edges.push_back(c.cast(e, c.shape(pts).dtype));
    RLX_CHECK(int64_t(edges.size()) == c.dims(pts)[1], c.node.op, ": ", edges.size(),
              " edge tensors for ", c.dims(pts)[1], "-d points");
    return Value::tensor(histogram_dd(c, pts, edges, 2, 3));
  });
}

}  // namespace rlx::torch_ir
