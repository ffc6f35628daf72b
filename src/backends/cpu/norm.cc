// Normalization kernels: layer_norm, rms_norm, group_norm, batch_norm (inference) and
// layer_norm_2d. Statistics are accumulated in double, two-pass (mean, then the sum of squared
// deviations from it), so rows whose mean is large next to their spread keep full precision; the
// element-wise affine pass runs in the tensor's dtype, as PyTorch's does. eps defaults to 1e-5.
//
// Shapes (validated again here; shape inference checks them when static):
//   layer_norm(x[, gamma[, beta]]) naxes: gamma/beta have the trailing `naxes` dims of x.
//   rms_norm(x[, gamma]) naxes: y = x * rsqrt(mean(x^2) + eps) * gamma.
//   group_norm(x [N,C,...][, gamma[, beta]]) groups: gamma/beta [C].
//   batch_norm(x [N,C,...], mean, var, gamma, beta): all [C].
//   layer_norm_2d(x [N,C,H,W][, gamma[, beta]]): normalizes over C at every (n, h, w).
#include <immintrin.h>

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

constexpr int64_t kNormGrain = 16384;  // work per parallel_for chunk

// ---- row reductions: sum(x) and sum((x - c)^2), accumulated in double.

template <typename T>
double sum_scalar(const T* x, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(x[i]);
  return s;
}

template <typename T>
double sq_dev_scalar(const T* x, int64_t n, double c) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    double d = double(x[i]) - c;
    s += d * d;
  }
  return s;
}

__attribute__((target("avx2,fma"))) double hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

__attribute__((target("avx2,fma"))) double sum_avx2(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
  }
  double s = hsum_pd(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) s += double(x[i]);
  return s;
}

__attribute__((target("avx2,fma"))) double sq_dev_avx2(const float* x, int64_t n, double c) {
  __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
  const __m256d vc = _mm256_set1_pd(c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vc);
    __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vc);
    a0 = _mm256_fmadd_pd(d0, d0, a0);
    a1 = _mm256_fmadd_pd(d1, d1, a1);
  }
  double s = hsum_pd(_mm256_add_pd(a0, a1));
  for (; i < n; ++i) {
    double d = double(x[i]) - c;
    s += d * d;
  }
  return s;
}

template <typename T>
double row_sum(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return sum_avx2(x, n);
  return sum_scalar(x, n);
}

template <typename T>
double row_sq_dev(const T* x, int64_t n, double c) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return sq_dev_avx2(x, n, c);
  return sq_dev_scalar(x, n, c);
}

// ---- element-wise passes. One always-inline body, instantiated twice: the AVX2 wrapper lets the
// compiler vectorize it with 256-bit registers, the plain one stays baseline x86-64.

// The mean is passed as hi + lo (hi = mean rounded to T, lo = the rest): x - hi is exact when x is
// near the mean (Sterbenz), so centering keeps double accuracy even when |mean| >> std.
struct Mean2 {
  double hi, lo;
};
template <typename T>
Mean2 split(double m) {
  T hi = T(m);
  return {double(hi), double(T(m - double(hi)))};
}

// y = ((x - mh) - ml) * scale [* g[i]] [+ b[i]]  (g, b may be null).
template <typename T>
[[gnu::always_inline]] inline void affine_body(const T* x, T* y, int64_t n, T mh, T ml, T scale,
                                               const T* g, const T* b) {
  if (g && b)
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mh) - ml) * scale * g[i] + b[i];
  else if (g)
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mh) - ml) * scale * g[i];
  else if (b)
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mh) - ml) * scale + b[i];
  else
    for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mh) - ml) * scale;
}

template <typename T>
__attribute__((target("avx2,fma"))) void affine_avx2(const T* x, T* y, int64_t n, T mh, T ml,
                                                     T scale, const T* g, const T* b) {
  affine_body(x, y, n, mh, ml, scale, g, b);
}

template <typename T>
void affine_plain(const T* x, T* y, int64_t n, T mh, T ml, T scale, const T* g, const T* b) {
  affine_body(x, y, n, mh, ml, scale, g, b);
}

template <typename T>
void affine_row(const T* x, T* y, int64_t n, double mean, T scale, const T* g, const T* b) {
  const Mean2 m = split<T>(mean);
  if (has_avx2_fma())
    affine_avx2(x, y, n, T(m.hi), T(m.lo), scale, g, b);
  else
    affine_plain(x, y, n, T(m.hi), T(m.lo), scale, g, b);
}

