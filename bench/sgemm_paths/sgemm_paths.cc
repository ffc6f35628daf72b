// rlx's f32 GEMM paths side by side in one process: rlx's own kernel for the
// widest ISA the CPU has (sgemm_avx512.cc or sgemm_avx2.cc; RLX_ISA lowers
// it) against OpenBLAS (the path under RLX_ISA=portable), one thread, the
// runs interleaved so machine noise hits both alike.
//   build/bench/sgemm_paths/rlx_sgemm_paths [--reps N]
// Prints GFLOP/s of the fastest run of each and the ratio (> 1: rlx faster),
// and rlx with the weight packed ahead as a compiled graph keeps it (the
// conv weight as A, a [N, K] Linear weight as B), and, where the CPU has
// AVX-512 BF16, the same packed product on the bf16 kernel
// (MatmulPrecision::bf16: operands rounded to bf16, f32 sums).
// Shapes: resnet18's im2col conv GEMMs as conv.cc tiles them (M = out
// channels, N = a tile of output pixels, K = C*kh*kw),
// BERT-base's projections at 128 tokens with PyTorch's [N, K] weights
// (trans_b), a decode step (M = 1), a skinny product and square ones.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include <immintrin.h>

#include "backends/cpu/gemm.h"
#include "rlx/cpu_isa.h"
#include "rlx/thread_pool.h"

