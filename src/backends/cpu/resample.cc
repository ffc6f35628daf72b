// Spatial resampling, matching PyTorch's CPU kernels (torch 1.13):
//
// resize(x NCHW) size: [h, w], mode, align_corners, antialias -> F.interpolate(x, size=...).
//   nearest        legacy: src = min(floor(dst * (in/out)), in - 1), computed in float like PyTorch
//                  (so in/out ratios that round in float pick the same pixel).
//   nearest_exact  src = min(floor((dst + 0.5) * (in/out)), in - 1).
//   bilinear       2 taps; bicubic: 4 taps, A = -0.75, border indices clamped.
//   align_corners  (bilinear/bicubic only) maps corner pixel centers onto each other.
//   antialias      (bilinear/bicubic only) PyTorch's _upsample_*_aa: a separable filter whose
//   support
//                  widens with the downscale factor (triangle; cubic with a = -0.5 as in PIL),
//                  weights normalized per output pixel.
//   Every mode is computed separably: a horizontal pass into a row buffer, then a vertical pass.
//
// grid_sample(x NCHW, grid N,Ho,Wo,2) mode: bilinear | nearest | bicubic, padding: zeros | border
//   | reflection, align_corners -> F.grid_sample. grid[..., 0] is x (width), grid[..., 1] is y.
//   Coordinates are unnormalized, padded and rounded exactly as PyTorch's vectorized CPU kernel
//   (nearest rounds half to even; NaN coordinates clip to 0 under border/reflection padding).
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// ---------------------------------------------------------------- resize

// Taps of one axis: output o reads in[idx[o*K + t]] with weight w[o*K + t]. Unused taps carry a
// valid index and weight 0.
template <typename T>
struct Taps {
  int64_t K = 1;
  std::vector<int64_t> idx;
  std::vector<T> w;
};