// y = ((x - mh) - ml) * scale + shift with per-row scalars (group_norm, batch_norm).
template <typename T>
[[gnu::always_inline]] inline void shift_body(const T* x, T* y, int64_t n, T mh, T ml, T scale,
                                              T shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = ((x[i] - mh) - ml) * scale + shift;
}
template <typename T>
__attribute__((target("avx2,fma"))) void shift_avx2(const T* x, T* y, int64_t n, T mh, T ml,
                                                    T scale, T shift) {
  shift_body(x, y, n, mh, ml, scale, shift);
}
template <typename T>
void shift_plain(const T* x, T* y, int64_t n, T mh, T ml, T scale, T shift) {
  shift_body(x, y, n, mh, ml, scale, shift);
}
template <typename T>
void shift_row(const T* x, T* y, int64_t n, double mean, T scale, T shift) {
  const Mean2 m = split<T>(mean);
  if (has_avx2_fma())
    shift_avx2(x, y, n, T(m.hi), T(m.lo), scale, shift);
  else
    shift_plain(x, y, n, T(m.hi), T(m.lo), scale, shift);
}

// ---- validation helpers

void norm_check_float(const KernelCall& c) {
  DType t = c.in[0].dtype();
  RLX_CHECK(t == DType::F32 || t == DType::F64, c.node.label(), ": expected a float tensor, got ",
            c.in[0].shape().str());
  for (size_t i = 1; i < c.in.size(); ++i)
    RLX_CHECK(c.in[i].dtype() == t, c.node.label(), ": input ", i, " ", c.in[i].shape().str(),
              " has another dtype than x ", c.in[0].shape().str());
}

// Checks that input `i` (if present) has exactly `want` dims.
void check_param(const KernelCall& c, size_t i, const Dims& want, const char* what) {
  if (i >= c.in.size()) return;
  RLX_CHECK(c.in[i].dims() == want, c.node.label(), ": ", what, " ", c.in[i].shape().str(),
            " must have dims ", dims_str(want), " for x ", c.in[0].shape().str());
}

template <typename T>
const T* opt_ptr(const KernelCall& c, size_t i) {
  return i < c.in.size() ? c.in[i].data<T>() : nullptr;
}

double check_eps(const KernelCall& c, double eps) {
  RLX_CHECK(std::isfinite(eps), c.node.label(), ": eps must be finite, got ", eps);
  return eps;
}

int64_t grain_rows(int64_t row_len) {
  return std::max<int64_t>(1, kNormGrain / std::max<int64_t>(1, row_len));
}

// ---- layer_norm / rms_norm: rows of the trailing `naxes` dims.

template <typename T>
void layer_norm_t(const KernelCall& c, int64_t inner, double eps, bool rms) {
  const T* x = c.in[0].data<T>();
  T* y = c.out.data<T>();
  const T* g = opt_ptr<T>(c, 1);
  const T* b = rms ? nullptr : opt_ptr<T>(c, 2);
  const int64_t rows = inner ? c.in[0].numel() / inner : 0;
  parallel_for(rows, grain_rows(inner), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * inner;
      double mean = rms ? 0.0 : row_sum(xr, inner) / double(inner);
      double var = row_sq_dev(xr, inner, mean) / double(inner);
      T rstd = T(1.0 / std::sqrt(var + eps));
      affine_row(xr, y + r * inner, inner, mean, rstd, g, b);
    }
  });
}

void layer_or_rms(const KernelCall& c, bool rms) {
  norm_check_float(c);
  const Tensor& x = c.in[0];
  const auto& a = c.node.attrs_as<NormAttrs>();
  const int64_t naxes = a.naxes;
  RLX_CHECK(naxes >= 1 && naxes <= x.rank(), c.node.label(), ": naxes=", naxes,
            " out of range for x ", x.shape().str());
  Dims norm_dims(x.dims().end() - naxes, x.dims().end());
  check_param(c, 1, norm_dims, "gamma");
  check_param(c, 2, norm_dims, "beta");
  const double eps = check_eps(c, a.eps);
  const int64_t inner = numel(norm_dims);
  if (x.dtype() == DType::F32)
    layer_norm_t<float>(c, inner, eps, rms);
  else
    layer_norm_t<double>(c, inner, eps, rms);
}

