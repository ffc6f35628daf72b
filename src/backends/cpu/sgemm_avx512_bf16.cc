// The AVX-512 BF16 kernel for products allowed to round their operands to
// bf16 (MatmulPrecision::bf16, as PyTorch's float32 matmul precision
// "medium"): the f32 kernel's 14 x 32 tile and blocking (sgemm_driver.h), but
// each step takes a (k, k+1) pair: vdpbf16ps multiplies two bf16 pairs per
// lane and adds both products to f32 sums, twice the work of an f32 FMA in
// the same time (Zen 5, one core: 433 against 217 GFLOP/s in a register-only
// loop). Operands are rounded to bf16 (nearest even) as they are packed, a
// pair per 32-bit word, k even in the low half; sums stay f32.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/sgemm_avx512_tile.h"
#include "backends/cpu/sgemm_driver.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

#define RLX_SGEMM_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// C[M rows, n <= 16*V cols] (+)= Ap (K2 x M words) * Bp (K2 x 16V words),
// each word a bf16 pair; otherwise as the f32 kernel (sgemm_avx512.cc).
template <int M, int V, int NR, bool StreamA>
RLX_SGEMM_BF16 void micro_kernel_bf16(int64_t K2, const float* Ap, const float* Bp, float* C,
                                      int64_t ldc, int64_t n, bool accumulate,
                                      const TileEpilogue* epi) {
  __m512 acc[M][V];
  for (int r = 0; r < M; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const auto* a = reinterpret_cast<const int32_t*>(Ap);
  for (int64_t k = 0; k < K2; ++k) {
    __m512bh b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = (__m512bh)_mm512_load_si512(Bp + 16 * v);
    sgemm_detail::prefetch_step<M, NR, StreamA>(reinterpret_cast<const float*>(a), Bp);
#pragma GCC unroll 32
    for (int r = 0; r < M; ++r) {
      const auto x = (__m512bh)_mm512_set1_epi32(a[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], x, b[v]);
    }
    a += M;
    Bp += NR;
  }
  sgemm_detail::store_tile<M, V>(acc, C, ldc, n, accumulate, epi);
}

// 16 words: bf16(lo[i]) in the low half of word i, bf16(hi[i]) in the high one.
RLX_SGEMM_BF16 __m512 pair_words(__m512 lo, __m512 hi) {
  const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(hi, lo);  // lo's 16, then hi's 16
  const __m512i interleave =
      _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_castsi512_ps(_mm512_permutexvar_epi16(interleave, both));
}

// 32 consecutive floats x[0..31] (the first `n` read, the rest zero) as 16
// words, word i = (x[2i], x[2i+1]): bf16 of a run already lies in pair order.
RLX_SGEMM_BF16 __m512 run_words(const float* x, int64_t n, float scale) {
  const __m512 s = _mm512_set1_ps(scale);
  const __m512 x0 = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(vm::first_lanes16(n), x));
  const __m512 x1 = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(vm::first_lanes16(n - 16), x + 16));
  return _mm512_castsi512_ps((__m512i)_mm512_cvtne2ps_pbh(x1, x0));
}

// Rows r0 (k even) and r1 (k odd; null: zeros) of B over n columns into
// consecutive panels of 32 words: dst[p * stride + c] = pair of column
// p * 32 + c, zeros past n.
RLX_SGEMM_BF16 void pair_rows(const float* r0, const float* r1, int64_t n, float* dst,
                              int64_t stride) {
  for (int64_t j = 0; j < n; j += 32, dst += stride)
    for (int64_t h = 0; h < 32; h += 16) {
      const __mmask16 m = vm::first_lanes16(n - j - h);
      const __m512 lo = _mm512_maskz_loadu_ps(m, r0 + j + h);
      const __m512 hi = r1 ? _mm512_maskz_loadu_ps(m, r1 + j + h) : _mm512_setzero_ps();
      _mm512_store_ps(dst + h, pair_words(lo, hi));
    }
}

struct Avx512Bf16 {
  static constexpr int64_t MR = 14, NR = 32, T = 16, KP = 2;
  static constexpr int64_t KC = 512;  // 256 pairs x 32 words = 32 KiB of B per panel
  static constexpr int64_t NC = 512;
  static constexpr int64_t MC = 168;  // 168 x 256 words = 168 KiB of packed A
  template <int M, int V, bool StreamA>
  static constexpr auto tile = &micro_kernel_bf16<M, V, NR, StreamA>;

