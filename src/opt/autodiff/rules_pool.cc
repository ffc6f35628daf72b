// vjp rules of pooling and resampling. The pools' adjoints place per-window
// gradients with one grouped conv_transpose; resize and adaptive pooling are
// separable linear maps, differentiated as matrices along H and W;
// grid_sample recomputes its taps and scatter-adds onto them.
#include <cfloat>
#include <cmath>

#include "opt/autodiff/primitives.h"
#include "opt/autodiff/rules.h"
#include "rlx/error.h"

namespace rlx::opt::ad {
namespace {

// Pooled input as [N, C, H, W] (a 3-d [C, H, W] gets a unit batch).
struct Planes {
  NodeId x;
  Dims dims;  // the original dims
  int64_t n, c, h, w;
};

Planes as_nchw(Emit& e, NodeId x, const char* what) {
  Planes p{x, e.dims(x, what), 1, 0, 0, 0};
  const Dims& d = p.dims;
  p.c = d[d.size() - 3];
  p.h = d[d.size() - 2];
  p.w = d[d.size() - 1];
  if (d.size() == 4) p.n = d[0];
  p.x = e.reshape(x, {Dim(p.n), Dim(p.c), Dim(p.h), Dim(p.w)});
  return p;
}

NodeId to_nchw(Emit& e, NodeId g) {
  const Shape s = e.shape(g);
  if (s.rank() == 4) return g;
  std::vector<Dim> d = s.dims;
  d.insert(d.begin(), Dim(1));
  return e.reshape(g, d);
}

// Pool geometry with every list filled in.
struct PoolGeom {
  int64_t k[2], s[2], d[2], pb[2], pe[2], out[2];
};

template <typename A>
PoolGeom pool_geom(const A& a, const std::vector<int64_t>& dilation, const Dims& y) {
  PoolGeom g{};
  const auto& stride = pool_stride(a);
  const auto pads = list_or(a.pads, 4, 0);
  for (int i = 0; i < 2; ++i) {
    const size_t u = size_t(i);
    g.k[i] = a.kernel[u];
    g.s[i] = stride[u];
    g.d[i] = dilation[u];
    g.pb[i] = pads[u];
    g.pe[i] = pads[u + 2];
    g.out[i] = y[y.size() - 2 + u];
  }
  return g;
}

// The lowest finite value of a float dtype: max_pool's padding, which a conv
// can multiply by 0 (-inf would make NaN).
double lowest_finite(DType t) {
  switch (t) {
    case DType::F64:
      return -DBL_MAX;
    case DType::F16:
      return -65504.0;
    case DType::BF16:
      return -3.3895313892515355e38;
    default:
      return -FLT_MAX;
  }
}

// Scatters per-window gradients g [N, C*K, Ho, Wo] (K = kernel taps per
// channel, or 1) back onto the input [N, C, H, W]: conv_transpose with
// `weight` [C*K, 1, kh, kw], groups C. Its end pads crop what the last
// windows hang over; output_padding restores rows no window reached.
NodeId place_windows(Emit& e, NodeId g, NodeId weight, const PoolGeom& p, const Planes& x) {
  std::vector<int64_t> end(2), opad(2);
  const int64_t size[2] = {x.h, x.w};
  for (int i = 0; i < 2; ++i) {
    const int64_t r = (p.out[i] - 1) * p.s[i] + p.d[i] * (p.k[i] - 1) + 1 - p.pb[i] - size[i];
    end[size_t(i)] = std::max<int64_t>(r, 0);
    opad[size_t(i)] = std::max<int64_t>(-r, 0);
  }
  return e.op(Op::ConvTranspose, {g, weight},
              ConvTransposeAttrs{.stride = {p.s[0], p.s[1]},
                                 .pads = {p.pb[0], p.pb[1], end[0], end[1]},
                                 .dilation = {p.d[0], p.d[1]},
                                 .groups = x.c,
                                 .output_padding = opad});
}

// [C*K, 1, kh, kw] with channel c*K + t holding a one at tap t (K = kh*kw):
// as a conv weight it extracts every tap of every window, as a conv_transpose
// weight it puts each tap's gradient back.
Tensor tap_weights(int64_t c, const PoolGeom& p, DType t) {
  const int64_t taps = p.k[0] * p.k[1];
  Tensor w({c * taps, 1, p.k[0], p.k[1]}, DType::F64);
  double* v = w.data<double>();
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t tap = 0; tap < taps; ++tap) v[(ch * taps + tap) * taps + tap] = 1;
  return w.to(t);
}

// Separable averaging matrix of one axis, transposed: [in, out], entry
// 1/len for each input position in output position o's window.
Tensor adaptive_matrix_t(int64_t in, int64_t out, DType t) {
  Tensor m({in, out}, DType::F64);
  double* v = m.data<double>();
  for (int64_t o = 0; o < out; ++o) {
    const int64_t lo = o * in / out, hi = ((o + 1) * in + out - 1) / out;
    for (int64_t i = lo; i < hi; ++i) v[i * out + o] = 1.0 / double(hi - lo);
  }
  return m.to(t);
}

}  // namespace

