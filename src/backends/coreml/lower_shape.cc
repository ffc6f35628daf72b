// Reductions, softmax, movement and indexing.
#include <algorithm>
#include <climits>

#include "lower.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

std::vector<int64_t> reduce_axes(const ReduceAttrs& ra, int rank) {
  auto axes = ra.axes;
  if (axes.empty())
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  for (auto& a : axes) a = normalize_axis(a, rank);
  return axes;
}

template <const char* Name>
Val lower_reduce(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const auto& a = n.attrs_as<ReduceAttrs>();
  return L.b.op(Name,
                {{"x", x},
                 {"axes", L.b.ints(reduce_axes(a, x.type.rank()), L.hint(n) + "_axes")},
                 {"keep_dims", L.b.boolean(a.keepdims, L.hint(n) + "_keep")}},
                L.type_of(n), L.hint(n));
}
constexpr char kSum[] = "reduce_sum", kMean[] = "reduce_mean", kMax[] = "reduce_max",
               kMin[] = "reduce_min", kProd[] = "reduce_prod", kArgMax[] = "reduce_argmax",
               kArgMin[] = "reduce_argmin";

template <const char* Name>
Val lower_arg(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const auto& a = n.attrs_as<ArgReduceAttrs>();
  return L.b.op(
      Name,
      {{"x", x},
       {"axis", L.b.int_scalar(normalize_axis(a.axis, x.type.rank()), L.hint(n) + "_axis")},
       {"keep_dims", L.b.boolean(a.keepdims, L.hint(n) + "_keep")}},
      L.type_of(n), L.hint(n));
}

Val lower_softmax(Lowering& L, const Node& n) {
  return L.b.op("softmax",
                {{"x", L.in(n, 0)},
                 {"axis", L.b.int_scalar(n.attrs_as<SoftmaxAttrs>().axis, L.hint(n) + "_axis")}},
                L.type_of(n), L.hint(n));
}

// log_softmax = x - reduce_log_sum_exp(x, axis, keep_dims)
Val lower_log_softmax(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  Val lse = L.reduce("reduce_log_sum_exp", x, {n.attrs_as<SoftmaxAttrs>().axis}, true,
                     L.hint(n) + "_lse");
  return L.b.op("sub", {{"x", x}, {"y", lse}}, L.type_of(n), L.hint(n));
}

Val lower_cumsum(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const std::string h = L.hint(n);
  const auto& a = n.attrs_as<CumSumAttrs>();
  return L.b.op("cumsum",
                {{"x", x},
                 {"axis", L.b.int_scalar(a.axis, h + "_axis")},
                 {"exclusive", L.b.boolean(a.exclusive, h + "_excl")},
                 {"reverse", L.b.boolean(a.reverse, h + "_rev")}},
                L.type_of(n), h);
}

// Target shape for reshape: static dims, one unknown dim as -1.
std::vector<int64_t> reshape_target(const Node& n) {
  std::vector<int64_t> s;
  int unknown = 0;
  for (const Dim& d : n.shape.dims) {
    s.push_back(d.is_static() ? d.value : -1);
    unknown += !d.is_static();
  }
  RLX_CHECK(unknown <= 1, "coreml: reshape to ", n.shape.str(), " has more than one symbolic dim");
  return s;
}

Val lower_reshape(Lowering& L, const Node& n) {
  return L.b.op("reshape",
                {{"x", L.in(n, 0)}, {"shape", L.b.ints(reshape_target(n), L.hint(n) + "_shape")}},
                L.type_of(n), L.hint(n));
}

Val lower_transpose(Lowering& L, const Node& n) {
  return L.b.op("transpose",
                {{"x", L.in(n, 0)},
                 {"perm", L.b.ints(n.attrs_as<TransposeAttrs>().perm, L.hint(n) + "_perm")}},
                L.type_of(n), L.hint(n));
}

