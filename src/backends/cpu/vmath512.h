// vmath.h's functions on 16 lanes (AVX-512F/DQ): the same polynomials and the
// same operations in the same order, so every lane's result is bit for bit
// the 8-lane one (tests/backends/cpu/vmath_test.cc checks it) and a kernel may
// take either width. Twice the lanes per instruction roughly halves the time
// of the heavy activations, which are bound by their arithmetic: exact GELU
// ran at 2.1 G elements/s on 8 lanes at 2 threads on the Zen 5 VM (0.35x
// PyTorch's). Only call these from functions compiled with RLX_AVX512_MATH
// after checking cpu_isa() >= Isa::avx512.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/vmath.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() to the unmasked
// intrinsics, which -Wmaybe-uninitialized reports falsely (GCC bug 105593),
// at every inlined use: so for the whole of each includer.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_AVX512_MATH __attribute__((target("avx2,fma,avx512f,avx512dq")))
#define RLX_AVX512_MATH_INLINE \
  __attribute__((target("avx2,fma,avx512f,avx512dq"), always_inline)) inline

namespace rlx::cpu::vm16 {

using V = __m512;
RLX_AVX512_MATH_INLINE V set1(float v) { return _mm512_set1_ps(v); }
RLX_AVX512_MATH_INLINE V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
RLX_AVX512_MATH_INLINE V mul(V a, V b) { return _mm512_mul_ps(a, b); }

// The sign bit of every lane, as vmath.h's blendv reads it.
RLX_AVX512_MATH_INLINE __mmask16 sign_bits(V x) {
  return _mm512_movepi32_mask(_mm512_castps_si512(x));
}

RLX_AVX512_MATH_INLINE V keep_nan(V r, V x) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, _mm512_add_ps(x, x));
}

