// 2-d pooling over the last two dims of [N,]C,H,W, following PyTorch's CPU
// kernels: max pool with dilation, -inf padding and NaN propagation; avg pool
// with PyTorch's divisor rules; adaptive avg pool with floor/ceil bins.
// Work is split over output rows of all planes; each row is computed one
// kernel tap at a time across the whole row, which makes the stride-1 inner
// loops contiguous (auto-vectorized); f32 max pool of stride 1 or 2 has its
// own AVX2 path over padded planes.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

struct PoolGeom {
  int64_t planes = 0, H = 0, W = 0, OH = 0, OW = 0;
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, d[2] = {1, 1}, pb[2] = {0, 0}, pe[2] = {0, 0};
  bool ceil_mode = false, count_include_pad = true;
};

// PyTorch's pooling_output_shape_pad_lr (floor division, ceil-mode correction).
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, int64_t d,
                 bool ceil_mode) {
  int64_t num = in + pb + pe - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t q = num >= 0 ? num / s : -((-num + s - 1) / s);
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * s >= in + pb) --out;
  return out;
}

void check_plane_dims(const KernelCall& c, const std::string& where, int64_t OH, int64_t OW) {
  const Tensor& x = c.in[0];
  Dims want = x.dims();
  want[want.size() - 2] = OH;
  want[want.size() - 1] = OW;
  if (c.node.op == Op::MaxPool2dGrad) {  // dy has the pooled dims, dx those of x
    const Tensor& dy = c.in[1];
    RLX_CHECK(dy.dims() == want && dy.dtype() == x.dtype() && c.out.dims() == x.dims() &&
                  c.out.dtype() == x.dtype(),
              where, ": dy ", dims_str(dy.dims()), " ", dtype_name(dy.dtype()), " and dx ",
              dims_str(c.out.dims()), ", expected ", dims_str(want), " and ", dims_str(x.dims()),
              " ", dtype_name(x.dtype()));
    return;
  }
  const DType dt = c.node.op == Op::MaxPool2dIndices ? DType::I64 : x.dtype();
  RLX_CHECK(c.out.dims() == want && c.out.dtype() == dt, where, ": output ", dims_str(c.out.dims()),
            " ", dtype_name(c.out.dtype()), ", expected ", dims_str(want), " ", dtype_name(dt));
}

// A is MaxPoolAttrs (dilation, no count_include_pad) or AvgPoolAttrs (the reverse).
template <typename A>
PoolGeom make_pool_geom(const KernelCall& c, const char* op) {
  const Tensor& x = c.in[0];
  const std::string where = c.node.label() + ": " + op + " " + dims_str(x.dims());
  RLX_CHECK(x.rank() == 3 || x.rank() == 4, where, ": expected [N,]C,H,W");
  PoolGeom g;
  g.H = x.dim(-2);
  g.W = x.dim(-1);
  RLX_CHECK(g.H > 0 && g.W > 0, where, ": spatial dims must be non-empty");
  g.planes = x.numel() / (g.H * g.W);
  const A& a = c.node.attrs_as<A>();
  const std::vector<int64_t>& k = a.kernel;
  const std::vector<int64_t>& s = pool_stride(a);
  const std::vector<int64_t> p = list_or(a.pads, 4, 0);
  std::vector<int64_t> d{1, 1};
  if constexpr (std::is_same_v<A, MaxPoolAttrs>) {
    d = list_or(a.dilation, 2, 1);
  } else {
    g.count_include_pad = a.count_include_pad;
  }
  RLX_CHECK(k.size() == 2 && s.size() == 2 && p.size() == 4 && d.size() == 2, where,
            ": kernel, stride, dilation need 2 values and pads 4 [t,l,b,r]");
  g.ceil_mode = a.ceil_mode;
  for (int i = 0; i < 2; ++i) {
    const size_t u = size_t(i);
    g.k[i] = k[u];
    g.s[i] = s[u];
    g.d[i] = d[u];
    g.pb[i] = p[u];
    g.pe[i] = p[u + 2];
    RLX_CHECK(g.k[i] >= 1 && g.s[i] >= 1 && g.d[i] >= 1, where,
              ": kernel, stride and dilation must be >= 1");
    RLX_CHECK(g.pb[i] >= 0 && g.pe[i] >= 0 && 2 * g.pb[i] <= g.k[i] && 2 * g.pe[i] <= g.k[i], where,
              ": pads must be in [0, kernel / 2]");
  }
  g.OH = pool_out(g.H, g.k[0], g.s[0], g.pb[0], g.pe[0], g.d[0], g.ceil_mode);
  g.OW = pool_out(g.W, g.k[1], g.s[1], g.pb[1], g.pe[1], g.d[1], g.ceil_mode);
  RLX_CHECK(g.OH >= 1 && g.OW >= 1, where, ": output would be empty (", g.OH, "x", g.OW, ")");
  check_plane_dims(c, where, g.OH, g.OW);
  return g;
}