  static constexpr int64_t pairs(int64_t kc) { return (kc + 1) / 2; }

  // op(B)[k0 + k, j0 + j], k < kc, j < nc: panels of pairs(kc) x NR words.
  RLX_SGEMM_BF16 static void pack_b_block(bool tb, const float* B, int64_t ldb, int64_t k0,
                                          int64_t j0, int64_t kc, int64_t nc, float* out) {
    const int64_t kr = pairs(kc);
    if (!tb) {
      for (int64_t p = 0; p < kr; ++p) {
        const float* r0 = B + (k0 + 2 * p) * ldb + j0;
        pair_rows(r0, 2 * p + 1 < kc ? r0 + ldb : nullptr, nc, out + p * NR, kr * NR);
      }
      return;
    }
    // B is stored [N, K]: a column's k run is a row of B, already in pair
    // order once rounded; 16 columns x 16 pairs are transposed at a time.
    for (int64_t j = 0; j < nc; j += NR, out += kr * NR)
      for (int64_t c = 0; c < NR; c += 16)
        for (int64_t p = 0; p < kr; p += 16) {
          __m512 r[16];
          for (int64_t i = 0; i < 16; ++i)
            r[i] = j + c + i < nc
                       ? run_words(B + (j0 + j + c + i) * ldb + k0 + 2 * p, kc - 2 * p, 1.f)
                       : _mm512_setzero_ps();
          sgemm_detail::transpose16_regs(r);
          for (int64_t i = 0; i < 16 && p + i < kr; ++i)
            _mm512_store_ps(out + (p + i) * NR + c, r[i]);
        }
  }

  // alpha * op(A)[i0 + i, k0 + k] into slivers of MR rows, each pairs(kc) x h words.
  RLX_SGEMM_BF16 static void pack_a_block(bool ta, const float* A, int64_t lda, int64_t i0,
                                          int64_t k0, int64_t mc, int64_t kc, float alpha,
                                          float* out) {
    const int64_t kr = pairs(kc);
    const __m512 s = _mm512_set1_ps(alpha);
    for (int64_t i = 0, h = 0; i < mc; i += MR, out += kr * h) {
      h = std::min(MR, mc - i);
      const __mmask16 m = vm::first_lanes16(h);
      if (ta) {
        // A is stored [K, M]: a sliver's k row is contiguous, pairs from two rows.
        for (int64_t p = 0; p < kr; ++p) {
          const float* r0 = A + (k0 + 2 * p) * lda + i0 + i;
          const __m512 lo = _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, r0));
          const __m512 hi = 2 * p + 1 < kc ? _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, r0 + lda))
                                           : _mm512_setzero_ps();
          _mm512_mask_storeu_ps(out + p * h, m, pair_words(lo, hi));
        }
        continue;
      }
      for (int64_t p = 0; p < kr; p += 16) {
        __m512 r[16];
        for (int64_t q = 0; q < 16; ++q)
          r[q] = q < h ? run_words(A + (i0 + i + q) * lda + k0 + 2 * p, kc - 2 * p, alpha)
                       : _mm512_setzero_ps();
        sgemm_detail::transpose16_regs(r);
        for (int64_t q = 0; q < 16 && p + q < kr; ++q)
          _mm512_mask_storeu_ps(out + (p + q) * h, m, r[q]);
      }
    }
  }

  // B[k][j] = rows[k][j] as pack_b packs it (sgemm.h's pack_b_rows).
  RLX_SGEMM_BF16 static void pack_b_rows(const float* const* rows, int64_t Kd, int64_t N,
                                         float* out) {
    const int64_t np = (N + NR - 1) / NR * NR;
    for (int64_t pc = 0; pc < Kd; pc += KC) {
      const int64_t kc = std::min(KC, Kd - pc), kr = pairs(kc);
      for (int64_t p = 0; p < kr; ++p)
        pair_rows(rows[pc + 2 * p], 2 * p + 1 < kc ? rows[pc + 2 * p + 1] : nullptr, N,
                  out + pc / 2 * np + p * NR, kr * NR);
    }
  }
};

constexpr SgemmKernel kBf16Kernel = sgemm_detail::Driver<Avx512Bf16>::kernel("avx512-bf16 14x32");

}  // namespace

const SgemmKernel& sgemm_avx512_bf16_kernel() { return kBf16Kernel; }

}  // namespace rlx::cpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