// PyTorch's area_pixel_compute_scale (float arithmetic for float tensors).
// `user_scale` > 0 is F.interpolate's scale_factor, which PyTorch uses
// instead of in/out when given (they differ when in * scale is not whole).
template <typename T>
T pixel_scale(int64_t in, int64_t out, bool align_corners, double user_scale) {
  if (align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
  if (user_scale > 0) return T(1.0 / user_scale);
  return T(in) / T(out);
}

// PyTorch's area_pixel_compute_source_index.
template <typename T>
T source_index(T scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * T(dst);
  T src = T(double(scale) * (double(dst) + 0.5) - 0.5);
  return (!cubic && src < T(0)) ? T(0) : src;
}

template <typename T>
void cubic_coeffs(T t, T A, T* c) {
  auto conv1 = [A](T x) { return ((A + 2) * x - (A + 3)) * x * x + 1; };
  auto conv2 = [A](T x) { return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A; };
  c[0] = conv2(t + T(1));
  c[1] = conv1(t);
  c[2] = conv1(T(1) - t);
  c[3] = conv2(T(2) - t);
}

template <typename T>
T aa_filter(T x, bool cubic) {
  if (x < T(0)) x = -x;
  if (!cubic) return x < T(1) ? T(1) - x : T(0);
  const T a = T(-0.5);  // PIL's bicubic, which PyTorch's antialias path follows
  if (x < T(1)) return ((a + T(2)) * x - (a + T(3))) * x * x + T(1);
  if (x < T(2)) return (((x - T(5)) * x + T(8)) * x - T(4)) * a;
  return T(0);
}

template <typename T>
Taps<T> make_taps(int64_t in, int64_t out, ResizeMode mode, bool align_corners, bool antialias,
                  double user_scale) {
  Taps<T> tp;
  auto alloc = [&](int64_t K) {
    tp.K = K;
    tp.idx.assign(size_t(out * K), 0);
    tp.w.assign(size_t(out * K), T(0));
  };
  auto clampi = [in](int64_t v) { return std::clamp<int64_t>(v, 0, in - 1); };
  if (mode == ResizeMode::nearest || mode == ResizeMode::nearest_exact) {
    alloc(1);
    const float scale = user_scale > 0 ? float(1.0 / user_scale) : float(in) / float(out);
    for (int64_t o = 0; o < out; ++o) {
      int64_t s;
      if (mode == ResizeMode::nearest)
        s = out == in ? o : out == 2 * in ? o >> 1 : int64_t(std::floor(float(o) * scale));
      else
        s = int64_t(std::floor(float((double(o) + 0.5) * double(scale))));
      tp.idx[size_t(o)] = std::min(s, in - 1);
      tp.w[size_t(o)] = T(1);
    }
    return tp;
  }
  const bool cubic = mode == ResizeMode::bicubic;
  const T scale = pixel_scale<T>(in, out, align_corners, user_scale);
  if (antialias) {
    const int base = cubic ? 4 : 2;
    const T support = scale >= T(1) ? T(base * 0.5) * scale : T(base * 0.5);
    alloc(int64_t(std::ceil(float(support))) * 2 + 1);
    const T invscale = scale >= T(1) ? T(1) / scale : T(1);
    for (int64_t o = 0; o < out; ++o) {
      const T center = T(double(scale) * (double(o) + 0.5));
      const int64_t xmin = std::max<int64_t>(int64_t(center - support + T(0.5)), 0);
      const int64_t xsize = std::min<int64_t>(int64_t(center + support + T(0.5)), in) - xmin;
      T* w = tp.w.data() + o * tp.K;
      int64_t* id = tp.idx.data() + o * tp.K;
      T total = 0;
      for (int64_t j = 0; j < xsize && j < tp.K; ++j) {
        w[j] = aa_filter(T((double(j + xmin) - double(center) + 0.5) * double(invscale)), cubic);
        total += w[j];
      }
      for (int64_t j = 0; j < tp.K; ++j) {
        if (j < xsize && total != T(0)) w[j] /= total;
        id[j] = clampi(xmin + std::min(j, std::max<int64_t>(xsize - 1, 0)));
      }
    }
    return tp;
  }
  if (!cubic) {
    alloc(2);
    for (int64_t o = 0; o < out; ++o) {
      const T real = source_index(scale, o, align_corners, false);
      const int64_t i0 = std::min(int64_t(real), in - 1);
      const T l1 = real - T(i0);
      tp.idx[size_t(2 * o)] = i0;
      tp.idx[size_t(2 * o + 1)] = i0 + (i0 < in - 1 ? 1 : 0);
      tp.w[size_t(2 * o)] = T(1) - l1;
      tp.w[size_t(2 * o + 1)] = l1;
    }
    return tp;
  }
  alloc(4);
  for (int64_t o = 0; o < out; ++o) {
    const T real = source_index(scale, o, align_corners, true);
    const T fl = std::floor(real);
    const int64_t i0 = int64_t(fl);
    cubic_coeffs(real - fl, T(-0.75), tp.w.data() + 4 * o);
    for (int64_t t = 0; t < 4; ++t) tp.idx[size_t(4 * o + t)] = clampi(i0 - 1 + t);
  }
  return tp;
}

// y[i] += a * x[i], vectorized by the compiler under the AVX2 target.
template <typename T>
[[gnu::always_inline]] inline void axpy_body(T* y, const T* x, T a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}
template <typename T>
__attribute__((target("avx2,fma"))) void resize_axpy_avx2(T* y, const T* x, T a, int64_t n) {
  axpy_body(y, x, a, n);
}
template <typename T>
void axpy_plain(T* y, const T* x, T a, int64_t n) {
  axpy_body(y, x, a, n);
}

template <typename T>
void resize_t(const KernelCall& c, ResizeMode mode, bool align_corners, bool antialias,
              const std::vector<double>& scales) {
  const Tensor& x = c.in[0];
  const int64_t P = x.dim(0) * x.dim(1), IH = x.dim(2), IW = x.dim(3);
  const int64_t OH = c.out.dim(2), OW = c.out.dim(3);
  const Taps<T> th = make_taps<T>(IH, OH, mode, align_corners, antialias, scales[0]);
  const Taps<T> tw = make_taps<T>(IW, OW, mode, align_corners, antialias, scales[1]);
  const int64_t rows_per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, OW * tw.K));
  const int64_t chunks = (OH + rows_per_task - 1) / rows_per_task;
  const T* xp = x.data<T>();
  T* yp = c.out.data<T>();
  const bool avx = has_avx2_fma();
  parallel_for(P * chunks, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> tmp;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t p = t / chunks, oh0 = (t % chunks) * rows_per_task;
      const int64_t oh1 = std::min(OH, oh0 + rows_per_task);
      // Input rows this chunk reads, then the horizontal pass over just those rows.
      int64_t lo = IH, hi = -1;
      for (int64_t k = oh0 * th.K; k < oh1 * th.K; ++k) {
        lo = std::min(lo, th.idx[size_t(k)]);
        hi = std::max(hi, th.idx[size_t(k)]);
      }
      tmp.assign(size_t((hi - lo + 1) * OW), T(0));
      const T* plane = xp + p * IH * IW;
      for (int64_t r = lo; r <= hi; ++r) {
        const T* src = plane + r * IW;
        T* dst = tmp.data() + (r - lo) * OW;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t* id = tw.idx.data() + ow * tw.K;
          const T* w = tw.w.data() + ow * tw.K;
          T s = w[0] * src[id[0]];
          for (int64_t k = 1; k < tw.K; ++k) s += w[k] * src[id[k]];
          dst[ow] = s;
        }
      }
      for (int64_t oh = oh0; oh < oh1; ++oh) {
        T* out = yp + (p * OH + oh) * OW;
        std::fill(out, out + OW, T(0));
        for (int64_t k = 0; k < th.K; ++k) {
          const T wk = th.w[size_t(oh * th.K + k)];
          const T* row = tmp.data() + (th.idx[size_t(oh * th.K + k)] - lo) * OW;
          if (avx)
            resize_axpy_avx2(out, row, wk, OW);
          else
            axpy_plain(out, row, wk, OW);
        }
      }
    }
  });
}

