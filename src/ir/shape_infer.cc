// Shape inference for every op in the op table. Symbolic dims flow through
// where the rule is exact; where it is not, the result is the anonymous "?"
// and becomes concrete when the runtime specializes the graph to input shapes.
#include <algorithm>
#include <cmath>

#include "ir/elementwise_program.h"
#include "ir/shape_infer_control.h"
#include "ir/shape_infer_data_dependent.h"
#include "ir/shape_infer_linalg.h"
#include "ir/shape_infer_state_space.h"
#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/fake_quant.h"
#include "rlx/graph.h"
#include "rlx/quant.h"
#include "rlx/recurrent.h"

namespace rlx {
namespace {

using In = std::vector<const Shape*>;
const Dim kUnknown = Dim::symbol("?");

Dim broadcast_dim(const Dim& a, const Dim& b) {
  if (a.is_static() && a.value == 1) return b;
  if (b.is_static() && b.value == 1) return a;
  if (a == b) return a;
  if (a.is_static() && b.is_static())
    throw make_error("cannot broadcast dims ", a.value, " and ", b.value);
  return a.is_static() ? a : b.is_static() ? b : kUnknown;
}

std::vector<Dim> broadcast_dims(const std::vector<Dim>& a, const std::vector<Dim>& b) {
  size_t r = std::max(a.size(), b.size());
  std::vector<Dim> out(r);
  for (size_t i = 0; i < r; ++i) {
    Dim da = i < r - a.size() ? Dim(1) : a[i - (r - a.size())];
    Dim db = i < r - b.size() ? Dim(1) : b[i - (r - b.size())];
    out[i] = broadcast_dim(da, db);
  }
  return out;
}

void same_dtype(const Shape& a, const Shape& b) {
  RLX_CHECK(a.dtype == b.dtype, "dtype mismatch: ", a.str(), " vs ", b.str());
}

// Applies f to a dim when static, else yields "?".
template <typename F>
Dim map_dim(const Dim& d, F f) {
  return d.is_static() ? Dim(f(d.value)) : kUnknown;
}

Shape infer_leaf(const Node& n, const In&) {
  if (n.op == Op::Full) {
    const auto& a = n.attrs_as<FullAttrs>();
    return Shape(a.shape, a.dtype);
  }
  if (n.op == Op::Arange) {
    const auto& a = n.attrs_as<ArangeAttrs>();
    RLX_CHECK(a.count >= 0, "arange count must be >= 0, got ", a.count);
    return Shape(Dims{a.count}, a.dtype);
  }
  return n.shape;
}

Shape infer_unary(const Node&, const In& in) { return *in[0]; }
Shape infer_unary_any(const Node&, const In& in) { return *in[0]; }
// The output it reads (Graph::input_shapes hands that output's shape in).
Shape infer_result(const Node&, const In& in) { return *in[0]; }

Shape infer_logical_not(const Node&, const In& in) { return Shape(in[0]->dims, DType::Bool); }

Shape infer_binary(const Node&, const In& in) {
  same_dtype(*in[0], *in[1]);
  return Shape(broadcast_dims(in[0]->dims, in[1]->dims), in[0]->dtype);
}

Shape infer_logical(const Node&, const In& in) {
  return Shape(broadcast_dims(in[0]->dims, in[1]->dims), DType::Bool);
}

Shape infer_compare(const Node&, const In& in) {
  same_dtype(*in[0], *in[1]);
  return Shape(broadcast_dims(in[0]->dims, in[1]->dims), DType::Bool);
}

Shape infer_where(const Node&, const In& in) {
  RLX_CHECK(in[0]->dtype == DType::Bool, "where: condition must be bool, got ", in[0]->str());
  same_dtype(*in[1], *in[2]);
  return Shape(broadcast_dims(broadcast_dims(in[0]->dims, in[1]->dims), in[2]->dims), in[1]->dtype);
}

Shape infer_cast(const Node& n, const In& in) {
  return Shape(in[0]->dims, n.attrs_as<CastAttrs>().dtype);
}

// Every instruction broadcasts to the output, so the output is the broadcast of all inputs.
Shape infer_fused_elementwise(const Node& n, const In& in) {
  std::vector<DType> types;
  std::vector<Dim> dims;
  for (const Shape* s : in) {
    types.push_back(s->dtype);
    dims = broadcast_dims(dims, s->dims);
  }
  parse_program(n.attrs_as<FusedElementwiseAttrs>().program, types);
  return Shape(dims, DType::F32);
}

std::vector<bool> reduced_axes(const std::vector<int64_t>& axes, int rank) {
  std::vector<bool> red(size_t(rank), false);
  if (axes.empty()) std::fill(red.begin(), red.end(), true);
  for (int64_t a : axes) {
    // A scalar accepts axis 0 or -1 (as in PyTorch) and has nothing to mark.
    int ax = normalize_axis(a, std::max(rank, 1));
    if (rank == 0) continue;
    RLX_CHECK(!red[size_t(ax)], "axis ", a, " listed twice");
    red[size_t(ax)] = true;
  }
  return red;
}

Shape infer_reduce(const Node& n, const In& in) {
  const int r = in[0]->rank();
  const auto& a = n.attrs_as<ReduceAttrs>();
  auto red = reduced_axes(a.axes, r);
  const bool keep = a.keepdims;
  std::vector<Dim> out;
  for (int i = 0; i < r; ++i) {
    if (!red[size_t(i)])
      out.push_back(in[0]->dims[i]);
    else if (keep)
      out.emplace_back(1);
  }
  return Shape(out, in[0]->dtype);
}

Shape infer_arg_reduce(const Node& n, const In& in) {
  const int r = in[0]->rank();
  const auto& a = n.attrs_as<ArgReduceAttrs>();
  int ax = normalize_axis(a.axis, std::max(r, 1));  // scalar: 0 or -1
  std::vector<Dim> out;
  for (int i = 0; i < r; ++i) {
    if (i != ax)
      out.push_back(in[0]->dims[i]);
    else if (a.keepdims)
      out.emplace_back(1);
  }
  return Shape(out, DType::I64);
}

Shape infer_reshape(const Node& n, const In& in) {
  const auto& target = n.attrs_as<ReshapeAttrs>().shape;
  // Validates the entries (>= 0 or one -1) and their product before any use.
  const ReshapeTarget t = check_reshape_target(target, "reshape");
  std::vector<Dim> out;
  for (int64_t d : target) out.push_back(d == -1 ? kUnknown : Dim(d));
  if (!in[0]->is_static()) {
    // One symbolic input dim and the target's known dims holding exactly the
    // input's static ones: the -1 is that dim (a flatten keeps "batch").
    const Dim* sym = nullptr;
    int64_t static_in = 1;
    int n_sym = 0;
    for (const Dim& d : in[0]->dims)
      if (d.is_static())
        static_in = checked_mul(static_in, d.value, "reshape");
      else
        sym = &d, ++n_sym;
    if (t.infer_at >= 0 && n_sym == 1 && t.known == static_in) out[size_t(t.infer_at)] = *sym;
    return Shape(out, in[0]->dtype);
  }
  const int64_t total = in[0]->numel();
  if (t.infer_at >= 0) {
    RLX_CHECK(t.known != 0 && total % t.known == 0, "reshape: cannot reshape ", in[0]->str(),
              " to ", short_dims_str(target));
    out[size_t(t.infer_at)] = Dim(total / t.known);
  } else {
    RLX_CHECK(t.known == total, "reshape: cannot reshape ", in[0]->str(), " (", total,
              " elements) to ", short_dims_str(target), " (", t.known, " elements)");
  }
  return Shape(out, in[0]->dtype);
}

Shape infer_reshape_like(const Node& n, const In& in) {
  const Shape &x = *in[0], &like = *in[1];
  const auto& target = n.attrs_as<ReshapeLikeAttrs>().shape;
  std::vector<Dim> out;
  int inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t v = target[i];
    if (v == -1) {
      RLX_CHECK(inferred < 0, "reshape_like: more than one -1 in ", short_dims_str(target));
      inferred = int(i);
      out.push_back(kUnknown);
    } else if (v <= -2) {
      const int64_t axis = -2 - v;
      RLX_CHECK(axis < like.rank(), "reshape_like: entry ", v, " names dim ", axis, " of ",
                like.str());
      out.push_back(like.dims[size_t(axis)]);
    } else {
      out.push_back(Dim(v));
    }
  }
  if (!x.is_static()) return Shape(out, x.dtype);
  int64_t known = 1;
  bool all_static = true;
  for (size_t i = 0; i < out.size(); ++i)
    if (int(i) != inferred) {
      all_static = all_static && out[i].is_static();
      if (out[i].is_static()) known = checked_mul(known, out[i].value, "reshape_like");
    }
  if (!all_static) return Shape(out, x.dtype);
  const int64_t total = x.numel();
  if (inferred >= 0) {
    RLX_CHECK(known != 0 && total % known == 0, "reshape_like: cannot reshape ", x.str(), " to ",
              short_dims_str(target), " of ", like.str());
    out[size_t(inferred)] = Dim(total / known);
  } else {
    RLX_CHECK(known == total, "reshape_like: cannot reshape ", x.str(), " (", total,
              " elements) to ", Shape(out, x.dtype).str());
  }
  return Shape(out, x.dtype);
}

Shape infer_transpose(const Node& n, const In& in) {
  const auto& perm = n.attrs_as<TransposeAttrs>().perm;
  const int r = in[0]->rank();
  RLX_CHECK(int(perm.size()) == r, "transpose: perm of ", perm.size(), " axes for rank ", r);
  std::vector<bool> seen(size_t(r), false);
  std::vector<Dim> out;
  for (int64_t p : perm) {
    int a = normalize_axis(p, r);
    RLX_CHECK(!seen[size_t(a)], "transpose: axis ", p, " repeated in perm");
    seen[size_t(a)] = true;
    out.push_back(in[0]->dims[size_t(a)]);
  }
  return Shape(out, in[0]->dtype);
}

Shape infer_slice(const Node& n, const In& in) {
  const int r = in[0]->rank();
  RLX_CHECK(r > 0, "slice: cannot slice a scalar");
  const auto& a = n.attrs_as<SliceAttrs>();
  int ax = normalize_axis(a.axis, r);
  const int64_t step = a.step;
  RLX_CHECK(step != 0 && step != INT64_MIN, "slice: bad step ", step);
  std::vector<Dim> out = in[0]->dims;
  out[size_t(ax)] = map_dim(in[0]->dims[size_t(ax)], [&](int64_t len) {
    int64_t s, e;
    // Python semantics, as in PyTorch/NumPy: clamp, then count.
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(hi, v)); };
    const int64_t start = slice_start(a), end = slice_end(a);
    if (step > 0) {
      s = clampi(start < 0 ? start + len : start, 0, len);
      e = clampi(end < 0 ? end + len : end, 0, len);
      return e > s ? (e - s - 1) / step + 1 : 0;  // no overflow for huge steps
    }
    s = clampi(start < 0 ? start + len : start, -1, len - 1);
    e = clampi(end < 0 && end != INT64_MIN ? end + len : end, -1, len - 1);
    return s > e ? (s - e - 1) / -step + 1 : 0;
  });
  return Shape(out, in[0]->dtype);
}

