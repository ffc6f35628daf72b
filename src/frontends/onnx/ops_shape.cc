// Shape and movement ops, and the leaves that make values (Constant,
// ConstantOfShape, Range). Shape code (Shape -> Gather -> Concat -> Reshape)
// folds at import: the ops here work on IntList values when their inputs are
// known, so a reshape target is known by the time Reshape needs it. Axes and
// other parameters come from attributes or inputs depending on the opset.
#include <charconv>
#include <optional>
#include <string>

#include "frontends/onnx/context.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

// Axes from the attribute (before `input_from`) or input `index` (since).
std::optional<Dims> axes_of(Ctx& c, int64_t input_from, size_t index, const char* attr = "axes") {
  if (c.opset < input_from) {
    if (!c.has_attr(attr)) return std::nullopt;
    return c.ints_attr(attr);
  }
  if (!c.has(index)) return std::nullopt;
  return c.static_ints(index, attr);
}

// Target dims as rlx reshape wants them: symbolic entries become the one -1
// rlx allows.
Dims reshape_target(const std::vector<Dim>& t, const char* what) {
  Dims r;
  int unknown = 0;
  for (const auto& d : t) {
    r.push_back(d.is_static() ? d.value : -1);
    unknown += r.back() == -1;
  }
  RLX_CHECK(unknown <= 1, what, " to ", Shape(t, DType::F32).str(),
            ": more than one dim unknown at import (rlx reshapes take one -1; give the inputs "
            "static dims)");
  return r;
}

// An anonymous dim ('?', e.g. a conv's output width over a symbolic input width) as Shape
// reports it: "%<node>:<axis>", that node's dim read at run time. Only shape code holds these
// names; a Reshape turns them into reshape_like entries.
std::string dim_ref(NodeId node, int64_t axis) {
  return "%" + std::to_string(node) + ":" + std::to_string(axis);
}

// The (node, axis) of a dim_ref name, checked against the graph; nullopt for other dims.
std::optional<std::pair<NodeId, int64_t>> parse_dim_ref(Ctx& c, const Dim& d) {
  if (d.is_static() || d.sym.empty() || d.sym[0] != '%') return std::nullopt;
  const char *p = d.sym.data() + 1, *end = d.sym.data() + d.sym.size();
  int64_t node = -1, axis = -1;
  auto r = std::from_chars(p, end, node);
  RLX_CHECK(r.ec == std::errc() && r.ptr < end && *r.ptr == ':', "bad dim name '", d.sym, "'");
  r = std::from_chars(r.ptr + 1, end, axis);
  RLX_CHECK(r.ec == std::errc() && r.ptr == end && node >= 0 && size_t(node) < c.g().size() &&
                axis >= 0 && axis < c.shape_of(NodeId(node)).rank(),
            "bad dim name '", d.sym, "'");
  return std::pair{NodeId(node), axis};
}

