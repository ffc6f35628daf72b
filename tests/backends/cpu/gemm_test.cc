// The f32 GEMM paths (rlx's AVX-512 and AVX2 kernels, OpenBLAS) against a
// float64 scalar reference: every transpose combination, alpha/beta, edge
// shapes that cut the 14x32 and 6x16 micro-tiles and the 256-deep k blocks,
// the fused epilogue, and weights packed ahead.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/gemm.h"
#include "rlx/cpu_isa.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"

namespace rlx::cpu {
namespace {

using testing::IsaLimit;

struct GemmCase {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
};

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Checks one product on the current path; each element within 4 ulp-ish of
// the float64 result, scaled by sum_k |a||b| (the rounding error's size).
// With `bf16`, on the bf16 kernel (called directly when nothing is packed),
// against the product of the operands rounded to bf16 (alpha * A rounded).
enum class Pack { none, a, b };

void check_gemm(const GemmCase& c, const GemmEpilogue<float>& epi = {}, Pack pack = Pack::none,
                bool bf16 = false) {
  const int64_t lda = c.ta ? c.M : c.K, ldb = c.tb ? c.K : c.N, ldc = c.N + 3;
  auto A = random_vec(size_t(c.M * c.K), 1), B = random_vec(size_t(c.K * c.N), 2);
  auto C = random_vec(size_t(c.M * ldc), 3);
  const auto C0 = C;
  const SgemmKernel* kernel = bf16 ? sgemm_kernel_bf16() : nullptr;
  PackedOperand pa, pb;
  GemmPacked packed;
  if (pack == Pack::a) {
    pa = pack_a_operand(c.ta, A.data(), lda, c.M, c.K, kernel);
    packed.a = &pa;
  } else if (pack == Pack::b) {
    pb = pack_b_operand(c.tb, B.data(), ldb, c.K, c.N, kernel);
    packed.b = &pb;
  }
  if (bf16 && pack == Pack::none)
    sgemm(*kernel, c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta,
          C.data(), ldc, epi, 0, 0);
  else
    gemm(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc,
         epi, packed);
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        double a = c.ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)];
        double b = c.tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)];
        if (bf16) {
          a = bf16_to_f32(f32_to_bf16(c.alpha * float(a))) / c.alpha;
          b = bf16_to_f32(f32_to_bf16(float(b)));
        }
        sum += a * b;
        mag += std::fabs(a * b);
      }
      double want = c.alpha * sum + (c.beta == 0 ? 0.0 : c.beta * C0[size_t(i * ldc + j)]);
      if (epi.bias) want += epi.bias_per_row ? epi.bias[i] : epi.bias[j];
      if (epi.act == Epilogue::relu) want = std::max(want, 0.0);
      if (epi.act == Epilogue::relu6) want = std::clamp(want, 0.0, 6.0);
      const double tol = 1e-6 * (std::fabs(c.alpha) * mag + std::fabs(c.beta) + 1) + 1e-7 * c.K;
      ASSERT_NEAR(C[size_t(i * ldc + j)], want, tol)
          << "at (" << i << "," << j << ") of " << c.M << "x" << c.N << "x" << c.K << " ta=" << c.ta
          << " tb=" << c.tb << " on " << isa_name(cpu_isa());
    }
  // Padding columns past N are never written.
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = c.N; j < ldc; ++j) ASSERT_EQ(C[size_t(i * ldc + j)], C0[size_t(i * ldc + j)]);
}

const GemmCase kCases[] = {
    {1, 17, 1, false, false, 1, 0},
    {13, 33, 7, false, false, 1, 0},
    {14, 32, 256, false, false, 1, 0},
    {15, 31, 257, false, false, 1, 0},
    {29, 65, 300, true, false, 1, 0},
    {40, 100, 70, false, true, 1, 0},
    {37, 45, 513, true, true, 1, 0},
    {200, 600, 40, false, false, 1, 0},
    {170, 40, 20, false, true, 2.5f, 0},
    {33, 50, 260, false, false, 1, 1},
    {21, 70, 90, true, true, -0.5f, 0.25f},
    {5, 9, 11, false, false, 1, 0},
    {6, 16, 8, false, true, 1, 0},
    {7, 12, 9, true, false, 1, 0},
    // One row block of A across several blocks of columns (A packed once), K over a block:
    {40, 1100, 600, true, false, 1.5f, 0.5f},
    {130, 700, 520, false, true, 1, 0},
    {3, 5, 11, false, false, 1, 0},  // N at most half a micro-tile: OpenBLAS
};

