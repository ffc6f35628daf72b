// Which sgemm kernel runs, packing a weight ahead, and the checks of a call.
#include "backends/cpu/sgemm.h"

#include "backends/cpu/sgemm_driver.h"
#include "rlx/checked.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

PackedOperand allocate(const SgemmKernel& kernel, bool is_a, int64_t rows, int64_t cols,
                       const float* source, int64_t n) {
  PackedOperand p;
  p.is_a = is_a;
  p.rows = rows;
  p.cols = cols;
  p.source = source;
  p.kernel = &kernel;
  p.storage.reset(new float[size_t(n) + 16]);
  p.data = sgemm_detail::align64(p.storage.get());
  return p;
}

const SgemmKernel& kernel_or_current(const SgemmKernel* k) {
  if (!k) k = sgemm_kernel();
  RLX_CHECK(k, "sgemm: no own kernel on the ", isa_name(cpu_isa()), " path");
  return *k;
}

int64_t packed_rows(const SgemmKernel& kernel, int64_t K) {
  return (K + kernel.kp - 1) / kernel.kp;
}

}  // namespace

const SgemmKernel* sgemm_kernel() {
  switch (cpu_isa()) {
    case Isa::avx512:
      return &sgemm_avx512_kernel();
    case Isa::avx2:
      return &sgemm_avx2_kernel();
    case Isa::portable:
      return nullptr;
  }
  return nullptr;
}

const SgemmKernel* sgemm_kernel_bf16() {
  if (cpu_isa() == Isa::avx512 && has_avx512_bf16()) return &sgemm_avx512_bf16_kernel();
  return sgemm_kernel();
}

bool sgemm_kernel_runs(const SgemmKernel* k) {
  return k && (k == sgemm_kernel() || k == sgemm_kernel_bf16());
}

PackedOperand pack_a_operand(bool ta, const float* A, int64_t lda, int64_t M, int64_t K,
                             const SgemmKernel* k) {
  const SgemmKernel& kernel = kernel_or_current(k);
  PackedOperand p =
      allocate(kernel, true, M, K, A, checked_mul(M, packed_rows(kernel, K), "packed weight"));
  kernel.pack_a(ta, A, lda, M, K, p.data);
  return p;
}

PackedOperand pack_b_operand(bool tb, const float* B, int64_t ldb, int64_t K, int64_t N,
                             const SgemmKernel* k) {
  const SgemmKernel& kernel = kernel_or_current(k);
  const int64_t np = (N + kernel.nr - 1) / kernel.nr * kernel.nr;
  PackedOperand p =
      allocate(kernel, false, K, N, B, checked_mul(packed_rows(kernel, K), np, "packed weight"));
  kernel.pack_b(tb, B, ldb, K, N, p.data);
  return p;
}

void sgemm(const SgemmKernel& kernel, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
           float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
           float* C, int64_t ldc, const GemmEpilogue<float>& epi, int64_t row0, int64_t col0,
           PackedPart pa, PackedPart pb) {
  RLX_CHECK(
      !pa.op || (pa.op->kernel == &kernel && pa.op->is_a && alpha == 1.f &&
                 pa.offset % kernel.mr == 0 && pa.offset + M <= pa.op->rows && pa.op->cols == K),
      "sgemm: packed A does not fit the product");
  RLX_CHECK(!pb.op || (pb.op->kernel == &kernel && !pb.op->is_a && pb.offset % kernel.nr == 0 &&
                       pb.offset + N <= pb.op->cols && pb.op->rows == K),
            "sgemm: packed B does not fit the product");
  kernel.run(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, row0, col0, pa, pb);
}

}  // namespace rlx::cpu