void vjp_max_pool(VjpCall& c) {
  c.dx[0] = c.e.op(Op::MaxPool2dGrad, {c.in(0), c.grad()}, c.n.attrs_as<MaxPoolAttrs>());
}

void vjp_max_pool_grad(VjpCall& c) {
  // dx = P^T dy with P the 0/1 map of each window's argmax tap, constant in x
  // almost everywhere: x gets nothing, dy the cotangent gathered at the taps.
  if (!c.needs(1)) return;
  Emit& e = c.e;
  const Dims x = e.dims(c.in(0), "max_pool2d_grad's gradient");
  const Dims dy = e.dims(c.in(1), "max_pool2d_grad's gradient");
  const int64_t lead = x.size() == 4 ? x[0] * x[1] : x[0];
  const NodeId idx = e.op(Op::MaxPool2dIndices, {c.in(0)}, c.n.attrs_as<MaxPoolAttrs>());
  const int64_t pooled = dy[dy.size() - 2] * dy[dy.size() - 1];
  const NodeId taps = e.op(Op::GatherElements,
                           {e.reshape(c.grad(), {Dim(lead), Dim(x[x.size() - 2] * x.back())}),
                            e.reshape(idx, {Dim(lead), Dim(pooled)})},
                           AxisAttrs{.axis = 1});
  c.dx[1] = e.reshape(taps, c.in_shape(1).dims);
}

