// rlx's own single-precision GEMM for AVX-512 CPUs. Written because OpenBLAS
// 0.3.21 (Debian 12) runs its AVX2 Haswell kernels on Zen 4/5 and this kernel
// measured 1.3-1.7x faster there on conv and transformer shapes
// (bench/matmul_bench.cc). CPUs without AVX-512 keep OpenBLAS.
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/epilogue.h"

namespace rlx::cpu {

// The micro-tile: a packed A is cut into slivers of this many rows, a packed B
// into panels of this many columns, so a caller that splits a product over
// threads starts each part of a packed operand on a multiple of these.
inline constexpr int64_t kSgemmRowTile = 14;
inline constexpr int64_t kSgemmColTile = 32;

// A constant operand (a model's weight) packed once into the kernel's layout,
// so products run after run skip packing it. For each block of 256 k: as A,
// every row's sliver (M x kc floats); as B, every column's panel (N rounded up
// to 32, x kc). `source` is the data it was packed from.
struct PackedOperand {
  bool is_a = false;
  int64_t rows = 0, cols = 0;  // op(A) is rows x cols = M x K; op(B) is K x N
  const float* source = nullptr;
  std::unique_ptr<float[]> storage;  // 64-byte aligned view: data
  float* data = nullptr;
};
PackedOperand pack_a_operand(bool trans_a, const float* A, int64_t lda, int64_t M, int64_t K);
PackedOperand pack_b_operand(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N);

// The part of a packed operand one call uses: a packed A from row `offset`
// (a multiple of kSgemmRowTile), a packed B from column `offset` (of kSgemmColTile).
struct PackedPart {
  const PackedOperand* op = nullptr;
  int64_t offset = 0;
};

// Same contract as gemm_serial (row-major, op(X) = X or X^T, beta == 0 never
// reads C); the epilogue runs on each finished block while it is in cache,
// with (row0, col0) the block's place in the whole output. Needs
// cpu_isa() >= Isa::avx512. With `pa` / `pb`, that operand comes from its
// packed form (A / B and trans are then ignored; a packed A needs alpha == 1).
void sgemm_avx512(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                  const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                  int64_t ldc, const GemmEpilogue<float>& epi, int64_t row0, int64_t col0,
                  PackedPart pa = {}, PackedPart pb = {});

}  // namespace rlx::cpu