// ---------------------------------------------------------------- grid_sample

template <typename T>
struct Axis {
  int64_t size;
  bool align;
  GridSamplePadding pad;

  T unnormalize(T g) const {
    if (align) return (g + T(1)) * (T(size - 1) / T(2));
    return (g + T(1)) * (T(size) / T(2)) - T(0.5);
  }
  // Clamp to [0, size-1]; NaN becomes 0.
  T clip(T v) const {
    const T mx = T(size - 1);
    if (!(v > T(0))) return T(0);
    return v > mx ? mx : v;
  }
  T reflect(T v) const {
    T low = align ? T(0) : T(-0.5);
    T twice = align ? T(size - 1) * T(2) : T(size) * T(2);
    if (align && size <= 1) return T(0);
    T a = std::abs(v - low);
    T extra = a - std::trunc(a / twice) * twice;
    T r = twice - extra;
    return (std::isnan(extra) || std::isnan(r) ? extra + r : std::min(extra, r)) + low;
  }
  // Padding applied to a (possibly fractional) coordinate.
  T pad_coord(T v) const {
    if (pad == GridSamplePadding::border) return clip(v);
    if (pad == GridSamplePadding::reflection) return clip(reflect(v));
    return v;
  }
  // Integer-valued coordinate -> index, or -1 when it falls outside (zeros padding).
  int64_t index(T v) const {
    if (!(v > T(-1) && v < T(size))) return -1;
    return int64_t(v);
  }
};

template <typename T>
void grid_sample_t(const KernelCall& c, GridSampleMode mode, GridSamplePadding pad, bool align) {
  const Tensor &x = c.in[0], &grid = c.in[1];
  const int64_t N = x.dim(0), C = x.dim(1), IH = x.dim(2), IW = x.dim(3);
  const int64_t OH = grid.dim(1), OW = grid.dim(2);
  const Axis<T> ax{IW, align, pad}, ay{IH, align, pad};
  const T* xp = x.data<T>();
  const T* gp = grid.data<T>();
  T* yp = c.out.data<T>();
  const int64_t HWo = OH * OW, HWi = IH * IW;
  parallel_for(
      N * HWo, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, C)), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t n = p / HWo, o = p % HWo;
          const T gx = gp[2 * p], gy = gp[2 * p + 1];
          const T* in = xp + n * C * HWi;
          T* out = yp + n * C * HWo + o;
          switch (mode) {
            case GridSampleMode::nearest: {
              const int64_t ix = ax.index(std::nearbyint(ax.pad_coord(ax.unnormalize(gx))));
              const int64_t iy = ay.index(std::nearbyint(ay.pad_coord(ay.unnormalize(gy))));
              const bool ok = ix >= 0 && iy >= 0;
              for (int64_t ch = 0; ch < C; ++ch)
                out[ch * HWo] = ok ? in[ch * HWi + iy * IW + ix] : T(0);
              break;
            }
            case GridSampleMode::bilinear: {
              const T fx = ax.pad_coord(ax.unnormalize(gx)), fy = ay.pad_coord(ay.unnormalize(gy));
              const T x0 = std::floor(fx), y0 = std::floor(fy);
              const T w = fx - x0, e = T(1) - w, nn = fy - y0, s = T(1) - nn;
              const T wts[4] = {s * e, s * w, nn * e, nn * w};  // nw, ne, sw, se
              const int64_t ixw = ax.index(x0), ixe = ax.index(x0 + T(1));
              const int64_t iyn = ay.index(y0), iys = ay.index(y0 + T(1));
              const int64_t offs[4] = {ixw >= 0 && iyn >= 0 ? iyn * IW + ixw : -1,
                                       ixe >= 0 && iyn >= 0 ? iyn * IW + ixe : -1,
                                       ixw >= 0 && iys >= 0 ? iys * IW + ixw : -1,
                                       ixe >= 0 && iys >= 0 ? iys * IW + ixe : -1};
              for (int64_t ch = 0; ch < C; ++ch) {
                const T* src = in + ch * HWi;
                T v = 0;
                for (int k = 0; k < 4; ++k) v += (offs[k] >= 0 ? src[offs[k]] : T(0)) * wts[k];
                out[ch * HWo] = v;
              }
              break;
            }
            case GridSampleMode::bicubic: {  // taps on the unpadded coordinate; padding per tap
              const T fx = ax.unnormalize(gx), fy = ay.unnormalize(gy);
              const T x0 = std::floor(fx), y0 = std::floor(fy);
              T cx[4], cy[4];
              cubic_coeffs(fx - x0, T(-0.75), cx);
              cubic_coeffs(fy - y0, T(-0.75), cy);
              int64_t ixs[4], iys[4];
              for (int k = 0; k < 4; ++k) {
                ixs[k] = ax.index(ax.pad_coord(x0 + T(k - 1)));
                iys[k] = ay.index(ay.pad_coord(y0 + T(k - 1)));
              }
              for (int64_t ch = 0; ch < C; ++ch) {
                const T* src = in + ch * HWi;
                T v = 0;
                for (int i = 0; i < 4; ++i) {
                  T row = 0;
                  for (int j = 0; j < 4; ++j) {
                    const bool ok = ixs[j] >= 0 && iys[i] >= 0;
                    row += cx[j] * (ok ? src[iys[i] * IW + ixs[j]] : T(0));
                  }
                  v += cy[i] * row;
                }
                out[ch * HWo] = v;
              }
            }
          }
        }
      });
}

