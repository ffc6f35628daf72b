// Reductions over runs of an axis that the inputs delimit (segment_reduce by lengths or offsets,
// embedding_bag by offsets) and the class-indexed losses without an rlx op (nll_loss2d,
// multi_margin_loss, multilabel_margin_loss): composed from masks built at run time, so
// lengths, offsets and targets may be graph inputs.
#include <cmath>
#include <limits>
#include <tuple>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

enum class Seg { Sum, Mean, Max, Min, Prod };

Seg seg_kind(const LowerCtx& c, const std::string& name) {
  if (name == "sum") return Seg::Sum;
  if (name == "mean") return Seg::Mean;
  if (name == "max") return Seg::Max;
  if (name == "min") return Seg::Min;
  RLX_CHECK(name == "prod", c.node.op, ": unknown reduction '", name, "'");
  return Seg::Prod;
}

// x [lead..., N, trail...] reduced over the runs [start, end) of its axis `a` given per segment
// (starts / ends [lead..., S], i64) into [lead..., S, trail...]. Empty runs give the reduction's
// identity (NaN for mean); NaNs propagate as PyTorch's segment kernels propagate them.
NodeId reduce_runs(LowerCtx& c, NodeId x, int64_t a, NodeId starts, NodeId ends, Seg how,
                   NodeId* count_out = nullptr, NodeId keep = -1) {
  const Dims d = c.dims(x);
  const DType t = c.shape(x).dtype;
  const int64_t N = d[size_t(a)], S = c.dims(starts).back();
  const size_t trail = d.size() - size_t(a) - 1;
  // mask [lead..., S, N, 1...]: position n lies in segment s.
  const NodeId pos = c.b.arange(N);
  Dims col(d.begin(), d.begin() + a);
  col.push_back(S);
  col.push_back(1);
  NodeId in = c.b.op(Op::LogicalAnd, {c.b.op(Op::Ge, {pos, c.b.reshape(starts, col)}),
                                      c.b.op(Op::Lt, {pos, c.b.reshape(ends, col)})});
  if (keep >= 0) in = c.b.op(Op::LogicalAnd, {in, keep});  // [N]: positions that count at all
  Dims mask_dims = col;
  mask_dims.back() = N;
  mask_dims.insert(mask_dims.end(), trail, 1);
  in = c.b.reshape(in, mask_dims);
  Dims xd = d;
  xd.insert(xd.begin() + a, 1);
  const NodeId xs = c.b.reshape(x, xd);
  const double inf = std::numeric_limits<double>::infinity();
  const double identity = how == Seg::Max ? -inf : how == Seg::Min ? inf : how == Seg::Prod ? 1 : 0;
  const NodeId picked = c.b.op(Op::Where, {in, xs, c.scalar(identity, t)});
  const Op op = how == Seg::Max    ? Op::ReduceMax
                : how == Seg::Min  ? Op::ReduceMin
                : how == Seg::Prod ? Op::ReduceProd
                                   : Op::ReduceSum;
  NodeId r = c.b.reduce(op, picked, {a + 1});
  if (how == Seg::Max || how == Seg::Min) {  // a NaN in the run wins
    const NodeId nan_in = c.b.op(Op::LogicalAnd, {in, c.b.op(Op::Ne, {xs, xs})});
    const NodeId any_nan = c.b.reduce(Op::ReduceMax, c.cast(nan_in, t), {a + 1});
    r = c.b.op(Op::Where, {c.b.op(Op::Gt, {any_nan, c.scalar(0, t)}),
                           c.scalar(std::numeric_limits<double>::quiet_NaN(), t), r});
  }
  if (count_out) *count_out = c.b.reduce(Op::ReduceSum, c.cast(in, t), {a + 1});
  return r;
}

// lengths [..., S] -> (starts, ends) of the runs they delimit, i64.
std::pair<NodeId, NodeId> runs_of_lengths(LowerCtx& c, NodeId lengths) {
  const NodeId len = c.cast(lengths, DType::I64);
  const NodeId ends = c.b.op(Op::CumSum, {len}, {{"axis", int64_t(-1)}});
  return {c.b.sub(ends, len), ends};
}