// ---- group_norm

template <typename T>
void group_norm_t(const KernelCall& c, int64_t groups, double eps) {
  const Tensor& xt = c.in[0];
  const int64_t N = xt.dim(0), C = xt.dim(1);
  const int64_t spatial = C ? xt.numel() / (N * C) : 0;
  const int64_t cpg = C / groups, glen = cpg * spatial;
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  const T* g = opt_ptr<T>(c, 1);
  const T* b = opt_ptr<T>(c, 2);
  parallel_for(N * groups, grain_rows(glen), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * glen;
      T* yr = y + r * glen;
      double mean = glen ? row_sum(xr, glen) / double(glen) : 0.0;
      double var = glen ? row_sq_dev(xr, glen, mean) / double(glen) : 0.0;
      T rstd = T(1.0 / std::sqrt(var + eps));
      for (int64_t k = 0; k < cpg; ++k) {
        int64_t ch = (r % groups) * cpg + k;
        shift_row(xr + k * spatial, yr + k * spatial, spatial, mean, g ? T(rstd * g[ch]) : rstd,
                  b ? b[ch] : T(0));
      }
    }
  });
}

// ---- batch_norm (inference): per-channel statistics are inputs.

template <typename T>
void batch_norm_t(const KernelCall& c, double eps) {
  const Tensor& xt = c.in[0];
  const int64_t N = xt.dim(0), C = xt.dim(1);
  const int64_t spatial = C && N ? xt.numel() / (N * C) : 0;
  const T *x = xt.data<T>(), *mean = c.in[1].data<T>(), *var = c.in[2].data<T>();
  const T *g = c.in[3].data<T>(), *b = c.in[4].data<T>();
  T* y = c.out.data<T>();
  std::vector<T> scale(static_cast<size_t>(C));
  // A negative variance gives NaN, as in PyTorch.
  for (int64_t ch = 0; ch < C; ++ch) {
    scale[size_t(ch)] = T(double(g[ch]) / std::sqrt(double(var[ch]) + eps));
  }
  parallel_for(N * C, grain_rows(spatial), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t ch = r % C;
      shift_row(x + r * spatial, y + r * spatial, spatial, double(mean[ch]), scale[size_t(ch)],
                b[ch]);
    }
  });
}

// ---- layer_norm_2d: statistics over C for each spatial position. Channels are HW apart, so a
// block of positions is processed at once: every pass is an element-wise loop over positions
// (contiguous), accumulating per-position sums in double.

constexpr int64_t kPosBlock = 256;

template <typename T>
[[gnu::always_inline]] inline void ln2d_block_body(const T* x, T* y, int64_t C, int64_t hw,
                                                   int64_t len, double eps, const T* g, const T* b,
                                                   double* acc, T* mean_t, T* lo_t, T* rstd_t) {
  for (int64_t p = 0; p < len; ++p) acc[p] = 0;
  for (int64_t ch = 0; ch < C; ++ch) {
    const T* xc = x + ch * hw;
    for (int64_t p = 0; p < len; ++p) acc[p] += double(xc[p]);
  }
  for (int64_t p = 0; p < len; ++p) acc[p] /= double(C);
  double var[kPosBlock];  // acc holds the means now
  for (int64_t p = 0; p < len; ++p) var[p] = 0;
  for (int64_t ch = 0; ch < C; ++ch) {
    const T* xc = x + ch * hw;
    for (int64_t p = 0; p < len; ++p) {
      double d = double(xc[p]) - acc[p];
      var[p] += d * d;
    }
  }
  for (int64_t p = 0; p < len; ++p) {
    mean_t[p] = T(acc[p]);
    lo_t[p] = T(acc[p] - double(mean_t[p]));
    rstd_t[p] = T(1.0 / std::sqrt(var[p] / double(C) + eps));
  }
  for (int64_t ch = 0; ch < C; ++ch) {
    const T* xc = x + ch * hw;
    T* yc = y + ch * hw;
    const T gc = g ? g[ch] : T(1), bc = b ? b[ch] : T(0);
    for (int64_t p = 0; p < len; ++p) yc[p] = ((xc[p] - mean_t[p]) - lo_t[p]) * rstd_t[p] * gc + bc;
  }
}