Shape infer_concat(const Node& n, const In& in) {
  const int r = in[0]->rank();
  RLX_CHECK(r > 0, "concat: cannot concatenate scalars");
  int ax = normalize_axis(n.attrs_as<AxisAttrs>().axis, r);
  std::vector<Dim> out = in[0]->dims;
  for (size_t k = 1; k < in.size(); ++k) {
    same_dtype(*in[0], *in[k]);
    RLX_CHECK(in[k]->rank() == r, "concat: rank mismatch ", in[0]->str(), " vs ", in[k]->str());
    for (int d = 0; d < r; ++d) {
      if (d == ax) continue;
      const Dim &a = out[size_t(d)], &b = in[k]->dims[size_t(d)];
      RLX_CHECK(!(a.is_static() && b.is_static() && a.value != b.value), "concat: dim ", d,
                " differs: ", in[0]->str(), " vs ", in[k]->str());
    }
    const Dim& extra = in[k]->dims[size_t(ax)];
    Dim& acc = out[size_t(ax)];
    acc = acc.is_static() && extra.is_static() ? Dim(checked_add(acc.value, extra.value, "concat"))
                                               : kUnknown;
  }
  return Shape(out, in[0]->dtype);
}

std::vector<Shape> infer_split(const Node& n, const In& in) {
  const int r = in[0]->rank();
  RLX_CHECK(r > 0, "split: cannot split a scalar");
  const auto& a = n.attrs_as<SplitAttrs>();
  const int ax = normalize_axis(a.axis, r);
  RLX_CHECK(!a.sizes.empty(), "split: sizes must not be empty");
  RLX_CHECK(int64_t(a.sizes.size()) <= kMaxOutputs, "split: ", a.sizes.size(),
            " pieces exceed the limit of ", kMaxOutputs, " outputs per node");
  int64_t total = 0;
  std::vector<Shape> out;
  for (int64_t s : a.sizes) {
    RLX_CHECK(s >= 0 && s <= (int64_t(1) << 48), "split: size ", s, " out of range");
    total += s;
    Shape piece = *in[0];
    piece.dims[size_t(ax)] = Dim(s);
    out.push_back(std::move(piece));
  }
  const Dim& len = in[0]->dims[size_t(ax)];
  RLX_CHECK(!len.is_static() || len.value == total, "split: sizes ", dims_str(a.sizes), " sum to ",
            total, ", axis ", ax, " of ", in[0]->str(), " is ", len.str());
  return out;
}

Shape infer_expand(const Node& n, const In& in) {
  const auto& target = n.attrs_as<ExpandAttrs>().shape;
  RLX_CHECK(target.size() >= in[0]->dims.size(), "expand: target ", dims_str(target),
            " has lower rank than ", in[0]->str());
  std::vector<Dim> t;
  size_t lead = target.size() - in[0]->dims.size();
  for (size_t i = 0; i < target.size(); ++i) {
    // -1 keeps the input's dim, as in torch.expand.
    if (target[i] == -1) {
      RLX_CHECK(i >= lead, "expand: -1 in a new leading dim");
      t.push_back(in[0]->dims[i - lead]);
    } else {
      t.emplace_back(target[i]);
    }
  }
  std::vector<Dim> out = broadcast_dims(in[0]->dims, t);
  for (size_t i = 0; i < out.size(); ++i)
    RLX_CHECK(!t[i].is_static() || !out[i].is_static() || out[i].value == t[i].value,
              "expand: cannot expand ", in[0]->str(), " to ", dims_str(target));
  return Shape(out, in[0]->dtype);
}

Shape infer_pad(const Node& n, const In& in) {
  const auto& a = n.attrs_as<PadAttrs>();
  const auto& pads = a.pads;
  const int r = in[0]->rank();
  RLX_CHECK(int(pads.size()) == 2 * r, "pad: need ", 2 * r, " pads for rank ", r, ", got ",
            pads.size());
  const PadMode mode = a.mode;
  std::vector<Dim> out = in[0]->dims;
  for (int i = 0; i < r; ++i) {
    int64_t b = pads[size_t(i)], e = pads[size_t(i + r)];
    out[size_t(i)] = map_dim(out[size_t(i)], [&](int64_t d) {
      if (mode == PadMode::reflect)
        RLX_CHECK(b < d && e < d, "pad: reflect padding ", b, "/", e, " needs dim > pad, dim is ",
                  d);
      if (mode == PadMode::replicate)
        RLX_CHECK(d > 0 || (b == 0 && e == 0), "pad: replicate of empty dim");
      const int64_t size = checked_add(checked_add(d, b, "pad"), e, "pad");
      RLX_CHECK(size >= 0, "pad: negative result size");
      return size;
    });
  }
  return Shape(out, in[0]->dtype);
}

Shape infer_tile(const Node& n, const In& in) {
  const auto& reps = n.attrs_as<TileAttrs>().repeats;
  const int r = in[0]->rank();
  RLX_CHECK(int(reps.size()) == r, "tile: ", reps.size(), " repeats for rank ", r);
  std::vector<Dim> out = in[0]->dims;
  for (int i = 0; i < r; ++i) {
    RLX_CHECK(reps[size_t(i)] >= 0, "tile: negative repeat");
    out[size_t(i)] =
        map_dim(out[size_t(i)], [&](int64_t d) { return checked_mul(d, reps[size_t(i)], "tile"); });
  }
  return Shape(out, in[0]->dtype);
}

void check_index_dtype(const Shape& s, const char* what) {
  RLX_CHECK(s.dtype == DType::I64 || s.dtype == DType::I32, what,
            ": indices must be i32 or i64, got ", s.str());
}

Shape infer_gather(const Node& n, const In& in) {
  check_index_dtype(*in[1], "gather");
  const int r = in[0]->rank();
  RLX_CHECK(r >= 1, "gather: data must have rank >= 1, got ", in[0]->str());
  int ax = normalize_axis(n.attrs_as<GatherAttrs>().axis, r);
  std::vector<Dim> out(in[0]->dims.begin(), in[0]->dims.begin() + ax);
  out.insert(out.end(), in[1]->dims.begin(), in[1]->dims.end());
  out.insert(out.end(), in[0]->dims.begin() + ax + 1, in[0]->dims.end());
  return Shape(out, in[0]->dtype);
}

// For gather/scatter_elements: indices may be smaller than data in every dim
// but `axis` (PyTorch's rule; ONNX's equal shapes are the common case).
void check_index_dims_fit(const Shape& idx, const Shape& data, int axis, const char* what) {
  for (int d = 0; d < data.rank(); ++d) {
    const Dim &a = idx.dims[size_t(d)], &b = data.dims[size_t(d)];
    RLX_CHECK(d == axis || !a.is_static() || !b.is_static() || a.value <= b.value, what,
              ": indices ", idx.str(), " exceed data ", data.str(), " in dim ", d);
  }
}

bool dims_compatible(const Dim& a, const Dim& b) {
  return !a.is_static() || !b.is_static() || a.value == b.value;
}

// Same rank, and every dim pair compatible (a symbolic dim matches anything).
bool shapes_compatible(const Shape& a, const Shape& b) {
  bool ok = a.rank() == b.rank();
  for (int i = 0; ok && i < a.rank(); ++i)
    ok = dims_compatible(a.dims[size_t(i)], b.dims[size_t(i)]);
  return ok;
}