NodeId reshape_to(Ctx& c, NodeId x, const std::vector<Dim>& target) {
  const Shape& s = c.shape_of(x);
  if (s.dims == target) return x;
  // Inserting or dropping 1s only (Unsqueeze, Squeeze) keeps x's other dims in order, anonymous
  // ones included: each is read from x at run time.
  auto non_unit = [](const std::vector<Dim>& d) {
    std::vector<size_t> at;
    for (size_t k = 0; k < d.size(); ++k)
      if (!d[k].is_static() || d[k].value != 1) at.push_back(k);
    return at;
  };
  const std::vector<size_t> from = non_unit(s.dims), to = non_unit(target);
  bool kept = from.size() == to.size();
  for (size_t j = 0; kept && j < from.size(); ++j) kept = s.dims[from[j]] == target[to[j]];
  if (kept && !s.is_static()) {
    Dims entries(target.size(), 1);
    for (size_t j = 0; j < from.size(); ++j)
      entries[to[j]] = s.dims[from[j]].is_static() ? s.dims[from[j]].value : -2 - int64_t(from[j]);
    return c.b().op(Op::ReshapeLike, {x, x}, {{"shape", entries}});
  }
  int unknown = 0;
  NodeId like = x;
  for (const Dim& d : target) {
    unknown += !d.is_static() || d.value == -1;
    if (auto ref = parse_dim_ref(c, d)) like = ref->first;
  }
  if (unknown <= 1 && like == x) return c.b().reshape(x, reshape_target(target, "Reshape"));
  // Dims unknown at import are read at run time from one tensor (reshape_like): the one a
  // Shape's "%node:axis" entries name, else x itself for the named symbols among its dims.
  const Shape& model = c.shape_of(like);
  Dims entries;
  int rest = 0;
  for (const Dim& d : target) {
    int64_t axis = -1;
    if (auto ref = parse_dim_ref(c, d)) {
      RLX_CHECK(ref->first == like, "Reshape of ", s.str(), ": its target reads dims of two ",
                "tensors computed at run time (rlx reads them from one)");
      axis = ref->second;
    } else if (!d.is_static() && d.sym != "?") {
      for (size_t k = 0; k < model.dims.size(); ++k)
        if (model.dims[k] == d) axis = axis == -1 ? int64_t(k) : -2;  // -2: ambiguous
    }
    if (axis >= 0) {
      entries.push_back(-2 - axis);
    } else {
      entries.push_back(d.is_static() ? d.value : -1);
      rest += entries.back() == -1;
    }
  }
  RLX_CHECK(rest <= 1, "Reshape of ", s.str(), " to ", Shape(target, s.dtype).str(),
            ": more than one dim unknown at import that rlx cannot read at run time (reshapes ",
            "take one -1; give the inputs static dims)");
  return c.b().op(Op::ReshapeLike, {x, like}, {{"shape", entries}});
}

std::vector<Val> lower_reshape(Ctx& c) {
  const Shape in = c.shape(0);
  std::vector<Dim> target;
  if (c.opset < 5) {
    for (int64_t d : c.ints_attr("shape")) target.emplace_back(d);
  } else {
    auto l = c.ints(1);
    RLX_CHECK(l, "shape (input 1) must be an integer tensor known at import (rlx cannot compute ",
              "shapes at run time)");
    target = l->v;  // symbolic entries stay symbols (a dim of the input, read at run time)
  }
  const bool allowzero = c.i("allowzero", 0) != 0;
  for (size_t k = 0; k < target.size(); ++k) {
    if (target[k].value == 0 && !allowzero) {  // 0 copies the input's dim
      RLX_CHECK(k < in.dims.size(), "shape entry ", k, " is 0 but the input ", in.str(),
                " has no dim ", k);
      target[k] = in.dims[k];
    }
    RLX_CHECK(target[k].value >= -1 || !target[k].is_static(), "bad shape entry ", target[k].value);
  }
  // Fill a -1 when the rest is known, so the result keeps its symbols.
  int neg = -1;
  for (size_t k = 0; k < target.size(); ++k)
    if (target[k].is_static() && target[k].value == -1) neg = int(k);
  if (neg >= 0 && in.is_static()) {
    int64_t known = 1;
    bool ok = true;
    for (size_t k = 0; k < target.size(); ++k)
      if (int(k) != neg) {
        ok = ok && target[k].is_static();
        if (ok) known = checked_mul(known, target[k].value, "reshape");
      }
    if (ok) {
      RLX_CHECK(known > 0 && in.numel() % known == 0, "cannot reshape ", in.str(), " to ",
                Shape(target, in.dtype).str());
      target[size_t(neg)] = Dim(in.numel() / known);
    }
  }
  if (auto l = c.ints(0); l && c.val(0).id < 0) {
    IntList r = *l;
    Dims d = reshape_target(target, "Reshape");
    r.dims = resolve_reshape(d, int64_t(l->v.size()), "Reshape");
    return {int_val(r)};
  }
  return one(reshape_to(c, c.in(0), target));
}