void check_all_cases(bool bf16 = false) {
  for (const GemmCase& c : kCases)
    if (!bf16 || gemm_uses_packed_operands(c.N)) check_gemm(c, {}, Pack::none, bf16);
  if (bf16) return;
  // Bias per column (matmul) and per row (conv) with relu, over several blocks.
  std::vector<float> col_bias = random_vec(600, 4), row_bias = random_vec(200, 5);
  check_gemm({200, 600, 300, false, false, 1, 0}, {Epilogue::relu, col_bias.data(), false});
  check_gemm({200, 600, 300, false, true, 1, 0}, {Epilogue::relu, row_bias.data(), true});
  // Few rows: the epilogue runs on spans of several panels, the last one short.
  check_gemm({24, 1500, 40, false, false, 1, 0}, {Epilogue::relu, row_bias.data(), true});
  // relu6 (scaled so that both bounds clamp), and a bias alone.
  check_gemm({50, 70, 300, false, false, 6, 0}, {Epilogue::relu6, row_bias.data(), true});
  check_gemm({50, 70, 30, false, true, 1, 0.5f}, {Epilogue::none, col_bias.data(), false});
}

// The epilogue the kernels fuse in registers (a bias, none / relu / relu6)
// rounds exactly as apply_epilogue's separate pass after the product does,
// NaN included; the ones they leave to that pass (gelu, a residual) too.
void check_fused_epilogue_is_exact() {
  const int64_t M = 45, N = 70, K = 300, ld = N + 1;
  auto A = random_vec(size_t(M * K), 6), B = random_vec(size_t(K * N), 7);
  auto bias = random_vec(size_t(std::max(M, N)), 8), res = random_vec(size_t(M * ld), 9);
  bias[3] = std::numeric_limits<float>::quiet_NaN();
  for (Epilogue act : {Epilogue::none, Epilogue::relu, Epilogue::relu6, Epilogue::gelu})
    for (bool per_row : {false, true})
      for (bool residual : {false, true}) {
        GemmEpilogue<float> epi{act, bias.data(), per_row, residual ? res.data() : nullptr,
                                residual ? ld : 0};
        std::vector<float> fused(size_t(M * ld), 0.f), separate = fused;
        gemm(false, false, M, N, K, 4.f, A.data(), K, B.data(), N, 0.f, fused.data(), ld, epi, {});
        gemm(false, false, M, N, K, 4.f, A.data(), K, B.data(), N, 0.f, separate.data(), ld, {},
             {});
        apply_epilogue(epi, separate.data(), ld, M, N, 0, 0);
        for (size_t i = 0; i < fused.size(); ++i)
          ASSERT_EQ(std::bit_cast<uint32_t>(fused[i]), std::bit_cast<uint32_t>(separate[i]))
              << "at " << i << ", act " << int(act) << " per_row " << per_row << " residual "
              << residual << " on " << isa_name(cpu_isa());
      }
}

// Weights packed ahead (pack_a_operand / pack_b_operand) give the same
// products, on one thread and split over two (parts start on micro-tiles).
void check_packed_cases() {
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const GemmCase& c : kCases) {
      if (c.alpha != 1 || !gemm_uses_packed_operands(c.N)) continue;  // a packed A holds alpha 1
      check_gemm(c, {}, Pack::a);
      check_gemm(c, {}, Pack::b);
    }
    check_gemm({300, 500, 600, false, true, 1, 0}, {}, Pack::b);
    check_gemm({301, 90, 600, false, false, 1, 0}, {}, Pack::a);
    std::vector<float> row_bias = random_vec(301, 5);
    check_gemm({301, 90, 300, false, false, 1, 0}, {Epilogue::relu, row_bias.data(), true},
               Pack::a);
  }
  set_num_threads(saved);
}

// Each own kernel on its own path, then with weights packed ahead.
void check_kernel(Isa isa, const SgemmKernel& kernel) {
  IsaLimit limit(isa);
  ASSERT_EQ(cpu_isa(), isa);
  ASSERT_EQ(sgemm_kernel(), &kernel);
  check_all_cases();
  check_packed_cases();
  check_fused_epilogue_is_exact();
}

TEST(Gemm, Avx512KernelMatchesReference) {
  if (detected_isa() < Isa::avx512)
    GTEST_SKIP() << "CPU has no AVX-512";  // covered on Zen 4/5 hosts
  check_kernel(Isa::avx512, sgemm_avx512_kernel());
}