void check_float_input(const KernelCall& c, const Tensor& t, const char* what) {
  RLX_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::F64, c.node.label(), ": ", what,
            " must be a float tensor, got ", t.shape().str());
}

}  // namespace

void resize(const KernelCall& c) {
  const std::string& who = c.node.label();
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() == 4, who, ": expected NCHW, got ", x.shape().str());
  check_float_input(c, x, "x");
  const auto& a = c.node.attrs_as<ResizeAttrs>();
  const ResizeMode mode = a.mode;
  const bool align = a.align_corners;
  const bool aa = a.antialias;
  const bool interp = mode == ResizeMode::bilinear || mode == ResizeMode::bicubic;
  RLX_CHECK(interp || !align, who, ": align_corners needs mode bilinear or bicubic, not '",
            to_string(mode), "'");
  RLX_CHECK(interp || !aa, who, ": antialias needs mode bilinear or bicubic, not '",
            to_string(mode), "'");
  RLX_CHECK(c.out.dim(2) > 0 && c.out.dim(3) > 0, who, ": output size must be > 0, got ",
            c.out.shape().str());
  if (c.out.numel() == 0) return;  // N or C is 0
  RLX_CHECK(x.dim(2) > 0 && x.dim(3) > 0, who, ": input spatial size must be > 0, got ",
            x.shape().str());
  // No scales: 0 each, the coordinate map comes from the sizes.
  const std::vector<double> scales = a.scales.empty() ? std::vector<double>{0, 0} : a.scales;
  RLX_CHECK(scales.size() == 2, who, ": scales must be [h, w], got ", scales.size(), " values");
  if (x.dtype() == DType::F32)
    resize_t<float>(c, mode, align, aa, scales);
  else
    resize_t<double>(c, mode, align, aa, scales);
}

void grid_sample(const KernelCall& c) {
  const std::string& who = c.node.label();
  const Tensor &x = c.in[0], &grid = c.in[1];
  RLX_CHECK(x.rank() == 4 && grid.rank() == 4 && grid.dim(3) == 2 && grid.dim(0) == x.dim(0), who,
            ": expected x [N,C,H,W] and grid [N,H,W,2], got ", x.shape().str(), ", ",
            grid.shape().str());
  check_float_input(c, x, "x");
  RLX_CHECK(grid.dtype() == x.dtype(), who, ": grid ", grid.shape().str(), " must have x's dtype");
  const auto& a = c.node.attrs_as<GridSampleAttrs>();
  const GridSampleMode mode = a.mode;
  const GridSamplePadding pad = a.padding;
  const bool align = a.align_corners;
  if (c.out.numel() == 0) return;
  RLX_CHECK(x.dim(2) > 0 && x.dim(3) > 0, who, ": input spatial size must be > 0, got ",
            x.shape().str());
  if (x.dtype() == DType::F32)
    grid_sample_t<float>(c, mode, pad, align);
  else
    grid_sample_t<double>(c, mode, pad, align);
}

}  // namespace rlx::cpu
