// AVX2/FMA single-precision math: exp, tanh, erf, sigmoid on 8 lanes. Each is
// accurate to a few ulp over the whole float range (measured in
// tests/backends/cpu/vmath_test.cc), propagates NaN, and handles +-inf and
// results that underflow into subnormals. Only call these from functions
// compiled with RLX_AVX2 after checking has_avx2_fma().
#pragma once
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#define RLX_AVX2 __attribute__((target("avx2,fma")))
#define RLX_AVX2_INLINE __attribute__((target("avx2,fma"), always_inline)) inline

namespace rlx::cpu {

// True when the CPU has AVX2 and FMA (asked once, then cached).
bool has_avx2_fma();

namespace vm {

// The first n lanes of 8 set (none for n <= 0, all for n >= 8): the mask of a
// tail's maskload / maskstore.
RLX_AVX2_INLINE __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(int(n < 8 ? n : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The same for 16 lanes, as an AVX-512 mask register value.
inline __mmask16 first_lanes16(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
}

// x[j * S] for j < 8, S = 1 or 2 (stride 2: two loads deinterleaved, so
// x[15] is read too).
template <int S>
RLX_AVX2_INLINE __m256 strided8(const float* x) {
  static_assert(S == 1 || S == 2);
  if constexpr (S == 1) {
    return _mm256_loadu_ps(x);
  } else {
    const __m256 a = _mm256_loadu_ps(x), b = _mm256_loadu_ps(x + 8);
    const __m256 even =
        _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));  // a0 a2 b0 b2 | a4 a6 b4 b6
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), _MM_SHUFFLE(3, 1, 2, 0)));
  }
}

// even[j] = src[2 * j] for j < (n + 1) / 2 and odd[j] = src[2 * j + 1] for
// j < n / 2: a row of n floats split by parity, reading nothing past it.
RLX_AVX2 inline void deinterleave2(const float* src, int64_t n, float* even, float* odd) {
  int64_t j = 0;
  for (; 2 * j + 17 <= n; j += 8) {  // strided8<2>(src + 2j + 1) reads src[2j + 16]
    _mm256_storeu_ps(even + j, strided8<2>(src + 2 * j));
    _mm256_storeu_ps(odd + j, strided8<2>(src + 2 * j + 1));
  }
  for (; 2 * j < n; ++j) {
    even[j] = src[2 * j];
    if (2 * j + 1 < n) odd[j] = src[2 * j + 1];
  }
}

// NaN lanes of x replace the matching lanes of r (clamps below would turn NaN
// into a finite value otherwise).
RLX_AVX2_INLINE __m256 keep_nan(__m256 r, __m256 x) {
  return _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// exp(x - n ln2) for n = round(x / ln2): exp's reduction and polynomial.
RLX_AVX2_INLINE __m256 exp_poly(__m256 x, __m256 n) {
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r);
  return _mm256_add_ps(p, _mm256_set1_ps(1.0f));
}
// round(x / ln2), to nearest.
RLX_AVX2_INLINE __m256 round_log2e(__m256 x) {
  return _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
// 2^n for integral n in [-126, 128] (128: inf).
RLX_AVX2_INLINE __m256 pow2(__m256 n) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23));
}

// exp(x): n = round(x / ln2), r = x - n ln2 (two-constant Cody-Waite with FMA),
// exp(r) by a degree-6 polynomial on |r| <= ln2/2, then scaled by 2^n in two
// halves so that results down to the smallest subnormal round only once.
RLX_AVX2_INLINE __m256 exp(__m256 x) {
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
  const __m256 n = round_log2e(xc);
  const __m256 p = exp_poly(xc, n);
  // n in [-150, 128]: 2^n = 2^n1 * 2^n2 with both factors normal floats.
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return keep_nan(_mm256_mul_ps(_mm256_mul_ps(p, s1), s2), x);
}

// exp(x) for x in [-87, 89] by one scaling (2^128 and past read as inf, as
// exp gives) and no NaN pass: the one-sided forms below, whose callers need no
// subnormal result and restore NaN themselves, at a third fewer operations.
RLX_AVX2_INLINE __m256 exp_one_scale(__m256 x) {
  const __m256 n = round_log2e(x);
  return _mm256_mul_ps(exp_poly(x, n), pow2(n));
}
// x <= 0 (erf's 1 - exp(q), exactly 1 for any q < -17): under -87 reads as -87.
RLX_AVX2_INLINE __m256 exp_nonpositive(__m256 x) {
  return exp_one_scale(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)));
}
// x >= 0 (tanh's exp(2|x|)).
RLX_AVX2_INLINE __m256 exp_nonnegative(__m256 x) {
  return exp_one_scale(_mm256_min_ps(x, _mm256_set1_ps(89.0f)));
}

// With e = exp(-|x|) in (0, 1]: 1 / (1 + e) for x >= 0 and e / (1 + e) for
// x < 0, so tiny results (down to subnormals) keep full relative accuracy.
RLX_AVX2_INLINE __m256 sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 neg_ax = _mm256_or_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 e = exp(neg_ax);
  const __m256 num = _mm256_blendv_ps(one, e, x);  // sign bit of x picks e
  return keep_nan(_mm256_div_ps(num, _mm256_add_ps(one, e)), x);
}