// For j in [0, n): j * s + off lies in [0, W) exactly for j in [lo, hi).
void pool_valid_range(int64_t n, int64_t s, int64_t off, int64_t W, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + s - 1) / s;
  hi = W - 1 - off < 0 ? 0 : (W - 1 - off) / s + 1;
  lo = std::min(lo, n);
  hi = std::clamp(hi, lo, n);
}

// Items per chunk for items of `per_row` taps each: about 128K taps (512 KB of f32 reads),
// below which a second core of this VM costs more than it brings (the small CNN's 2x2 pool on
// 32 planes of 32x32, 32K taps, took 0.018 ms split and 0.007 ms on one core).
int64_t pool_row_grain(int64_t per_row) {
  return std::max<int64_t>(1, (int64_t(1) << 17) / std::max<int64_t>(1, per_row));
}

// The taps of output row oh that lie in the input, in window order (row by row): tap(ih, off,
// lo, hi) for input row ih, whose column j * stride + off the row's outputs j in [lo, hi) read.
template <typename Tap>
void for_each_tap(const PoolGeom& g, int64_t oh, Tap&& tap) {
  for (int64_t kh = 0; kh < g.k[0]; ++kh) {
    const int64_t ih = oh * g.s[0] - g.pb[0] + kh * g.d[0];
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t kw = 0; kw < g.k[1]; ++kw) {
      const int64_t off = kw * g.d[1] - g.pb[1];
      int64_t lo, hi;
      pool_valid_range(g.OW, g.s[1], off, g.W, lo, hi);
      tap(ih, off, lo, hi);
    }
  }
}

// max over the taps of one window, NaN winning as in PyTorch (`v != v`).
template <typename T>
inline T take_max(T acc, T v) {
  return (v > acc || v != v) ? v : acc;
}

// f32 max pool without dilation and with stride 1 or 2 on AVX2: each plane
// is copied once into a buffer padded with -inf on every side (cheap next to
// its k * k passes of taps), so every output row runs 8 outputs per step with
// no bounds checks. NaN: max_ps(acc, v) yields v when v is NaN, and a mask
// keeps a NaN once seen (max_ps would drop a NaN already in acc).
template <int S>
RLX_AVX2 void max_pool_f32_planes(const PoolGeom& g, const float* x, float* y, int64_t p0,
                                  int64_t p1) {
  const int64_t KH = g.k[0], KW = g.k[1], pt = g.pb[0], pl = g.pb[1];
  const int64_t blocks = (g.OW + 7) / 8;
  // vm::strided8<2> reads one element past its last tap.
  const int64_t Wp = std::max(pl + g.W, (blocks * 8 - 1) * S + KW + (S - 1));
  const int64_t Hp = std::max(pt + g.H, (g.OH - 1) * g.s[0] + KH);
  thread_local std::vector<float> padded;
  padded.assign(size_t(Hp * Wp), -std::numeric_limits<float>::infinity());
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * g.H * g.W;
    for (int64_t ih = 0; ih < g.H; ++ih)
      std::copy_n(xp + ih * g.W, g.W, &padded[size_t((pt + ih) * Wp + pl)]);
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* top = &padded[size_t(oh * g.s[0] * Wp)];
      float* yr = y + (p * g.OH + oh) * g.OW;
      for (int64_t b = 0; b < blocks; ++b) {
        __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        __m256 nan = _mm256_setzero_ps();
        for (int64_t kh = 0; kh < KH; ++kh) {
          const float* xr = top + kh * Wp + b * 8 * S;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const __m256 v = vm::strided8<S>(xr + kw);
            acc = _mm256_max_ps(acc, v);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
          }
        }
        acc = _mm256_blendv_ps(acc, _mm256_set1_ps(NAN), nan);
        if (b + 1 < blocks)
          _mm256_storeu_ps(yr + b * 8, acc);
        else
          _mm256_maskstore_ps(yr + b * 8, vm::first_lanes(g.OW - b * 8), acc);
      }
    }
  }
}