NodeId max_pool_grad_primitives(Emit& e, NodeId x_in, NodeId dy, MaxPoolAttrs a) {
  // Extract every tap of every window with a grouped one-hot conv, give the
  // gradient to the first tap equal to the maximum (PyTorch's argmax), and
  // put it back with the transposed conv. Padding is the lowest finite value,
  // which never wins: every window holds an input element.
  const Planes x = as_nchw(e, x_in, "max_pool2d_grad");
  const NodeId y = to_nchw(e, e.op(Op::MaxPool2d, {x_in}, a));
  const PoolGeom p = pool_geom(a, list_or(a.dilation, 2, 1), e.dims(y, "max_pool2d"));
  const int64_t taps = p.k[0] * p.k[1];
  const DType t = e.dtype(x_in);
  // The windows' far ends may hang over the padded input (ceil_mode): pad more.
  int64_t extra[2];
  const int64_t size[2] = {x.h, x.w};
  for (int i = 0; i < 2; ++i)
    extra[i] = std::max<int64_t>(
        0, (p.out[i] - 1) * p.s[i] + p.d[i] * (p.k[i] - 1) + 1 - (size[i] + p.pb[i] + p.pe[i]));
  const NodeId xp =
      e.op(Op::Pad, {x.x},
           PadAttrs{.pads = {0, 0, p.pb[0], p.pb[1], 0, 0, p.pe[0] + extra[0], p.pe[1] + extra[1]},
                    .value = lowest_finite(t)});
  const NodeId w = e.constant(tap_weights(x.c, p, t));
  const NodeId all = e.op(
      Op::Conv, {xp, w},
      ConvAttrs{
          .stride = {p.s[0], p.s[1]}, .pads = {}, .dilation = {p.d[0], p.d[1]}, .groups = x.c});
  const std::vector<Dim> split{Dim(x.n), Dim(x.c), Dim(taps), Dim(p.out[0]), Dim(p.out[1])};
  const std::vector<Dim> one{Dim(x.n), Dim(x.c), Dim(1), Dim(p.out[0]), Dim(p.out[1])};
  const NodeId hit = e.compare(Op::Eq, e.reshape(all, split), e.reshape(y, one));
  const NodeId before =
      e.op(Op::CumSum, {e.cast(hit, t)}, CumSumAttrs{.axis = 2, .exclusive = true});
  const NodeId first = e.op(Op::LogicalAnd, {hit, e.compare(Op::Eq, before, e.scalar(0, t))});
  const NodeId g = e.mask(first, e.reshape(dy, one));
  const NodeId merged = e.reshape(g, {Dim(x.n), Dim(x.c * taps), Dim(p.out[0]), Dim(p.out[1])});
  return e.reshape(place_windows(e, merged, w, p, x), e.shape(x_in).dims);
}

void vjp_avg_pool(VjpCall& c) {
  // Each window's gradient / its divisor, spread over the window by a
  // conv_transpose with a ones kernel. The divisor is PyTorch's, as the
  // kernel computes it: a product of per-axis counts.
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<AvgPoolAttrs>();
  const Planes x = as_nchw(e, c.in(0), "avg_pool2d's gradient");
  const PoolGeom p = pool_geom(a, {1, 1}, e.dims(c.n.id, "avg_pool2d"));
  const DType t = e.dtype(c.in(0));
  const int64_t size[2] = {x.h, x.w};
  std::vector<double> count[2];
  for (int i = 0; i < 2; ++i)
    for (int64_t o = 0; o < p.out[i]; ++o) {
      const int64_t lo = o * p.s[i] - p.pb[i], hi = std::min(lo + p.k[i], size[i] + p.pe[i]);
      const int64_t in = std::min(hi, size[i]) - std::max<int64_t>(lo, 0);
      count[i].push_back(double(a.count_include_pad ? hi - lo : in));
    }
  Tensor inv({p.out[0], p.out[1]}, DType::F64);
  for (int64_t i = 0; i < p.out[0]; ++i)
    for (int64_t j = 0; j < p.out[1]; ++j) {
      const double n = count[0][size_t(i)] * count[1][size_t(j)];
      inv.data<double>()[i * p.out[1] + j] = n > 0 ? 1.0 / n : 1.0;
    }
  const NodeId g = e.mul(to_nchw(e, c.grad()), e.constant(inv.to(t)));
  const NodeId ones = e.full(Shape(Dims{x.c, 1, p.k[0], p.k[1]}, t), 1);
  c.dx[0] = e.reshape(place_windows(e, g, ones, p, x), c.in_shape(0).dims);
}

void vjp_adaptive_avg_pool(VjpCall& c) {
  // y = Ph x Pw^T per plane with averaging matrices: dx = Ph^T dy Pw.
  Emit& e = c.e;
  const Dims x = e.dims(c.in(0), "adaptive_avg_pool2d's gradient");
  const auto& out = c.n.attrs_as<AdaptivePoolAttrs>().output;
  const DType t = e.dtype(c.in(0));
  const NodeId ph_t = e.constant(adaptive_matrix_t(x[x.size() - 2], out[0], t));
  const NodeId pw_t = e.constant(adaptive_matrix_t(x[x.size() - 1], out[1], t));
  c.dx[0] = e.matmul(e.matmul(ph_t, c.grad()), pw_t, false, true);
}

