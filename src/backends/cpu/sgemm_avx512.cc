// Goto-style blocking: B is packed into KC x NR panels (L1-resident per
// micro-kernel call), A into MC x KC blocks of MR-row slivers (L2), and a
// register-blocked micro-kernel accumulates 14 x 32 outputs over KC in 28 zmm
// registers (two 16-lane columns x 14 rows; a, b and 28 accumulators fill 30
// of the 32 registers).
#include "backends/cpu/sgemm_avx512.h"

#include "rlx/checked.h"
#include "rlx/error.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>
#include <vector>

// GCC 12's AVX-512 headers build _mm512_setzero_ps & co. from a deliberately
// uninitialized value, which -Wuninitialized flags in every caller (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

constexpr int64_t kKC = 256;      // k per packed panel: 32 x 256 floats = 32 KiB of B
constexpr int64_t kNC = 512;      // columns per packed B block (KC x NC = 512 KiB)
constexpr int64_t kMCRows = 168;  // rows per packed A block: 168 x 256 floats = 168 KiB

#define RLX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

__mmask16 lane_mask(int64_t n) { return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1); }

// C[M rows, n <= 16*V cols] (+)= Ap (K x M, k-major) * Bp (K x 16V, k-major).
template <int M, int V>
RLX_AVX512 void micro_kernel(int64_t K, const float* Ap, const float* Bp, float* C, int64_t ldc,
                             int64_t n, bool accumulate) {
  __m512 acc[M][V];
  for (int r = 0; r < M; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    __m512 b[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) b[v] = _mm512_load_ps(Bp + 16 * v);
    _mm_prefetch(reinterpret_cast<const char*>(Bp + 16 * V * 8), _MM_HINT_T0);
#pragma GCC unroll 32
    for (int r = 0; r < M; ++r) {
      const __m512 a = _mm512_set1_ps(Ap[r]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
    Ap += M;
    Bp += 16 * V;
  }
  __mmask16 mask[V];
  for (int v = 0; v < V; ++v) mask[v] = lane_mask(std::max<int64_t>(n - 16 * v, 0));
  for (int r = 0; r < M; ++r) {
    float* c = C + r * ldc;
    for (int v = 0; v < V; ++v) {
      __m512 x = acc[r][v];
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(mask[v], c + 16 * v));
      _mm512_mask_storeu_ps(c + 16 * v, mask[v], x);
    }
  }
}

using MicroKernel = void (*)(int64_t, const float*, const float*, float*, int64_t, int64_t, bool);

// kernels[h - 1] handles an h-row sliver (the last sliver of a block may be short).
template <int V, int... H>
constexpr std::array<MicroKernel, sizeof...(H)> kernel_table(std::integer_sequence<int, H...>) {
  return {&micro_kernel<H + 1, V>...};
}

constexpr int kV = 2;  // zmm columns per micro-kernel
constexpr int64_t kNR = 16 * kV;
static_assert(kNR == kSgemmColTile);
constexpr int kMR = int(kSgemmRowTile);
constexpr auto kKernels = kernel_table<kV>(std::make_integer_sequence<int, kMR>{});

// dst[k * ldd + r] = scale * src[r * ld + k] for r < rows, k < 16: a 16 x 16
// transpose in registers (rows >= `rows` read as zeros). Each of the 16 stored
// rows writes `lanes` floats, so a panel's zero padding is written with it.
RLX_AVX512 void transpose16(const float* src, int64_t ld, int64_t rows, float scale, float* dst,
                            int64_t ldd, int64_t lanes) {
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i)
    r[i] = i < rows ? _mm512_mul_ps(_mm512_loadu_ps(src + i * ld), _mm512_set1_ps(scale))
                    : _mm512_setzero_ps();
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
  const __mmask16 m = lane_mask(lanes);
  for (int i = 0; i < 16; ++i) _mm512_mask_storeu_ps(dst + i * ldd, m, r[i]);
}

// op(B)[k0 + k, j0 + j] for k < kc, j < nc into NR-column panels, zero padded.
template <int64_t NR>
void pack_b(bool tb, const float* B, int64_t ldb, int64_t k0, int64_t j0, int64_t kc, int64_t nc,
            float* out) {
  for (int64_t j = 0; j < nc; j += NR, out += kc * NR) {
    const int64_t w = std::min(NR, nc - j);
    if (!tb) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = B + (k0 + k) * ldb + j0 + j;
        float* dst = out + k * NR;
        std::memcpy(dst, src, size_t(w) * sizeof(float));
        if (w < NR) std::memset(dst + w, 0, size_t(NR - w) * sizeof(float));
      }
      continue;
    }
    // B is stored [N, K]: transpose 16 columns x 16 k at a time.
    const float* panel = B + (j0 + j) * ldb + k0;
    int64_t k = 0;
    for (; k + 16 <= kc; k += 16)
      for (int64_t c = 0; c < NR; c += 16)
        transpose16(panel + c * ldb + k, ldb, std::max<int64_t>(w - c, 0), 1.f, out + k * NR + c,
                    NR, 16);
    for (; k < kc; ++k)
      for (int64_t c = 0; c < NR; ++c) out[k * NR + c] = c < w ? panel[c * ldb + k] : 0.f;
  }
}