TEST(Gemm, Avx2KernelMatchesReference) {
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "CPU has no AVX2/FMA";
  check_kernel(Isa::avx2, sgemm_avx2_kernel());
}

// The AVX-512 BF16 kernel against the product of bf16-rounded operands: its
// pair packing (odd K, K past a 512-deep block, both layouts of each operand),
// the epilogue, and operands packed ahead on one and two threads.
TEST(Gemm, Bf16KernelMatchesRoundedReference) {
  if (detected_isa() < Isa::avx512 || !has_avx512_bf16())
    GTEST_SKIP() << "CPU has no AVX-512 BF16";  // covered on Zen 4/5 hosts
  IsaLimit limit(Isa::avx512);
  ASSERT_EQ(sgemm_kernel_bf16(), &sgemm_avx512_bf16_kernel());
  check_all_cases(true);
  check_gemm({37, 45, 1025, true, true, 1, 0}, {}, Pack::none, true);
  std::vector<float> col_bias = random_vec(600, 4), row_bias = random_vec(301, 5);
  check_gemm({200, 600, 300, false, true, 1, 0}, {Epilogue::relu, col_bias.data(), false},
             Pack::none, true);
  check_gemm({50, 70, 301, false, false, 6, 0}, {Epilogue::relu6, row_bias.data(), true},
             Pack::none, true);
  const int saved = num_threads();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    check_gemm({128, 768, 3072, false, true, 1, 0}, {}, Pack::b, true);
    check_gemm({300, 500, 601, false, true, 1, 0}, {}, Pack::b, true);
    check_gemm({30, 100, 77, false, false, 1, 0.5f}, {}, Pack::b, true);
    check_gemm({301, 90, 600, false, false, 1, 0}, {}, Pack::a, true);
    check_gemm({301, 90, 300, true, false, 1, 0}, {Epilogue::relu, row_bias.data(), true}, Pack::a,
               true);
  }
  set_num_threads(saved);
  // Under a lower RLX_ISA a bf16 product runs on the f32 kernel.
  IsaLimit avx2(Isa::avx2);
  EXPECT_EQ(sgemm_kernel_bf16(), sgemm_kernel());
}

TEST(Gemm, OpenBlasPathMatchesReference) {
  IsaLimit limit(Isa::portable);
  ASSERT_EQ(sgemm_kernel(), nullptr);
  check_all_cases();
}

// An operand packed for one kernel is not used by another (a lower RLX_ISA
// set after packing): the product packs per call and stays right.
TEST(Gemm, PackedOperandOfAnotherKernelIsIgnored) {
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "CPU has no AVX2/FMA";
  const GemmCase c{40, 70, 300, false, true, 1, 0};
  const int64_t ldb = c.K;
  auto A = random_vec(size_t(c.M * c.K), 1), B = random_vec(size_t(c.K * c.N), 2);
  std::vector<float> want(size_t(c.M * c.N)), got(size_t(c.M * c.N), 7.f);
  PackedOperand pb;
  {
    IsaLimit limit(Isa::avx2);
    pb = pack_b_operand(c.tb, B.data(), ldb, c.K, c.N);
    gemm(false, c.tb, c.M, c.N, c.K, 1.f, A.data(), c.K, B.data(), ldb, 0.f, want.data(), c.N);
  }
  IsaLimit limit(Isa::portable);
  GemmPacked packed;
  packed.b = &pb;
  gemm(false, c.tb, c.M, c.N, c.K, 1.f, A.data(), c.K, B.data(), ldb, 0.f, got.data(), c.N, {},
       packed);
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

TEST(Gemm, ThreadedSplitMatchesReference) {
  const int saved = num_threads();
  set_num_threads(2);
  check_gemm({300, 500, 400, false, true, 1, 0});
  check_gemm({90, 900, 400, true, false, 1, 0});
  set_num_threads(saved);
}

TEST(CpuIsa, LimitCapsTheDetectedSet) {
  {
    IsaLimit limit(Isa::portable);
    EXPECT_EQ(cpu_isa(), Isa::portable);
  }
  EXPECT_EQ(cpu_isa(), Isa(std::min(int(detected_isa()), int(isa_limit()))));
  EXPECT_STREQ(isa_name(Isa::avx2), "avx2");
}

}  // namespace
}  // namespace rlx::cpu
