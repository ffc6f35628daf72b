// The AVX-512 micro-kernel for rlx's sgemm (sgemm_driver.h has the blocking):
// 14 x 32 outputs accumulate over KC in 28 zmm registers (two 16-lane columns
// x 14 rows; a, b and 28 accumulators fill 30 of the 32 registers).
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/sgemm_avx512_tile.h"
#include "backends/cpu/sgemm_driver.h"

// GCC 12's AVX-512 headers build _mm512_setzero_ps & co. from a deliberately
// uninitialized value, which -Wuninitialized flags in every caller (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

// C[M rows, n <= 16*V cols] (+)= Ap (K x M, k-major) * Bp (K x 16V, k-major).
// Bp rows are NR floats apart (the panel width), of which V vectors are read:
// a panel's last columns may fit in fewer vectors than it holds. StreamA:
// Ap is a weight packed ahead, read from memory (see sgemm_driver.h).
template <int M, int V, int NR, bool StreamA>
RLX_SGEMM_AVX512 void micro_kernel_avx512(int64_t K, const float* Ap, const float* Bp, float* C,
                                          int64_t ldc, int64_t n, bool accumulate,
                                          const TileEpilogue* epi) {
  __m512 acc[M][V];
  for (int r = 0; r < M; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = _mm512_load_ps(Bp + 16 * v);
    sgemm_detail::prefetch_step<M, NR, StreamA>(Ap, Bp);
#pragma GCC unroll 32
    for (int r = 0; r < M; ++r) {
      const __m512 a = _mm512_set1_ps(Ap[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
    Ap += M;
    Bp += NR;
  }
  sgemm_detail::store_tile<M, V>(acc, C, ldc, n, accumulate, epi);
}

// dst[k * ldd + r] = scale * src[r * ld + k] for r < rows, k < 16: a 16 x 16
// transpose in registers (rows >= `rows` read as zeros). Each of the 16 stored
// rows writes `lanes` floats, so a panel's zero padding is written with it.
RLX_SGEMM_AVX512 void transpose16(const float* src, int64_t ld, int64_t rows, float scale,
                                  float* dst, int64_t ldd, int64_t lanes) {
  __m512 r[16];
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_mul_ps(_mm512_loadu_ps(src + i * ld), _mm512_set1_ps(scale))
                    : _mm512_setzero_ps();
  sgemm_detail::transpose16_regs(r);
  const __mmask16 m = vm::first_lanes16(lanes);
  for (int i = 0; i < 16; ++i) _mm512_mask_storeu_ps(dst + i * ldd, m, r[i]);
}

// dst[k * 32 + c] = src[k * ld + c] for k < kc, c < w (<= 32), zeros past w: a B panel row by
// row in vector moves (a memcpy here compiles to rep movsq, slow for 128-byte rows: it took 13%
// of mobilenet_v2's time).
RLX_SGEMM_AVX512 void copy_panel16(const float* src, int64_t ld, int64_t kc, int64_t w,
                                   float* dst) {
  const __mmask16 m0 = vm::first_lanes16(w), m1 = vm::first_lanes16(w - 16);
  for (int64_t k = 0; k < kc; ++k, src += ld, dst += 32) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(m0, src));
    _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(m1, src + 16));
  }
}

// One row of B, n floats, into consecutive panels: dst[p * stride + c] =
// src[p * 32 + c], zeros past n (the last panel's padding).
RLX_SGEMM_AVX512 void copy_row16(const float* src, int64_t n, float* dst, int64_t stride) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32, dst += stride) {
    _mm512_storeu_ps(dst, _mm512_loadu_ps(src + j));
    _mm512_storeu_ps(dst + 16, _mm512_loadu_ps(src + j + 16));
  }
  if (j < n) {
    _mm512_storeu_ps(dst, _mm512_maskz_loadu_ps(vm::first_lanes16(n - j), src + j));
    _mm512_storeu_ps(dst + 16, _mm512_maskz_loadu_ps(vm::first_lanes16(n - j - 16), src + j + 16));
  }
}

struct Avx512 {
  static constexpr int64_t MR = 14, NR = 32, T = 16, KP = 1;
  static constexpr int64_t KC = 256;  // 32 x 256 floats = 32 KiB of B per panel
  static constexpr int64_t NC = 512;  // KC x NC = 512 KiB of packed B
  static constexpr int64_t MC = 168;  // 168 x 256 floats = 168 KiB of packed A
  template <int M, int V, bool StreamA>
  static constexpr auto tile = &micro_kernel_avx512<M, V, NR, StreamA>;
  static constexpr auto transpose = &transpose16;
  static constexpr auto copy_panel = &copy_panel16;
  static constexpr auto copy_row = &copy_row16;
};

constexpr SgemmKernel kAvx512Kernel = sgemm_detail::Driver<Avx512>::kernel("avx512 14x32");

}  // namespace

const SgemmKernel& sgemm_avx512_kernel() { return kAvx512Kernel; }

}  // namespace rlx::cpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