// x[start:end:step] along `ax`, with start/end already normalized as Python does.
Val slice_axis(Lowering& L, const Val& x, int ax, int64_t start, int64_t end, int64_t step,
               const Type& t, const std::string& h) {
  const int r = x.type.rank();
  std::vector<int64_t> begin(size_t(r), 0), stop(size_t(r), 0), stride(size_t(r), 1);
  std::vector<int64_t> bmask(size_t(r), 1), emask(size_t(r), 1);
  // MIL reads indices like Python (a negative begin/end counts from the end), so
  // an empty slice is written as [0:0:1]: a negative-step begin of -1 would
  // mean the last element, and a begin mask the whole axis.
  const bool empty = step > 0 ? end <= start : end >= start;
  if (empty) start = end = 0;
  begin[size_t(ax)] = start, stop[size_t(ax)] = end, stride[size_t(ax)] = empty ? 1 : step;
  bmask[size_t(ax)] = 0;
  emask[size_t(ax)] = end < 0;  // negative step running past index 0
  auto bools = [&](const std::vector<int64_t>& v, const char* s) {
    Tensor m({int64_t(v.size())}, DType::Bool);
    for (size_t i = 0; i < v.size(); ++i) m.data<bool>()[i] = v[i] != 0;
    return L.b.constant(m, pb::BOOL, h + s);
  };
  return L.b.op("slice_by_index",
                {{"x", x},
                 {"begin", L.b.ints(begin, h + "_begin")},
                 {"end", L.b.ints(stop, h + "_end")},
                 {"stride", L.b.ints(stride, h + "_stride")},
                 {"begin_mask", bools(bmask, "_bmask")},
                 {"end_mask", bools(emask, "_emask")},
                 {"squeeze_mask", bools(std::vector<int64_t>(size_t(r), 0), "_smask")}},
                t, h);
}

Val lower_slice(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const int r = x.type.rank();
  const auto& a = n.attrs_as<SliceAttrs>();
  const int ax = normalize_axis(a.axis, r);
  const int64_t step = a.step;
  const int64_t d = x.type.dims[size_t(ax)];
  RLX_CHECK(d >= 0, "coreml: slice along symbolic axis ", ax, " is not lowered");
  // Python slice normalization, as the IR defines it.
  auto norm = [&](int64_t v, int64_t lo, int64_t hi) {
    if (v < 0) v += d;
    return std::clamp<int64_t>(v, lo, hi);
  };
  int64_t start = slice_start(a), end = slice_end(a);
  start = step > 0 ? norm(start, 0, d) : norm(start, -1, d - 1);
  end = step > 0 ? norm(end, 0, d) : norm(end, -1, d - 1);
  return slice_axis(L, x, ax, start, end, step, L.type_of(n), L.hint(n));
}

// One slice per piece: MIL's own split has several outputs, which the
// package checker's interpreter does not run.
std::vector<Val> lower_split(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const auto& a = n.attrs_as<SplitAttrs>();
  const int ax = normalize_axis(a.axis, x.type.rank());
  std::vector<Val> out;
  int64_t at = 0;
  for (size_t i = 0; i < a.sizes.size(); ++i) {
    out.push_back(slice_axis(L, x, ax, at, at + a.sizes[i], 1, L.type_of(n.results[i]),
                             L.hint(n) + "_" + std::to_string(i)));
    at += a.sizes[i];
  }
  return out;
}

Val lower_concat(Lowering& L, const Node& n) {
  std::vector<Val> vs;
  for (size_t i = 0; i < n.inputs.size(); ++i) vs.push_back(L.in(n, i));
  return L.b.op("concat",
                {{"values", vs},
                 {"axis", L.b.int_scalar(n.attrs_as<AxisAttrs>().axis, L.hint(n) + "_axis")},
                 {"interleave", L.b.boolean(false, L.hint(n) + "_interleave")}},
                L.type_of(n), L.hint(n));
}

// expand: reshape to the output rank, then tile the size-1 dims.
Val lower_expand(Lowering& L, const Node& n) {
  Val x = L.in(n, 0);
  Type out = L.type_of(n);
  RLX_CHECK(out.is_static() && x.type.is_static(), "coreml: expand needs static shapes, got ",
            n.shape.str());
  if (x.type.rank() < out.rank()) {
    std::vector<int64_t> s(size_t(out.rank() - x.type.rank()), 1);
    s.insert(s.end(), x.type.dims.begin(), x.type.dims.end());
    x = L.reshape(x, s, L.hint(n) + "_r");
  }
  std::vector<int64_t> reps;
  for (int i = 0; i < out.rank(); ++i)
    reps.push_back(out.dims[size_t(i)] / std::max<int64_t>(1, x.type.dims[size_t(i)]));
  return L.b.op("tile", {{"x", x}, {"reps", L.b.ints(reps, L.hint(n) + "_reps")}}, out, L.hint(n));
}

