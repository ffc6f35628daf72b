// Views and data movement: view/reshape family, permutes, slicing, joins,
// splits, padding, repeat/roll/flip and pixel (un)shuffle.
#include <numeric>

#include <algorithm>

#include "frontends/torch/lowering.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {

int axis(LowerCtx& c, NodeId x, int64_t d) { return normalize_axis(d, std::max(1, c.rank(x))); }

// Reshape to the recorded output shape: exact for every view-like op.
Value to_out_shape(LowerCtx& c) { return Value::tensor(c.reshape_to_out(c.tensor(0, "self"))); }

// view/reshape(self, size): lowered to the recorded output shape, so the size
// argument must agree with it rather than be ignored: entries >= 0 or one -1,
// no overflowing product, bounded rank. Symbolic entries (sym_size results)
// are checked only for what they cannot hide.
Value reshape_to(LowerCtx& c, const char* size_name) {
  NodeId x = c.tensor(0, "self");
  const Value* v = c.arg(1, size_name);
  RLX_CHECK(v && (v->kind == Value::List || v->kind == Value::Tuple || v->kind == Value::Int),
            "argument '", size_name, "' must be a list of sizes");
  std::vector<Value> items = v->kind == Value::Int ? std::vector<Value>{*v} : v->items;
  RLX_CHECK(items.size() <= size_t(kMaxRank), "target shape has rank ", items.size(),
            " (the most rlx supports is ", kMaxRank, ")");
  Dims size;
  bool symbolic = false;
  for (const Value& e : items) {
    symbolic = symbolic || e.kind != Value::Int;
    size.push_back(e.kind == Value::Int ? e.i : 1);  // 1: a placeholder for a symbolic size
  }
  check_reshape_target(size, "target shape");
  if (!symbolic && c.shape(x).is_static()) {
    const Dims resolved = resolve_reshape(size, c.shape(x).numel(), "target shape");
    RLX_CHECK(resolved == c.out().shape, "target shape ", dims_str(size), " gives ",
              dims_str(resolved), " but PyTorch recorded ", dims_str(c.out().shape));
  }
  return to_out_shape(c);
}

NodeId slice(LowerCtx& c, NodeId x, int ax, int64_t start, int64_t end, int64_t step = 1) {
  return c.b.op(Op::Slice, {x},
                {{"axis", int64_t(ax)}, {"start", start}, {"end", end}, {"step", step}});
}

// x with x[ax, start:end] replaced by src, as cat(before, src, after).
NodeId scatter_range(LowerCtx& c, NodeId x, NodeId src, int ax, int64_t start, int64_t end) {
  src = c.cast(src, c.shape(x).dtype);
  int64_t len = c.dims(x)[size_t(ax)];
  auto clampi = [len](int64_t v) { return std::clamp(v < 0 ? v + len : v, int64_t(0), len); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  RLX_CHECK(c.dims(src)[size_t(ax)] == end - start, "scatter: src ", c.shape(src).str(),
            " does not fit the range [", start, ", ", end, ") of axis ", ax);
  std::vector<NodeId> parts;
  if (start > 0) parts.push_back(slice(c, x, ax, 0, start));
  parts.push_back(src);
  if (end < len) parts.push_back(slice(c, x, ax, end, len));
  return parts.size() == 1 ? parts[0] : c.b.concat(parts, ax);
}

void check_piece_count(int64_t pieces) {
  RLX_CHECK(pieces <= kMaxOutputs, "splitting into ", pieces, " pieces exceeds the limit of ",
            kMaxOutputs, " outputs per node");
}

// Pieces of `x` along `ax` with the given sizes: one split node.
Value split_sizes(LowerCtx& c, NodeId x, int ax, const std::vector<int64_t>& sizes) {
  check_piece_count(int64_t(sizes.size()));
  return Value::tuple(c.b.results(Op::Split, {x}, {{"axis", int64_t(ax)}, {"sizes", sizes}}));
}

Value split_even(LowerCtx& c, NodeId x, int ax, int64_t size) {
  int64_t len = c.dims(x)[size_t(ax)];
  RLX_CHECK(size > 0 || len == 0, "split size must be positive");
  if (len > 0) check_piece_count((len - 1) / size + 1);
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < len; at += size) sizes.push_back(std::min(size, len - at));
  if (sizes.empty()) sizes.push_back(0);
  return split_sizes(c, x, ax, sizes);
}