// alpha * op(A)[i0 + i, k0 + k] into slivers of MR rows, each k-major (kc x h).
template <int MR>
void pack_a(bool ta, const float* A, int64_t lda, int64_t i0, int64_t k0, int64_t mc, int64_t kc,
            float alpha, float* out) {
  static_assert(MR <= 16);
  for (int64_t i = 0; i < mc; i += MR) {
    const int64_t h = std::min<int64_t>(MR, mc - i);
    if (ta) {
      // A is stored [K, M]: a sliver's row of k is contiguous.
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = A + (k0 + k) * lda + i0 + i;
        for (int64_t r = 0; r < h; ++r) out[k * h + r] = alpha * src[r];
      }
    } else {
      const float* sliver = A + (i0 + i) * lda + k0;
      int64_t k = 0;
      for (; k + 16 <= kc; k += 16) transpose16(sliver + k, lda, h, alpha, out + k * h, h, h);
      for (; k < kc; ++k)
        for (int64_t r = 0; r < h; ++r) out[k * h + r] = alpha * sliver[r * lda + k];
    }
    out += kc * h;
  }
}

// The first 64-byte boundary in a buffer allocated 16 floats longer than needed
// (the micro-kernel's aligned loads of B).
float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

float* aligned(std::vector<float>& buf, size_t n) {
  buf.resize(n + 16);
  return align64(buf.data());
}

PackedOperand allocate(bool is_a, int64_t rows, int64_t cols, const float* source, int64_t n) {
  PackedOperand p;
  p.is_a = is_a;
  p.rows = rows;
  p.cols = cols;
  p.source = source;
  p.storage.reset(new float[size_t(n) + 16]);
  p.data = align64(p.storage.get());
  return p;
}

int64_t padded_cols(int64_t N) { return (N + kNR - 1) / kNR * kNR; }

}  // namespace

PackedOperand pack_a_operand(bool ta, const float* A, int64_t lda, int64_t M, int64_t K) {
  PackedOperand p = allocate(true, M, K, A, checked_mul(M, K, "packed weight"));
  for (int64_t pc = 0; pc < K; pc += kKC)
    pack_a<kMR>(ta, A, lda, 0, pc, M, std::min(kKC, K - pc), 1.f, p.data + pc * M);
  return p;
}

PackedOperand pack_b_operand(bool tb, const float* B, int64_t ldb, int64_t K, int64_t N) {
  const int64_t np = padded_cols(N);
  PackedOperand p = allocate(false, K, N, B, checked_mul(K, np, "packed weight"));
  for (int64_t pc = 0; pc < K; pc += kKC)
    pack_b<kNR>(tb, B, ldb, pc, 0, std::min(kKC, K - pc), N, p.data + pc * np);
  return p;
}

void sgemm_avx512(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const GemmEpilogue<float>& epi, int64_t row0, int64_t col0, PackedPart pa,
                  PackedPart pb) {
  RLX_CHECK(!pa.op || (pa.op->is_a && alpha == 1.f && pa.offset % kMR == 0 &&
                       pa.offset + M <= pa.op->rows && pa.op->cols == K),
            "sgemm: packed A does not fit the product");
  RLX_CHECK(!pb.op || (!pb.op->is_a && pb.offset % kNR == 0 && pb.offset + N <= pb.op->cols &&
                       pb.op->rows == K),
            "sgemm: packed B does not fit the product");
  constexpr int64_t MC = kMCRows / kMR * kMR;
  // Per thread: gemm runs one call per pool thread, and nested calls never share.
  thread_local std::vector<float> a_buf, b_buf;
  float* Ap = pa.op ? nullptr : aligned(a_buf, size_t(MC * kKC));
  float* Bp = pb.op ? nullptr : aligned(b_buf, size_t(kKC * (kNC + kNR)));
  if (beta != 0.f && beta != 1.f)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
  for (int64_t jc = 0; jc < N; jc += kNC) {
    const int64_t nc = std::min(kNC, N - jc);
    for (int64_t pc = 0; pc < K; pc += kKC) {
      const int64_t kc = std::min(kKC, K - pc);
      const bool accumulate = pc > 0 || beta != 0.f, last = pc + kc == K;
      const float* b_block =
          pb.op ? pb.op->data + pc * padded_cols(pb.op->cols) + (pb.offset + jc) * kc : Bp;
      if (!pb.op) pack_b<kNR>(tb, B, ldb, pc, jc, kc, nc, Bp);
      for (int64_t ic = 0; ic < M; ic += MC) {
        const int64_t mc = std::min(MC, M - ic);
        const float* a_block = pa.op ? pa.op->data + pc * pa.op->rows + (pa.offset + ic) * kc : Ap;
        if (!pa.op) pack_a<kMR>(ta, A, lda, ic, pc, mc, kc, alpha, Ap);
        for (int64_t jr = 0; jr < nc; jr += kNR) {
          const float* bp = b_block + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += kMR) {
            const int64_t h = std::min<int64_t>(kMR, mc - ir);
            kKernels[size_t(h - 1)](kc, a_block + ir * kc, bp, C + (ic + ir) * ldc + jc + jr, ldc,
                                    nc - jr, accumulate);
          }
        }
        if (last && epi.active())
          apply_epilogue(epi, C + ic * ldc + jc, ldc, mc, nc, row0 + ic, col0 + jc);
      }
    }
  }
}

}  // namespace rlx::cpu