RLX_AVX512_MATH_INLINE V exp_poly(V x, V n) {
  V r = _mm512_fnmadd_ps(n, set1(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, set1(1.428606765330187045e-06f), r);
  V p = set1(1.9875691500e-4f);
  p = fma(p, r, set1(1.3981999507e-3f));
  p = fma(p, r, set1(8.3334519073e-3f));
  p = fma(p, r, set1(4.1665795894e-2f));
  p = fma(p, r, set1(1.6666665459e-1f));
  p = fma(p, r, set1(5.0000001201e-1f));
  p = fma(p, mul(r, r), r);
  return _mm512_add_ps(p, set1(1.0f));
}
RLX_AVX512_MATH_INLINE V pow2(V n) {
  return _mm512_castsi512_ps(
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23));
}
RLX_AVX512_MATH_INLINE V round_log2e(V x) {
  return _mm512_roundscale_ps(mul(x, set1(1.44269504088896341f)),
                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
RLX_AVX512_MATH_INLINE V exp(V x) {
  const V xc = _mm512_min_ps(_mm512_max_ps(x, set1(-104.0f)), set1(89.0f));
  const V n = round_log2e(xc);
  const V p = exp_poly(xc, n);
  const __m512i ni = _mm512_cvtps_epi32(n);
  const __m512i n1 = _mm512_srai_epi32(ni, 1);
  const __m512i n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const V s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const V s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  return keep_nan(mul(mul(p, s1), s2), x);
}

RLX_AVX512_MATH_INLINE V exp_one_scale(V x) {
  const V n = round_log2e(x);
  return mul(exp_poly(x, n), pow2(n));
}
RLX_AVX512_MATH_INLINE V exp_nonpositive(V x) {
  return exp_one_scale(_mm512_max_ps(x, set1(-87.0f)));
}
RLX_AVX512_MATH_INLINE V exp_nonnegative(V x) {
  return exp_one_scale(_mm512_min_ps(x, set1(89.0f)));
}

RLX_AVX512_MATH_INLINE V sigmoid(V x) {
  const V one = set1(1.0f);
  const V e = exp(_mm512_or_ps(x, set1(-0.0f)));
  const V num = _mm512_mask_blend_ps(sign_bits(x), one, e);
  return keep_nan(_mm512_div_ps(num, _mm512_add_ps(one, e)), x);
}

RLX_AVX512_MATH_INLINE V tanh(V x) {
  const V sign_mask = set1(-0.0f);
  const V ax = _mm512_andnot_ps(sign_mask, x);
  const V z = mul(x, x);
  V p = set1(-5.70498872745e-3f);
  p = fma(p, z, set1(2.06390887954e-2f));
  p = fma(p, z, set1(-5.37397155531e-2f));
  p = fma(p, z, set1(1.33314422036e-1f));
  p = fma(p, z, set1(-3.33332819422e-1f));
  const V small = fma(mul(p, z), x, x);
  const V one = set1(1.0f);
  const V e = exp_nonnegative(_mm512_add_ps(ax, ax));
  V big = _mm512_sub_ps(one, _mm512_div_ps(set1(2.0f), _mm512_add_ps(e, one)));
  big = _mm512_or_ps(big, _mm512_and_ps(x, sign_mask));
  const __mmask16 use_small = _mm512_cmp_ps_mask(ax, set1(0.625f), _CMP_LT_OQ);
  return keep_nan(_mm512_mask_blend_ps(use_small, big, small), x);
}

RLX_AVX512_MATH_INLINE V erf(V x) {
  const V sign_mask = set1(-0.0f);
  const V t = _mm512_andnot_ps(sign_mask, x);
  const V s = mul(x, x);
  V r = set1(-5.96761703e-4f);
  r = fma(r, s, set1(4.99119423e-3f));
  r = fma(r, s, set1(-2.67681349e-2f));
  r = fma(r, s, set1(1.12819925e-1f));
  r = fma(r, s, set1(-3.76125336e-1f));
  r = fma(r, s, set1(1.28379166e-1f));
  const V small = fma(r, x, x);
  const V tc = _mm512_min_ps(t, set1(16.0f));
  const V sc = mul(tc, tc);
  V q = fma(set1(-1.72853470e-5f), tc, set1(3.83197126e-4f));
  const V u = fma(set1(-3.88396438e-3f), tc, set1(2.42546219e-2f));
  q = fma(q, sc, u);
  q = fma(q, tc, set1(-1.06777877e-1f));
  q = fma(q, tc, set1(-6.34846687e-1f));
  q = fma(q, tc, set1(-1.28717512e-1f));
  q = fma(q, tc, _mm512_sub_ps(_mm512_setzero_ps(), tc));
  V big = _mm512_sub_ps(set1(1.0f), exp_nonpositive(q));
  big = _mm512_or_ps(big, _mm512_and_ps(x, sign_mask));
  const __mmask16 use_small = _mm512_cmp_ps_mask(t, set1(0.921875f), _CMP_LE_OQ);
  return keep_nan(_mm512_mask_blend_ps(use_small, big, small), x);
}

RLX_AVX512_MATH_INLINE V silu(V x) { return mul(x, sigmoid(x)); }
RLX_AVX512_MATH_INLINE V gelu(V x) {
  const V half_x = mul(x, set1(0.5f));
  return fma(half_x, erf(mul(x, set1(0.70710678118654752440f))), half_x);
}
RLX_AVX512_MATH_INLINE V gelu_tanh(V x) {
  const V x3 = mul(mul(x, x), x);
  const V inner = mul(set1(0.79788456080286535588f), fma(set1(0.044715f), x3, x));
  const V half_x = mul(x, set1(0.5f));
  return fma(half_x, tanh(inner), half_x);
}

// y[i] = F(x[i]) for i < n: whole vectors, then a masked tail.
template <V (*F)(V)>
RLX_AVX512_MATH void map(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, F(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = vm::first_lanes16(n - i);
    _mm512_mask_storeu_ps(y + i, m, F(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace rlx::cpu::vm16