void vjp_resize(VjpCall& c) {
  // resize is separable and linear: y = Mh x Mw^T per plane, so dx = Mh^T dy
  // Mw. Each matrix comes from the op itself, resizing an identity along one
  // axis (the other axis stays 1 -> 1, the identity in every mode), so the
  // gradient follows the kernel's coordinate rules exactly.
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<ResizeAttrs>();
  const Dims x = e.dims(c.in(0), "resize's gradient");
  const DType t = e.dtype(c.in(0));
  auto matrix_t = [&](int axis) {  // [in, out] of axis 0 (H) or 1 (W)
    const int64_t in = x[size_t(2 + axis)];
    const int64_t out = a.size[size_t(axis)] > 0
                            ? a.size[size_t(axis)]
                            : int64_t(std::floor(double(in) * a.scales.at(size_t(axis))));
    Tensor eye({in, in}, DType::F64);
    for (int64_t i = 0; i < in; ++i) eye.data<double>()[i * in + i] = 1;
    const Dims basis = axis == 0 ? Dims{1, in, in, 1} : Dims{1, in, 1, in};
    ResizeAttrs r = a;
    r.size = axis == 0 ? std::vector<int64_t>{out, 1} : std::vector<int64_t>{1, out};
    if (!r.scales.empty()) r.scales[size_t(1 - axis)] = 1.0;
    const NodeId m = e.op(Op::Resize, {e.constant(eye.to(t).reshape(basis))}, r);
    return e.reshape(m, {Dim(in), Dim(out)});
  };
  c.dx[0] = e.matmul(e.matmul(matrix_t(0), c.grad()), matrix_t(1), false, true);
}

namespace {

// One axis of grid_sample's coordinate map, as resample.cc computes it, on
// graph values shaped [N, 1, Ho*Wo]: unnormalize, then pad (border clips,
// reflection folds then clips), with the derivative PyTorch's backward uses.
struct GridAxis {
  Emit& e;
  int64_t size;
  bool align;
  GridSamplePadding padding;
  DType t;