Val lower_tile(Lowering& L, const Node& n) {
  return L.b.op(
      "tile",
      {{"x", L.in(n, 0)}, {"reps", L.b.ints(n.attrs_as<TileAttrs>().repeats, L.hint(n) + "_reps")}},
      L.type_of(n), L.hint(n));
}

Val lower_flip(Lowering& L, const Node& n) {
  return L.b.op(
      "reverse",
      {{"x", L.in(n, 0)}, {"axes", L.b.ints(n.attrs_as<FlipAttrs>().axes, L.hint(n) + "_axes")}},
      L.type_of(n), L.hint(n));
}

// MIL pad's mode names.
const char* mil_pad_mode(PadMode m) {
  switch (m) {
    case PadMode::constant:
      return "constant";
    case PadMode::reflect:
      return "reflect";
    case PadMode::replicate:
      return "replicate";
  }
  throw make_error("coreml: bad pad mode ", int(m));
}

Val lower_pad(Lowering& L, const Node& n) {
  const Val& x = L.in(n, 0);
  const auto& a = n.attrs_as<PadAttrs>();
  const auto& pads = a.pads;  // [begin..., end...] -> MIL [b0, e0, b1, e1, ...]
  const size_t r = pads.size() / 2;
  std::vector<int64_t> p;
  for (size_t i = 0; i < r; ++i) p.insert(p.end(), {pads[i], pads[i + r]});
  const std::string h = L.hint(n);
  return L.b.op("pad",
                {{"x", x},
                 {"pad", L.b.ints(p, h + "_pad")},
                 {"mode", L.b.string(mil_pad_mode(a.mode), h + "_mode")},
                 {"constant_val", L.scalar_like(a.value, x, h + "_val")}},
                L.type_of(n), h);
}

Val gather(Lowering& L, const Node& n, const Val& x, const Val& idx, int64_t axis) {
  const std::string h = L.hint(n);
  std::vector<std::pair<std::string, Arg>> in{
      {"x", x}, {"indices", idx}, {"axis", L.b.int_scalar(axis, h + "_axis")}};
  if (L.opset() >= 6) in.push_back({"batch_dims", L.b.int_scalar(0, h + "_bd")});
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("gather", in, L.type_of(n), h);
}
Val lower_gather(Lowering& L, const Node& n) {
  return gather(L, n, L.in(n, 0), L.in(n, 1), n.attrs_as<GatherAttrs>().axis);
}
Val lower_embedding(Lowering& L, const Node& n) { return gather(L, n, L.in(n, 0), L.in(n, 1), 0); }

Val lower_gather_elements(Lowering& L, const Node& n) {
  const std::string h = L.hint(n);
  std::vector<std::pair<std::string, Arg>> in{
      {"x", L.in(n, 0)},
      {"indices", L.in(n, 1)},
      {"axis", L.b.int_scalar(n.attrs_as<AxisAttrs>().axis, h + "_axis")}};
  if (L.opset() >= 7) in.push_back({"validate_indices", L.b.boolean(false, h + "_vi")});
  return L.b.op("gather_along_axis", in, L.type_of(n), h);
}

}  // namespace

void register_shape(LowerTable& t) {
  auto set = [&](Op op, LowerFn f) { t.one[size_t(op)] = f; };
  set(Op::ReduceSum, lower_reduce<kSum>);
  set(Op::ReduceMean, lower_reduce<kMean>);
  set(Op::ReduceMax, lower_reduce<kMax>);
  set(Op::ReduceMin, lower_reduce<kMin>);
  set(Op::ReduceProd, lower_reduce<kProd>);
  set(Op::ArgMax, lower_arg<kArgMax>);
  set(Op::ArgMin, lower_arg<kArgMin>);
  set(Op::Softmax, lower_softmax);
  set(Op::LogSoftmax, lower_log_softmax);
  set(Op::CumSum, lower_cumsum);
  set(Op::Reshape, lower_reshape);
  set(Op::ReshapeLike, lower_reshape);  // the dims are static at export
  set(Op::Transpose, lower_transpose);
  set(Op::Slice, lower_slice);
  set(Op::Concat, lower_concat);
  set(Op::Expand, lower_expand);
  set(Op::Pad, lower_pad);
  set(Op::Tile, lower_tile);
  set(Op::Flip, lower_flip);
  set(Op::Gather, lower_gather);
  set(Op::GatherElements, lower_gather_elements);
  set(Op::Embedding, lower_embedding);
  t.many[size_t(Op::Split)] = lower_split;
}

}  // namespace rlx::coreml