Shape infer_gather_elements(const Node& n, const In& in) {
  check_index_dtype(*in[1], "gather_elements");
  RLX_CHECK(in[0]->rank() == in[1]->rank() && in[0]->rank() >= 1,
            "gather_elements: data and indices need the same rank >= 1, got ", in[0]->str(),
            " and ", in[1]->str());
  int ax = normalize_axis(n.attrs_as<AxisAttrs>().axis, in[0]->rank());
  check_index_dims_fit(*in[1], *in[0], ax, "gather_elements");
  return Shape(in[1]->dims, in[0]->dtype);
}

Shape infer_gather_nd(const Node& n, const In& in) {
  check_index_dtype(*in[1], "gather_nd");
  const auto& d = in[0]->dims;
  const auto& id = in[1]->dims;
  const int64_t b = n.attrs_as<GatherNDAttrs>().batch_dims;
  RLX_CHECK(!id.empty() && id.back().is_static(), "gather_nd: indices need a static last dim");
  int64_t k = id.back().value;
  RLX_CHECK(b >= 0 && k >= 1 && b + k <= int64_t(d.size()) && b < int64_t(id.size()),
            "gather_nd: index depth ", k, " with batch_dims ", b, " does not fit data ",
            in[0]->str(), " and indices ", in[1]->str());
  for (int64_t i = 0; i < b; ++i)
    RLX_CHECK(dims_compatible(d[size_t(i)], id[size_t(i)]), "gather_nd: batch dim ", i,
              " differs: data ", in[0]->str(), ", indices ", in[1]->str());
  std::vector<Dim> out(id.begin(), id.end() - 1);
  out.insert(out.end(), d.begin() + b + k, d.end());
  return Shape(out, in[0]->dtype);
}

Shape infer_scatter_elements(const Node& n, const In& in) {
  const Shape &d = *in[0], &idx = *in[1], &u = *in[2];
  check_index_dtype(idx, "scatter_elements");
  same_dtype(d, u);
  RLX_CHECK(d.rank() >= 1 && idx.rank() == d.rank() && u.rank() == d.rank(),
            "scatter_elements: data, indices and updates need one rank >= 1, got ", d.str(), ", ",
            idx.str(), ", ", u.str());
  int ax = normalize_axis(n.attrs_as<ScatterElementsAttrs>().axis, d.rank());
  for (int i = 0; i < d.rank(); ++i)
    RLX_CHECK(dims_compatible(idx.dims[size_t(i)], u.dims[size_t(i)]), "scatter_elements: updates ",
              u.str(), " must match indices ", idx.str());
  check_index_dims_fit(idx, d, ax, "scatter_elements");
  return d;
}

// ONNX ScatterND: indices [..., k] with 1 <= k <= rank(data), updates of
// shape indices.shape[:-1] + data.shape[k:].
Shape infer_scatter_nd(const Node&, const In& in) {
  const Shape &d = *in[0], &idx = *in[1], &u = *in[2];
  check_index_dtype(idx, "scatter_nd");
  same_dtype(d, u);
  RLX_CHECK(idx.rank() >= 1 && idx.dims.back().is_static(),
            "scatter_nd: indices need rank >= 1 and a static last dim, got ", idx.str());
  int64_t k = idx.dims.back().value;
  RLX_CHECK(k >= 1 && k <= d.rank(), "scatter_nd: index depth ", k, " does not fit data ", d.str());
  std::vector<Dim> want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), d.dims.begin() + k, d.dims.end());
  bool ok = u.dims.size() == want.size();
  for (size_t i = 0; ok && i < want.size(); ++i) ok = dims_compatible(u.dims[i], want[i]);
  RLX_CHECK(ok, "scatter_nd: updates ", u.str(), " should have dims indices[:-1] + data[", k,
            ":] for data ", d.str(), " and indices ", idx.str());
  return d;
}

std::vector<Shape> infer_topk(const Node& n, const In& in) {
  const int r = in[0]->rank();
  RLX_CHECK(r >= 1, "topk: x must have rank >= 1, got ", in[0]->str());
  const auto& a = n.attrs_as<TopKAttrs>();
  int ax = normalize_axis(a.axis, r);
  const int64_t k = a.k;
  std::vector<Dim> out = in[0]->dims;
  const Dim& len = out[size_t(ax)];
  RLX_CHECK(k >= 0 && (!len.is_static() || k <= len.value), "topk: k=", k, " out of range for ",
            in[0]->str());
  out[size_t(ax)] = Dim(k);
  return {Shape(out, in[0]->dtype), Shape(out, DType::I64)};
}

Shape infer_one_hot(const Node& n, const In& in) {
  check_index_dtype(*in[0], "one_hot");
  std::vector<Dim> out = in[0]->dims;
  const auto& a = n.attrs_as<OneHotAttrs>();
  RLX_CHECK(a.depth > 0, "one_hot: depth must be > 0, got ", a.depth);
  out.emplace_back(a.depth);
  return Shape(out, a.dtype);
}

Shape infer_embedding(const Node&, const In& in) {
  RLX_CHECK(in[0]->rank() == 2, "embedding: table must be 2-d, got ", in[0]->str());
  check_index_dtype(*in[1], "embedding");
  std::vector<Dim> out = in[1]->dims;
  out.push_back(in[0]->dims[1]);
  return Shape(out, in[0]->dtype);
}

// A u8 [rows, row_bytes] tensor of ggml blocks holding rows of k elements.
void check_quant_rows(const Node& n, const Shape& w, const char* what) {
  const auto& a = n.attrs_as<QuantAttrs>();
  quant::GgmlType t = quant::parse_type_name(a.scheme);
  const int64_t k = a.k;
  RLX_CHECK(w.dtype == DType::U8 && w.rank() == 2, what,
            ": weight must be u8 [rows, row_bytes], got ", w.str());
  const int64_t bytes = int64_t(quant::row_size(t, k));
  RLX_CHECK(!w.dims[1].is_static() || w.dims[1].value == bytes, what, ": rows of ", k, " ",
            a.scheme, " elements take ", bytes, " bytes, weight is ", w.str());
}

Shape infer_dequant_embedding(const Node& n, const In& in) {
  check_quant_rows(n, *in[0], "dequant_embedding");
  check_index_dtype(*in[1], "dequant_embedding");
  std::vector<Dim> out = in[1]->dims;
  out.emplace_back(n.attrs_as<QuantAttrs>().k);
  return Shape(out, DType::F32);
}

Shape infer_matmul(const Node& n, const In& in) {
  same_dtype(*in[0], *in[1]);
  std::vector<Dim> a = in[0]->dims, b = in[1]->dims;
  RLX_CHECK(!a.empty() && !b.empty(), "matmul: scalars are not allowed");
  const auto& t = n.attrs_as<MatMulAttrs>();
  RLX_CHECK((!t.transpose_a || a.size() >= 2) && (!t.transpose_b || b.size() >= 2),
            "matmul: transpose_a/transpose_b need an operand of rank >= 2");
  if (t.transpose_a) std::swap(a[a.size() - 1], a[a.size() - 2]);
  if (t.transpose_b) std::swap(b[b.size() - 1], b[b.size() - 2]);
  bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), Dim(1));
  if (b1) b.emplace_back(1);
  const Dim &k1 = a.back(), &k2 = b[b.size() - 2];
  RLX_CHECK(!(k1.is_static() && k2.is_static() && k1.value != k2.value),
            "matmul: inner dims differ: ", in[0]->str(), " @ ", in[1]->str());
  std::vector<Dim> batch = broadcast_dims(std::vector<Dim>(a.begin(), a.end() - 2),
                                          std::vector<Dim>(b.begin(), b.end() - 2));
  if (!a1) batch.push_back(a[a.size() - 2]);
  if (!b1) batch.push_back(b.back());
  RLX_CHECK(in.size() - (t.residual ? 1 : 0) >= 2, "matmul: residual=true needs a residual input");
  if (matmul_has_bias(t.residual, in.size())) {  // bias over the output's last dim
    same_dtype(*in[0], *in[2]);
    RLX_CHECK(!b1 && in[2]->rank() == 1 && dims_compatible(in[2]->dims[0], b.back()),
              "matmul: bias ", in[2]->str(), " must be [N] for a result ending in N = ",
              b1 ? std::string("(none)") : b.back().str());
  }
  RLX_CHECK((t.activation == Epilogue::none && !t.residual) || is_float(in[0]->dtype),
            "matmul: a fused activation or residual needs floating-point operands, got ",
            in[0]->str());
  Shape out(batch, in[0]->dtype);
  if (t.residual)
    RLX_CHECK(shapes_compatible(*in.back(), out) && in.back()->dtype == out.dtype,
              "matmul: residual ", in.back()->str(), " does not match the output ", out.str());
  return out;
}

// Spatial dims of conv/pool outputs; floor or ceil division, PyTorch rules.
int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t dil,
                   bool ceil_mode) {
  RLX_CHECK(k >= 1 && s >= 1 && dil >= 1, "kernel, stride and dilation must be >= 1, got ", k, ", ",
            s, ", ", dil);
  RLX_CHECK(pb >= 0 && pe >= 0, "paddings must be >= 0, got ", pb, ", ", pe);
  // 128-bit: kernel, stride, dilation and pads are untrusted attributes.
  using Wide = __int128;
  const Wide eff = Wide(dil) * (k - 1) + 1;
  // Floor division: with ceil_mode a window may overhang a too-small input
  // (PyTorch gives 1 output for in=2, k=3, s=2), without it that is an error.
  const Wide num = Wide(in) + pb + pe - eff + (ceil_mode ? s - 1 : 0);
  Wide out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  // The last window must start inside the input or left padding (PyTorch rule).
  if (ceil_mode && (out - 1) * s >= Wide(in) + pb) --out;
  RLX_CHECK(out >= 1, "window of ", int64_t(std::min<Wide>(eff, INT64_MAX)),
            " is larger than padded input ",
            int64_t(std::min<Wide>(Wide(in) + pb + pe, INT64_MAX)));
  RLX_CHECK(out <= kMaxElements, "window output size is too large");
  return int64_t(out);
}