  NodeId s(double v) const { return e.scalar(v, t); }
  double scale() const { return align ? double(size - 1) / 2 : double(size) / 2; }
  NodeId unnormalize(NodeId g) const {
    return e.add(e.mul(e.add(g, s(1)), scale()), s(align ? 0 : -0.5));
  }
  NodeId clip(NodeId v) const {
    return e.op(Op::Clamp, {v}, ClampAttrs{.min = 0, .max = double(size - 1)});
  }
  // 1 strictly inside (0, size - 1), 0 where the clip holds (clip_coordinates_set_grad).
  NodeId clip_grad(NodeId v) const {
    const NodeId in = e.op(Op::LogicalAnd,
                           {e.compare(Op::Gt, v, s(0)), e.compare(Op::Lt, v, s(double(size - 1)))});
    return e.where(in, s(1), s(0));
  }
  // Reflection about the borders (period 2 * span from `low`) and its slope, +-1.
  std::pair<NodeId, NodeId> reflect(NodeId v) const {
    const double low = align ? 0 : -0.5, span = align ? double(size - 1) : double(size);
    if (align && size <= 1) return {e.full(e.shape(v), 0), e.full(e.shape(v), 0)};
    const NodeId d = e.sub(v, s(low));
    const NodeId extra = e.op(Op::Fmod, {e.op(Op::Abs, {d}), s(2 * span)});
    const NodeId r = e.add(e.op(Op::Min, {extra, e.sub(s(2 * span), extra)}), s(low));
    const NodeId side = e.where(e.compare(Op::Lt, d, s(0)), s(-1), s(1));
    const NodeId fold = e.where(e.compare(Op::Lt, extra, s(span)), s(1), s(-1));
    return {r, e.mul(side, fold)};
  }
  // Padded coordinate of v, and d padded / d v.
  std::pair<NodeId, NodeId> pad(NodeId v) const {
    switch (padding) {
      case GridSamplePadding::zeros:
        return {v, s(1)};
      case GridSamplePadding::border:
        return {clip(v), clip_grad(v)};
      case GridSamplePadding::reflection: {
        const auto [r, dr] = reflect(v);
        return {clip(r), e.mul(dr, clip_grad(r))};
      }
    }
    return {v, s(1)};
  }
  // Whether an integer-valued coordinate is inside [0, size).
  NodeId valid(NodeId v) const {
    return e.op(Op::LogicalAnd,
                {e.compare(Op::Gt, v, s(-1)), e.compare(Op::Lt, v, s(double(size)))});
  }
};

// The taps of one axis: integer coordinates, their weights and the weights'
// derivatives with respect to the (unpadded) coordinate.
struct AxisTaps {
  std::vector<NodeId> coord, w, dw;
  NodeId dcoord;  // d coordinate / d grid value
};

AxisTaps axis_taps(const GridAxis& ax, GridSampleMode mode, NodeId g) {
  Emit& e = ax.e;
  AxisTaps r;
  const NodeId raw = ax.unnormalize(g);
  if (mode == GridSampleMode::bicubic) {
    // Taps at floor(f) - 1 .. + 2 of the unpadded coordinate, each padded on
    // its own; weights are Keys' cubic (A = -0.75) of the fraction.
    const double A = -0.75;
    const NodeId x0 = e.op(Op::Floor, {raw});
    const NodeId t = e.sub(raw, x0);
    auto poly = [&](NodeId u, std::vector<double> c) {  // Horner, highest power first
      NodeId v = ax.s(c[0]);
      for (size_t i = 1; i < c.size(); ++i) v = e.add(e.mul(v, u), ax.s(c[i]));
      return v;
    };
    const NodeId u0 = e.add(t, ax.s(1)), u2 = e.sub(ax.s(1), t), u3 = e.sub(ax.s(2), t);
    const std::vector<double> far{A, -5 * A, 8 * A, -4 * A}, dfar{3 * A, -10 * A, 8 * A};
    const std::vector<double> near{A + 2, -(A + 3), 0, 1}, dnear{3 * (A + 2), -2 * (A + 3), 0};
    r.w = {poly(u0, far), poly(t, near), poly(u2, near), poly(u3, far)};
    r.dw = {poly(u0, dfar), poly(t, dnear), e.neg(poly(u2, dnear)), e.neg(poly(u3, dfar))};
    for (int k = 0; k < 4; ++k) r.coord.push_back(ax.pad(e.add(x0, ax.s(k - 1))).first);
    r.dcoord = ax.s(ax.scale());
    return r;
  }
  const auto [f, df] = ax.pad(raw);
  r.dcoord = e.mul(df, ax.s(ax.scale()));
  if (mode == GridSampleMode::nearest) {  // round half to even, like the kernel
    r.coord = {e.op(Op::Round, {f})};
    r.w = {ax.s(1)};
    r.dw = {ax.s(0)};
    return r;
  }
  const NodeId x0 = e.op(Op::Floor, {f});
  const NodeId t = e.sub(f, x0);
  r.coord = {x0, e.add(x0, ax.s(1))};
  r.w = {e.sub(ax.s(1), t), t};
  r.dw = {ax.s(-1), ax.s(1)};
  return r;
}

}  // namespace