std::vector<Val> lower_flatten(Ctx& c) {
  const Shape s = c.shape(0);
  int64_t axis = c.i("axis", 1);
  if (axis < 0) axis += s.rank();
  RLX_CHECK(axis >= 0 && axis <= s.rank(), "Flatten: axis ", c.i("axis", 1), " out of range for ",
            s.str());
  Dim lead(1), tail(1);
  auto mul = [](Dim acc, const Dim& d) {
    if (!acc.is_static() || !d.is_static()) return Dim::symbol("?");
    return Dim(checked_mul(acc.value, d.value, "Flatten"));
  };
  for (int64_t k = 0; k < s.rank(); ++k)
    (k < axis ? lead : tail) = mul(k < axis ? lead : tail, s.dims[size_t(k)]);
  return one(reshape_to(c, c.in(0), {lead, tail}));
}

std::vector<Val> lower_transpose(Ctx& c) {
  const int r = c.shape(0).rank();
  Dims perm = c.ints_attr("perm");
  if (perm.empty())
    for (int k = r - 1; k >= 0; --k) perm.push_back(k);
  return one(c.b().transpose(c.in(0), perm));
}

// New dims after inserting size-1 axes (Unsqueeze) or dropping them (Squeeze).
std::vector<Dim> unsqueeze_dims(const std::vector<Dim>& in, const Dims& axes) {
  const int64_t r = int64_t(in.size() + axes.size());
  std::vector<bool> ins(size_t(r), false);
  for (int64_t a : axes) {
    const int64_t n = norm_axis(a, r, "Unsqueeze");
    RLX_CHECK(!ins[size_t(n)], "Unsqueeze: axis ", a, " repeated");
    ins[size_t(n)] = true;
  }
  std::vector<Dim> out;
  size_t k = 0;
  for (int64_t i = 0; i < r; ++i) out.push_back(ins[size_t(i)] ? Dim(1) : in[k++]);
  return out;
}

std::vector<Dim> squeeze_dims(const std::vector<Dim>& in, const std::optional<Dims>& axes) {
  const int64_t r = int64_t(in.size());
  std::vector<bool> drop(size_t(r), false);
  if (!axes) {
    for (int64_t i = 0; i < r; ++i) drop[size_t(i)] = in[size_t(i)] == Dim(1);
  } else {
    for (int64_t a : *axes) {
      const int64_t n = norm_axis(a, r, "Squeeze");
      RLX_CHECK(!in[size_t(n)].is_static() || in[size_t(n)].value == 1, "Squeeze: dim ", a, " is ",
                in[size_t(n)].str(), ", not 1");
      drop[size_t(n)] = true;
    }
  }
  std::vector<Dim> out;
  for (int64_t i = 0; i < r; ++i)
    if (!drop[size_t(i)]) out.push_back(in[size_t(i)]);
  return out;
}

Dims as_static(const std::vector<Dim>& d) {
  Dims r;
  for (const auto& x : d) r.push_back(x.value);
  return r;
}

std::vector<Val> regrid(Ctx& c, const std::vector<Dim>& out) {
  if (auto l = c.ints(0); l && c.val(0).id < 0) {
    IntList r = *l;
    r.dims = as_static(out);
    return {int_val(r)};
  }
  return one(reshape_to(c, c.in(0), out));
}

std::vector<Val> lower_unsqueeze(Ctx& c) {
  auto axes = axes_of(c, 13, 1);
  RLX_CHECK(axes, "Unsqueeze needs axes");
  return regrid(c, unsqueeze_dims(c.shape(0).dims, *axes));
}

std::vector<Val> lower_squeeze(Ctx& c) {
  return regrid(c, squeeze_dims(c.shape(0).dims, axes_of(c, 13, 1)));
}

