// Row-major GEMM, threaded by rlx's pool: f32 on rlx's own kernel (sgemm.h:
// AVX-512 or AVX2/FMA, whichever cpu_isa() allows), otherwise (RLX_ISA=portable,
// and f64) on OpenBLAS.
//
// Threading policy: OpenBLAS is pinned to one thread (openblas_set_num_threads(1)
// at first use) and all parallelism comes from rlx's pool, so the process never
// runs two thread pools fighting over the same cores (OpenBLAS's pthread
// workers spin after each call and would steal time from rlx workers).
// `gemm` splits C into row or column blocks, one per rlx thread, each computed
// by a single-threaded kernel call; kernels that already parallelize over
// batches/tiles call `gemm_serial` inside their parallel_for chunks.
#pragma once
#include <cstdint>

#include "backends/cpu/epilogue.h"
#include "backends/cpu/sgemm.h"

namespace rlx::cpu {

// C[M,N] = alpha * op(A)[M,K] op(B)[K,N] + beta * C, all row-major; op(X) is X
// or X^T (then X is stored [K,M] / [N,K]). K == 0 gives beta * C (zeros when
// beta == 0); M == 0 or N == 0 does nothing. Runs on the calling thread.
// A constant operand already packed (`a` for A, `b` for B; null: not packed).
// Used when the product runs on the kernel it was packed for; A and B must
// still be given, for the other paths.
struct GemmPacked {
  const PackedOperand* a = nullptr;
  const PackedOperand* b = nullptr;
};
// Whether an f32 product with N columns runs on rlx's kernel, which is when
// packing a constant operand ahead (pack_a_operand / pack_b_operand) pays.
bool gemm_uses_packed_operands(int64_t N);

void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                 const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                 int64_t ldc, const GemmEpilogue<float>& epi = {}, GemmPacked packed = {});
void gemm_serial(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
                 const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
                 int64_t ldc, const GemmEpilogue<double>& epi = {});

// Same contract; large products are split over rlx's pool (inline when nested).
// `epi` runs on each thread's block of C right after that block is computed.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const GemmEpilogue<float>& epi = {}, GemmPacked packed = {});
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc, const GemmEpilogue<double>& epi = {});

// Multiply-adds below which a GEMM is not worth splitting over threads.
constexpr int64_t kGemmSplitMacs = int64_t(1) << 18;

}  // namespace rlx::cpu