std::vector<int64_t> ints_or(const std::vector<int64_t>& list, const char* name, size_t count,
                             int64_t fill) {
  auto v = list_or(list, count, fill);
  RLX_CHECK(v.size() == count, name, " needs ", count, " values, got ", v.size());
  return v;
}

Shape infer_conv(const Node& n, const In& in) {
  const Shape &x = *in[0], &w = *in[1];
  same_dtype(x, w);
  const int sp = x.rank() - 2;
  RLX_CHECK(sp >= 1 && sp <= 3 && w.rank() == x.rank(),
            "conv: expected x [N,C,...] and w [O,C/g,...], got ", x.str(), " and ", w.str());
  RLX_CHECK(w.is_static(), "conv: weight shape must be static");
  const auto& a = n.attrs_as<ConvAttrs>();
  const int64_t g = a.groups;
  const auto wd = w.concrete();
  RLX_CHECK(g >= 1 && wd[0] % g == 0, "conv: groups=", g, " does not divide ", wd[0],
            " out channels");
  if (x.dims[1].is_static())
    RLX_CHECK(x.dims[1].value == wd[1] * g, "conv: input has ", x.dims[1].value,
              " channels, weight expects ", wd[1] * g, " (groups=", g, ")");
  RLX_CHECK(!a.residual || in.size() >= 3, "conv: residual=true needs a residual input");
  if (conv_has_bias(a.residual, in.size()))
    RLX_CHECK(in[2]->rank() == 1 && in[2]->dims[0] == Dim(wd[0]), "conv: bias ", in[2]->str(),
              " does not match ", wd[0], " out channels");
  else
    RLX_CHECK(in.size() - (a.residual ? 1 : 0) == 2, "conv: ", in.size(),
              " inputs, expected (x, w[, bias]) and the residual when residual=true");
  auto stride = ints_or(a.stride, "stride", size_t(sp), 1);
  auto dil = ints_or(a.dilation, "dilation", size_t(sp), 1);
  auto pads = ints_or(a.pads, "pads", size_t(2 * sp), 0);
  std::vector<Dim> out{x.dims[0], Dim(wd[0])};
  for (int i = 0; i < sp; ++i)
    out.push_back(map_dim(x.dims[size_t(2 + i)], [&](int64_t d) {
      return window_out(d, wd[size_t(2 + i)], stride[size_t(i)], pads[size_t(i)],
                        pads[size_t(i + sp)], dil[size_t(i)], false);
    }));
  const Shape y(out, x.dtype);
  if (a.residual)
    RLX_CHECK(*in.back() == y, "conv: residual ", in.back()->str(), " must match the output ",
              y.str());
  return y;
}

Shape infer_conv_blocked(const Node& n, const In& in) {
  const Shape &x = *in[0], &w = *in[1], &b = *in[2];
  const auto& a = n.attrs_as<ConvBlockedAttrs>();
  constexpr int64_t B = kConvChannelBlock;
  RLX_CHECK(x.dtype == DType::F32 && w.dtype == DType::F32 && b.dtype == DType::F32,
            "conv_blocked: f32 only, got x ", x.str(), ", w ", w.str(), ", bias ", b.str());
  RLX_CHECK(x.is_static() && w.is_static(), "conv_blocked: static shapes only, got x ", x.str());
  RLX_CHECK(
      a.channels >= 1 && a.out_channels >= 1 && a.stride.size() == 2 && a.pads.size() == 4,
      "conv_blocked: needs channels, out_channels >= 1, stride [sh, sw] and pads [t, l, b, r]");
  const int64_t CB = conv_channel_blocks(a.channels), OB = conv_channel_blocks(a.out_channels);
  const auto xd = x.concrete(), wd = w.concrete();
  const bool x_ok = a.in_blocked ? x.rank() == 5 && xd[1] == CB && xd[4] == B
                                 : x.rank() == 4 && xd[1] == a.channels;
  RLX_CHECK(x_ok, "conv_blocked: x ", x.str(), " is not ",
            a.in_blocked ? "channel-blocked" : "NCHW", " with ", a.channels, " channels");
  int64_t KH = 0, KW = 0;
  if (a.depthwise) {
    RLX_CHECK(
        a.in_blocked && a.channels == a.out_channels && w.rank() == 4 && wd[0] == CB && wd[3] == B,
        "conv_blocked: depthwise weight ", w.str(), " is not [", CB, ", KH, KW, 16]");
    KH = wd[1], KW = wd[2];
  } else {
    const int64_t G = a.in_blocked ? CB : a.channels, L = a.in_blocked ? B : 1;
    RLX_CHECK(w.rank() == 6 && wd[0] == OB && wd[1] == G && wd[4] == L && wd[5] == B,
              "conv_blocked: weight ", w.str(), " is not [", OB, ", ", G, ", KH, KW, ", L, ", 16]");
    KH = wd[2], KW = wd[3];
  }
  RLX_CHECK(b.rank() == 1 && b.dims[0] == Dim(OB * B), "conv_blocked: bias ", b.str(), " is not [",
            OB * B, "]");
  const int64_t H = xd[2], W = xd[3];
  const int64_t OH = window_out(H, KH, a.stride[0], a.pads[0], a.pads[2], 1, false);
  const int64_t OW = window_out(W, KW, a.stride[1], a.pads[1], a.pads[3], 1, false);
  const Shape y(Dims{xd[0], OB, OH, OW, B}, DType::F32);
  RLX_CHECK(a.residual == (in.size() == 4),
            "conv_blocked: residual=", a.residual ? "true" : "false", " with ", in.size(),
            " inputs");
  if (a.residual)
    RLX_CHECK(*in[3] == y, "conv_blocked: residual ", in[3]->str(), " must match the output ",
              y.str());
  return y;
}

// Each stage checked as the conv_blocked node it stands for, on the one before's output.
Shape infer_conv_blocked_chain(const Node& n, const In& in) {
  const auto& a = n.attrs_as<ConvBlockedChainAttrs>();
  RLX_CHECK(a.residual == (in.size() == 8),
            "conv_blocked_chain: residual=", a.residual ? "true" : "false", " with ", in.size(),
            " inputs");
  Shape y = *in[0];
  for (int stage = 0; stage < 3; ++stage) {
    Node s;
    s.op = Op::ConvBlocked;
    s.attrs = conv_chain_stage(a, stage);
    y = infer_conv_blocked(s, conv_chain_stage_inputs<const Shape*>(a, stage, &y, in));
  }
  return y;
}

Shape infer_conv_transpose(const Node& n, const In& in) {
  const Shape &x = *in[0], &w = *in[1];
  same_dtype(x, w);
  const int sp = x.rank() - 2;
  RLX_CHECK(sp >= 1 && sp <= 3 && w.rank() == x.rank() && w.is_static(),
            "conv_transpose: expected x [N,C,...] and static w [C,O/g,...], got ", x.str(), " and ",
            w.str());
  const auto& a = n.attrs_as<ConvTransposeAttrs>();
  const int64_t g = a.groups;
  const auto wd = w.concrete();
  if (x.dims[1].is_static())
    RLX_CHECK(x.dims[1].value == wd[0], "conv_transpose: input has ", x.dims[1].value,
              " channels, weight has ", wd[0]);
  RLX_CHECK(g >= 1 && wd[0] % g == 0, "conv_transpose: bad groups ", g);
  auto stride = ints_or(a.stride, "stride", size_t(sp), 1);
  auto dil = ints_or(a.dilation, "dilation", size_t(sp), 1);
  auto pads = ints_or(a.pads, "pads", size_t(2 * sp), 0);
  auto opad = ints_or(a.output_padding, "output_padding", size_t(sp), 0);
  for (int i = 0; i < sp; ++i) {
    const size_t u = size_t(i);
    RLX_CHECK(
        stride[u] >= 1 && dil[u] >= 1 && pads[u] >= 0 && pads[u + size_t(sp)] >= 0 && opad[u] >= 0,
        "conv_transpose: stride and dilation must be >= 1, paddings >= 0");
    RLX_CHECK(opad[u] < stride[u] || opad[u] < dil[u],
              "conv_transpose: output_padding must be smaller than stride or dilation");
  }
  if (in.size() == 3)
    RLX_CHECK(in[2]->rank() == 1 && in[2]->dims[0] == Dim(wd[1] * g), "conv_transpose: bias ",
              in[2]->str(), " does not match ", wd[1] * g, " out channels");
  std::vector<Dim> out{x.dims[0], Dim(wd[1] * g)};
  for (int i = 0; i < sp; ++i)
    out.push_back(map_dim(x.dims[size_t(2 + i)], [&](int64_t d) {
      // 128-bit: stride, pads and dilation are untrusted attributes.
      using Wide = __int128;
      const Wide o = Wide(d - 1) * stride[size_t(i)] - pads[size_t(i)] - pads[size_t(i + sp)] +
                     Wide(dil[size_t(i)]) * (wd[size_t(2 + i)] - 1) + opad[size_t(i)] + 1;
      RLX_CHECK(o > 0 && o <= kMaxElements, "conv_transpose: output size is ",
                o > 0 ? "too large" : "<= 0");
      return int64_t(o);
    }));
  return Shape(out, x.dtype);
}