std::vector<Val> lower_concat(Ctx& c) {
  const int64_t axis = c.i("axis");
  // Integer shape pieces concatenate at import.
  std::vector<IntList> parts;
  for (size_t k = 0; k < c.num_inputs(); ++k) {
    auto l = c.has(k) ? c.ints(k) : std::nullopt;
    if (!l || l->dims.size() != 1 || c.val(k).id >= 0) break;
    parts.push_back(*l);
  }
  if (parts.size() == c.num_inputs() && !parts.empty()) {
    IntList r{{0}, parts[0].dtype, {}};
    for (const auto& p : parts) r.v.insert(r.v.end(), p.v.begin(), p.v.end());
    r.dims = {int64_t(r.v.size())};
    return {int_val(r)};
  }
  std::vector<NodeId> xs;
  for (size_t k = 0; k < c.num_inputs(); ++k)
    if (c.has(k)) {
      const Shape s = c.shape(k);
      // ONNX lets empty pieces have any other dims; rlx checks them, so skip them.
      const int64_t ax = norm_axis(axis, s.rank(), "Concat");
      if (!(s.dims[size_t(ax)] == Dim(0))) xs.push_back(c.in(k));
    }
  if (xs.empty()) xs.push_back(c.in(0));  // every piece empty: the (empty) first one
  if (xs.size() == 1) return one(xs[0]);
  return one(c.b().concat(xs, axis));
}

std::vector<Val> lower_split(Ctx& c) {
  const Shape s = c.shape(0);
  const int64_t axis = norm_axis(c.i("axis", 0), s.rank(), "Split");
  const Dim len = s.dims[size_t(axis)];
  Dims sizes;
  if (c.opset < 13 && c.has_attr("split"))
    sizes = c.ints_attr("split");
  else if (c.opset >= 13 && c.has(1))
    sizes = c.static_ints(1, "split");
  if (sizes.empty()) {
    RLX_CHECK(len.is_static(), "Split of symbolic dim ", len.str(), " without sizes");
    const int64_t n = c.opset >= 18 && c.has_attr("num_outputs") ? c.i("num_outputs")
                                                                 : int64_t(c.node.outputs.size());
    RLX_CHECK(n >= 1, "Split into ", n, " pieces");
    const int64_t piece = (len.value + n - 1) / n;  // the last piece may be smaller (opset 18)
    for (int64_t k = 0, left = len.value; k < n; ++k, left -= piece)
      sizes.push_back(std::min(piece, std::max<int64_t>(left, 0)));
  }
  auto ids = c.b().results(Op::Split, {c.in(0)}, {{"axis", axis}, {"sizes", sizes}});
  std::vector<Val> out;
  for (NodeId id : ids) out.push_back(node_val(id));
  return out;
}

// Python-style start/end normalization for one axis of length `len`, as ONNX specifies.
std::vector<Val> lower_slice(Ctx& c) {
  Dims starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.ints_attr("starts");
    ends = c.ints_attr("ends");
    axes = c.ints_attr("axes");
  } else {
    starts = c.static_ints(1, "starts");
    ends = c.static_ints(2, "ends");
    if (c.has(3)) axes = c.static_ints(3, "axes");
    if (c.has(4)) steps = c.static_ints(4, "steps");
  }
  RLX_CHECK(starts.size() == ends.size(), "Slice: ", starts.size(), " starts but ", ends.size(),
            " ends");
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  RLX_CHECK(axes.size() == starts.size() && steps.size() == starts.size(),
            "Slice: starts, ends, axes and steps differ in length");
  const int r = c.shape(0).rank();
  // A 1-d integer value (shape code) slices at import.
  if (auto l = c.ints(0); l && c.val(0).id < 0 && l->dims.size() == 1 && axes.size() == 1) {
    const int64_t len = int64_t(l->v.size()), step = steps[0];
    RLX_CHECK(step != 0, "Slice: step 0");
    norm_axis(axes[0], 1, "Slice");
    auto clampv = [](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(hi, v)); };
    int64_t s = starts[0] < 0 ? starts[0] + len : starts[0];
    int64_t e = ends[0] < 0 ? (ends[0] < -len ? -1 : ends[0] + len) : ends[0];
    IntList out{{0}, l->dtype, {}};
    if (step > 0) {
      s = clampv(s, 0, len);
      e = clampv(e, 0, len);
      for (int64_t i = s; i < e; i += step) out.v.push_back(l->v[size_t(i)]);
    } else {
      s = clampv(s, -1, len - 1);
      e = clampv(e, -1, len - 1);
      for (int64_t i = s; i > e; i += step) out.v.push_back(l->v[size_t(i)]);
    }
    out.dims = {int64_t(out.v.size())};
    return {int_val(out)};
  }
  NodeId x = c.in(0);
  for (size_t k = 0; k < axes.size(); ++k) {
    const int64_t ax = norm_axis(axes[k], r, "Slice");
    RLX_CHECK(steps[k] != 0, "Slice: step 0 on axis ", ax);
    // ONNX clamps huge bounds (INT64_MAX / INT64_MIN markers) like Python;
    // rlx's slice does the same with its own markers.
    Attrs a{{"axis", ax}, {"start", starts[k]}, {"end", ends[k]}, {"step", steps[k]}};
    x = c.b().op(Op::Slice, {x}, a);
  }
  return one(x);
}