template <typename T>
__attribute__((target("avx2,fma"))) void ln2d_block_avx2(const T* x, T* y, int64_t C, int64_t hw,
                                                         int64_t len, double eps, const T* g,
                                                         const T* b, double* acc, T* m, T* lo,
                                                         T* r) {
  ln2d_block_body(x, y, C, hw, len, eps, g, b, acc, m, lo, r);
}

template <typename T>
void ln2d_block_plain(const T* x, T* y, int64_t C, int64_t hw, int64_t len, double eps, const T* g,
                      const T* b, double* acc, T* m, T* lo, T* r) {
  ln2d_block_body(x, y, C, hw, len, eps, g, b, acc, m, lo, r);
}

template <typename T>
void layer_norm_2d_t(const KernelCall& c, double eps) {
  const Tensor& xt = c.in[0];
  const int64_t N = xt.dim(0), C = xt.dim(1), hw = xt.dim(2) * xt.dim(3);
  if (N == 0 || C == 0 || hw == 0) return;
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  const T* g = opt_ptr<T>(c, 1);
  const T* b = opt_ptr<T>(c, 2);
  const int64_t nblk = (hw + kPosBlock - 1) / kPosBlock;
  parallel_for(N * nblk, grain_rows(C * kPosBlock), [&](int64_t t0, int64_t t1) {
    double acc[kPosBlock];
    T mean_t[kPosBlock], lo_t[kPosBlock], rstd_t[kPosBlock];
    for (int64_t t = t0; t < t1; ++t) {
      int64_t n = t / nblk, p0 = (t % nblk) * kPosBlock;
      int64_t len = std::min(kPosBlock, hw - p0);
      const T* xb = x + n * C * hw + p0;
      T* yb = y + n * C * hw + p0;
      if (has_avx2_fma())
        ln2d_block_avx2(xb, yb, C, hw, len, eps, g, b, acc, mean_t, lo_t, rstd_t);
      else
        ln2d_block_plain(xb, yb, C, hw, len, eps, g, b, acc, mean_t, lo_t, rstd_t);
    }
  });
}

}  // namespace

void layer_norm(const KernelCall& c) { layer_or_rms(c, false); }
void rms_norm(const KernelCall& c) { layer_or_rms(c, true); }

void group_norm(const KernelCall& c) {
  norm_check_float(c);
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() >= 2, c.node.label(), ": x must be [N,C,...], got ", x.shape().str());
  const auto& a = c.node.attrs_as<GroupNormAttrs>();
  const int64_t groups = a.groups;
  const int64_t C = x.dim(1);
  RLX_CHECK(groups >= 1 && C % groups == 0, c.node.label(), ": groups=", groups,
            " must be >= 1 and divide C=", C);
  check_param(c, 1, {C}, "gamma");
  check_param(c, 2, {C}, "beta");
  const double eps = check_eps(c, a.eps);
  if (x.numel() == 0) return;
  if (x.dtype() == DType::F32)
    group_norm_t<float>(c, groups, eps);
  else
    group_norm_t<double>(c, groups, eps);
}

void batch_norm(const KernelCall& c) {
  norm_check_float(c);
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() >= 2, c.node.label(), ": x must be [N,C,...], got ", x.shape().str());
  const int64_t C = x.dim(1);
  static const char* names[] = {"", "mean", "var", "gamma", "beta"};
  for (size_t i = 1; i < 5; ++i) check_param(c, i, {C}, names[i]);
  const double eps = check_eps(c, c.node.attrs_as<EpsAttrs>().eps);
  if (x.dtype() == DType::F32)
    batch_norm_t<float>(c, eps);
  else
    batch_norm_t<double>(c, eps);
}

void layer_norm_2d(const KernelCall& c) {
  norm_check_float(c);
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() == 4, c.node.label(), ": x must be [N,C,H,W], got ", x.shape().str());
  check_param(c, 1, {x.dim(1)}, "gamma");
  check_param(c, 2, {x.dim(1)}, "beta");
  const double eps = check_eps(c, c.node.attrs_as<EpsAttrs>().eps);
  if (x.dtype() == DType::F32)
    layer_norm_2d_t<float>(c, eps);
  else
    layer_norm_2d_t<double>(c, eps);
}

}  // namespace rlx::cpu