// x[j * S] for j < 8 where only the first n elements of x (from x[0]) may be
// read: the others load as 0 (their lanes are never stored).
template <int S>
RLX_AVX2_INLINE __m256 strided8_first(const float* x, int64_t n) {
  const __m256 a = _mm256_maskload_ps(x, vm::first_lanes(n));
  if constexpr (S == 1) return a;
  const __m256 b = _mm256_maskload_ps(x + 8, vm::first_lanes(n - 8));
  const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
}

// The same max pool when every window lies inside the plane (no padding: a
// CNN's 2x2/2 pools): taps read straight from the input, no padded copy; the
// last block of a row loads only the row's own columns.
template <int S>
RLX_AVX2 void max_pool_f32_inside(const PoolGeom& g, const float* x, float* y, int64_t p0,
                                  int64_t p1) {
  const int64_t KH = g.k[0], KW = g.k[1], blocks = (g.OW + 7) / 8;
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t oh = 0; oh < g.OH; ++oh) {
      const float* top = x + (p * g.H + oh * g.s[0]) * g.W;
      float* yr = y + (p * g.OH + oh) * g.OW;
      for (int64_t b = 0; b < blocks; ++b) {
        const bool last = b + 1 == blocks;
        __m256 acc = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
        __m256 nan = _mm256_setzero_ps();
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t at = b * 8 * S + kw;
            const float* xr = top + kh * g.W + at;
            const __m256 v = last ? strided8_first<S>(xr, g.W - at) : vm::strided8<S>(xr);
            acc = _mm256_max_ps(acc, v);
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
          }
        acc = _mm256_blendv_ps(acc, _mm256_set1_ps(NAN), nan);
        if (!last)
          _mm256_storeu_ps(yr + b * 8, acc);
        else
          _mm256_maskstore_ps(yr + b * 8, vm::first_lanes(g.OW - b * 8), acc);
      }
    }
}

template <typename T>
void max_pool(const PoolGeom& g, const T* x, T* y) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma() && g.d[0] == 1 && g.d[1] == 1 && g.s[1] <= 2) {
      const bool inside = g.pb[0] == 0 && g.pb[1] == 0 && (g.OH - 1) * g.s[0] + g.k[0] <= g.H &&
                          (g.OW - 1) * g.s[1] + g.k[1] <= g.W;
      return parallel_for(g.planes, pool_row_grain(g.OH * g.OW * g.k[0] * g.k[1]),
                          [&](int64_t p0, int64_t p1) {
                            if (inside && g.s[1] == 1)
                              return max_pool_f32_inside<1>(g, x, y, p0, p1);
                            if (inside) return max_pool_f32_inside<2>(g, x, y, p0, p1);
                            if (g.s[1] == 1) return max_pool_f32_planes<1>(g, x, y, p0, p1);
                            max_pool_f32_planes<2>(g, x, y, p0, p1);
                          });
    }
  const T init = std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                      : std::numeric_limits<T>::lowest();
  parallel_for(g.planes * g.OH, pool_row_grain(g.OW * g.k[0] * g.k[1]),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t oh = r % g.OH;
                   const T* xp = x + r / g.OH * g.H * g.W;
                   T* yr = y + r * g.OW;
                   std::fill(yr, yr + g.OW, init);
                   for_each_tap(g, oh, [&](int64_t ih, int64_t off, int64_t lo, int64_t hi) {
                     const T* xr = xp + ih * g.W;
                     for (int64_t j = lo; j < hi; ++j)
                       yr[j] = take_max(yr[j], xr[j * g.s[1] + off]);
                   });
                 }
               });
}