// offsets [..., S + 1] -> (offsets[..., :-1], offsets[..., 1:]), i64.
std::pair<NodeId, NodeId> runs_of_offsets(LowerCtx& c, NodeId offsets) {
  const NodeId off = c.cast(offsets, DType::I64);
  const int64_t axis = c.rank(off) - 1, n = c.dims(off).back();
  auto part = [&](int64_t start, int64_t end) {
    return c.b.op(Op::Slice, {off}, {{"axis", axis}, {"start", start}, {"end", end}});
  };
  return {part(0, n - 1), part(1, n)};
}

// segment_reduce(data, reduce, *, lengths, indices, offsets, axis, unsafe, initial): initial
// takes part in every segment (mean divides by the length alone; an empty one gives initial).
Value segment_reduce(LowerCtx& c) {
  const NodeId x = c.tensor(0, "data");
  const DType t = c.shape(x).dtype;
  const Seg how = seg_kind(c, c.str(1, "reduce", ""));
  RLX_CHECK(!c.has(3, "indices"), c.node.op, ": indices are not supported (nor by PyTorch)");
  RLX_CHECK(c.has(2, "lengths") || c.has(4, "offsets"), c.node.op, ": needs lengths or offsets");
  const int64_t a = normalize_axis(c.i(5, "axis", 0), c.rank(x));
  auto [starts, ends] = c.has(2, "lengths") ? runs_of_lengths(c, c.tensor(2, "lengths"))
                                            : runs_of_offsets(c, c.tensor(4, "offsets"));
  RLX_CHECK(c.rank(starts) == a + 1, c.node.op, ": lengths/offsets must have the ", a,
            " dims before the axis and one more, got ", c.shape(starts).str());
  NodeId count = -1;
  const NodeId r = reduce_runs(c, x, a, starts, ends, how == Seg::Mean ? Seg::Sum : how, &count);
  const bool has_init = c.has(7, "initial");
  const NodeId init = has_init ? c.scalar(c.f(7, "initial"), t) : -1;
  switch (how) {
    case Seg::Sum:
      return Value::tensor(has_init ? c.b.add(r, init) : r);
    case Seg::Prod:
      return Value::tensor(has_init ? c.b.mul(r, init) : r);
    case Seg::Max:
    case Seg::Min: {
      if (!has_init) return Value::tensor(r);
      const NodeId m = c.b.binary(how == Seg::Max ? Op::Max : Op::Min, r, init);
      return Value::tensor(c.b.op(Op::Where, {c.b.op(Op::Ne, {r, r}), r, m}));  // NaN stays
    }
    case Seg::Mean: {
      if (!has_init) return Value::tensor(c.b.div(r, count));  // empty: 0 / 0, NaN
      const NodeId empty = c.b.op(Op::Eq, {count, c.scalar(0, t)});
      return Value::tensor(c.b.op(Op::Where, {empty, init, c.b.div(c.b.add(r, init), count)}));
    }
  }
  return Value::tensor(r);
}