// max_pool2d and avg_pool2d windows with the optional lists filled in.
struct PoolWindow {
  std::vector<int64_t> kernel, stride, pads, dilation;
  bool ceil_mode;
};

PoolWindow pool_window(const Node& n) {
  auto fill = [](const auto& a, std::vector<int64_t> dilation) {
    RLX_CHECK(a.kernel.size() == 2, "pool: kernel needs 2 values");
    PoolWindow p{a.kernel, pool_stride(a), ints_or(a.pads, "pads", 4, 0), std::move(dilation),
                 a.ceil_mode};
    RLX_CHECK(p.stride.size() == 2, "pool: stride needs 2 values");
    return p;
  };
  if (n.op == Op::MaxPool2d || n.op == Op::MaxPool2dIndices || n.op == Op::MaxPool2dGrad) {
    const auto& a = n.attrs_as<MaxPoolAttrs>();
    return fill(a, ints_or(a.dilation, "dilation", 2, 1));
  }
  return fill(n.attrs_as<AvgPoolAttrs>(), {1, 1});
}

Shape infer_pool(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() == 4 || x.rank() == 3, "pool: expected [N,]C,H,W, got ", x.str());
  const PoolWindow p = pool_window(n);
  const auto &k = p.kernel, &stride = p.stride, &pads = p.pads, &dil = p.dilation;
  const bool ceil_mode = p.ceil_mode;
  for (int i = 0; i < 2; ++i)
    RLX_CHECK(pads[size_t(i)] * 2 <= k[size_t(i)] && pads[size_t(i + 2)] * 2 <= k[size_t(i)],
              "pool: pad should be at most half of kernel size");
  std::vector<Dim> out = x.dims;
  for (int i = 0; i < 2; ++i) {
    size_t d = size_t(x.rank() - 2 + i);
    out[d] = map_dim(x.dims[d], [&](int64_t v) {
      return window_out(v, k[size_t(i)], stride[size_t(i)], pads[size_t(i)], pads[size_t(i + 2)],
                        dil[size_t(i)], ceil_mode);
    });
  }
  return Shape(out, n.op == Op::MaxPool2dIndices ? DType::I64 : x.dtype);
}

Shape infer_max_pool_grad(const Node& n, const In& in) {
  const Shape &x = *in[0], &dy = *in[1];
  same_dtype(x, dy);
  RLX_CHECK(is_float(x.dtype), "max_pool2d_grad: x and dy must be float, got ", x.str());
  const Shape y = infer_pool(n, in);
  RLX_CHECK(shapes_compatible(y, dy), "max_pool2d_grad: dy ", dy.str(),
            " does not match max_pool2d's output ", y.str(), " for x ", x.str());
  return x;
}

Shape infer_adaptive_pool(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() == 4 || x.rank() == 3, "adaptive_avg_pool2d: expected [N,]C,H,W, got ",
            x.str());
  const auto& o = n.attrs_as<AdaptivePoolAttrs>().output;
  RLX_CHECK(o.size() == 2 && o[0] > 0 && o[1] > 0, "adaptive_avg_pool2d: bad output size");
  std::vector<Dim> out = x.dims;
  out[out.size() - 2] = Dim(o[0]);
  out[out.size() - 1] = Dim(o[1]);
  return Shape(out, x.dtype);
}

// Checks that an optional per-feature parameter (gamma, beta, ...) has dims `want` where both are
// static.
void check_param_dims(const char* op, const char* what, const Shape& x, const Shape& p,
                      const std::vector<Dim>& want) {
  same_dtype(x, p);
  bool ok = p.rank() == int(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i)
    ok = !(p.dims[i].is_static() && want[i].is_static()) || p.dims[i] == want[i];
  std::vector<Dim> w = want;
  RLX_CHECK(ok, op, ": ", what, " ", p.str(), " does not match ", Shape(w, x.dtype).str(),
            " required by x ", x.str());
}

// Any finite eps: PyTorch takes a negative one too (rsqrt(var + eps) may then be NaN).
void check_eps(double eps, const char* op) {
  RLX_CHECK(std::isfinite(eps), op, ": eps must be finite, got ", eps);
}

// layer_norm and rms_norm: gamma/beta have the trailing `naxes` dims of x.
Shape infer_layer_norm(const Node& n, const In& in) {
  const char* op = n.op == Op::RmsNorm ? "rms_norm" : "layer_norm";
  const Shape& x = *in[0];
  const auto& a = n.attrs_as<NormAttrs>();
  const int64_t naxes = a.naxes;
  RLX_CHECK(naxes >= 1 && naxes <= x.rank(), op, ": naxes=", naxes, " out of range for x ",
            x.str());
  std::vector<Dim> want(x.dims.end() - naxes, x.dims.end());
  static const char* names[] = {"x", "gamma", "beta"};
  for (size_t i = 1; i < in.size(); ++i) check_param_dims(op, names[i], x, *in[i], want);
  check_eps(a.eps, op);
  return x;
}

Shape infer_group_norm(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() >= 2, "group_norm: x must be [N,C,...], got ", x.str());
  const auto& a = n.attrs_as<GroupNormAttrs>();
  const int64_t g = a.groups;
  RLX_CHECK(g >= 1, "group_norm: groups must be >= 1, got ", g);
  const Dim& c = x.dims[1];
  if (c.is_static())
    RLX_CHECK(c.value % g == 0, "group_norm: groups=", g, " does not divide ", c.value,
              " channels");
  static const char* names[] = {"x", "gamma", "beta"};
  for (size_t i = 1; i < in.size(); ++i) check_param_dims("group_norm", names[i], x, *in[i], {c});
  check_eps(a.eps, "group_norm");
  return x;
}

Shape infer_batch_norm(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() >= 2, "batch_norm: x must be [N,C,...], got ", x.str());
  static const char* names[] = {"x", "mean", "var", "gamma", "beta"};
  for (size_t i = 1; i < in.size(); ++i)
    check_param_dims("batch_norm", names[i], x, *in[i], {x.dims[1]});
  check_eps(n.attrs_as<EpsAttrs>().eps, "batch_norm");
  return x;
}

// batch_norm_train's statistics of x [N, C, ...]: [1, C, 1, ...].
Shape batch_stats_shape(const Shape& x) {
  std::vector<Dim> stats(size_t(x.rank()), Dim(1));
  stats[1] = x.dims[1];
  return Shape(stats, x.dtype);
}

// batch_norm_train's optional gamma / beta: C elements each, of x's dtype.
void check_channel_param(const char* op, const char* what, const Shape& x, const Shape& p) {
  same_dtype(x, p);
  RLX_CHECK(!p.is_static() || !x.dims[1].is_static() || p.numel() == x.dims[1].value, op, ": ",
            what, " ", p.str(), " must hold one value per channel of x ", x.str());
}

std::vector<Shape> infer_batch_norm_train(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() >= 2 && is_float(x.dtype), "batch_norm_train: x must be float [N,C,...], got ",
            x.str());
  RLX_CHECK(in.size() != 2, "batch_norm_train: the affine takes both gamma and beta, got gamma ",
            in[1]->str(), " alone");
  for (size_t i = 1; i < in.size(); ++i)
    check_channel_param("batch_norm_train", i == 1 ? "gamma" : "beta", x, *in[i]);
  check_eps(n.attrs_as<EpsAttrs>().eps, "batch_norm_train");
  const Shape stats = batch_stats_shape(x);
  return {x, stats, stats};
}

std::vector<Shape> infer_batch_norm_train_grad(const Node& n, const In& in) {
  const Shape &x = *in[0], &g = *in[1];
  RLX_CHECK(x.rank() >= 2 && is_float(x.dtype),
            "batch_norm_train_grad: x must be float [N,C,...], got ", x.str());
  same_dtype(x, g);
  RLX_CHECK(shapes_compatible(x, g), "batch_norm_train_grad: dy ", g.str(), " does not match x ",
            x.str());
  check_eps(n.attrs_as<EpsAttrs>().eps, "batch_norm_train_grad");
  if (in.size() > 2) check_channel_param("batch_norm_train_grad", "gamma", x, *in[2]);
  const Shape p = in.size() > 2 ? *in[2] : batch_stats_shape(x);  // dgamma, dbeta
  return {x, p, p};
}

Shape infer_layer_norm_2d(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() == 4, "layer_norm_2d: x must be [N,C,H,W], got ", x.str());
  static const char* names[] = {"x", "gamma", "beta"};
  for (size_t i = 1; i < in.size(); ++i)
    check_param_dims("layer_norm_2d", names[i], x, *in[i], {x.dims[1]});
  check_eps(n.attrs_as<EpsAttrs>().eps, "layer_norm_2d");
  return x;
}

