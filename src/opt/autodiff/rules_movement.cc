// vjp rules of shape and movement ops: each is the adjoint data movement
// (inverse permutation, zero-padded placement, summing replicas back).
#include <algorithm>

#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {
namespace {

// Pads of a rank-r tensor that are zero except (begin, end) on `axis`.
std::vector<int64_t> axis_pads(int r, int axis, int64_t begin, int64_t end) {
  std::vector<int64_t> p(size_t(2 * r), 0);
  p[size_t(axis)] = begin;
  p[size_t(axis + r)] = end;
  return p;
}

int64_t static_dim(const Shape& s, int axis, const char* what) {
  const Dim& d = s.dims[size_t(axis)];
  RLX_CHECK(d.is_static(), what, "'s gradient needs dim ", axis, " of ", s.str(), " static");
  return d.value;
}

// Places g (n elements along `axis`) at positions start, start + step, ...
// of an axis of length len, zeros elsewhere: interleave step-1 zeros after
// each element, then pad/crop to the axis.
NodeId place_strided(Emit& e, NodeId g, int axis, int64_t start, int64_t step, int64_t len) {
  const Shape s = e.shape(g);
  const int r = s.rank();
  const int64_t n = static_dim(s, axis, "slice");
  if (step > 1) {
    std::vector<Dim> split = s.dims;
    split.insert(split.begin() + axis + 1, Dim(1));
    g = e.pad(e.reshape(g, split), axis_pads(r + 1, axis + 1, 0, step - 1));
    std::vector<Dim> merged = s.dims;
    merged[size_t(axis)] = Dim(n * step);
    g = e.reshape(g, merged);
  }
  return e.pad(g, axis_pads(r, axis, start, len - start - n * step));
}

}  // namespace

void vjp_reshape(VjpCall& c) { c.dx[0] = c.e.reshape(c.grad(), c.in_shape(0).dims); }

// Back to x's dims, symbolic ones included, read from x itself; `like` lends
// only dims and gets no gradient.
void vjp_reshape_like(VjpCall& c) {
  std::vector<int64_t> all;
  for (int a = 0; a < c.in_shape(0).rank(); ++a) all.push_back(-2 - a);
  c.dx[0] = c.e.op(Op::ReshapeLike, {c.grad(), c.in(0)}, ReshapeLikeAttrs{.shape = all});
}

void vjp_transpose(VjpCall& c) {
  const auto& perm = c.n.attrs_as<TransposeAttrs>().perm;
  std::vector<int64_t> inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i)
    inv[size_t(normalize_axis(perm[i], int(perm.size())))] = int64_t(i);
  c.dx[0] = c.e.transpose(c.grad(), inv);
}

void vjp_slice(VjpCall& c) {
  const Shape x = c.in_shape(0);
  const auto& a = c.n.attrs_as<SliceAttrs>();
  const int axis = normalize_axis(a.axis, x.rank());
  const int64_t len = static_dim(x, axis, "slice");
  const int64_t n = static_dim(c.e.shape(c.n.id), axis, "slice");
  if (n == 0) return;  // nothing selected: no gradient
  // The first selected index, as infer_slice computes it (Python's clamping).
  const int64_t step = a.step, start = slice_start(a);
  const int64_t from = start < 0 ? start + len : start;
  int64_t s = step > 0 ? std::clamp<int64_t>(from, 0, len) : std::clamp<int64_t>(from, -1, len - 1);
  NodeId g = c.grad();
  if (step < 0) {  // walk the selection upwards: flip it, start at its lowest index
    g = c.e.flip(g, {axis});
    s += (n - 1) * step;
  }
  c.dx[0] = place_strided(c.e, g, axis, s, step < 0 ? -step : step, len);
}

void vjp_concat(VjpCall& c) {
  const int r = c.e.rank(c.n.id);
  const int axis = normalize_axis(c.n.attrs_as<AxisAttrs>().axis, r);
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < c.n.inputs.size(); ++i)
    sizes.push_back(static_dim(c.in_shape(i), axis, "concat"));
  if (sizes.size() == 1) {
    c.dx[0] = c.grad();
    return;
  }
  const auto parts = c.e.results(Op::Split, {c.grad()}, SplitAttrs{.axis = axis, .sizes = sizes});
  for (size_t i = 0; i < parts.size(); ++i)
    if (c.needs(i)) c.dx[i] = parts[i];
}

void vjp_expand(VjpCall& c) { c.dx[0] = c.e.sum_to(c.grad(), c.in_shape(0)); }

void vjp_pad(VjpCall& c) {
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<PadAttrs>();
  std::vector<int64_t> crop = a.pads;
  for (int64_t& p : crop) p = -p;
  // Constant padding: the interior is the gradient (negative pads crop, so
  // cropped positions get zeros back).
  if (a.mode == PadMode::constant) {
    c.dx[0] = e.pad(c.grad(), crop);
    return;
  }
  // Reflect and replicate are separable: undo one axis at a time, folding the
  // padded borders back onto the input positions they copied.
  const Shape x = c.in_shape(0);
  const int r = x.rank();
  NodeId g = c.grad();
  for (int ax = 0; ax < r; ++ax) {
    const int64_t b = a.pads[size_t(ax)], en = a.pads[size_t(ax + r)];
    if (b == 0 && en == 0) continue;
    const int64_t len = static_dim(x, ax, "pad");
    NodeId acc = e.pad(g, axis_pads(r, ax, -b, -en));
    if (b > 0) {
      NodeId left = e.slice(g, ax, 0, b);
      left = a.mode == PadMode::reflect
                 ? e.pad(e.flip(left, {ax}), axis_pads(r, ax, 1, len - 1 - b))
                 : e.pad(e.sum(left, {ax}, true), axis_pads(r, ax, 0, len - 1));
      acc = e.add(acc, left);
    }
    if (en > 0) {
      NodeId right = e.slice(g, ax, b + len, b + len + en);
      right = a.mode == PadMode::reflect
                  ? e.pad(e.flip(right, {ax}), axis_pads(r, ax, len - 1 - en, 1))
                  : e.pad(e.sum(right, {ax}, true), axis_pads(r, ax, len - 1, 0));
      acc = e.add(acc, right);
    }
    g = acc;
  }
  c.dx[0] = g;
}

void vjp_tile(VjpCall& c) {
  // [r0*d0, r1*d1, ...] -> [r0, d0, r1, d1, ...], summed over the r axes.
  const Dims x = c.e.dims(c.in(0), "tile's gradient");
  const auto& reps = c.n.attrs_as<TileAttrs>().repeats;
  std::vector<Dim> split;
  std::vector<int64_t> axes;
  for (size_t i = 0; i < x.size(); ++i) {
    axes.push_back(int64_t(split.size()));
    split.emplace_back(reps[i]);
    split.emplace_back(x[i]);
  }
  c.dx[0] = c.e.sum(c.e.reshape(c.grad(), split), axes, false);
}

void vjp_flip(VjpCall& c) { c.dx[0] = c.e.flip(c.grad(), c.n.attrs_as<FlipAttrs>().axes); }

void vjp_split(VjpCall& c) {
  const auto& a = c.n.attrs_as<SplitAttrs>();
  std::vector<NodeId> parts;
  for (size_t i = 0; i < c.dy.size(); ++i)
    parts.push_back(c.dy[i] >= 0 ? c.dy[i] : c.e.zeros(c.n.results[i]));
  c.dx[0] = c.e.concat(parts, a.axis);
}

}  // namespace rlx::opt::ad