template <typename T>
void avg_pool(const PoolGeom& g, const T* x, T* y) {
  parallel_for(
      g.planes * g.OH, pool_row_grain(g.OW * g.k[0] * g.k[1]), [&](int64_t r0, int64_t r1) {
        std::vector<T> div(size_t(g.OW));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t oh = r % g.OH;
          const T* xp = x + r / g.OH * g.H * g.W;
          T* yr = y + r * g.OW;
          std::fill(yr, yr + g.OW, T(0));
          // PyTorch: the window is first clipped to the padded input (which only
          // matters for ceil_mode's extra windows), that size is the
          // count_include_pad divisor; then clipped to the input for the sum.
          const int64_t h0 = oh * g.s[0] - g.pb[0], h1 = std::min(h0 + g.k[0], g.H + g.pe[0]);
          const int64_t hc = std::min(h1, g.H) - std::max<int64_t>(h0, 0);
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int64_t w0 = ow * g.s[1] - g.pb[1], w1 = std::min(w0 + g.k[1], g.W + g.pe[1]);
            const int64_t wc = std::min(w1, g.W) - std::max<int64_t>(w0, 0);
            const int64_t n = g.count_include_pad ? (h1 - h0) * (w1 - w0) : hc * wc;
            div[size_t(ow)] = n > 0 ? T(n) : T(1);  // empty windows (not reachable) give 0
          }
          for (int64_t ih = std::max<int64_t>(h0, 0); ih < std::min(h1, g.H); ++ih) {
            const T* xr = xp + ih * g.W;
            for (int64_t kw = 0; kw < g.k[1]; ++kw) {
              const int64_t off = kw - g.pb[1];
              int64_t lo, hi;
              pool_valid_range(g.OW, g.s[1], off, g.W, lo, hi);
              for (int64_t j = lo; j < hi; ++j) yr[j] += xr[j * g.s[1] + off];
            }
          }
          for (int64_t ow = 0; ow < g.OW; ++ow) yr[ow] /= div[size_t(ow)];
        }
      });
}

template <typename T>
void adaptive_avg(const KernelCall& c, int64_t OH, int64_t OW, const T* x, T* y) {
  const int64_t H = c.in[0].dim(-2), W = c.in[0].dim(-1);
  const int64_t planes = c.in[0].numel() / (H * W);
  const int64_t per_row = OW * ((H + OH - 1) / OH + 1) * ((W + OW - 1) / OW + 1);
  parallel_for(planes * OH, pool_row_grain(per_row), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t oh = r % OH;
      const T* xp = x + r / OH * H * W;
      const int64_t h0 = oh * H / OH, h1 = ((oh + 1) * H + OH - 1) / OH;
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = ow * W / OW, w1 = ((ow + 1) * W + OW - 1) / OW;
        T sum = 0;
        for (int64_t ih = h0; ih < h1; ++ih)
          for (int64_t iw = w0; iw < w1; ++iw) sum += xp[ih * W + iw];
        y[r * OW + ow] = sum / T((h1 - h0) * (w1 - w0));
      }
    }
  });
}

[[noreturn]] void bad_dtype(const KernelCall& c, const char* op) {
  throw make_error(c.node.label(), ": ", op, " does not support dtype ",
                   dtype_name(c.in[0].dtype()));
}

// ir[j] for output row oh of plane xp: the index ih * W + iw of the tap its
// window's max comes from (take_max's rule: the first maximum, a NaN winning).
template <typename T>
void window_argmax_row(const PoolGeom& g, const T* xp, int64_t oh, T* best, int64_t* ir) {
  std::fill(ir, ir + g.OW, int64_t(-1));
  for_each_tap(g, oh, [&](int64_t ih, int64_t off, int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      const int64_t at = ih * g.W + j * g.s[1] + off;
      const T v = xp[at];
      if (ir[j] < 0 || v > best[j] || v != v) {
        best[j] = v;
        ir[j] = at;
      }
    }
  });
}

// The indices PyTorch's max_pool2d returns: per output, ih * W + iw (within
// its plane) of the tap take_max keeps, scanning the window row by row: the
// first maximum, the last NaN, the first tap inside the input when all are
// -inf. Scalar: indices are asked for by training graphs and unpooling, not
// by inference's hot path.
template <typename T>
void max_pool_indices(const PoolGeom& g, const T* x, int64_t* idx) {
  parallel_for(
      g.planes * g.OH, pool_row_grain(g.OW * g.k[0] * g.k[1]), [&](int64_t r0, int64_t r1) {
        std::vector<T> best(size_t(g.OW));
        for (int64_t r = r0; r < r1; ++r)
          window_argmax_row(g, x + r / g.OH * g.H * g.W, r % g.OH, best.data(), idx + r * g.OW);
      });
}

// Row oh's argmax taps (window_argmax_row) in per-thread buffers of OW.
template <typename T>
const int64_t* argmax_row(const PoolGeom& g, const T* xp, int64_t oh) {
  thread_local std::vector<T> best;
  thread_local std::vector<int64_t> at;
  best.resize(size_t(g.OW));
  at.resize(size_t(g.OW));
  window_argmax_row(g, xp, oh, best.data(), at.data());
  return at.data();
}