Value cat(LowerCtx& c) {
  std::vector<NodeId> xs;
  // Legacy PyTorch skips 1-d empty tensors in cat.
  for (NodeId x : c.tensors(0, "tensors"))
    if (!(c.rank(x) == 1 && c.dims(x)[0] == 0)) xs.push_back(c.cast(x, c.out_dtype()));
  if (xs.empty()) return Value::tensor(c.b.full(c.out().shape, 0, c.out_dtype()));
  return Value::tensor(c.b.concat(xs, axis(c, xs[0], c.i(1, "dim", 0))));
}

// Pad `x` (pad list in torch order: (begin, end) pairs from the last dim
// backwards) with the IR's pad op, whose pads are [begin..., end...].
Value pad(LowerCtx& c, const std::vector<int64_t>& pad, const std::string& mode, double value) {
  NodeId x = c.tensor(0, "self");
  const int r = c.rank(x);
  RLX_CHECK(pad.size() % 2 == 0 && int(pad.size()) / 2 <= r, "bad pad list of ", pad.size());
  std::vector<int64_t> pads(size_t(2 * r), 0);
  for (size_t k = 0; k < pad.size() / 2; ++k) {
    size_t d = size_t(r - 1) - k;
    pads[d] = pad[2 * k];
    pads[d + size_t(r)] = pad[2 * k + 1];
  }
  // Nothing to pad, or an empty result (reflecting a 0-size dim by 0 is
  // allowed in PyTorch): no pad node.
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return Value::tensor(x);
  if (c.shape(x).is_static() && numel(c.out().shape) == 0)
    return Value::tensor(c.b.full(c.out().shape, 0, c.shape(x).dtype));
  Attrs a{{"pads", pads}, {"mode", mode}};
  if (mode == "constant") a.set("value", value);
  return Value::tensor(c.b.op(Op::Pad, {x}, a));
}

Value pad_mode(LowerCtx& c, const std::string& mode) {
  return pad(c, c.ints(1, "padding"), mode, 0);
}

Value roll(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  auto shifts = c.ints(1, "shifts");
  auto dims = c.ints(2, "dims", {});
  Dims orig = c.dims(x);
  bool flat = dims.empty();
  if (flat) {
    x = c.b.reshape(x, {numel(orig)});
    dims = {0};
  }
  RLX_CHECK(shifts.size() == dims.size(), "roll: shifts and dims differ in length");
  for (size_t k = 0; k < dims.size(); ++k) {
    int ax = axis(c, x, dims[k]);
    int64_t len = c.dims(x)[size_t(ax)];
    if (len == 0) continue;
    int64_t s = ((shifts[k] % len) + len) % len;
    if (s == 0) continue;
    x = c.b.concat({slice(c, x, ax, len - s, len), slice(c, x, ax, 0, len - s)}, ax);
  }
  return Value::tensor(flat ? c.b.reshape(x, orig) : x);
}

