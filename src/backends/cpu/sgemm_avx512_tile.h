// What the AVX-512 sgemm kernels share (sgemm_avx512.cc for f32,
// sgemm_avx512_bf16.cc for bf16 pairs): a k step's prefetches, finishing a
// tile of f32 sums in registers, and a 16 x 16 transpose of 32-bit lanes.
#pragma once
#include <immintrin.h>

#include "backends/cpu/sgemm.h"
#include "backends/cpu/sgemm_driver.h"
#include "backends/cpu/vmath.h"

// GCC 12's AVX-512 headers build _mm512_setzero_ps & co. from a deliberately
// uninitialized value, which -Wuninitialized flags in every caller (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_SGEMM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace rlx::cpu::sgemm_detail {

// The prefetches of one k step of an M-row tile over NR-wide panels, Ap and Bp
// at that step (32-bit lanes apart, floats or bf16 pairs): B's panel 8 rows
// ahead; with StreamA, an A packed ahead kStreamAhead lanes ahead.
template <int M, int NR, bool StreamA>
RLX_SGEMM_AVX512 __attribute__((always_inline)) inline void prefetch_step(const float* Ap,
                                                                          const float* Bp) {
  _mm_prefetch(reinterpret_cast<const char*>(Bp + NR * 8), _MM_HINT_T0);
  if constexpr (StreamA)
    _mm_prefetch(reinterpret_cast<const char*>(Ap + kStreamAhead), _MM_HINT_T0);
  if constexpr (M < 4) {
    // Few rows stream B from memory (a GEMV, M = 1): both lines of each
    // 128-byte row of the panel, further ahead.
    _mm_prefetch(reinterpret_cast<const char*>(Bp + NR * 32), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(Bp + NR * 32 + 16), _MM_HINT_T0);
  }
}

// C[M rows, n <= 16*V cols] (+)= acc, then `epi` (if not null): the row or
// column bias and the relu / relu6 clamp, on the sums still in registers.
template <int M, int V>
RLX_SGEMM_AVX512 inline void store_tile(__m512 (&acc)[M][V], float* C, int64_t ldc, int64_t n,
                                        bool accumulate, const TileEpilogue* epi) {
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) mask[v] = vm::first_lanes16(n - 16 * v);
  for (int r = 0; r < M; ++r) {
    float* c = C + r * ldc;
    for (int v = 0; v < V; ++v) {
      __m512 x = acc[r][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], c + 16 * v));
      if (epi) {
        if (epi->row_bias) x = _mm512_add_ps(x, _mm512_set1_ps(epi->row_bias[r]));
        if (epi->col_bias)
          x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], epi->col_bias + 16 * v));
        if (epi->clamp)  // x second: NaN lanes come through (vmath.h's relu)
          x = _mm512_min_ps(_mm512_set1_ps(epi->top), _mm512_max_ps(_mm512_setzero_ps(), x));
      }
      _mm512_mask_storeu_ps(c + 16 * v, mask[v], x);
    }
  }
}

// r[i][k] -> r[k][i] for 16 vectors of 16 lanes; only moves bits, so it also
// transposes lanes that hold bf16 pairs.
RLX_SGEMM_AVX512 inline void transpose16_regs(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
  }
}

}  // namespace rlx::cpu::sgemm_detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
