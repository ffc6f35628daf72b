// The Goto-style blocking shared by every sgemm kernel: B is packed into
// KC x NR panels (L1-resident per micro-kernel call), A into MC x KC blocks of
// MR-row slivers (L2), and the ISA's register-blocked micro-kernel
// accumulates MR x NR outputs over KC. Included only by the ISA files
// (sgemm_avx512.cc, sgemm_avx512_bf16.cc, sgemm_avx2.cc), which instantiate it
// with their traits:
//   MR, NR         the micro-tile (rows x columns)
//   KP             k per packed row: 1 for f32 kernels; 2 for bf16 ones, whose
//                  packed rows hold (k, k+1) pairs of bf16 in each 32-bit
//                  word (so "floats" below are such words) and which bring
//                  their own pack_a_block / pack_b_block / pack_b_rows
//   T              floats per vector, and the square block `transpose` handles
//                  (MR <= T, NR % 2T == 0)
//   KC, NC, MC     k per panel, columns per packed B block, rows per A block
//   tile<M, V, S>  C[M rows, n <= V*T cols] (+)= Ap (kc x M) * Bp (kc x NR),
//                  kc in packed rows,
//                  reading V vectors of each Bp row, then `epi` (if not null)
//                  on the finished sums in registers; with S, prefetching Ap
//                  kStreamAhead floats ahead
//   copy_panel(src, ld, kc, w, dst)
//                  dst[k * NR + c] = src[k * ld + c], c < w (<= NR), zeros past w
//   copy_row(src, n, dst, stride)
//                  dst[p * stride + c] = src[p * NR + c] for p * NR + c < n,
//                  zeros up to the last panel's end
//   transpose(src, ld, rows, scale, dst, ldd, lanes)
//                  dst[k * ldd + r] = scale * src[r * ld + k], r < rows, k < T
//                  (rows >= `rows` read as zeros), writing `lanes` per row
#pragma once
#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/cpu/sgemm.h"
#include "core/scratch.h"

namespace rlx::cpu::sgemm_detail {

// The first 64-byte boundary in a buffer allocated 16 floats longer than needed.
inline float* align64(float* p) {
  return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t(63));
}

// How far ahead a kernel prefetches an A packed ahead of the call (a conv's
// weight, Winograd's transformed weights): those stream from memory, as a
// model's weights outgrow the caches, and the hardware prefetcher alone kept
// resnet18's 14x14 and 7x7 Winograd GEMMs (16 columns per weight) waiting on
// them. 4 KiB ahead: resnet18 at 1 thread 15.1 -> 14.0 ms (2 KiB: 14.5, 8 and
// 16 KiB: no better). Only there: where A is packed per call it sits in L2,
// and the extra load slowed BERT and GPT-2 by a few percent.
inline constexpr int64_t kStreamAhead = 1024;

using Tile = void (*)(int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                      int64_t n, bool accumulate, const TileEpilogue* epi);

// The epilogue the micro-kernels can apply in registers on the last k block,
// or nothing (apply_epilogue then runs on each block from L1): a bias and
// none, relu or relu6, without a residual. Fusing it saves a load and a store
// of every output: mobilenet_v2's epilogue passes took 10% of its time.
inline bool in_registers(const GemmEpilogue<float>& e) {
  return !e.residual && (e.act == Epilogue::none || clamp_top(e.act));
}

// tiles[h - 1] takes an h-row sliver (a block's last sliver may be short).
template <class K, int V, bool S, int... H>
constexpr std::array<Tile, sizeof...(H)> tile_table(std::integer_sequence<int, H...>) {
  return {K::template tile<H + 1, V, S>...};
}

template <class K>
struct Driver {
  static_assert(K::MR <= K::T && K::NR % (2 * K::T) == 0 && K::MC % K::MR == 0 &&
                K::KC % K::KP == 0);

  // Packed rows of `kc` k: a packed block is packed_rows(kc) x M (A) or x NR per panel (B).
  static constexpr int64_t packed_rows(int64_t kc) { return (kc + K::KP - 1) / K::KP; }

  // C[h rows, n cols] (+)= one sliver times one panel: all NR columns, or only
  // the first half of the panel when n fits in it.
  template <bool StreamA>
  static void micro(int64_t h, int64_t kc, const float* Ap, const float* Bp, float* C, int64_t ldc,
                    int64_t n, bool accumulate, const TileEpilogue* epi) {
    constexpr auto rows = std::make_integer_sequence<int, int(K::MR)>{};
    static constexpr auto full = tile_table<K, int(K::NR / K::T), StreamA>(rows);
    static constexpr auto half = tile_table<K, int(K::NR / K::T / 2), StreamA>(rows);
    (n <= K::NR / 2 ? half : full)[size_t(h - 1)](kc, Ap, Bp, C, ldc, n, accumulate, epi);
  }