Shape infer_rope(const Node& n, const In& in) {
  const Shape &x = *in[0], &pos = *in[1];
  RLX_CHECK(x.rank() == 4, "rope: x must be [B,H,S,D], got ", x.str());
  check_index_dtype(pos, "rope");
  RLX_CHECK(pos.rank() == 1 && !(pos.dims[0].is_static() && x.dims[2].is_static() &&
                                 pos.dims[0].value != x.dims[2].value),
            "rope: positions ", pos.str(), " must be [S] for x ", x.str());
  const auto& a = n.attrs_as<RopeAttrs>();
  const Dim& d = x.dims[3];
  if (a.rotary_dims || d.is_static()) {
    const int64_t rd = a.rotary_dims.value_or(d.value);
    RLX_CHECK(rd >= 0 && rd % 2 == 0 && (!d.is_static() || rd <= d.value), "rope: rotary_dims=", rd,
              " must be even and at most D of x ", x.str());
    if (in.size() == 3) check_param_dims("rope", "freq_factors", x, *in[2], {Dim(rd / 2)});
  }
  RLX_CHECK(a.theta > 0, "rope: theta must be > 0");
  return x;
}

// [B, S, H, D] as [B, H, S, D] (dims only: attention's checks read them so).
Shape bhsd_view(const Shape& x) {
  Shape s = x;
  if (s.rank() == 4) std::swap(s.dims[1], s.dims[2]);
  return s;
}

Shape infer_attention(const Node& n, const In& in) {
  if (n.attrs_as<AttentionAttrs>().layout == AttentionLayout::bshd) {
    const Shape q = bhsd_view(*in[0]), k = bhsd_view(*in[1]), v = bhsd_view(*in[2]);
    Node as_bhsd = n;
    auto a = n.attrs_as<AttentionAttrs>();
    a.layout = AttentionLayout::bhsd;
    as_bhsd.attrs = a;
    In view{&q, &k, &v};
    if (in.size() == 4) view.push_back(in[3]);
    return bhsd_view(infer_attention(as_bhsd, view));
  }
  const Shape &q = *in[0], &k = *in[1], &v = *in[2];
  RLX_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4,
            "attention: q, k, v must be [B,H,S,D], got ", q.str(), ", ", k.str(), ", ", v.str());
  same_dtype(k, v);
  // f16 keys and values beside an f32 q: an f16 KV cache.
  if (!(q.dtype == DType::F32 && k.dtype == DType::F16)) same_dtype(q, k);
  if (q.dims[1].is_static() && k.dims[1].is_static())
    RLX_CHECK(k.dims[1].value > 0 && q.dims[1].value % k.dims[1].value == 0,
              "attention: ", q.dims[1].value, " query heads not a multiple of ", k.dims[1].value,
              " key heads");
  RLX_CHECK(q.dims[3] == k.dims[3] || !q.dims[3].is_static() || !k.dims[3].is_static(),
            "attention: q and k head dims differ");
  const auto& a = n.attrs_as<AttentionAttrs>();
  RLX_CHECK((a.mask == MaskKind::bias) == (in.size() == 4),
            "attention: mask 'bias' needs exactly a 4th input");
  if (a.mask == MaskKind::sliding)
    RLX_CHECK(a.window >= 1, "attention: sliding window must be >= 1, got ", a.window);
  RLX_CHECK(!a.scale || std::isfinite(*a.scale), "attention: scale must be finite, got ",
            a.scale.value_or(0));
  RLX_CHECK(a.softcap >= 0 && std::isfinite(a.softcap),
            "attention: softcap must be finite and >= 0 (0: off), got ", a.softcap);
  auto differ = [](const Dim& a, const Dim& b) {
    return a.is_static() && b.is_static() && a.value != b.value;
  };
  RLX_CHECK(!differ(q.dims[0], k.dims[0]) && !differ(k.dims[0], v.dims[0]) &&
                !differ(k.dims[1], v.dims[1]) && !differ(k.dims[2], v.dims[2]),
            "attention: batch, heads or lengths of q ", q.str(), ", k ", k.str(), ", v ", v.str(),
            " do not match");
  if (in.size() == 4) {
    const Shape& b = *in[3];
    RLX_CHECK(b.dtype == q.dtype || b.dtype == DType::Bool, "attention: bias ", b.str(),
              " must have q's dtype or be bool");
    std::vector<Dim> full{q.dims[0], q.dims[1], q.dims[2], k.dims[2]};
    RLX_CHECK(b.rank() <= 4, "attention: bias ", b.str(), " has rank > 4");
    for (int i = 0; i < b.rank(); ++i) {
      const Dim &bd = b.dims[size_t(i)], &fd = full[size_t(4 - b.rank() + i)];
      RLX_CHECK(!(bd.is_static() && bd.value != 1 && differ(bd, fd)), "attention: bias ", b.str(),
                " does not broadcast to [B,Hq,Sq,Sk]");
    }
  }
  return Shape({q.dims[0], q.dims[1], q.dims[2], v.dims[3]}, q.dtype);
}

std::vector<Shape> infer_attention_grad(const Node& n, const In& in) {
  In fwd{in[0], in[1], in[2]};
  if (in.size() == 5) fwd.push_back(in[4]);
  const Shape out = infer_attention(n, fwd);
  const Shape& dout = *in[3];
  same_dtype(*in[0], dout);
  RLX_CHECK(shapes_compatible(out, dout), "attention_grad: dout ", dout.str(),
            " does not match attention's output ", out.str());
  return {*in[0], *in[1], *in[2]};
}

Shape infer_resize(const Node& n, const In& in) {
  const Shape& x = *in[0];
  RLX_CHECK(x.rank() == 4, "resize: expected NCHW, got ", x.str());
  const auto& a = n.attrs_as<ResizeAttrs>();
  const auto& size = a.size;
  RLX_CHECK(a.scales.empty() || a.scales.size() == 2, "resize: scales needs 2 values, got ",
            a.scales.size());
  RLX_CHECK(size.size() == 2, "resize: size needs 2 values, got ", size.size());
  std::vector<Dim> out{x.dims[0], x.dims[1]};
  for (size_t k = 0; k < 2; ++k) {
    const Dim& in_dim = x.dims[2 + k];
    if (size[k] > 0) {
      out.emplace_back(size[k]);
      continue;
    }
    RLX_CHECK(size[k] == 0 && !a.scales.empty() && a.scales[k] > 0 && a.scales[k] < 0x1p20,
              "resize: size ", short_dims_str(size),
              " needs positive entries (0 only with scales)");
    if (!in_dim.is_static()) {
      out.push_back(Dim::symbol("?"));
      continue;
    }
    const double v = std::floor(double(in_dim.value) * a.scales[k]);
    RLX_CHECK(v >= 1 && v < 0x1p40, "resize: ", x.str(), " scaled by ", a.scales[k], " is empty");
    out.emplace_back(int64_t(v));
  }
  const bool interp = a.mode == ResizeMode::bilinear || a.mode == ResizeMode::bicubic;
  RLX_CHECK(interp || (!a.align_corners && !a.antialias),
            "resize: align_corners and antialias need mode bilinear or bicubic, not '",
            to_string(a.mode), "'");
  return Shape(std::move(out), x.dtype);
}

Shape infer_grid_sample(const Node&, const In& in) {
  const Shape &x = *in[0], &g = *in[1];
  RLX_CHECK(x.rank() == 4 && g.rank() == 4 && g.dims[3] == Dim(2),
            "grid_sample: expected x [N,C,H,W] and grid [N,H,W,2], got ", x.str(), ", ", g.str());
  same_dtype(x, g);
  return Shape({x.dims[0], x.dims[1], g.dims[1], g.dims[2]}, x.dtype);
}

// dequant_matmul: x [..., K] float times the N ggml-quantized rows of w
// (raw bytes [N, row_bytes]), output f32 [..., N].
Shape infer_dequant_matmul(const Node& n, const In& in) {
  const Shape &x = *in[0], &w = *in[1];
  const std::string& scheme = n.attrs_as<QuantAttrs>().scheme;
  const int64_t K = n.attrs_as<QuantAttrs>().k;
  const quant::GgmlType t = quant::parse_type_name(scheme);
  const quant::TypeTraits& tr = quant::traits(t);
  RLX_CHECK(K >= 0 && K % tr.block_size == 0, "dequant_matmul: k = ", K, " is not a multiple of ",
            scheme, "'s block size ", tr.block_size);
  RLX_CHECK(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16,
            "dequant_matmul: x must be f32/f16/bf16, got ", x.str());
  RLX_CHECK(x.rank() >= 1, "dequant_matmul: x must have rank >= 1, got ", x.str());
  RLX_CHECK(!x.dims.back().is_static() || x.dims.back().value == K, "dequant_matmul: x ", x.str(),
            " has last dim != k = ", K);
  check_quant_rows(n, w, "dequant_matmul");
  if (in.size() > 2) {
    const Shape& b = *in[2];
    RLX_CHECK(b.dtype == DType::F32 && b.rank() == 1 && b.dims[0] == w.dims[0],
              "dequant_matmul: bias must be f32 [", w.dims[0].str(), "], got ", b.str());
  }
  std::vector<Dim> out = x.dims;
  out.back() = w.dims[0];
  return Shape(out, DType::F32);
}

// ---- gradients

