// The AVX2/FMA micro-kernel for rlx's sgemm (sgemm_driver.h has the blocking):
// 6 x 16 outputs accumulate over KC in 12 ymm registers (two 8-lane columns
// x 6 rows; with two of B and one broadcast of A, 15 of the 16 registers),
// the tile BLIS uses on Haswell-class cores. Two FMA pipes need 12
// independent accumulators to hide the FMA latency; the 8 loads per k fit
// Zen 3's three load ports.
#include <immintrin.h>

#include "backends/cpu/sgemm_driver.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {
namespace {

// C[M rows, n <= 8*V cols] (+)= Ap (K x M, k-major) * Bp (K x 8V, k-major).
// Bp rows are NR floats apart (the panel width), of which V vectors are read:
// a panel's last columns may fit in fewer vectors than it holds. StreamA:
// Ap is a weight packed ahead, read from memory (see sgemm_driver.h).
template <int M, int V, int NR, bool StreamA>
RLX_AVX2 void micro_kernel_avx2(int64_t K, const float* Ap, const float* Bp, float* C, int64_t ldc,
                                int64_t n, bool accumulate, const TileEpilogue* epi) {
  __m256 acc[M][V];
  for (int r = 0; r < M; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m256 b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm256_load_ps(Bp + 8 * v);
    _mm_prefetch(reinterpret_cast<const char*>(Bp + NR * 8), _MM_HINT_T0);
    if constexpr (StreamA)
      _mm_prefetch(reinterpret_cast<const char*>(Ap + sgemm_detail::kStreamAhead), _MM_HINT_T0);
#pragma GCC unroll 8
    for (int r = 0; r < M; ++r) {
      // set1 of a value, not _mm256_broadcast_ss(pointer): a float load through
      // a pointer may alias the (may_alias) __m256 accumulators, and GCC 12
      // then stores all 12 of them back to the stack every k.
      const __m256 a = _mm256_set1_ps(Ap[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(a, b[v], acc[r][v]);
    }
    Ap += M;
    Bp += NR;
  }
  // Masked lanes are neither read nor written (an all-off mask may point past
  // C's row); full tiles take plain loads and stores, which are cheaper on AMD.
  const bool full = n >= 8 * V;
  __m256i mask[V];
  for (int v = 0; v < V; ++v) mask[v] = vm::first_lanes(n - 8 * v);
  for (int r = 0; r < M; ++r)
    for (int v = 0; v < V; ++v) {
      float* c = C + r * ldc + 8 * v;
      __m256 x = acc[r][v];
      if (accumulate)
        x = _mm256_add_ps(x, full ? _mm256_loadu_ps(c) : _mm256_maskload_ps(c, mask[v]));
      if (epi) {
        if (epi->row_bias) x = _mm256_add_ps(x, _mm256_set1_ps(epi->row_bias[r]));
        if (epi->col_bias) {
          const float* b = epi->col_bias + 8 * v;
          x = _mm256_add_ps(x, full ? _mm256_loadu_ps(b) : _mm256_maskload_ps(b, mask[v]));
        }
        if (epi->clamp)  // x second: NaN lanes come through (vmath.h's relu)
          x = _mm256_min_ps(_mm256_set1_ps(epi->top), _mm256_max_ps(_mm256_setzero_ps(), x));
      }
      if (full)
        _mm256_storeu_ps(c, x);
      else
        _mm256_maskstore_ps(c, mask[v], x);
    }
}

// dst[k * ldd + r] = scale * src[r * ld + k] for r < rows, k < 8: an 8 x 8
// transpose in registers (rows >= `rows` read as zeros), `lanes` floats stored per row.
RLX_AVX2 void transpose8(const float* src, int64_t ld, int64_t rows, float scale, float* dst,
                         int64_t ldd, int64_t lanes) {
  __m256 r[8], t[8];
  const __m256 s = _mm256_set1_ps(scale);
  for (int i = 0; i < 8; ++i)
    r[i] = i < rows ? _mm256_mul_ps(_mm256_loadu_ps(src + i * ld), s) : _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x20);
    t[i + 4] = _mm256_permute2f128_ps(r[i], r[i + 4], 0x31);
  }
  if (lanes >= 8) {
    for (int i = 0; i < 8; ++i) _mm256_storeu_ps(dst + i * ldd, t[i]);
    return;
  }
  const __m256i m = vm::first_lanes(lanes);
  for (int i = 0; i < 8; ++i) _mm256_maskstore_ps(dst + i * ldd, m, t[i]);
}

// dst[k * 16 + c] = src[k * ld + c] for k < kc, c < w (<= 16), zeros past w: a B panel row by
// row in vector moves (a memcpy here compiles to rep movsq, slow for 64-byte rows).
RLX_AVX2 void copy_panel8(const float* src, int64_t ld, int64_t kc, int64_t w, float* dst) {
  const __m256i m0 = vm::first_lanes(std::min<int64_t>(w, 8));
  const __m256i m1 = vm::first_lanes(std::max<int64_t>(w - 8, 0));
  for (int64_t k = 0; k < kc; ++k, src += ld, dst += 16) {
    _mm256_storeu_ps(dst, _mm256_maskload_ps(src, m0));
    _mm256_storeu_ps(dst + 8, _mm256_maskload_ps(src + 8, m1));
  }
}

// One row of B, n floats, into consecutive panels: dst[p * stride + c] =
// src[p * 16 + c], zeros past n (the last panel's padding).
RLX_AVX2 void copy_row8(const float* src, int64_t n, float* dst, int64_t stride) {
  int64_t j = 0;
  for (; j + 16 <= n; j += 16, dst += stride) {
    _mm256_storeu_ps(dst, _mm256_loadu_ps(src + j));
    _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(src + j + 8));
  }
  if (j < n) {
    _mm256_storeu_ps(dst, _mm256_maskload_ps(src + j, vm::first_lanes(n - j)));
    _mm256_storeu_ps(dst + 8, _mm256_maskload_ps(src + j + 8, vm::first_lanes(n - j - 8)));
  }
}

struct Avx2 {
  static constexpr int64_t MR = 6, NR = 16, T = 8, KP = 1;
  static constexpr int64_t KC = 256;  // 16 x 256 floats = 16 KiB of B per panel (half of L1)
  static constexpr int64_t NC = 512;  // KC x NC = 512 KiB of packed B
  static constexpr int64_t MC = 168;  // 168 x 256 floats = 168 KiB of packed A (in L2)
  template <int M, int V, bool StreamA>
  static constexpr auto tile = &micro_kernel_avx2<M, V, NR, StreamA>;
  static constexpr auto transpose = &transpose8;
  static constexpr auto copy_panel = &copy_panel8;
  static constexpr auto copy_row = &copy_row8;
};

constexpr SgemmKernel kAvx2Kernel = sgemm_detail::Driver<Avx2>::kernel("avx2 6x16");

}  // namespace

const SgemmKernel& sgemm_avx2_kernel() { return kAvx2Kernel; }

}  // namespace rlx::cpu
