// AVX-512 dot kernels for float weight rows (f32, f16, bf16) against f32
// activations: 16 lanes and four independent accumulator chains, where the
// AVX2 kernels' one or two chains left a decode GEMV waiting on FMA latency
// (bf16: one chain of 8 lanes, 0.70x llama.cpp's 100M decode on Zen 5).
#include <immintrin.h>

#include <cstring>

#include "quant/vec_dot.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() to the unmasked
// intrinsics, which -Wmaybe-uninitialized reports falsely (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_VDOT_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl")))

namespace rlx::quant::detail {
namespace {

// sum_i w(i) * y[i] with w(i) the i-th weight as f32: 64 elements a step over
// four chains, then one masked step per 16 left, in the same order every call.
template <class Load>
RLX_VDOT_AVX512 inline float dot16(const float* y, int64_t n, Load w) {
  __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                 _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 64 <= n; i += 64)
    for (int c = 0; c < 4; ++c)
      s[c] =
          _mm512_fmadd_ps(w(i + 16 * c, __mmask16(0xFFFF)), _mm512_loadu_ps(y + i + 16 * c), s[c]);
  for (int c = 0; i < n; i += 16, c = (c + 1) % 4) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    s[c] = _mm512_fmadd_ps(w(i, m), _mm512_maskz_loadu_ps(m, y + i), s[c]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
}

}  // namespace

RLX_VDOT_AVX512 float vec_dot_f32_avx512(const void* w, const void* a, int64_t n) {
  const float* x = static_cast<const float*>(w);
  return dot16(static_cast<const float*>(a), n, [x](int64_t i, __mmask16 m) RLX_VDOT_AVX512 {
    return _mm512_maskz_loadu_ps(m, x + i);
  });
}

RLX_VDOT_AVX512 float vec_dot_f16_avx512(const void* w, const void* a, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  return dot16(static_cast<const float*>(a), n, [x](int64_t i, __mmask16 m) RLX_VDOT_AVX512 {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, x + i));
  });
}

// bf16 is the top half of an f32: widen to 32 bits and shift up.
RLX_VDOT_AVX512 float vec_dot_bf16_avx512(const void* w, const void* a, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  return dot16(static_cast<const float*>(a), n, [x](int64_t i, __mmask16 m) RLX_VDOT_AVX512 {
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i)), 16));
  });
}

}  // namespace rlx::quant::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
