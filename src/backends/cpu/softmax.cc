// softmax and log_softmax over any axis, numerically stable (the max is
// subtracted first). f32 contiguous rows run on 16 lanes with AVX-512, else f32
// uses an AVX2 exp when available; f64 is scalar.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// exp(x) for 8 floats: Cephes-style range reduction x = n ln2 + r, |r| <=
// ln2/2, degree-6 polynomial, scale by 2^n. Relative error ~2 ulp. The clamps
// put x first so NaN passes through (min/max return their second operand on
// NaN); below ~-88.37 the result is 0, -inf gives 0, +inf gives inf.
__attribute__((target("avx2,fma"))) inline __m256 exp256(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
  x = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  __m256 y = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // n in [-127, 128]: 2^n built in the exponent field (-127 -> 0.0, 128 -> inf).
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

__attribute__((target("avx2,fma"))) inline __m256d add_wide(__m256d acc, __m256 v) {
  return _mm256_add_pd(_mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(v))),
                       _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
}

__attribute__((target("avx2,fma"))) float row_max_avx2(const float* x, int64_t n) {
  __m256 m = _mm256_set1_ps(-INFINITY);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
  alignas(32) float l[8];
  _mm256_store_ps(l, m);
  float r = -INFINITY;
  for (float v : l) r = std::max(r, v);
  for (; i < n; ++i) r = std::max(r, x[i]);
  return r;
}

// y[i] = exp(x[i] - m) (y may be null); returns the sum in double.
__attribute__((target("avx2,fma"))) double exp_sum_avx2(const float* x, float m, float* y,
                                                        int64_t n) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256d acc = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    if (y) _mm256_storeu_ps(y + i, e);
    acc = add_wide(acc, e);
  }
  alignas(32) double l[4];
  _mm256_store_pd(l, acc);
  double s = (l[0] + l[1]) + (l[2] + l[3]);
  for (; i < n; ++i) {
    float e = std::exp(x[i] - m);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

// Column form: y[i] = exp(x[i] - m[i]); sum[i] += y[i].
__attribute__((target("avx2,fma"))) void exp_cols_avx2(const float* x, const float* m, float* y,
                                                       double* sum, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(m + i)));
    _mm256_storeu_ps(y + i, e);
    _mm256_storeu_pd(sum + i, _mm256_add_pd(_mm256_loadu_pd(sum + i),
                                            _mm256_cvtps_pd(_mm256_castps256_ps128(e))));
    _mm256_storeu_pd(sum + i + 4, _mm256_add_pd(_mm256_loadu_pd(sum + i + 4),
                                                _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - m[i]);
    sum[i] += y[i];
  }
}

// One contiguous row on 16 lanes (vmath512.h's exp), the sum in double as
// above: max, exp and sum, then the scaling (or the log form) in place.
RLX_AVX512_MATH void softmax_row_avx512(const float* x, float* y, int64_t n, bool log) {
  __m512 mv = _mm512_set1_ps(-INFINITY);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = vm::first_lanes16(n - i);
    mv = _mm512_mask_max_ps(mv, k, mv, _mm512_maskz_loadu_ps(k, x + i));
  }
  const float m = _mm512_reduce_max_ps(mv);
  const __m512 vmax = _mm512_set1_ps(m);
  __m512d acc = _mm512_setzero_pd();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = vm::first_lanes16(n - i);
    const __m512 e =
        _mm512_maskz_mov_ps(k, vm16::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vmax)));
    if (!log) _mm512_mask_storeu_ps(y + i, k, e);
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
    acc = _mm512_add_pd(
        acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
  }
  const double sum = _mm512_reduce_add_pd(acc);
  if (log) {
    const __m512 lse = _mm512_set1_ps(float(std::log(sum)));
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = vm::first_lanes16(n - i);
      const __m512 v = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), vmax);
      _mm512_mask_storeu_ps(y + i, k, _mm512_sub_ps(v, lse));
    }
    return;
  }
  const __m512 inv = _mm512_set1_ps(float(1.0 / sum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = vm::first_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, y + i), inv));
  }
}