  // The tile at (i, j) of the whole output: its bias, and relu / relu6 as a clamp.
  static TileEpilogue tile_epilogue(const GemmEpilogue<float>& e, int64_t i, int64_t j) {
    TileEpilogue t;
    if (e.bias) (e.bias_per_row ? t.row_bias : t.col_bias) = e.bias + (e.bias_per_row ? i : j);
    if (const auto top = clamp_top(e.act)) {
      t.clamp = true;
      t.top = *top;
    }
    return t;
  }

  static int64_t padded_cols(int64_t N) { return (N + K::NR - 1) / K::NR * K::NR; }

  // op(B)[k0 + k, j0 + j] for k < kc, j < nc into NR-column panels, zero padded.
  static void pack_b_block(bool tb, const float* B, int64_t ldb, int64_t k0, int64_t j0, int64_t kc,
                           int64_t nc, float* out) {
    if constexpr (K::KP > 1)
      K::pack_b_block(tb, B, ldb, k0, j0, kc, nc, out);
    else
      pack_b_block_f32(tb, B, ldb, k0, j0, kc, nc, out);
  }
  static void pack_b_block_f32(bool tb, const float* B, int64_t ldb, int64_t k0, int64_t j0,
                               int64_t kc, int64_t nc, float* out) {
    constexpr int64_t NR = K::NR, T = K::T;
    for (int64_t j = 0; j < nc; j += NR, out += kc * NR) {
      const int64_t w = std::min(NR, nc - j);
      if (!tb) {
        K::copy_panel(B + k0 * ldb + j0 + j, ldb, kc, w, out);
        continue;
      }
      // B is stored [N, K]: transpose T columns x T k at a time.
      const float* panel = B + (j0 + j) * ldb + k0;
      int64_t k = 0;
      for (; k + T <= kc; k += T)
        for (int64_t c = 0; c < NR; c += T)
          K::transpose(panel + c * ldb + k, ldb, std::max<int64_t>(w - c, 0), 1.f, out + k * NR + c,
                       NR, T);
      for (; k < kc; ++k)
        for (int64_t c = 0; c < NR; ++c) out[k * NR + c] = c < w ? panel[c * ldb + k] : 0.f;
    }
  }

  // alpha * op(A)[i0 + i, k0 + k] into slivers of MR rows, each k-major (kc x h).
  static void pack_a_block(bool ta, const float* A, int64_t lda, int64_t i0, int64_t k0, int64_t mc,
                           int64_t kc, float alpha, float* out) {
    if constexpr (K::KP > 1)
      K::pack_a_block(ta, A, lda, i0, k0, mc, kc, alpha, out);
    else
      pack_a_block_f32(ta, A, lda, i0, k0, mc, kc, alpha, out);
  }
  static void pack_a_block_f32(bool ta, const float* A, int64_t lda, int64_t i0, int64_t k0,
                               int64_t mc, int64_t kc, float alpha, float* out) {
    constexpr int64_t MR = K::MR, T = K::T;
    for (int64_t i = 0; i < mc; i += MR) {
      const int64_t h = std::min(MR, mc - i);
      if (ta) {
        // A is stored [K, M]: a sliver's row of k is contiguous.
        for (int64_t k = 0; k < kc; ++k) {
          const float* src = A + (k0 + k) * lda + i0 + i;
          for (int64_t r = 0; r < h; ++r) out[k * h + r] = alpha * src[r];
        }
      } else {
        const float* sliver = A + (i0 + i) * lda + k0;
        int64_t k = 0;
        for (; k + T <= kc; k += T) K::transpose(sliver + k, lda, h, alpha, out + k * h, h, h);
        for (; k < kc; ++k)
          for (int64_t r = 0; r < h; ++r) out[k * h + r] = alpha * sliver[r * lda + k];
      }
      out += kc * h;
    }
  }

  // Whole operands, the block of k from pc at out + packed_rows(pc) * M (A) or * padded N (B).
  static void pack_a(bool ta, const float* A, int64_t lda, int64_t M, int64_t Kd, float* out) {
    for (int64_t pc = 0; pc < Kd; pc += K::KC)
      pack_a_block(ta, A, lda, 0, pc, M, std::min<int64_t>(K::KC, Kd - pc), 1.f,
                   out + packed_rows(pc) * M);
  }
  static void pack_b(bool tb, const float* B, int64_t ldb, int64_t Kd, int64_t N, float* out) {
    const int64_t np = padded_cols(N);
    for (int64_t pc = 0; pc < Kd; pc += K::KC)
      pack_b_block(tb, B, ldb, pc, 0, std::min<int64_t>(K::KC, Kd - pc), N,
                   out + packed_rows(pc) * np);
  }