std::vector<Val> lower_expand(Ctx& c) {
  const Shape s = c.shape(0);
  const auto t = c.ints(1);
  RLX_CHECK(t, "Expand: the shape must be known at import");
  std::vector<Dim> target(t->v.begin(), t->v.end());
  // ONNX Expand broadcasts both ways (a 1 in the target keeps the input's dim).
  const std::vector<Dim> out = broadcast(s.dims, target);
  if (out == s.dims) return one(c.in(0));
  Dims attr;
  const size_t lead = out.size() - s.dims.size();
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k].is_static())
      attr.push_back(out[k].value);
    else {
      RLX_CHECK(k >= lead && s.dims[k - lead] == out[k], "Expand to symbolic dim ", out[k].str(),
                " not taken from the input");
      attr.push_back(-1);
    }
  }
  return one(c.b().op(Op::Expand, {c.in(0)}, {{"shape", attr}}));
}

std::vector<Val> lower_tile(Ctx& c) {
  return one(c.b().op(Op::Tile, {c.in(0)}, {{"repeats", c.static_ints(1, "repeats")}}));
}

std::vector<Val> lower_pad(Ctx& c) {
  const int r = c.shape(0).rank();
  Dims pads;
  double value = 0;
  if (c.opset < 11) {
    pads = c.ints_attr("pads");
    value = c.f("value", 0.0);
  } else {
    pads = c.static_ints(1, "pads");
    if (c.has(2)) {
      auto v = c.scalar(2);
      RLX_CHECK(v, "Pad: constant_value must be known at import");
      value = *v;
    }
    if (c.has(3)) {  // opset 18: pads for these axes only
      const Dims axes = c.static_ints(3, "axes");
      RLX_CHECK(pads.size() == 2 * axes.size(), "Pad: ", pads.size(), " pads for ", axes.size(),
                " axes");
      Dims full(size_t(2 * r), 0);
      for (size_t k = 0; k < axes.size(); ++k) {
        const int64_t ax = norm_axis(axes[k], r, "Pad");
        full[size_t(ax)] = pads[k];
        full[size_t(ax + r)] = pads[k + axes.size()];
      }
      pads = full;
    }
  }
  const std::string mode = c.s("mode", "constant");
  std::string m = mode == "edge" ? "replicate" : mode;
  RLX_CHECK(m == "constant" || m == "reflect" || m == "replicate", "Pad mode '", mode,
            "' (rlx pads constant, reflect, edge)");
  return one(c.b().op(Op::Pad, {c.in(0)}, {{"pads", pads}, {"mode", m}, {"value", value}}));
}

std::vector<Val> lower_constant(Ctx& c) {
  if (c.has_attr("value")) return {tensor_val(c.tensor_attr("value"))};
  if (c.has_attr("value_float")) {
    Tensor t({}, DType::F32);
    *t.data<float>() = float(c.f("value_float", 0));
    return {tensor_val(t)};
  }
  if (c.has_attr("value_int")) {
    Tensor t({}, DType::I64);
    *t.data<int64_t>() = c.i("value_int");
    return {tensor_val(t)};
  }
  if (c.has_attr("value_floats")) {
    auto v = c.floats_attr("value_floats");
    return {tensor_val(Tensor::from_vector<double>({int64_t(v.size())}, v, DType::F32))};
  }
  if (c.has_attr("value_ints")) {
    auto v = c.ints_attr("value_ints");
    return {tensor_val(Tensor::from_vector<int64_t>({int64_t(v.size())}, v, DType::I64))};
  }
  c.unsupported("Constant without a tensor, float(s) or int(s) value (sparse or string)");
}

