// rlx's own single-precision GEMM: one Goto-style driver (sgemm_driver.h)
// over a register-tiled micro-kernel per instruction set, an AVX-512 one
// (sgemm_avx512.cc, 14x32 tile) and an AVX2/FMA one (sgemm_avx2.cc, 6x16).
// Written because OpenBLAS 0.3.21 (Debian 12) runs its Haswell kernels on
// Zen 4/5, where the AVX-512 kernel measured 1.3-1.7x faster, and because
// only an own kernel can take weights packed once per compiled graph and
// run the fused epilogue on each block while it is in cache; both kernels
// are measured against OpenBLAS by bench/sgemm_paths. OpenBLAS stays the
// path under RLX_ISA=portable and for f64.
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/epilogue.h"

namespace rlx::cpu {

// What a micro-kernel does to its finished tile in registers: C = min(top,
// max(0, C + bias)) with the bias per row (row_bias[r]) or per column
// (col_bias[c]) and the clamp only when `clamp` (clamp_top in epilogue.h), so
// it rounds as the separate relu / relu6.
struct TileEpilogue {
  const float* row_bias = nullptr;
  const float* col_bias = nullptr;
  bool clamp = false;
  float top = 0.f;
};

// A constant operand (a model's weight) packed once into a kernel's layout,
// so products run after run skip packing it. `source` is the data it was
// packed from; `kernel` the kernel whose layout it holds (a product on
// another kernel, e.g. under a lower RLX_ISA, packs per call instead).
struct SgemmKernel;
struct PackedOperand {
  bool is_a = false;
  int64_t rows = 0, cols = 0;  // op(A) is rows x cols = M x K; op(B) is K x N
  const float* source = nullptr;
  const SgemmKernel* kernel = nullptr;
  std::unique_ptr<float[]> storage;  // 64-byte aligned view: data
  float* data = nullptr;
};
// Packed for `kernel` (default sgemm_kernel(), which must not be null).
PackedOperand pack_a_operand(bool trans_a, const float* A, int64_t lda, int64_t M, int64_t K,
                             const SgemmKernel* kernel = nullptr);
PackedOperand pack_b_operand(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N,
                             const SgemmKernel* kernel = nullptr);

// The part of a packed operand one call uses: a packed A from row `offset`
// (a multiple of the kernel's mr), a packed B from column `offset` (of nr).
struct PackedPart {
  const PackedOperand* op = nullptr;
  int64_t offset = 0;
};

// One instruction set's kernel: its micro-tile and entry points. A packed A
// is cut into slivers of `mr` rows, a packed B into panels of `nr` columns,
// for each block of `kc` k; a caller that splits a product over threads
// starts each part of a packed operand on a multiple of these. A bf16 kernel
// (kp = 2) rounds both operands to bf16 as it packs them, a (k, k+1) pair
// per 32-bit word, and accumulates in f32.
struct SgemmKernel {
  const char* name;
  int64_t mr, nr, kc;
  int64_t kp;  // k per packed row: 1 (f32) or 2 (bf16 pairs)
  // op(A) (M x K) into M * ceil(K / kp) floats, or op(B) (K x N) into
  // ceil(K / kp) * (N rounded up to nr) floats, all k blocks, at a 64-byte aligned `out`.
  void (*pack_a)(bool trans_a, const float* A, int64_t lda, int64_t M, int64_t K, float* out);
  void (*pack_b)(bool trans_b, const float* B, int64_t ldb, int64_t K, int64_t N, float* out);
  // B[k][j] = rows[k][j] (K x N) packed as pack_b packs: a B whose rows lie
  // anywhere, e.g. a conv's window taps as runs over its input (an im2col
  // that is never written out).
  void (*pack_b_rows)(const float* const* rows, int64_t K, int64_t N, float* out);
  // The product (checked by sgemm below); a PackedPart without op: pack here.
  void (*run)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
              const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
              int64_t ldc, const GemmEpilogue<float>& epi, int64_t row0, int64_t col0,
              PackedPart pa, PackedPart pb);
};

// The kernel for cpu_isa() (null under RLX_ISA=portable: OpenBLAS).
const SgemmKernel* sgemm_kernel();
// The kernel for products allowed to round their operands to bf16
// (MatmulPrecision::bf16): the AVX-512 BF16 one where the CPU has that
// extension and cpu_isa() is avx512, otherwise sgemm_kernel().
const SgemmKernel* sgemm_kernel_bf16();
// Whether `k` may run now: a packed operand's kernel after RLX_ISA was lowered may not.
bool sgemm_kernel_runs(const SgemmKernel* k);

// Same contract as gemm_serial (row-major, op(X) = X or X^T, beta == 0 never
// reads C); the epilogue runs on each finished block while it is in cache,
// with (row0, col0) the block's place in the whole output. With `pa` / `pb`,
// that operand comes from its packed form (A / B and trans are then ignored;
// a packed A needs alpha == 1), which must be for `kernel`.
void sgemm(const SgemmKernel& kernel, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
           float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
           float* C, int64_t ldc, const GemmEpilogue<float>& epi, int64_t row0, int64_t col0,
           PackedPart pa = {}, PackedPart pb = {});

// The kernels themselves; sgemm_kernel() decides which one the CPU can run.
const SgemmKernel& sgemm_avx512_kernel();
const SgemmKernel& sgemm_avx2_kernel();
const SgemmKernel& sgemm_avx512_bf16_kernel();

}  // namespace rlx::cpu