// A strided view of x copied out: element i of the result (dims `out`) is
// x's flat element src(i) (x row-major as its own storage). The flat indices
// are a constant built at import (static shapes: 8 bytes per output element).
template <class Src>
NodeId strided_index(LowerCtx& c, NodeId x, const Dims& out, const Src& src) {
  const int64_t numel = checked_numel(c.dims(x), "strided view input");
  const int64_t count = checked_numel(out, "strided view");
  RLX_CHECK(count <= (int64_t(1) << 26), "strided view of ", count,
            " elements is too large to index at import");
  Tensor idx(out, DType::I64);
  int64_t* p = idx.data<int64_t>();
  Dims i(out.size(), 0);
  for (int64_t k = 0; k < count; ++k) {
    const int64_t at = src(i);
    RLX_CHECK(at >= 0 && at < numel, "strided view reads element ", at, " of an input of ", numel,
              " (", c.shape(x).str(), ")");
    p[k] = at;
    for (size_t d = out.size(); d-- > 0;) {  // next multi-index, last dim fastest
      if (++i[d] < out[d]) break;
      i[d] = 0;
    }
  }
  return c.b.constant(idx);
}

template <class Src>
Value strided_copy(LowerCtx& c, NodeId x, const Dims& out, const Src& src) {
  const NodeId idx = strided_index(c, x, out, src);
  return Value::tensor(
      c.b.op(Op::Gather, {c.b.reshape(x, {numel(c.dims(x))}), idx}, {{"axis", int64_t(0)}}));
}

// as_strided(self, size, stride, storage_offset): self taken as contiguous,
// i.e. its own storage (how decompositions such as roll and window
// partitioning apply it).
Value as_strided(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  const auto size = c.ints(1, "size"), stride = c.ints(2, "stride");
  const int64_t offset = c.i(3, "storage_offset", 0);
  RLX_CHECK(size.size() == stride.size(), "as_strided: ", size.size(), " sizes but ", stride.size(),
            " strides");
  for (int64_t d : size) RLX_CHECK(d >= 0, "as_strided: negative size ", d);
  return strided_copy(c, x, size, [&](const Dims& i) {
    int64_t at = offset;
    for (size_t d = 0; d < i.size(); ++d) at += i[d] * stride[d];
    return at;
  });
}

// unfold(self, dimension, size, step): windows of `size` along `dimension`
// every `step`, as a new last dim. A 0-d self unfolds as [1] into [size].
Value unfold(LowerCtx& c) {
  NodeId x = c.tensor(0, "self");
  const bool scalar = c.rank(x) == 0;
  const Dims in = scalar ? Dims{1} : c.dims(x);
  const int64_t r = int64_t(in.size());
  int64_t dim = c.i(1, "dimension"), size = c.i(2, "size"), step = c.i(3, "step");
  if (dim < 0) dim += r;
  RLX_CHECK(dim >= 0 && dim < r, "unfold: dimension ", c.i(1, "dimension"), " out of range for ",
            c.shape(x).str());
  const int64_t n = in[size_t(dim)];
  RLX_CHECK(step > 0 && size >= 0 && size <= n, "unfold: size ", size, " step ", step,
            " for a dimension of ", n);
  Dims out = in;
  out[size_t(dim)] = (n - size) / step + 1;
  out.push_back(size);
  Dims strides(in.size(), 1);
  for (size_t d = in.size() - 1; d-- > 0;) strides[d] = strides[d + 1] * in[d + 1];
  Value v = strided_copy(c, x, out, [&](const Dims& i) {
    int64_t at = 0;
    for (size_t d = 0; d < in.size(); ++d)
      at += (d == size_t(dim) ? i[d] * step + i.back() : i[d]) * strides[d];
    return at;
  });
  return scalar ? Value::tensor(c.b.reshape(v.id, {size})) : v;
}