std::vector<Val> lower_constant_of_shape(Ctx& c) {
  const Dims dims = c.static_ints(0, "shape");
  check_dims(dims, "ConstantOfShape");
  double value = 0;
  DType t = DType::F32;
  if (c.has_attr("value")) {
    const Tensor& v = c.tensor_attr("value");
    RLX_CHECK(v.numel() == 1, "ConstantOfShape: value must have one element");
    value = v.item_as_double(0);
    t = v.dtype();
  }
  if (numel(dims) <= kMaxFoldElements) {
    Tensor out =
        Tensor::from_vector<double>(dims, std::vector<double>(size_t(numel(dims)), value), t);
    return {tensor_val(out)};
  }
  return one(c.b().full(dims, value, t));
}

std::vector<Val> lower_range(Ctx& c) {
  auto start = c.scalar(0), limit = c.scalar(1), delta = c.scalar(2);
  RLX_CHECK(start && limit && delta, "Range: start, limit and delta must be known at import");
  RLX_CHECK(*delta != 0, "Range: delta 0");
  const DType t = c.shape(0).dtype;
  const double n = std::ceil((*limit - *start) / *delta);
  RLX_CHECK(n <= double(kMaxElements), "Range of ", n, " elements");
  const int64_t count = n > 0 ? int64_t(n) : 0;  // n is at most kMaxElements (NaN failed above)
  if (is_integer(t) && count <= kMaxFoldElements) {
    const double last = *start + double(count) * *delta;
    RLX_CHECK(std::abs(*start) < 0x1p62 && std::abs(last) < 0x1p62, "Range from ", *start, " by ",
              *delta, " leaves the integers");
    IntList l{{count}, t, {}};
    for (int64_t k = 0; k < count; ++k) l.v.emplace_back(int64_t(*start + double(k) * *delta));
    return {int_val(l)};
  }
  return one(c.b().arange(count, *start, *delta, t));
}

std::vector<Val> lower_shape(Ctx& c) {
  const Shape s = c.shape(0);
  const int64_t r = s.rank();
  auto clampi = [&](int64_t v) { return std::max<int64_t>(0, std::min(r, v < 0 ? v + r : v)); };
  const int64_t start = clampi(c.i("start", 0)), end = clampi(c.i("end", r));
  IntList l{{0}, DType::I64, {}};
  for (int64_t k = start; k < end; ++k) {
    const Dim& d = s.dims[size_t(k)];
    l.v.push_back(d.is_static() || d.sym != "?" ? d : Dim::symbol(dim_ref(c.in(0), k)));
  }
  l.dims = {int64_t(l.v.size())};
  return {int_val(l)};
}

std::vector<Val> lower_size(Ctx& c) {
  const Shape s = c.shape(0);
  RLX_CHECK(s.is_static(), "Size of symbolic shape ", s.str());
  return {int_val(IntList{{}, DType::I64, {Dim(s.numel())}})};
}