// moe_ffn: each expert weight holds `experts` blocks of rows of its scheme.
Shape infer_moe_ffn(const Node& n, const In& in) {
  const Shape &x = *in[0], &ids = *in[1], &w = *in[2];
  const auto& a = n.attrs_as<MoeFfnAttrs>();
  RLX_CHECK(a.experts > 0, "moe_ffn: experts must be > 0, got ", a.experts);
  RLX_CHECK(a.activation == Epilogue::silu || a.activation == Epilogue::gelu_tanh,
            "moe_ffn: activation must be silu or gelu_tanh, got ", to_string(a.activation));
  RLX_CHECK(x.dtype == DType::F32 && x.rank() == 2 && x.dims[1].is_static(),
            "moe_ffn: x must be f32 [tokens, d] with a static d, got ", x.str());
  check_index_dtype(ids, "moe_ffn");
  RLX_CHECK(ids.rank() == 2 && dims_compatible(ids.dims[0], x.dims[0]) && w.dtype == DType::F32 &&
                w.rank() == 2 && dims_compatible(w.dims[0], x.dims[0]) &&
                dims_compatible(w.dims[1], ids.dims[1]),
            "moe_ffn: ids and weights must be [tokens, k] (i64, f32) for x ", x.str(), ", got ",
            ids.str(), " and ", w.str());
  const int64_t D = x.dims[1].value;
  // Rows and row length of an expert weight: [experts * rows, row_bytes(k)].
  auto expert_rows = [&](const Shape& s, const char* what) {
    RLX_CHECK(s.dtype == DType::U8 && s.rank() == 2 && s.is_static(), "moe_ffn: ", what,
              " must be static u8 [experts * rows, row_bytes], got ", s.str());
    const int64_t rows = s.dims[0].value;
    RLX_CHECK(rows % a.experts == 0, "moe_ffn: ", what, " ", s.str(), " does not hold ", a.experts,
              " experts' rows");
    return rows / a.experts;
  };
  auto check_k = [&](const Shape& s, const std::string& scheme, int64_t k, const char* what) {
    const quant::GgmlType t = quant::parse_type_name(scheme);
    RLX_CHECK(
        k % quant::traits(t).block_size == 0 && s.dims[1].value == int64_t(quant::row_size(t, k)),
        "moe_ffn: ", what, " ", s.str(), " is not rows of ", k, " ", scheme, " elements");
  };
  const int64_t F = expert_rows(*in[3], "gate"), F2 = expert_rows(*in[4], "up"),
                D2 = expert_rows(*in[5], "down");
  RLX_CHECK(F == F2 && D2 == D, "moe_ffn: gate ", in[3]->str(), ", up ", in[4]->str(), " and down ",
            in[5]->str(), " do not agree on ", a.experts, " experts of d = ", D);
  check_k(*in[3], a.gate_scheme, D, "gate");
  check_k(*in[4], a.up_scheme, D, "up");
  check_k(*in[5], a.down_scheme, F, "down");
  return Shape({x.dims[0], Dim(D)}, DType::F32);
}

// rms/layer/group_norm_grad (x, dy[, gamma]): dx has x's shape; dgamma/dbeta have the
// parameter's (trailing `naxes` dims of x, or [C] for group_norm), gamma or not.
std::vector<Shape> infer_norm_grad(const Node& n, const In& in) {
  const char* op = op_name(n.op);
  const Shape &x = *in[0], &dy = *in[1];
  RLX_CHECK(x.dtype == DType::F32 || x.dtype == DType::F64 || x.dtype == DType::F16 ||
                x.dtype == DType::BF16,
            op, ": x must be floating point, got ", x.str());
  same_dtype(x, dy);
  RLX_CHECK(x.rank() == dy.rank(), op, ": dy ", dy.str(), " does not match x ", x.str());
  for (int i = 0; i < x.rank(); ++i)
    RLX_CHECK(dims_compatible(x.dims[size_t(i)], dy.dims[size_t(i)]), op, ": dy ", dy.str(),
              " does not match x ", x.str());
  std::vector<Dim> pdims;
  double eps;
  if (n.op == Op::GroupNormGrad) {
    RLX_CHECK(x.rank() >= 2, op, ": x must be [N,C,...], got ", x.str());
    const auto& a = n.attrs_as<GroupNormGradAttrs>();
    const int64_t g = a.groups;
    eps = a.eps;
    RLX_CHECK(g >= 1, op, ": groups must be >= 1, got ", g);
    const Dim& c = x.dims[1];
    RLX_CHECK(!c.is_static() || c.value % g == 0, op, ": groups=", g, " does not divide ", c.str(),
              " channels");
    pdims = {c};
  } else {
    const auto& a = n.attrs_as<NormGradAttrs>();
    const int64_t naxes = a.naxes;
    eps = a.eps;
    RLX_CHECK(naxes >= 1 && naxes <= x.rank(), op, ": naxes=", naxes, " out of range for x ",
              x.str());
    pdims.assign(x.dims.end() - naxes, x.dims.end());
  }
  if (in.size() > 2) check_param_dims(op, "gamma", x, *in[2], pdims);
  check_eps(eps, op);
  std::vector<Shape> out{x, Shape(pdims, x.dtype)};               // dx, dgamma
  if (n.op != Op::RmsNormGrad) out.emplace_back(pdims, x.dtype);  // dbeta
  return out;
}

Shape infer_activation_grad(const Node& n, const In& in) {
  // Throws for a kind that is not an activation or attributes it does not take.
  activation_attrs(n.attrs_as<ActivationGradAttrs>());
  const Shape &x = *in[0], &dy = *in[1];
  same_dtype(x, dy);
  RLX_CHECK(shapes_compatible(x, dy), "activation_grad: dy ", dy.str(), " does not match x ",
            x.str());
  return x;
}

// Shared checks of softmax_cross_entropy(_grad); returns the reduction.
LossReduction check_softmax_ce(const Node& n, const In& in) {
  const char* op = op_name(n.op);
  const Shape &logits = *in[0], &labels = *in[1];
  RLX_CHECK(logits.rank() == 2 && labels.rank() == 1, op,
            ": expected logits [N, C] and labels [N], got ", logits.str(), ", ", labels.str());
  check_index_dtype(labels, op);
  RLX_CHECK(dims_compatible(logits.dims[0], labels.dims[0]), op, ": logits ", logits.str(),
            " and labels ", labels.str(), " disagree on N");
  return n.attrs_as<CrossEntropyAttrs>().reduction;
}

Shape infer_softmax_ce(const Node& n, const In& in) {
  const LossReduction r = check_softmax_ce(n, in);
  if (r == LossReduction::none) return Shape(std::vector<Dim>{in[0]->dims[0]}, in[0]->dtype);
  return Shape(std::vector<Dim>{}, in[0]->dtype);
}

Shape infer_softmax_ce_grad(const Node& n, const In& in) {
  const LossReduction r = check_softmax_ce(n, in);
  const Shape& dl = *in[2];
  same_dtype(*in[0], dl);
  if (r == LossReduction::none)
    RLX_CHECK(dl.rank() == 1 && dims_compatible(dl.dims[0], in[0]->dims[0]),
              "softmax_cross_entropy_grad: dloss must be [N] for reduction 'none', got ", dl.str());
  else
    RLX_CHECK(dl.rank() == 0, "softmax_cross_entropy_grad: dloss must be a scalar for reduction '",
              to_string(r), "', got ", dl.str());
  return *in[0];
}

Shape infer_dropout(const Node& n, const In& in) {
  const double p = n.attrs_as<DropoutAttrs>().p;
  RLX_CHECK(p >= 0 && p < 1, "dropout: p must be in [0, 1), got ", p);
  RLX_CHECK(is_float(in[0]->dtype), "dropout: x must be floating point, got ", in[0]->str());
  const Shape& step = *in[1];
  RLX_CHECK(step.rank() == 0 && (step.dtype == DType::I64 || step.dtype == DType::I32),
            "dropout: step must be an integer scalar, got ", step.str());
  return *in[0];
}

// ---- quantization-aware training

// fake_quantize's checks, shared by its backward op: returns the scale's shape ([C] for a channel
// axis, [1] per tensor; the given scale's own shape for scale=input). `extra` is how many inputs
// come before the scale (1 for fake_quantize, 2 for fake_quantize_grad: x, dy).
Shape check_fake_quantize(const Node& n, const In& in, size_t extra) {
  const char* op = op_name(n.op);
  const auto& a = n.attrs_as<FakeQuantAttrs>();
  const FakeQuantRange r = fake_quant_range(a);
  const Shape& x = *in[0];
  RLX_CHECK(is_float(x.dtype), op, ": x must be floating point, got ", x.str());
  RLX_CHECK(std::isfinite(a.grad_factor), op, ": grad_factor must be finite, got ", a.grad_factor);
  std::vector<Dim> sdims{Dim(1)};
  if (a.axis) {
    RLX_CHECK(*a.axis >= -x.rank() && *a.axis < x.rank(), op, ": axis ", *a.axis,
              " out of range for x ", x.str());
    sdims = {x.dims[size_t(normalize_axis(*a.axis, x.rank()))]};
  }
  const size_t given = in.size() - extra;  // scale and zero point
  if (a.scale == FakeQuantScale::batch) {
    RLX_CHECK(given == 0, op, ": scale=batch computes the scale from x and takes no scale input (",
              given, " given); use scale=input to pass one");
    RLX_CHECK(a.ste != FakeQuantSte::lsq, op,
              ": ste=lsq learns the scale, so it needs scale=input (a scale tensor to train)");
    RLX_CHECK(r.qmax >= 1, op, ": scale=batch divides max|x| by quant_max, which is ", r.qmax);
    return Shape(sdims, x.dtype);
  }
  RLX_CHECK(given >= 1, op, ": scale=input needs a scale input (x[, scale[, zero_point]])");
  const Shape& s = *in[extra];
  RLX_CHECK(s.dtype == x.dtype, op, ": scale ", s.str(), " must have x's dtype (x ", x.str(), ")");
  const bool one = s.rank() == 0 || (s.rank() == 1 && s.dims[0] == Dim(1));
  const bool per_channel = a.axis && s.rank() == 1 && dims_compatible(s.dims[0], sdims[0]);
  RLX_CHECK(one || per_channel, op, ": scale ", s.str(), " must be ",
            a.axis ? "[C] (C = x's axis " + std::to_string(*a.axis) + " extent, " + sdims[0].str() +
                         ") or [1]"
                   : std::string("[1] or a scalar (no axis: one scale for the tensor)"),
            "; x ", x.str());
  if (given == 2) {
    const Shape& z = *in[extra + 1];
    RLX_CHECK(z.dtype == x.dtype || is_integer(z.dtype), op, ": zero_point ", z.str(),
              " must be an integer or have x's dtype");
    RLX_CHECK(z.rank() == s.rank() && (z.rank() == 0 || dims_compatible(z.dims[0], s.dims[0])), op,
              ": zero_point ", z.str(), " must have scale's shape ", s.str());
  }
  return s;
}