namespace {

struct Shape {
  const char* what;
  int64_t M, N, K;
  bool tb;
};

const Shape kShapes[] = {
    {"conv stem 7x7 tile", 64, 448, 147, false},
    {"conv 64ch 3x3 tile", 64, 128, 576, false},
    {"conv 128ch 3x3 tile", 128, 64, 1152, false},
    {"conv 256ch 3x3 tile", 256, 64, 2304, false},
    {"conv 512ch 7x7 map", 512, 49, 4608, false},
    {"bert qkv/out 128 tok", 128, 768, 768, true},
    {"bert ffn up", 128, 3072, 768, true},
    {"bert ffn down", 128, 768, 3072, true},
    {"decode step (M=1)", 1, 768, 768, true},
    {"skinny M=32 ffn up", 32, 3072, 768, true},
    {"square 512", 512, 512, 512, false},
    {"square 1024", 1024, 1024, 1024, false},
    // mobilenet_v2's 1x1 convs (M = out channels, N = positions, K = in channels).
    {"1x1 16->96 112x112", 96, 12544, 16, false},
    {"1x1 32->16 112x112", 16, 12544, 32, false},
    {"1x1 144->24 56x56", 24, 3136, 144, false},
    {"1x1 192->32 28x28", 32, 784, 192, false},
    {"1x1 576->96 14x14", 96, 196, 576, false},
    {"1x1 96->576 14x14", 576, 196, 96, false},
    {"1x1 960->320 7x7", 320, 49, 960, false},
    {"1x1 320->1280 7x7", 1280, 49, 320, false},
};

double seconds_of(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// One core's fp32 peak on a vector width: 12 independent FMA chains (enough
// to cover the FMA latency on two pipes), fastest of 5 runs. A macro, since
// each ISA's copy needs its own target attribute (lambdas do not inherit it).
#define RLX_PEAK_GFLOPS(NAME, TARGET, V, LANES, SET, FMA)                              \
  __attribute__((target(TARGET))) double NAME() {                                      \
    constexpr int64_t kIters = 20'000'000;                                             \
    double best = 1e9;                                                                 \
    for (int rep = 0; rep < 5; ++rep) {                                                \
      V acc[12];                                                                       \
      for (int i = 0; i < 12; ++i) acc[i] = SET(float(i));                             \
      const V a = SET(0.999f), b = SET(1e-6f);                                         \
      const auto t0 = std::chrono::steady_clock::now();                                \
      for (int64_t it = 0; it < kIters; ++it)                                          \
        for (int i = 0; i < 12; ++i) acc[i] = FMA(acc[i], a, b);                       \
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - t0;   \
      float sink = 0;                                                                  \
      for (int i = 0; i < 12; ++i) sink += reinterpret_cast<const float*>(&acc[i])[0]; \
      if (sink == 42.f) std::printf(" "); /* keeps the loop */                         \
      best = std::min(best, t.count());                                                \
    }                                                                                  \
    return 2.0 * LANES * 12 * double(kIters) / best * 1e-9;                            \
  }
RLX_PEAK_GFLOPS(peak_avx2, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps)
RLX_PEAK_GFLOPS(peak_avx512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps)

}  // namespace

int main(int argc, char** argv) {
  int reps = 20;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--reps") == 0) reps = std::atoi(argv[i + 1]);
  rlx::set_num_threads(1);
  const rlx::Isa own = rlx::cpu_isa();
  if (!rlx::cpu::sgemm_kernel()) {
    std::printf("the %s path has no own sgemm kernel: nothing to compare\n", rlx::isa_name(own));
    return 0;
  }
  const double peak = own == rlx::Isa::avx512 ? peak_avx512() : peak_avx2();
  std::printf("1 thread, fastest of %d interleaved runs each; rlx kernel %s; FMA peak %.1f GF/s\n",
              reps, rlx::cpu::sgemm_kernel()->name, peak);
  const rlx::cpu::SgemmKernel* bf16 = rlx::cpu::sgemm_kernel_bf16();
  if (bf16 == rlx::cpu::sgemm_kernel()) bf16 = nullptr;
  std::printf("%-22s %16s %9s %14s %6s %12s %6s %7s %10s %8s\n", "shape", "MxNxK", "rlx GF/s",
              "openblas GF/s", "ratio", "packed GF/s", "ratio", "% peak", "bf16 GF/s", "x packed");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const Shape& s : kShapes) {
    std::vector<float> A(size_t(s.M * s.K)), B(size_t(s.K * s.N)), C(size_t(s.M * s.N));
    for (float& x : A) x = dist(rng);
    for (float& x : B) x = dist(rng);
    const int64_t ldb = s.tb ? s.K : s.N;
    // Conv shapes hold the weight in A, Linear shapes in B.
    auto pack = [&](const rlx::cpu::SgemmKernel* k) {
      return s.tb ? rlx::cpu::pack_b_operand(true, B.data(), ldb, s.K, s.N, k)
                  : rlx::cpu::pack_a_operand(false, A.data(), s.K, s.M, s.K, k);
    };
    const rlx::cpu::PackedOperand weight = pack(nullptr),
                                  weight_bf16 = bf16 ? pack(bf16) : rlx::cpu::PackedOperand{};
    auto run = [&](const rlx::cpu::PackedOperand* packed) {
      rlx::cpu::GemmPacked p;
      if (packed) (s.tb ? p.b : p.a) = packed;
      rlx::cpu::gemm(false, s.tb, s.M, s.N, s.K, 1.f, A.data(), s.K, B.data(), ldb, 0.f, C.data(),
                     s.N, {}, p);
    };
    double best[4] = {1e9, 1e9, 1e9, 1e9};  // rlx, openblas, rlx packed, bf16 packed
    for (int r = 0; r < reps + 1; ++r)
      for (int path = 0; path < (bf16 ? 4 : 3); ++path) {
        rlx::set_isa_limit(path == 1 ? rlx::Isa::portable : own);
        const rlx::cpu::PackedOperand* packed = path == 2   ? &weight
                                                : path == 3 ? &weight_bf16
                                                            : nullptr;
        const double t = seconds_of([&] { run(packed); });
        if (r > 0) best[path] = std::min(best[path], t);  // the first run warms buffers
      }
    rlx::set_isa_limit(own);
    const double gflop = 2.0 * double(s.M) * double(s.N) * double(s.K) * 1e-9;
    char dims[48];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld%s", (long long)s.M, (long long)s.N,
                  (long long)s.K, s.tb ? " tb" : "");
    std::printf("%-22s %16s %9.1f %14.1f %6.2f %12.1f %6.2f %6.0f%%", s.what, dims, gflop / best[0],
                gflop / best[1], best[1] / best[0], gflop / best[2], best[1] / best[2],
                100 * gflop / best[2] / peak);
    if (bf16) std::printf(" %10.1f %8.2f", gflop / best[3], best[2] / best[3]);
    std::printf("\n");
  }
}