// _embedding_bag(_forward_only)(weight, indices, offsets, scale_grad_by_freq, mode, sparse,
// per_sample_weights, include_last_offset, padding_idx) -> (output, offset2bag, bag_size,
// max_indices): each bag of rows of weight summed (mode 0), averaged (1) or maxed (2), rows of
// padding_idx left out, an empty bag zeros. Only the output is computed.
Value embedding_bag(LowerCtx& c) {
  const NodeId w = c.tensor(0, "weight");
  NodeId idx = c.cast(c.tensor(1, "indices"), DType::I64);
  const DType t = c.shape(w).dtype;
  const int64_t mode = c.i(4, "mode", 0);
  RLX_CHECK(mode >= 0 && mode <= 2, c.node.op, ": unknown mode ", mode);
  const bool last = c.flag(7, "include_last_offset", false);
  NodeId starts, ends;
  if (c.rank(idx) == 2) {  // one bag per row
    const int64_t B = c.dims(idx)[0], K = c.dims(idx)[1];
    starts = c.b.arange(B, 0, double(K));
    ends = c.b.arange(B, double(K), double(K));
    idx = c.b.reshape(idx, {B * K});
  } else {
    RLX_CHECK(c.rank(idx) == 1 && c.has(2, "offsets"), c.node.op,
              ": 1-d indices need offsets, got ", c.shape(idx).str());
    const NodeId off = c.cast(c.tensor(2, "offsets"), DType::I64);
    if (last) {
      std::tie(starts, ends) = runs_of_offsets(c, off);
    } else {
      starts = off;
      ends = c.b.concat({c.b.op(Op::Slice, {off}, {{"axis", int64_t(0)}, {"start", int64_t(1)}}),
                         c.b.full({1}, double(c.dims(idx)[0]), DType::I64)},
                        0);
    }
  }
  NodeId rows = c.b.op(Op::Gather, {w, idx}, {{"axis", int64_t(0)}});
  if (c.has(6, "per_sample_weights")) {
    RLX_CHECK(mode == 0, c.node.op, ": per_sample_weights need mode sum");
    rows = c.b.mul(rows, c.b.reshape(c.cast(c.tensor(6, "per_sample_weights"), t), {-1, 1}));
  }
  NodeId keep = -1;
  if (const int64_t pad = c.i(8, "padding_idx", -1); pad >= 0)
    keep = c.b.op(Op::Ne, {idx, c.scalar(double(pad), DType::I64)});
  NodeId count = -1;
  const Seg how = mode == 2 ? Seg::Max : Seg::Sum;
  NodeId r = reduce_runs(c, rows, 0, starts, ends, how, &count, keep);
  if (mode == 1) r = c.b.div(r, c.b.binary(Op::Max, count, c.scalar(1, t)));
  if (mode == 2)
    r = c.b.op(Op::Where, {c.b.op(Op::Eq, {count, c.scalar(0, t)}), c.scalar(0, t), r});
  return Value::tuple({r, -1, -1, -1});
}

// x [N, C] (a 1-d or 0-d x is one row) and its target [N] as a column [N, 1] of i64.
std::pair<NodeId, NodeId> rows_and_targets(LowerCtx& c, NodeId x, NodeId target) {
  const Dims d = c.dims(x);
  RLX_CHECK(d.size() <= 2, c.node.op, ": expected [C] or [N, C] input, got ", c.shape(x).str());
  const int64_t C = d.empty() ? 1 : d.back(), N = d.size() == 2 ? d[0] : 1;
  return {c.b.reshape(x, {N, C}), c.b.reshape(c.cast(target, DType::I64), {N, -1})};
}

// nll_loss2d_forward(x [N, C, H, W], target [N, H, W], weight, reduction, ignore_index) ->
// (loss, total_weight): -w[t] x[n, t, h, w] over the pixels whose target is not ignored.
Value nll_loss2d(LowerCtx& c) {
  const NodeId x = c.tensor(0, "self");
  const DType t = c.shape(x).dtype;
  const NodeId tgt = c.cast(c.tensor(1, "target"), DType::I64);
  RLX_CHECK(c.rank(x) == 4 && c.rank(tgt) == 3, c.node.op, ": expected x [N, C, H, W] and target ",
            "[N, H, W], got ", c.shape(x).str(), " and ", c.shape(tgt).str());
  const NodeId valid =
      c.b.op(Op::Ne, {tgt, c.scalar(double(c.i(4, "ignore_index", -100)), DType::I64)});
  const NodeId safe = c.b.op(Op::Where, {valid, tgt, c.scalar(0, DType::I64)});
  Dims td = c.dims(tgt);
  Dims col = td;
  col.insert(col.begin() + 1, 1);
  const NodeId picked = c.b.reshape(
      c.b.op(Op::GatherElements, {x, c.b.reshape(safe, col)}, {{"axis", int64_t(1)}}), td);
  NodeId w = c.cast(valid, t);
  if (c.has(2, "weight")) {
    const NodeId wc =
        c.b.op(Op::Gather, {c.cast(c.tensor(2, "weight"), t), safe}, {{"axis", int64_t(0)}});
    w = c.b.mul(w, wc);
  }
  const NodeId loss = c.b.mul(c.b.unary(Op::Neg, picked), w);
  const NodeId total = c.b.reduce(Op::ReduceSum, w, {}, false);
  return Value::tuple({reduce_loss(c, loss, 3, total), total});
}