// One plane of max_pool2d_grad: dx = 0, then dx[argmax of each window] += dy.
template <typename T>
void max_pool_grad_plane(const PoolGeom& g, const T* xp, const T* dyp, T* dp) {
  std::fill(dp, dp + g.H * g.W, T(0));
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const int64_t* at = argmax_row(g, xp, oh);
    for (int64_t ow = 0; ow < g.OW; ++ow)
      if (at[ow] >= 0) dp[at[ow]] += dyp[oh * g.OW + ow];
  }
}

// The usual CNN pool, f32 2x2 windows of stride 2 without padding or
// dilation: four windows per step from two input rows split into their even
// and odd columns. Compares in window order (a NaN taking over, as take_max)
// keep the generic tap, windows do not overlap, and each dy lands on its tap
// through a mask, so dx is written once, never accumulated.
RLX_AVX2 void max_pool_grad_2x2_plane(const PoolGeom& g, const float* xp, const float* dyp,
                                      float* dp) {
  if (2 * g.OH < g.H || 2 * g.OW < g.W) std::fill(dp, dp + g.H * g.W, 0.f);  // rows no window reads
  const __m128 one = _mm_set1_ps(1), two = _mm_set1_ps(2), three = _mm_set1_ps(3);
  auto take = [](__m128 v, __m128 best) {
    return _mm_or_ps(_mm_cmpgt_ps(v, best), _mm_cmpunord_ps(v, v));
  };
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float *r0 = xp + 2 * oh * g.W, *r1 = r0 + g.W, *gy = dyp + oh * g.OW;
    float *d0 = dp + 2 * oh * g.W, *d1 = d0 + g.W;
    int64_t ow = 0;
    for (; ow + 4 <= g.OW; ow += 4) {
      const __m128 u0 = _mm_loadu_ps(r0 + 2 * ow), u1 = _mm_loadu_ps(r0 + 2 * ow + 4);
      const __m128 v0 = _mm_loadu_ps(r1 + 2 * ow), v1 = _mm_loadu_ps(r1 + 2 * ow + 4);
      const __m128 a = _mm_shuffle_ps(u0, u1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m128 b = _mm_shuffle_ps(u0, u1, _MM_SHUFFLE(3, 1, 3, 1));
      const __m128 c = _mm_shuffle_ps(v0, v1, _MM_SHUFFLE(2, 0, 2, 0));
      const __m128 d = _mm_shuffle_ps(v0, v1, _MM_SHUFFLE(3, 1, 3, 1));
      __m128 best = a, tap = _mm_setzero_ps(), t = take(b, best);
      best = _mm_blendv_ps(best, b, t);
      tap = _mm_blendv_ps(tap, one, t);
      t = take(c, best);
      best = _mm_blendv_ps(best, c, t);
      tap = _mm_blendv_ps(tap, two, t);
      tap = _mm_blendv_ps(tap, three, take(d, best));
      const __m128 dy = _mm_loadu_ps(gy + ow);
      const __m128 da = _mm_and_ps(_mm_cmpeq_ps(tap, _mm_setzero_ps()), dy);
      const __m128 db = _mm_and_ps(_mm_cmpeq_ps(tap, one), dy);
      const __m128 dc = _mm_and_ps(_mm_cmpeq_ps(tap, two), dy);
      const __m128 dd = _mm_and_ps(_mm_cmpeq_ps(tap, three), dy);
      _mm_storeu_ps(d0 + 2 * ow, _mm_unpacklo_ps(da, db));
      _mm_storeu_ps(d0 + 2 * ow + 4, _mm_unpackhi_ps(da, db));
      _mm_storeu_ps(d1 + 2 * ow, _mm_unpacklo_ps(dc, dd));
      _mm_storeu_ps(d1 + 2 * ow + 4, _mm_unpackhi_ps(dc, dd));
    }
    if (ow == g.OW) continue;
    const int64_t* at = argmax_row(g, xp, oh);
    for (; ow < g.OW; ++ow)
      for (int64_t ih = 2 * oh; ih < 2 * oh + 2; ++ih)
        for (int64_t iw = 2 * ow; iw < 2 * ow + 2; ++iw)
          dp[ih * g.W + iw] = ih * g.W + iw == at[ow] ? gy[ow] : 0.f;
  }
}