Value pixel_shuffle(LowerCtx& c, bool inverse) {
  NodeId x = c.tensor(0, "self");
  int64_t f = c.i(1, inverse ? "downscale_factor" : "upscale_factor");
  Dims d = c.dims(x);
  RLX_CHECK(d.size() >= 3, "pixel_shuffle needs [..., C, H, W]");
  size_t r = d.size();
  Dims lead(d.begin(), d.end() - 3);
  int64_t C = d[r - 3], H = d[r - 2], W = d[r - 1];
  int64_t L = int64_t(lead.size());
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < L; ++i) perm.push_back(i);
  Dims shape = lead;
  if (!inverse) {  // [.., C*f*f, H, W] -> [.., C, H*f, W*f]
    int64_t oc = C / (f * f);
    shape.insert(shape.end(), {oc, f, f, H, W});
    for (int64_t p : {0, 3, 1, 4, 2}) perm.push_back(L + p);
    Dims out = lead;
    out.insert(out.end(), {oc, H * f, W * f});
    return Value::tensor(c.b.reshape(c.b.transpose(c.b.reshape(x, shape), perm), out));
  }
  // [.., C, H*f, W*f] -> [.., C*f*f, H, W]
  int64_t oh = H / f, ow = W / f;
  shape.insert(shape.end(), {C, oh, f, ow, f});
  for (int64_t p : {0, 2, 4, 1, 3}) perm.push_back(L + p);
  Dims out = lead;
  out.insert(out.end(), {C * f * f, oh, ow});
  return Value::tensor(c.b.reshape(c.b.transpose(c.b.reshape(x, shape), perm), out));
}

// diagonal(x, offset, dim1, dim2): dim1 and dim2 moved last and flattened,
// then a slice whose step m + 1 walks the diagonal (x[i, i + offset] sits at
// i (m + 1) + offset of an n x m plane); the diagonal ends up as the last dim.
NodeId diagonal(LowerCtx& c, NodeId x, int64_t offset, int64_t dim1, int64_t dim2) {
  const int a = axis(c, x, dim1), b = axis(c, x, dim2);
  RLX_CHECK(a != b, "diagonal: dim1 and dim2 are the same axis ", a);
  std::vector<int64_t> perm;
  for (int d = 0; d < c.rank(x); ++d)
    if (d != a && d != b) perm.push_back(d);
  perm.push_back(a);
  perm.push_back(b);
  Dims d = c.dims(x);
  const int64_t n = d[size_t(a)], m = d[size_t(b)];
  const int64_t len =
      std::max<int64_t>(0, offset >= 0 ? std::min(n, m - offset) : std::min(n + offset, m));
  Dims flat;
  for (size_t i = 0; i + 2 < perm.size(); ++i) flat.push_back(d[size_t(perm[i])]);
  flat.push_back(n * m);
  const NodeId plane = c.b.reshape(c.b.transpose(x, perm), flat);
  const int64_t start = offset >= 0 ? offset : -offset * m;
  const int64_t end = len == 0 ? start : start + (len - 1) * (m + 1) + 1;
  return slice(c, plane, int(flat.size()) - 1, start, end, m + 1);
}

// diag of a vector v (n): v as a column padded to [n, n + 1], whose flat first n * n values are
// the n x n matrix with v on its diagonal, then padded by |offset| so v sits on that diagonal.
Value diag(LowerCtx& c) {
  const NodeId x = c.tensor(0, "self");
  const int64_t k = c.i(1, "diagonal", 0);
  if (c.rank(x) == 2) return Value::tensor(diagonal(c, x, k, 0, 1));
  RLX_CHECK(c.rank(x) == 1, "diag takes a 1-d or 2-d tensor, got ", c.shape(x).str());
  const int64_t n = c.dims(x)[0], a = std::abs(k);
  NodeId col =
      c.b.op(Op::Pad, {c.b.reshape(x, {n, 1})}, {{"pads", std::vector<int64_t>{0, 0, 0, n}}});
  NodeId sq = c.b.reshape(slice(c, c.b.reshape(col, {n * (n + 1)}), 0, 0, n * n), {n, n});
  if (k == 0) return Value::tensor(sq);
  const std::vector<int64_t> pads =
      k > 0 ? std::vector<int64_t>{0, a, a, 0} : std::vector<int64_t>{a, 0, 0, a};
  return Value::tensor(c.b.op(Op::Pad, {sq}, {{"pads", pads}}));
}

