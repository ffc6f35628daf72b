#include "backends/cpu/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <limits>
#include <mutex>

#include "backends/cpu/sgemm.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

// OpenBLAS's pthread build's own hook for fork (it stops and joins its worker
// threads); weak, so a BLAS without it (the OpenMP or serial builds) links too.
extern "C" int blas_thread_shutdown_(void) __attribute__((weak));

namespace rlx::cpu {
namespace {

// rlx threads over its own pool and calls OpenBLAS single-threaded only. The
// pthread build starts a worker per core as it loads, and each spins on
// sched_yield for ~2^28 cycles before it sleeps: on a 2-core machine one core
// went to that spin for the first ~0.1 s of every process, where a short
// `rlx run --bench` (the small CNN: 300 runs in 90 ms) spends all its time.
// So the workers stop when rlx loads, not at its first BLAS call.
void blas_single_threaded() {
  static std::once_flag once;
  std::call_once(once, [] {
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) blas_thread_shutdown_();
  });
}
const bool blas_quiet_at_load = (blas_single_threaded(), true);

// cblas takes 32-bit ints in the LP64 build.
blasint to_blas(int64_t v) {
  RLX_CHECK(v >= 0 && v <= std::numeric_limits<blasint>::max(), "gemm: dimension ", v,
            " exceeds the BLAS integer range");
  return blasint(v);
}

template <typename T>
void zero_or_scale(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == T(0) ? T(0) : beta * C[i * ldc + j];
}

// The block C[M,N] at (row0, col0) of the whole product, epilogue included.
template <typename T>
void blas_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
               const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const GemmEpilogue<T>& epi,
               int64_t row0, int64_t col0, const GemmPacked& packed) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    zero_or_scale(M, N, beta, C, ldc);
    return apply_epilogue(epi, C, ldc, M, N, row0, col0);
  }
  // A block at (row0, col0) of C uses a packed A from row row0, a packed B from
  // column col0, on the kernel they were packed for (bf16 ones included), even
  // when the block is narrow: a thread's last few columns round as the rest.
  if constexpr (std::is_same_v<T, float>)
    if (packed.a || packed.b || gemm_uses_packed_operands(N)) {
      const SgemmKernel* k = packed.b   ? packed.b->kernel
                             : packed.a ? packed.a->kernel
                                        : sgemm_kernel();
      return sgemm(*k, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, row0, col0,
                   {packed.a, row0}, {packed.b, col0});
    }
  blas_single_threaded();
  auto t_a = ta ? CblasTrans : CblasNoTrans, t_b = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, t_a, t_b, to_blas(M), to_blas(N), to_blas(K), alpha, A, to_blas(lda),
                B, to_blas(ldb), beta, C, to_blas(ldc));
  else
    cblas_dgemm(CblasRowMajor, t_a, t_b, to_blas(M), to_blas(N), to_blas(K), alpha, A, to_blas(lda),
                B, to_blas(ldb), beta, C, to_blas(ldc));
  apply_epilogue(epi, C, ldc, M, N, row0, col0);
}

// Packed operands the product can use: those packed for a kernel that may
// run now (a lower RLX_ISA set after packing, or a C too narrow, packs per
// call); both on one kernel.
GemmPacked usable(const GemmPacked& packed, int64_t N) {
  const bool own = gemm_uses_packed_operands(N);
  auto keep = [&](const PackedOperand* p) {
    return own && p && sgemm_kernel_runs(p->kernel) ? p : nullptr;
  };
  GemmPacked u{keep(packed.a), keep(packed.b)};
  if (u.a && u.b && u.a->kernel != u.b->kernel) u.a = nullptr;
  return u;
}

template <typename T>
void split_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const GemmEpilogue<T>& epi,
                const GemmPacked& packed) {
  const int64_t threads = num_threads();
  if (threads <= 1 || M * N * std::max<int64_t>(K, 1) < 2 * kGemmSplitMacs)
    return blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, 0, 0, packed);
  // One block per thread: each call packs its own panels, so fewer, larger
  // blocks waste less. Split the longer side of C, in units of a packed
  // operand's micro-tile (its slivers / panels) so each part starts on one.
  if (M >= N) {
    const int64_t unit = packed.a ? packed.a->kernel->mr : 1, units = (M + unit - 1) / unit;
    parallel_for(units, std::max<int64_t>((units + threads - 1) / threads, 1),
                 [&](int64_t u0, int64_t u1) {
                   const int64_t r0 = u0 * unit, r1 = std::min(M, u1 * unit);
                   blas_call(ta, tb, r1 - r0, N, K, alpha, ta ? A + r0 : A + r0 * lda, lda, B, ldb,
                             beta, C + r0 * ldc, ldc, epi, r0, 0, packed);
                 });
  } else {
    const int64_t unit = packed.b ? packed.b->kernel->nr : 1, units = (N + unit - 1) / unit;
    parallel_for(units, std::max<int64_t>((units + threads - 1) / threads, 1),
                 [&](int64_t u0, int64_t u1) {
                   const int64_t c0 = u0 * unit, c1 = std::min(N, u1 * unit);
                   blas_call(ta, tb, M, c1 - c0, K, alpha, A, lda, tb ? B + c0 * ldb : B + c0, ldb,
                             beta, C + c0, ldc, epi, 0, c0, packed);
                 });
  }
}

}  // namespace

// rlx's kernel where the CPU has one; a C of at most half its micro-tile's
// columns would waste most lanes, which OpenBLAS does better.
bool gemm_uses_packed_operands(int64_t N) {
  const SgemmKernel* k = sgemm_kernel();
  return k && N > k->nr / 2;
}

void gemm_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                 const GemmEpilogue<float>& epi, GemmPacked packed) {
  blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, 0, 0, usable(packed, N));
}
void gemm_serial(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                 int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
                 const GemmEpilogue<double>& epi) {
  blas_call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, 0, 0, {});
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          const GemmEpilogue<float>& epi, GemmPacked packed) {
  split_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, usable(packed, N));
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
          const GemmEpilogue<double>& epi) {
  split_gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, epi, {});
}

}  // namespace rlx::cpu