// DepthToSpace (DCR or CRD order) and SpaceToDepth as reshape + transpose + reshape.
std::vector<Val> lower_depth_space(Ctx& c, bool to_space) {
  const Shape s = c.shape(0);
  RLX_CHECK(s.rank() == 4 && s.is_static(), "needs a static NCHW input, got ", s.str());
  const Dims d = s.concrete();
  const int64_t b = c.i("blocksize"), n = d[0], ch = d[1], h = d[2], w = d[3];
  RLX_CHECK(b >= 1, "blocksize ", b);
  NodeId x = c.in(0);
  if (to_space) {
    RLX_CHECK(ch % (b * b) == 0, "channels ", ch, " not divisible by blocksize^2");
    const std::string mode = c.s("mode", "DCR");
    RLX_CHECK(mode == "DCR" || mode == "CRD", "mode '", mode, "'");
    const int64_t oc = ch / (b * b);
    if (mode == "DCR") {
      x = c.b().reshape(x, {n, b, b, oc, h, w});
      x = c.b().transpose(x, {0, 3, 4, 1, 5, 2});
    } else {
      x = c.b().reshape(x, {n, oc, b, b, h, w});
      x = c.b().transpose(x, {0, 1, 4, 2, 5, 3});
    }
    return one(c.b().reshape(x, {n, oc, h * b, w * b}));
  }
  RLX_CHECK(h % b == 0 && w % b == 0, "H and W must be divisible by blocksize ", b);
  x = c.b().reshape(x, {n, ch, h / b, b, w / b, b});
  x = c.b().transpose(x, {0, 3, 5, 1, 2, 4});
  return one(c.b().reshape(x, {n, ch * b * b, h / b, w / b}));
}

// Trilu: keep the upper (j - i >= k) or lower (j - i <= k) triangle of the
// last two dims, through a mask known at import.
std::vector<Val> lower_trilu(Ctx& c) {
  const Shape s = c.shape(0);
  RLX_CHECK(s.rank() >= 2 && s.dims[size_t(s.rank() - 2)].is_static() &&
                s.dims[size_t(s.rank() - 1)].is_static(),
            "Trilu needs static last two dims, got ", s.str());
  int64_t k = 0;
  if (c.has(1)) {
    auto v = c.scalar_int(1, "Trilu k");
    RLX_CHECK(v, "Trilu k must be known at import");
    k = *v;
  }
  const bool upper = c.i("upper", 1) != 0;
  const int64_t rows = s.dims[size_t(s.rank() - 2)].value,
                cols = s.dims[size_t(s.rank() - 1)].value;
  Tensor mask({rows, cols}, DType::Bool);
  auto* m = mask.data<bool>();
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) m[i * cols + j] = upper ? j - i >= k : j - i <= k;
  NodeId x = c.in(0);
  return one(c.b().op(Op::Where, {c.constant(mask), x, c.scalar_const(0, s.dtype)}));
}

std::vector<Val> lower_eye_like(Ctx& c) {
  const Shape s = c.shape(0);
  RLX_CHECK(s.rank() == 2 && s.is_static(), "EyeLike needs a static 2-d input, got ", s.str());
  DType t = s.dtype;
  if (c.has_attr("dtype")) {
    auto d = dtype_of(int32_t(c.i("dtype")));
    RLX_CHECK(d, "EyeLike dtype ", onnx_type_name(int32_t(c.i("dtype"))),
              ": rlx has no such dtype");
    t = *d;
  }
  const int64_t k = c.i("k", 0), rows = s.concrete()[0], cols = s.concrete()[1];
  std::vector<double> v(size_t(rows * cols), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    if (i + k >= 0 && i + k < cols) v[size_t(i * cols + i + k)] = 1;
  return {tensor_val(Tensor::from_vector<double>({rows, cols}, v, t))};
}

}  // namespace

void register_shape(Registry& r) {
  r.add("DepthToSpace", [](Ctx& c) { return lower_depth_space(c, true); });
  r.add("SpaceToDepth", [](Ctx& c) { return lower_depth_space(c, false); });
  r.add("Trilu", lower_trilu);
  r.add("EyeLike", lower_eye_like);
  r.add("Reshape", lower_reshape);
  r.add("Flatten", lower_flatten);
  r.add("Transpose", lower_transpose);
  r.add("Unsqueeze", lower_unsqueeze);
  r.add("Squeeze", lower_squeeze);
  r.add("Concat", lower_concat);
  r.add("Split", lower_split);
  r.add("Slice", lower_slice);
  r.add("Expand", lower_expand);
  r.add("Tile", lower_tile);
  r.add("Pad", lower_pad);
  r.add("Constant", lower_constant);
  r.add("ConstantOfShape", lower_constant_of_shape);
  r.add("Range", lower_range);
  r.add("Shape", lower_shape);
  r.add("Size", lower_size);
}

}  // namespace rlx::onnx