void vjp_grid_sample(VjpCall& c) {
  // Recomputes the taps the kernel reads (resample.cc): x's gradient is the
  // weighted output gradient scatter-added onto them; the grid's is the tap
  // values times the weights' derivatives, times the coordinate map's slope.
  Emit& e = c.e;
  const auto& a = c.n.attrs_as<GridSampleAttrs>();
  const Dims x = e.dims(c.in(0), "grid_sample's gradient");
  const Dims gd = e.dims(c.in(1), "grid_sample's gradient");
  const int64_t N = x[0], C = x[1], H = x[2], W = x[3], HWo = gd[1] * gd[2];
  const DType t = e.dtype(c.in(0));
  const GridAxis ax{e, W, a.align_corners, a.padding, t}, ay{e, H, a.align_corners, a.padding, t};
  // grid [N, Ho, Wo, 2] -> gx, gy [N, 1, HWo]; dy and x flattened to [N, C, HW].
  const NodeId grid = e.reshape(c.in(1), {Dim(N), Dim(HWo), Dim(2)});
  auto comp = [&](int i) {
    return e.reshape(e.slice(grid, 2, i, i + 1), {Dim(N), Dim(1), Dim(HWo)});
  };
  const NodeId gx = comp(0), gy = comp(1);
  const NodeId dy = e.reshape(c.grad(), {Dim(N), Dim(C), Dim(HWo)});
  const NodeId xf = e.reshape(c.in(0), {Dim(N), Dim(C), Dim(H * W)});
  const std::vector<Dim> full{Dim(N), Dim(C), Dim(HWo)};
  const AxisTaps tx = axis_taps(ax, a.mode, gx), ty = axis_taps(ay, a.mode, gy);
  NodeId dx = c.needs(0) ? e.zeros(e.shape(xf)) : -1;
  NodeId dvx = -1, dvy = -1;  // sum over taps of value * weight derivative
  const bool grid_grad = c.needs(1) && a.mode != GridSampleMode::nearest;
  for (size_t i = 0; i < ty.coord.size(); ++i)
    for (size_t j = 0; j < tx.coord.size(); ++j) {
      // The tap's flat index (0 when outside, where its weight is masked to 0).
      const NodeId ok = e.op(Op::LogicalAnd, {ax.valid(tx.coord[j]), ay.valid(ty.coord[i])});
      const NodeId flat = e.add(e.mul(ty.coord[i], double(W)), tx.coord[j]);
      const NodeId index = e.expand(e.cast(e.where(ok, flat, e.scalar(0, t)), DType::I64), full);
      if (dx >= 0)
        dx = e.op(Op::ScatterElements, {dx, index, e.mask(ok, e.mul(dy, e.mul(ty.w[i], tx.w[j])))},
                  ScatterElementsAttrs{.axis = 2, .reduction = ScatterReduction::add});
      if (!grid_grad) continue;
      const NodeId v = e.mask(ok, e.op(Op::GatherElements, {xf, index}, AxisAttrs{.axis = 2}));
      const NodeId vx = e.mul(v, e.mul(ty.w[i], tx.dw[j])), vy = e.mul(v, e.mul(ty.dw[i], tx.w[j]));
      dvx = dvx < 0 ? vx : e.add(dvx, vx);
      dvy = dvy < 0 ? vy : e.add(dvy, vy);
    }
  if (dx >= 0) c.dx[0] = e.reshape(dx, c.in_shape(0).dims);
  if (!c.needs(1)) return;
  NodeId dgx, dgy;
  if (grid_grad) {
    dgx = e.mul(e.sum(e.mul(dy, dvx), {1}, true), tx.dcoord);
    dgy = e.mul(e.sum(e.mul(dy, dvy), {1}, true), ty.dcoord);
  } else {  // nearest: piecewise constant in the grid
    dgx = dgy = e.zeros(e.shape(gx));
  }
  // [N, 1, HWo] x 2 -> [N, Ho, Wo, 2]
  const std::vector<Dim> col{Dim(N), Dim(HWo), Dim(1)};
  const NodeId both = e.concat({e.reshape(dgx, col), e.reshape(dgy, col)}, 2);
  c.dx[1] = e.reshape(both, c.in_shape(1).dims);
}

}  // namespace rlx::opt::ad