// multi_margin_loss(x, target, p, margin, weight, reduction): per row, the sum over the classes
// i != y of max(0, margin - x[y] + x[i])^p (times weight[y]) over C.
Value multi_margin(LowerCtx& c) {
  const NodeId x0 = c.tensor(0, "self");
  const DType t = c.shape(x0).dtype;
  auto [x, y] = rows_and_targets(c, x0, c.tensor(1, "target"));
  const int64_t p = c.i(2, "p", 1), C = c.dims(x)[1];
  RLX_CHECK(p == 1 || p == 2, c.node.op, ": p must be 1 or 2, got ", p);
  const NodeId xy = c.b.op(Op::GatherElements, {x, y}, {{"axis", int64_t(1)}});
  NodeId z = c.b.relu(c.b.add(c.b.sub(c.scalar(c.f(3, "margin", 1.0), t), xy), x));
  if (p == 2) z = c.b.mul(z, z);
  if (c.has(4, "weight"))
    z = c.b.mul(z,
                c.b.op(Op::Gather, {c.cast(c.tensor(4, "weight"), t), y}, {{"axis", int64_t(0)}}));
  const NodeId own = c.b.op(Op::Eq, {c.b.arange(C), y});
  z = c.b.op(Op::Where, {own, c.scalar(0, t), z});
  NodeId loss = c.b.div(c.b.reduce(Op::ReduceSum, z, {1}), c.scalar(double(C), t));
  if (c.rank(x0) <= 1) loss = c.b.reshape(loss, {});
  return Value::tensor(reduce_loss(c, loss, 5));
}

// multilabel_margin_loss_forward(x, target, reduction) -> (loss, is_target): the targets of a row
// are its entries before the first -1; per row, the sum over targets j and non-targets i of
// max(0, 1 - (x[j] - x[i])) over C.
Value multilabel_margin(LowerCtx& c) {
  const NodeId x0 = c.tensor(0, "self");
  const DType t = c.shape(x0).dtype;
  auto [x, y] = rows_and_targets(c, x0, c.tensor(1, "target"));
  const int64_t N = c.dims(x)[0], C = c.dims(x)[1];
  RLX_CHECK(c.dims(y)[1] == C, c.node.op, ": target must have x's shape, got ",
            c.shape(c.tensor(1, "target")).str(), " for ", c.shape(x0).str());
  const NodeId nonneg = c.cast(c.b.op(Op::Ge, {y, c.scalar(0, DType::I64)}), t);
  const NodeId valid = c.b.op(
      Op::Gt, {c.b.op(Op::CumProd, {nonneg}, {{"axis", int64_t(1)}}), c.scalar(0, t)});  // [N, J]
  const NodeId safe = c.b.op(Op::Where, {valid, y, c.scalar(0, DType::I64)});
  const NodeId hit =
      c.b.op(Op::LogicalAnd, {c.b.op(Op::Eq, {c.b.reshape(safe, {N, C, 1}), c.b.arange(C)}),
                              c.b.reshape(valid, {N, C, 1})});                      // [N, J, I]
  const NodeId is_target = c.b.reduce(Op::ReduceMax, c.cast(hit, t), {1});          // [N, I]
  const NodeId xy = c.b.op(Op::GatherElements, {x, safe}, {{"axis", int64_t(1)}});  // [N, J]
  NodeId h = c.b.relu(
      c.b.add(c.b.sub(c.scalar(1, t), c.b.reshape(xy, {N, C, 1})), c.b.reshape(x, {N, 1, C})));
  h = c.b.mul(h, c.b.reshape(c.cast(valid, t), {N, C, 1}));
  h = c.b.mul(h, c.b.reshape(c.b.sub(c.scalar(1, t), is_target), {N, 1, C}));
  NodeId loss = c.b.div(c.b.reduce(Op::ReduceSum, h, {1, 2}), c.scalar(double(C), t));
  NodeId targets = is_target;
  if (c.rank(x0) <= 1) {
    loss = c.b.reshape(loss, {});
    targets = c.b.reshape(targets, c.dims(x0));
  }
  return Value::tuple({reduce_loss(c, loss, 2), targets});
}

}  // namespace

void register_segment(Registry& r) {
  r.add("aten.segment_reduce", segment_reduce);
  r.add("aten._embedding_bag_forward_only", embedding_bag);
  r.add("aten._embedding_bag", embedding_bag);
  r.add("aten.nll_loss2d_forward", nll_loss2d);
  r.add("aten.multi_margin_loss", multi_margin);
  r.add("aten.multilabel_margin_loss_forward", multilabel_margin);
}

}  // namespace rlx::torch_ir