template <typename T>
T row_max(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return row_max_avx2(x, n);
  T m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

template <typename T>
double exp_sum(const T* x, T m, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return exp_sum_avx2(x, m, y, n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    T e = std::exp(x[i] - m);
    if (y) y[i] = e;
    s += e;
  }
  return s;
}

template <typename T>
void exp_cols(const T* x, const T* m, T* y, double* sum, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return exp_cols_avx2(x, m, y, sum, n);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::exp(x[i] - m[i]);
    sum[i] += y[i];
  }
}

// Contiguous rows of length n (the axis is innermost).
template <typename T>
void softmax_rows(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const T* xr = x + r * n;
                   T* yr = y + r * n;
                   if constexpr (std::is_same_v<T, float>)
                     if (cpu_isa() >= Isa::avx512) {
                       softmax_row_avx512(xr, yr, n, log);
                       continue;
                     }
                   // Any NaN makes the whole row NaN (through exp), as in PyTorch.
                   T m = row_max(xr, n);
                   if (log) {
                     T lse = T(std::log(exp_sum<T>(xr, m, nullptr, n)));
                     for (int64_t i = 0; i < n; ++i) yr[i] = (xr[i] - m) - lse;
                   } else {
                     T inv = T(1.0 / exp_sum<T>(xr, m, yr, n));
                     for (int64_t i = 0; i < n; ++i) yr[i] *= inv;
                   }
                 }
               });
}

// Strided axis: [outer, len, inner]; vectorized across blocks of inner.
template <typename T>
void softmax_cols(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool log) {
  const int64_t iblk = std::min<int64_t>(inner, 256);
  const int64_t nib = (inner + iblk - 1) / iblk;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len * iblk));
  parallel_for(outer * nib, grain, [&](int64_t b, int64_t e) {
    std::vector<T> mx(static_cast<size_t>(iblk));
    std::vector<double> sum(static_cast<size_t>(iblk));
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nib, i0 = (t % nib) * iblk, ni = std::min(inner, i0 + iblk) - i0;
      const T* xb = x + o * len * inner + i0;
      T* yb = y + o * len * inner + i0;
      std::fill(mx.begin(), mx.end(), T(-INFINITY));
      std::fill(sum.begin(), sum.end(), 0.0);
      for (int64_t a = 0; a < len; ++a)
        for (int64_t i = 0; i < ni; ++i) mx[size_t(i)] = std::max(mx[size_t(i)], xb[a * inner + i]);
      for (int64_t a = 0; a < len; ++a)
        exp_cols<T>(xb + a * inner, mx.data(), yb + a * inner, sum.data(), ni);
      for (int64_t i = 0; i < ni; ++i)
        sum[size_t(i)] = log ? std::log(sum[size_t(i)]) : 1.0 / sum[size_t(i)];
      for (int64_t a = 0; a < len; ++a) {
        const T* xr = xb + a * inner;
        T* yr = yb + a * inner;
        if (log)
          for (int64_t i = 0; i < ni; ++i) yr[i] = (xr[i] - mx[size_t(i)]) - T(sum[size_t(i)]);
        else
          for (int64_t i = 0; i < ni; ++i) yr[i] *= T(sum[size_t(i)]);
      }
    }
  });
}

}  // namespace

void softmax(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  int ax = normalize_axis(c.node.attrs_as<SoftmaxAttrs>().axis, std::max(rank, 1));
  const bool log = c.node.op == Op::LogSoftmax;
  RLX_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F64, c.node.label(),
            ": softmax needs a float input, got ", x.shape().str());
  RLX_CHECK(c.out.dtype() == x.dtype(), c.node.label(), ": output dtype differs from input");
  if (x.numel() == 0) return;
  int64_t len = 1, outer = 1, inner = 1;
  for (int i = 0; i < rank; ++i) (i < ax ? outer : i == ax ? len : inner) *= x.dims()[size_t(i)];
  auto run = [&](auto* xp, auto* yp) {
    if (inner == 1)
      softmax_rows(xp, yp, outer, len, log);
    else
      softmax_cols(xp, yp, outer, len, inner, log);
  };
  if (x.dtype() == DType::F32)
    run(x.data<float>(), c.out.data<float>());
  else
    run(x.data<double>(), c.out.data<double>());
}

}  // namespace rlx::cpu
