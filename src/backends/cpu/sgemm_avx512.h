// rlx's own single-precision GEMM for AVX-512 CPUs. Written because OpenBLAS
// 0.3.21 (Debian 12) runs its AVX2 Haswell kernels on Zen 4/5 and this kernel
// measured 1.3-1.7x faster there on conv and transformer shapes
// (bench/matmul_bench.cc). CPUs without AVX-512 keep OpenBLAS.
#pragma once
#include <cstdint>

#include "backends/cpu/epilogue.h"

namespace rlx::cpu {

// Same contract as gemm_serial (row-major, op(X) = X or X^T, beta == 0 never
// reads C); the epilogue runs on each finished block while it is in cache,
// with (row0, col0) the block's place in the whole output. Needs
// cpu_isa() >= Isa::avx512.
void sgemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc, const GemmEpilogue<float>& epi, int64_t row0, int64_t col0);

}  // namespace rlx::cpu