// Split by plane: windows of one plane may overlap, planes never do.
template <typename T, typename Plane>
void max_pool_grad(const PoolGeom& g, const T* x, const T* dy, T* dx, Plane plane) {
  const int64_t plane_work = g.OH * g.OW * g.k[0] * g.k[1] + g.H * g.W;
  parallel_for(g.planes, std::max<int64_t>(1, 16384 / plane_work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p)
      plane(g, x + p * g.H * g.W, dy + p * g.OH * g.OW, dx + p * g.H * g.W);
  });
}

// fn(T{}) for the element type of max_pool2d's input (floats and integers).
template <typename Fn>
void for_max_pool_dtype(const KernelCall& c, const char* op, Fn&& fn) {
  switch (c.in[0].dtype()) {
#define RLX_CASE(E, T) \
  case DType::E:       \
    return fn(T{});
    RLX_CASE(F32, float)
    RLX_CASE(F64, double)
    RLX_CASE(I8, int8_t)
    RLX_CASE(I16, int16_t)
    RLX_CASE(I32, int32_t)
    RLX_CASE(I64, int64_t)
    RLX_CASE(U8, uint8_t)
#undef RLX_CASE
    default:
      bad_dtype(c, op);
  }
}
}  // namespace

void max_pool2d_indices(const KernelCall& c) {
  const PoolGeom g = make_pool_geom<MaxPoolAttrs>(c, "max_pool2d_indices");
  for_max_pool_dtype(c, "max_pool2d_indices", [&]<typename T>(T) {
    max_pool_indices(g, c.in[0].data<T>(), c.out.data<int64_t>());
  });
}

void max_pool2d_grad(const KernelCall& c) {
  const PoolGeom g = make_pool_geom<MaxPoolAttrs>(c, "max_pool2d_grad");
  const Tensor &x = c.in[0], &dy = c.in[1];
  const bool two_by_two = g.k[0] == 2 && g.k[1] == 2 && g.s[0] == 2 && g.s[1] == 2 && g.d[0] == 1 &&
                          g.d[1] == 1 && g.pb[0] == 0 && g.pb[1] == 0 && 2 * g.OH <= g.H &&
                          2 * g.OW <= g.W;
  if (x.dtype() == DType::F32)
    return max_pool_grad(
        g, x.data<float>(), dy.data<float>(), c.out.data<float>(),
        two_by_two && has_avx2_fma() ? max_pool_grad_2x2_plane : max_pool_grad_plane<float>);
  if (x.dtype() == DType::F64)
    return max_pool_grad(g, x.data<double>(), dy.data<double>(), c.out.data<double>(),
                         max_pool_grad_plane<double>);
  bad_dtype(c, "max_pool2d_grad");
}

void max_pool2d(const KernelCall& c) {
  const PoolGeom g = make_pool_geom<MaxPoolAttrs>(c, "max_pool2d");
  for_max_pool_dtype(c, "max_pool2d",
                     [&]<typename T>(T) { max_pool(g, c.in[0].data<T>(), c.out.data<T>()); });
}

void avg_pool2d(const KernelCall& c) {
  const PoolGeom g = make_pool_geom<AvgPoolAttrs>(c, "avg_pool2d");
  RLX_CHECK(g.d[0] == 1 && g.d[1] == 1, c.node.label(), ": avg_pool2d has no dilation");
  const Tensor& x = c.in[0];
  if (x.dtype() == DType::F32) return avg_pool(g, x.data<float>(), c.out.data<float>());
  if (x.dtype() == DType::F64) return avg_pool(g, x.data<double>(), c.out.data<double>());
  bad_dtype(c, "avg_pool2d");
}

void adaptive_avg_pool2d(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const std::string where = c.node.label() + ": adaptive_avg_pool2d " + dims_str(x.dims());
  RLX_CHECK(x.rank() == 3 || x.rank() == 4, where, ": expected [N,]C,H,W");
  RLX_CHECK(x.dim(-2) > 0 && x.dim(-1) > 0, where, ": spatial dims must be non-empty");
  const auto& o = c.node.attrs_as<AdaptivePoolAttrs>().output;
  RLX_CHECK(o.size() == 2 && o[0] >= 1 && o[1] >= 1, where, ": output needs 2 sizes >= 1");
  check_plane_dims(c, where, o[0], o[1]);
  if (x.dtype() == DType::F32)
    return adaptive_avg(c, o[0], o[1], x.data<float>(), c.out.data<float>());
  if (x.dtype() == DType::F64)
    return adaptive_avg(c, o[0], o[1], x.data<double>(), c.out.data<double>());
  bad_dtype(c, "adaptive_avg_pool2d");
}

}  // namespace rlx::cpu