// tanh: odd minimax polynomial for |x| < 0.625 (Cephes tanhf), else
// sign(x) (1 - 2 / (exp(2|x|) + 1)), which is 1 once exp overflows.
RLX_AVX2_INLINE __m256 tanh(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 ax = _mm256_andnot_ps(sign_mask, x);
  const __m256 z = _mm256_mul_ps(x, x);
  __m256 p = _mm256_set1_ps(-5.70498872745e-3f);
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(2.06390887954e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-5.37397155531e-2f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(1.33314422036e-1f));
  p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(-3.33332819422e-1f));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_nonnegative(_mm256_add_ps(ax, ax));
  __m256 big = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  big = _mm256_or_ps(big, _mm256_and_ps(x, sign_mask));
  const __m256 use_small = _mm256_cmp_ps(ax, _mm256_set1_ps(0.625f), _CMP_LT_OQ);
  return keep_nan(_mm256_blendv_ps(big, small, use_small), x);
}

// erf: x + x P(x^2) for |x| <= 0.921875, else sign(x) (1 - exp(Q(|x|))) with
// Q a polynomial approximating log(erfc); both minimax fits in the style of
// N. Juffa's erff. Saturates to +-1 for large |x| because exp underflows to 0.
RLX_AVX2_INLINE __m256 erf(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 t = _mm256_andnot_ps(sign_mask, x);
  const __m256 s = _mm256_mul_ps(x, x);
  // Small branch.
  __m256 r = _mm256_set1_ps(-5.96761703e-4f);
  r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(4.99119423e-3f));
  r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(-2.67681349e-2f));
  r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(1.12819925e-1f));
  r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(-3.76125336e-1f));
  r = _mm256_fmadd_ps(r, s, _mm256_set1_ps(1.28379166e-1f));
  const __m256 small = _mm256_fmadd_ps(r, x, x);
  // Large branch; t is clamped so that Q stays finite for huge inputs.
  const __m256 tc = _mm256_min_ps(t, _mm256_set1_ps(16.0f));
  const __m256 sc = _mm256_mul_ps(tc, tc);
  __m256 q = _mm256_fmadd_ps(_mm256_set1_ps(-1.72853470e-5f), tc, _mm256_set1_ps(3.83197126e-4f));
  const __m256 u =
      _mm256_fmadd_ps(_mm256_set1_ps(-3.88396438e-3f), tc, _mm256_set1_ps(2.42546219e-2f));
  q = _mm256_fmadd_ps(q, sc, u);
  q = _mm256_fmadd_ps(q, tc, _mm256_set1_ps(-1.06777877e-1f));
  q = _mm256_fmadd_ps(q, tc, _mm256_set1_ps(-6.34846687e-1f));
  q = _mm256_fmadd_ps(q, tc, _mm256_set1_ps(-1.28717512e-1f));
  q = _mm256_fmadd_ps(q, tc, _mm256_sub_ps(_mm256_setzero_ps(), tc));
  __m256 big = _mm256_sub_ps(_mm256_set1_ps(1.0f), exp_nonpositive(q));
  big = _mm256_or_ps(big, _mm256_and_ps(x, sign_mask));
  const __m256 use_small = _mm256_cmp_ps(t, _mm256_set1_ps(0.921875f), _CMP_LE_OQ);
  return keep_nan(_mm256_blendv_ps(big, small, use_small), x);
}

// Activations shared by the unary kernels and the conv/matmul epilogues, so a
// fused activation rounds exactly like the separate op.
RLX_AVX2_INLINE __m256 relu(__m256 x) {
  // max(x, 0) returns the second operand for NaN lanes, so put x second.
  return _mm256_max_ps(_mm256_setzero_ps(), x);
}
RLX_AVX2_INLINE __m256 silu(__m256 x) { return _mm256_mul_ps(x, sigmoid(x)); }
RLX_AVX2_INLINE __m256 gelu(__m256 x) {
  const __m256 half_x = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
  const __m256 e = erf(_mm256_mul_ps(x, _mm256_set1_ps(0.70710678118654752440f)));
  return _mm256_fmadd_ps(half_x, e, half_x);
}
RLX_AVX2_INLINE __m256 gelu_tanh(__m256 x) {
  const __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
  const __m256 inner = _mm256_mul_ps(_mm256_set1_ps(0.79788456080286535588f),
                                     _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), x3, x));
  const __m256 half_x = _mm256_mul_ps(x, _mm256_set1_ps(0.5f));
  return _mm256_fmadd_ps(half_x, tanh(inner), half_x);
}

// y[i] = F(x[i]) for i < n: whole vectors, then the tail through a masked
// load/store so every element takes the same code path wherever it sits.
template <__m256 (*F)(__m256)>
RLX_AVX2 void map_avx2(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, F(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i mask = first_lanes(n - i);
    _mm256_maskstore_ps(y + i, mask, F(_mm256_maskload_ps(x + i, mask)));
  }
}

}  // namespace vm

// Array forms, for tests and kernels: y[i] = f(x[i]) for i < n, with AVX2
// when available and the std:: functions otherwise.
void vexp(const float* x, float* y, int64_t n);
void vtanh(const float* x, float* y, int64_t n);
void verf(const float* x, float* y, int64_t n);
void vsigmoid(const float* x, float* y, int64_t n);
// v[i] = exp(v[i]) in place: vexp for floats, std::exp for doubles (the
// selective scan and gated delta net kernels).
inline void exp_in_place(float* v, int64_t n) { vexp(v, v, n); }
inline void exp_in_place(double* v, int64_t n) {
  for (int64_t i = 0; i < n; ++i) v[i] = std::exp(v[i]);
}

}  // namespace rlx::cpu