Value tri(LowerCtx& c, bool lower) {
  NodeId x = c.tensor(0, "self");
  int64_t k = c.i(1, "diagonal", 0);
  Dims d = c.dims(x);
  RLX_CHECK(d.size() >= 2, "tril/triu need at least 2 dims");
  int64_t R = d[d.size() - 2], C = d.back();
  Tensor keep({R, C}, DType::Bool);
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j) keep.data<bool>()[i * C + j] = lower ? j - i <= k : j - i >= k;
  NodeId zero = c.scalar(0, c.shape(x).dtype);
  return Value::tensor(c.b.op(Op::Where, {c.b.constant(keep), x, zero}));
}

}  // namespace

void register_shape_ops(Registry& r) {
  // torch.export's run-time assertions and metadata checks (17 of them in a
  // llama export): PyTorch checked them when it traced these shapes, and
  // they compute nothing, so they lower to nothing.
  for (const char* op :
       {"aten._assert_tensor_metadata", "aten._assert_async", "aten._assert_scalar",
        "aten.sym_constrain_range", "aten.sym_constrain_range_for_size"})
    r.add(op, [](LowerCtx&) { return Value{}; });
  for (const char* op : {"aten.view", "aten._unsafe_view", "aten._reshape_alias"})
    r.add(op, [](LowerCtx& c) { return reshape_to(c, "size"); });
  for (const char* op : {"aten.reshape", "prims.reshape"})
    r.add(op, [](LowerCtx& c) { return reshape_to(c, "shape"); });
  for (const char* op : {"aten.flatten", "aten.unflatten", "aten.unsqueeze", "aten.squeeze",
                         "aten.view_as", "aten.reshape_as", "prims.squeeze", "aten.expand_dims"})
    r.add(op, to_out_shape);
  r.add("prims.broadcast_in_dim", [](LowerCtx& c) {
    // broadcast_in_dim(x, shape, broadcast_dimensions): put x's dims at the listed positions.
    NodeId x = c.tensor(0, "a");
    auto shape = c.ints(1, "shape");
    auto bdims = c.ints(2, "broadcast_dimensions");
    Dims mid(shape.size(), 1);
    Dims xd = c.dims(x);
    for (size_t k = 0; k < bdims.size(); ++k) mid[size_t(bdims[k])] = xd[k];
    return Value::tensor(c.b.op(Op::Expand, {c.b.reshape(x, mid)}, {{"shape", shape}}));
  });
  r.add("aten.permute", [](LowerCtx& c) {
    return Value::tensor(c.b.transpose(c.tensor(0, "self"), c.ints(1, "dims")));
  });
  r.add("prims.transpose", [](LowerCtx& c) {
    return Value::tensor(c.b.transpose(c.tensor(0, "a"), c.ints(1, "permutation")));
  });
  r.add("aten.transpose", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    const int rank = c.rank(x);
    if (rank < 2) return Value::tensor(x);
    std::vector<int64_t> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(axis(c, x, c.i(1, "dim0")))], perm[size_t(axis(c, x, c.i(2, "dim1")))]);
    return Value::tensor(c.b.transpose(x, perm));
  });
  r.add("aten.t", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    return Value::tensor(c.rank(x) == 2 ? c.b.transpose(x, {1, 0}) : x);
  });
  // To the recorded shape, but a symbolic dim of self is kept (-1), not
  // broadcast to its example size.
  auto expand = [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    Dims target = c.out().shape;
    const Shape& s = c.shape(x);
    const size_t lead = target.size() - std::min(target.size(), size_t(s.rank()));
    for (size_t i = lead; i < target.size(); ++i)
      if (!s.dims[i - lead].is_static()) target[i] = -1;
    return Value::tensor(c.b.op(Op::Expand, {x}, {{"shape", target}}));
  };
  r.add("aten.expand", expand);
  r.add("aten.expand_as", expand);
  r.add("aten.expand_copy", expand);
  r.add("aten.slice", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    return Value::tensor(slice(c, x, axis(c, x, c.i(1, "dim", 0)), c.i(2, "start", 0),
                               c.i(3, "end", INT64_MAX), c.i(4, "step", 1)));
  });
  // slice_scatter(self, src, dim, start, end, step): self with the slice
  // replaced by src; unit steps only. select_scatter(self, src, dim, index)
  // is the one-element slice with src unsqueezed.
  r.add("aten.slice_scatter", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(2, "dim", 0));
    const int64_t step = c.i(5, "step", 1);
    if (step == 1)
      return Value::tensor(scatter_range(c, x, c.tensor(1, "src"), ax, c.i(3, "start", 0),
                                         c.i(4, "end", INT64_MAX)));
    // A strided slice: src scattered along dim at start, start + step, ...
    RLX_CHECK(step > 0, "slice_scatter: step must be positive, got ", step);
    const int64_t len = c.dims(x)[size_t(ax)];
    auto clampi = [len](int64_t v) { return std::clamp(v < 0 ? v + len : v, int64_t(0), len); };
    const int64_t start = clampi(c.i(3, "start", 0)), end = clampi(c.i(4, "end", INT64_MAX));
    const NodeId src = c.cast(c.tensor(1, "src"), c.shape(x).dtype);
    const Dims sd = c.dims(src);
    const int64_t n = end > start ? (end - start + step - 1) / step : 0;
    RLX_CHECK(sd[size_t(ax)] == n, "slice_scatter: src ", c.shape(src).str(), " does not fit ", n,
              " strided positions of axis ", ax);
    if (n == 0) return Value::tensor(x);
    Dims lay(sd.size(), 1);
    lay[size_t(ax)] = n;
    const NodeId at = c.b.reshape(c.b.arange(n, double(start), double(step)), lay);
    return Value::tensor(c.b.op(Op::ScatterElements,
                                {x, c.b.op(Op::Expand, {at}, {{"shape", sd}}), src},
                                {{"axis", int64_t(ax)}}));
  });
  r.add("aten.select_scatter", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self"), src = c.tensor(1, "src");
    int ax = axis(c, x, c.i(2, "dim"));
    int64_t len = c.dims(x)[size_t(ax)], idx = c.i(3, "index");
    RLX_CHECK(idx >= -len && idx < len, "select_scatter index ", idx, " out of range for ", len);
    if (idx < 0) idx += len;
    Dims d = c.dims(src);
    d.insert(d.begin() + ax, 1);
    return Value::tensor(scatter_range(c, x, c.b.reshape(src, d), ax, idx, idx + 1));
  });
  r.add("aten.narrow", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(1, "dim"));
    int64_t start = c.i(2, "start");
    if (start < 0) start += c.dims(x)[size_t(ax)];
    return Value::tensor(slice(c, x, ax, start, start + c.i(3, "length")));
  });
  r.alias("aten.narrow_copy", "aten.narrow");
  // narrow.Tensor(x, dim, start: a 0-d tensor, length): the window found at run time (a
  // gather of start + 0 .. length - 1, a negative start counted from the end).
  r.add("aten.narrow.Tensor", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const int ax = axis(c, x, c.i(1, "dim"));
    const int64_t n = c.static_dim(x, ax), len = c.i(3, "length");
    RLX_CHECK(len >= 0 && len <= n, c.node.op, ": length ", len, " for a dim of ", n);
    NodeId s = c.b.reshape(c.cast(c.tensor(2, "start"), DType::I64), {1});
    s = c.b.op(Op::Where, {c.b.op(Op::Lt, {s, c.scalar(0, DType::I64)}),
                           c.b.add(s, c.scalar(double(n), DType::I64)), s});
    return Value::tensor(
        c.b.op(Op::Gather, {x, c.b.add(s, c.b.arange(len))}, {{"axis", int64_t(ax)}}));
  });
  r.add("aten.select", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(1, "dim"));
    int64_t len = c.dims(x)[size_t(ax)];
    int64_t idx = c.i(2, "index");
    RLX_CHECK(idx >= -len && idx < len, "select index ", idx, " out of range for dim of ", len);
    if (idx < 0) idx += len;
    return Value::tensor(c.reshape_to_out(slice(c, x, ax, idx, idx + 1)));
  });
  r.add("aten.cat", cat);
  r.add("aten.concat", cat);
  r.add("prims.cat", cat);
  r.add("aten.stack", [](LowerCtx& c) {
    auto xs = c.tensors(0, "tensors");
    RLX_CHECK(!xs.empty(), "stack of no tensors");
    int ax = normalize_axis(c.i(1, "dim", 0), c.rank(xs[0]) + 1);
    for (NodeId& x : xs) {
      Dims d = c.reshape_dims(x);  // a symbolic dim (a nonzero's count) as -1
      d.insert(d.begin() + ax, 1);
      x = c.b.reshape(c.cast(x, c.out_dtype()), d);
    }
    return Value::tensor(c.b.concat(xs, ax));
  });
  r.add("aten.split_with_sizes", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    return split_sizes(c, x, axis(c, x, c.i(2, "dim", 0)), c.ints(1, "split_sizes"));
  });
  r.add("aten.split", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(2, "dim", 0));
    const Value* s = c.arg(1, "split_size");
    if (s && s->kind == Value::List) return split_sizes(c, x, ax, c.ints(1, "split_size"));
    return split_even(c, x, ax, c.i(1, "split_size"));
  });
  r.add("aten.chunk", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(2, "dim", 0));
    int64_t chunks = c.i(1, "chunks");
    RLX_CHECK(chunks > 0, "chunk count must be positive");
    int64_t len = c.dims(x)[size_t(ax)];
    return split_even(c, x, ax, std::max<int64_t>(1, (len + chunks - 1) / chunks));
  });
  r.add("aten.unbind", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    int ax = axis(c, x, c.i(1, "dim", 0));
    const int64_t n = c.static_dim(x, ax);
    Dims piece = c.reshape_dims(x);  // a symbolic dim elsewhere (a nonzero's count) as -1
    piece.erase(piece.begin() + ax);
    check_piece_count(n);
    std::vector<NodeId> parts;
    if (n > 0)
      for (NodeId p :
           c.b.results(Op::Split, {x},
                       {{"axis", int64_t(ax)}, {"sizes", std::vector<int64_t>(size_t(n), 1)}}))
        parts.push_back(c.b.reshape(p, piece));
    return Value::tuple(parts);
  });
  r.add("aten.constant_pad_nd",
        [](LowerCtx& c) { return pad(c, c.ints(1, "pad"), "constant", c.f(2, "value", 0)); });
  r.add("aten.pad", [](LowerCtx& c) {
    std::string mode = c.str(2, "mode", "constant");
    RLX_CHECK(mode == "constant" || mode == "reflect" || mode == "replicate", "aten.pad mode '",
              mode, "' is not supported");
    return pad(c, c.ints(1, "pad"), mode, c.f(3, "value", 0));
  });
  for (const char* op : {"aten.reflection_pad1d", "aten.reflection_pad2d", "aten.reflection_pad3d"})
    r.add(op, [](LowerCtx& c) { return pad_mode(c, "reflect"); });
  for (const char* op :
       {"aten.replication_pad1d", "aten.replication_pad2d", "aten.replication_pad3d"})
    r.add(op, [](LowerCtx& c) { return pad_mode(c, "replicate"); });
  r.add("aten.repeat", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    auto reps = c.ints(1, "repeats");
    Dims d = c.dims(x);
    RLX_CHECK(reps.size() >= d.size(), "repeat needs at least as many repeats as dims");
    d.insert(d.begin(), reps.size() - d.size(), 1);
    return Value::tensor(c.b.op(Op::Tile, {c.b.reshape(x, d)}, {{"repeats", reps}}));
  });
  r.add("aten.roll", roll);
  r.add("aten.as_strided", as_strided);
  // as_strided_scatter(self, src, size, stride, storage_offset): src written
  // through the strided view of self (self as its own storage): a scatter at
  // the view's flat indices.
  r.add("aten.as_strided_scatter", [](LowerCtx& c) {
    const NodeId x = c.tensor(0, "self");
    const auto size = c.ints(2, "size"), stride = c.ints(3, "stride");
    const int64_t offset = c.i(4, "storage_offset", 0);
    RLX_CHECK(size.size() == stride.size(), "as_strided_scatter: ", size.size(), " sizes but ",
              stride.size(), " strides");
    const Dims out(size.begin(), size.end());
    const int64_t numel = checked_numel(c.dims(x), "as_strided_scatter input");
    if (numel == 0 || checked_numel(out, "as_strided_scatter") == 0) return Value::tensor(x);
    const NodeId idx = strided_index(c, x, out, [&](const Dims& i) {
      int64_t at = offset;
      for (size_t d = 0; d < i.size(); ++d) at += i[d] * stride[d];
      return at;
    });
    const NodeId src = c.b.reshape(c.cast(c.tensor(1, "src"), c.shape(x).dtype), {-1});
    const NodeId y =
        c.b.op(Op::ScatterElements, {c.b.reshape(x, {numel}), c.b.reshape(idx, {-1}), src},
               {{"axis", int64_t(0)}});
    return Value::tensor(c.b.reshape(y, c.dims(x)));
  });
  r.add("aten.unfold", unfold);
  r.add("aten.flip", [](LowerCtx& c) {
    return Value::tensor(c.b.op(Op::Flip, {c.tensor(0, "self")}, {{"axes", c.ints(1, "dims")}}));
  });
  r.add("aten.pixel_shuffle", [](LowerCtx& c) { return pixel_shuffle(c, false); });
  r.add("aten.pixel_unshuffle", [](LowerCtx& c) { return pixel_shuffle(c, true); });
  r.add("aten.tril", [](LowerCtx& c) { return tri(c, true); });
  r.add("aten.diag", diag);
  // rot90(x, k, dims) as PyTorch spells it: k = 1 flips dims[1] then swaps the two, 2 flips
  // both, 3 flips dims[0] then swaps.
  r.add("aten.rot90", [](LowerCtx& c) {
    NodeId x = c.tensor(0, "self");
    const int64_t k = ((c.i(1, "k", 1) % 4) + 4) % 4;
    const std::vector<int64_t> dims = c.ints(2, "dims", {0, 1});
    RLX_CHECK(dims.size() == 2, "rot90 takes two dims, got ", dims.size());
    const int a = axis(c, x, dims[0]), b = axis(c, x, dims[1]);
    RLX_CHECK(a != b, "rot90: the two dims are the same axis ", a);
    auto flip = [&](std::vector<int64_t> axes) { return c.b.op(Op::Flip, {x}, {{"axes", axes}}); };
    if (k == 0) return Value::tensor(x);
    if (k == 2) return Value::tensor(flip({a, b}));
    std::vector<int64_t> perm(size_t(c.rank(x)));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[size_t(a)], perm[size_t(b)]);
    return Value::tensor(c.b.transpose(flip({k == 1 ? b : a}), perm));
  });
  r.add("aten.trace", [](LowerCtx& c) {  // the sum of the main diagonal, in the result's dtype
    const NodeId d = c.cast(diagonal(c, c.tensor(0, "self"), 0, 0, 1), c.out_dtype());
    return Value::tensor(c.b.op(Op::ReduceSum, {d}, {{"axes", std::vector<int64_t>{0}}}));
  });
  r.add("aten.diagonal", [](LowerCtx& c) {
    return Value::tensor(diagonal(c, c.tensor(0, "self"), c.i(1, "offset", 0), c.i(2, "dim1", 0),
                                  c.i(3, "dim2", 1)));
  });
  r.add("aten.triu", [](LowerCtx& c) { return tri(c, false); });
}

}  // namespace rlx::torch_ir