  // Row by row, so each run is read once from start to end (a call per
  // row and panel cost the AVX2 path's 7x7 stem 4% of its time).
  static void pack_b_rows(const float* const* rows, int64_t Kd, int64_t N, float* out) {
    if constexpr (K::KP > 1)
      K::pack_b_rows(rows, Kd, N, out);
    else
      pack_b_rows_f32(rows, Kd, N, out);
  }
  static void pack_b_rows_f32(const float* const* rows, int64_t Kd, int64_t N, float* out) {
    const int64_t np = padded_cols(N);
    for (int64_t pc = 0; pc < Kd; pc += K::KC) {
      const int64_t kc = std::min<int64_t>(K::KC, Kd - pc);
      for (int64_t k = 0; k < kc; ++k)
        K::copy_row(rows[pc + k], N, out + pc * np + k * K::NR, kc * K::NR);
    }
  }

  static void run(bool ta, bool tb, int64_t M, int64_t N, int64_t Kd, float alpha, const float* A,
                  int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                  const GemmEpilogue<float>& epi, int64_t row0, int64_t col0, PackedPart pa,
                  PackedPart pb) {
    constexpr int64_t MR = K::MR, NR = K::NR, KC = K::KC, NC = K::NC, MC = K::MC;
    // Per thread: gemm runs one call per pool thread, and nested calls never share.
    thread_local ScratchBuffer<float> a_buf, b_buf, a_whole;
    // A spanning several column blocks is packed once, not once per block:
    // GPT-2's logits (128 x 50257 x 768) packed their A 49 times per thread.
    PackedOperand whole;
    if (!pa.op && N > NC && M * Kd <= (int64_t(1) << 20)) {
      whole.is_a = true;
      whole.rows = M;
      whole.cols = Kd;
      whole.data = a_whole.get(size_t(M * Kd));
      for (int64_t pc = 0; pc < Kd; pc += KC)
        pack_a_block(ta, A, lda, 0, pc, M, std::min<int64_t>(KC, Kd - pc), alpha,
                     whole.data + packed_rows(pc) * M);
      pa = {&whole, 0};
    }
    float* Ap = pa.op ? nullptr : a_buf.get(size_t(MC * KC));
    float* Bp = pb.op ? nullptr : b_buf.get(size_t(KC * (NC + NR)));
    const bool fused = epi.active() && in_registers(epi);
    const bool stream_a = pa.op && pa.op != &whole;
    if (beta != 0.f && beta != 1.f)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
    for (int64_t jc = 0; jc < N; jc += NC) {
      const int64_t nc = std::min(NC, N - jc);
      for (int64_t pc = 0; pc < Kd; pc += KC) {
        const int64_t kc = std::min(KC, Kd - pc), kr = packed_rows(kc);
        const bool accumulate = pc > 0 || beta != 0.f, last = pc + kc == Kd;
        const float* b_block =
            pb.op ? pb.op->data + packed_rows(pc) * padded_cols(pb.op->cols) + (pb.offset + jc) * kr
                  : Bp;
        if (!pb.op) pack_b_block(tb, B, ldb, pc, jc, kc, nc, Bp);
        for (int64_t ic = 0; ic < M; ic += MC) {
          const int64_t mc = std::min(MC, M - ic);
          const float* a_block =
              pa.op ? pa.op->data + packed_rows(pc) * pa.op->rows + (pa.offset + ic) * kr : Ap;
          if (!pa.op) pack_a_block(ta, A, lda, ic, pc, mc, kc, alpha, Ap);
          // The epilogue every `span` columns, on an mc x span part of C still
          // in L1 (about 32 KiB), rather than on the mc x nc block, which has
          // left L1 by then; at least a panel, since each call costs a call per row.
          const int64_t span = std::max(NR, (int64_t(8192) / mc) / NR * NR);
          for (int64_t jr = 0, done = 0; jr < nc; jr += NR) {
            const float* bp = b_block + jr * kr;
            for (int64_t ir = 0; ir < mc; ir += MR) {
              const int64_t i = row0 + ic + ir, j = col0 + jc + jr;
              const TileEpilogue te = tile_epilogue(epi, i, j);
              (stream_a ? &micro<true> : &micro<false>)(std::min(MR, mc - ir), kr,
                                                        a_block + ir * kr, bp,
                                                        C + (ic + ir) * ldc + jc + jr, ldc, nc - jr,
                                                        accumulate, last && fused ? &te : nullptr);
            }
            const int64_t end = std::min(nc, jr + NR);
            if (last && epi.active() && !fused && (end - done >= span || end == nc)) {
              apply_epilogue(epi, C + ic * ldc + jc + done, ldc, mc, end - done, row0 + ic,
                             col0 + jc + done);
              done = end;
            }
          }
        }
      }
    }
  }

  static constexpr SgemmKernel kernel(const char* name) {
    return {name, K::MR, K::NR, K::KC, K::KP, &pack_a, &pack_b, &pack_b_rows, &run};
  }
};

}  // namespace rlx::cpu::sgemm_detail