Shape infer_fake_quantize(const Node& n, const In& in) {
  check_fake_quantize(n, in, 1);
  return *in[0];
}

std::vector<Shape> infer_fake_quantize_grad(const Node& n, const In& in) {
  const Shape &x = *in[0], &dy = *in[1];
  same_dtype(x, dy);
  RLX_CHECK(shapes_compatible(x, dy), "fake_quantize_grad: dy ", dy.str(), " does not match x ",
            x.str());
  return {x, check_fake_quantize(n, in, 2)};
}

// ---- recurrent

// Static element count of a weight input, or an error naming it.
int64_t weight_numel(const char* op, const char* what, const Shape& s) {
  RLX_CHECK(s.is_static(), op, ": ", what, " must have static dims, got ", s.str());
  int64_t n = 1;
  for (const Dim& d : s.dims) n = checked_mul(n, d.value, op);
  return n;
}

// lstm / gru / rnn (ops.def): checks every input against the attributes and returns
// (y, h_n[, c_n]).
std::vector<Shape> infer_recurrent(const Node& n, const In& in) {
  const char* op = op_name(n.op);
  const RecurrentSpec s = recurrent_spec(n);
  RLX_CHECK(int(in.size()) == s.num_inputs, op, ": expected ", s.num_inputs,
            " inputs (x, w_ih, w_hh, bias", s.carry ? (n.op == Op::Lstm ? ", h0, c0" : ", h0") : "",
            s.lengths ? ", lengths" : "", s.peephole ? ", peephole" : "", s.proj ? ", w_hr" : "",
            ") for these attributes, got ", in.size());
  const Shape& x = *in[0];
  RLX_CHECK(x.dtype == DType::F32 || x.dtype == DType::F16 || x.dtype == DType::BF16, op,
            ": x must be f32, f16 or bf16, got ", x.str());
  RLX_CHECK(x.rank() == 3, op, ": x must be ", s.batch_first ? "[B, S, in]" : "[S, B, in]",
            ", got ", x.str());
  RLX_CHECK(x.dims[2].is_static(), op, ": x's feature dim must be static, got ", x.str());
  const int64_t in_f = x.dims[2].value, h = s.hidden, G = s.gates, LD = s.layers * s.dirs;
  const int64_t w = s.width();
  const Dim B = s.batch_first ? x.dims[0] : x.dims[1];
  const Dim S = s.batch_first ? x.dims[1] : x.dims[0];
  for (size_t i = 1; i < in.size(); ++i)
    if (int(i) != s.len)
      RLX_CHECK(in[i]->dtype == x.dtype, op, ": input ", i, " ", in[i]->str(),
                " must have x's dtype (x ", x.str(), ")");
  // w_ih: the packed blocks; any shape [..., in] of that size when every layer reads in features.
  const Shape &wi = *in[1], &wh = *in[2], &b = *in[3];
  const int64_t want_wi = s.w_ih_numel(in_f);
  const bool uniform = s.layers == 1 || in_f == s.dirs * w;
  RLX_CHECK(weight_numel(op, "w_ih", wi) == want_wi &&
                (wi.rank() == 1 || (uniform && wi.dims.back().value == in_f)),
            op, ": w_ih ", wi.str(), " does not fit hidden=", h, " num_layers=", s.layers,
            " directions=", s.dirs, " and x ", x.str(), ": expected ", want_wi,
            " elements (per layer ", s.dirs, " blocks [", G * h, ", in_l], in_0=", in_f,
            ", in_l=", s.dirs * w, ")", uniform ? ", as [..., in] or flat" : ", flat");
  const int64_t want_wh = LD * G * h * w;
  RLX_CHECK(
      weight_numel(op, "w_hh", wh) == want_wh && (wh.rank() == 1 || wh.dims.back().value == w), op,
      ": w_hh ", wh.str(), " does not fit hidden=", h, s.proj ? " proj_size=" : "",
      s.proj ? std::to_string(s.proj) : "", ": expected [", LD, ", ", G * h, ", ", w, "] (",
      want_wh, " elements)");
  const int64_t nb = weight_numel(op, "bias", b);
  const bool summed = nb == LD * G * h && n.op != Op::Gru;
  RLX_CHECK((summed || nb == LD * 2 * G * h) && (b.rank() == 1 || b.dims.back().value == nb / LD),
            op, ": bias ", b.str(), " does not fit hidden=", h, ": expected [", LD, ", ", 2 * G * h,
            "] (b_ih | b_hh)",
            n.op == Op::Gru
                ? " (gru keeps b_hn apart)"
                : " or [" + std::to_string(LD) + ", " + std::to_string(G * h) + "] (summed)");
  // h is proj_size wide with a projection, the cell state c always hidden.
  const Shape state(std::vector<Dim>{Dim(LD), B, Dim(w)}, x.dtype);
  const Shape cell(std::vector<Dim>{Dim(LD), B, Dim(h)}, x.dtype);
  auto check_state = [&](int i, const char* what, const Shape& want, const char* dims) {
    const Shape& t = *in[size_t(i)];
    bool ok = t.rank() == 3;
    for (int k = 0; ok && k < 3; ++k) ok = dims_compatible(t.dims[size_t(k)], want.dims[size_t(k)]);
    RLX_CHECK(ok, op, ": ", what, " ", t.str(), " must be ", want.str(), " (", dims, ")");
  };
  if (s.h0 >= 0)
    check_state(s.h0, "h0", state, s.proj ? "[L*D, B, proj_size]" : "[L*D, B, hidden]");
  if (s.c0 >= 0) check_state(s.c0, "c0", cell, "[L*D, B, hidden]");
  if (s.w_hr >= 0)
    RLX_CHECK(weight_numel(op, "w_hr", *in[size_t(s.w_hr)]) == LD * w * h, op, ": w_hr ",
              in[size_t(s.w_hr)]->str(), " must be [", LD, ", ", w, ", ", h,
              "] (proj_size, hidden)");
  if (s.len >= 0) {
    const Shape& l = *in[size_t(s.len)];
    check_index_dtype(l, op);
    RLX_CHECK(l.rank() == 1 && dims_compatible(l.dims[0], B), op, ": lengths ", l.str(),
              " must be [B] for x ", x.str());
  }
  if (s.peep >= 0)
    RLX_CHECK(weight_numel(op, "peephole", *in[size_t(s.peep)]) == LD * 3 * h, op, ": peephole ",
              in[size_t(s.peep)]->str(), " must be [", LD, ", ", 3 * h, "] (i, o, f)");
  const Dim Dh(s.dirs * w);
  Shape y(s.batch_first ? std::vector<Dim>{B, S, Dh} : std::vector<Dim>{S, B, Dh}, x.dtype);
  std::vector<Shape> out{y, state};
  if (n.op == Op::Lstm) out.push_back(cell);
  return out;
}

}  // namespace

namespace {
std::vector<Shape> dispatch_infer(const Node& n, const std::vector<const Shape*>& inputs) {
  // Single-output rules return a Shape, multi-output ones a list.
  struct AsList {
    std::vector<Shape> operator()(Shape s) const { return {std::move(s)}; }
    std::vector<Shape> operator()(std::vector<Shape> s) const { return s; }
  };
  switch (n.op) {
#define RLX_OP(e, name, fam, set, mn, mx, outs, infer) \
  case Op::e:                                          \
    return AsList{}(infer(n, inputs));
#include "rlx/ops.def"
#undef RLX_OP
  }
  throw make_error("infer_shape: bad op id ", int(n.op));
}
}  // namespace

std::vector<Shape> infer_shapes(const Node& n, const std::vector<const Shape*>& inputs) {
  std::vector<Shape> shapes = dispatch_infer(n, inputs);
  // Every shape a graph holds (leaves included) passes the checked-arithmetic
  // limits, so no later numel, stride or byte size can overflow.
  for (const Shape& s : shapes) {
    Dims fixed;
    for (const Dim& d : s.dims)
      if (d.is_static()) fixed.push_back(d.value);
    RLX_CHECK(s.rank() <= kMaxRank, op_name(n.op), ": result has rank ", s.rank(),
              " (the most rlx supports is ", kMaxRank, ")");
    check_dims(fixed, op_name(n.op));
  }
  return shapes;
}

Shape infer_shape(const Node& n, const std::vector<const Shape*>& inputs) {
  RLX_CHECK(!has_results(n.op), n.label(), ": has several outputs; use infer_shapes");
  return infer_shapes(n, inputs).at(0);
}

}  // namespace rlx
