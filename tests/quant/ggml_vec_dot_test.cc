// Against ggml-cpu itself: dlopen()s libggml-base.so and, beside it,
// libggml-cpu-haswell.so (AVX2), then checks that our activation quantizers
// produce ggml-cpu's exact bytes (its from_float for q8_0 / q8_K) and that
// our vec_dot matches ggml's vec_dot on identical inputs. Skips without the
// library (or without AVX2) unless RLX_REQUIRE_GGML=1.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx::quant {
namespace {

using testing::randn;

struct GgmlCpuTraits {  // struct ggml_type_traits_cpu (ggml-cpu.h)
  void (*from_float)(const float*, void*, int64_t);
  void (*vec_dot)(int n, float* s, size_t bs, const void* x, size_t bx, const void* y, size_t by,
                  int nrc);
  int vec_dot_type;
  int64_t nrows;
};
using GetCpuTraits = const GgmlCpuTraits* (*)(int);

std::string base_path() {
  if (const char* p = std::getenv("RLX_GGML_LIB")) return p;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") +
         "/.cache/rlx-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so";
}

GetCpuTraits ggml_cpu() {
  static GetCpuTraits fn = []() -> GetCpuTraits {
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return nullptr;
    const std::filesystem::path base = base_path();
    if (!std::filesystem::exists(base)) return nullptr;
    // The CPU backend resolves ggml-base symbols globally.
    if (!dlopen(base.c_str(), RTLD_NOW | RTLD_GLOBAL)) return nullptr;
    void* cpu = dlopen((base.parent_path() / "libggml-cpu-haswell.so").c_str(), RTLD_NOW);
    if (!cpu) return nullptr;
    if (auto init = reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))) init();
    return reinterpret_cast<GetCpuTraits>(dlsym(cpu, "ggml_get_type_traits_cpu"));
  }();
  return fn;
}

#define NEED_GGML_CPU()                                                                         \
  do {                                                                                          \
    if (!ggml_cpu()) {                                                                          \
      const char* r = std::getenv("RLX_REQUIRE_GGML");                                          \
      if (r && std::string(r) == "1") FAIL() << "ggml-cpu not loadable beside " << base_path(); \
      GTEST_SKIP() << "ggml-cpu (haswell) not found beside " << base_path();                    \
    }                                                                                           \
  } while (0)

TEST(GgmlVecDot, ActivationQuantizationBitExact) {
  NEED_GGML_CPU();
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K}) {
    const GgmlCpuTraits* g = ggml_cpu()(int(t));
    ASSERT_TRUE(g && g->from_float) << traits(t).name;
    const int64_t n = 4096;
    for (uint32_t seed = 0; seed < 8; ++seed) {
      std::vector<float> x = randn(size_t(n), 100 + seed);
      if (seed % 2) x[5] = 0.5f * x[0];                           // include exact ties
      if (seed == 3) std::fill(x.begin(), x.begin() + 256, 0.f);  // a zero block
      std::vector<uint8_t> ours(row_size(t, n)), theirs(ours.size());
      quantize_activations(t, x.data(), ours.data(), n);
      g->from_float(x.data(), theirs.data(), n);
      ASSERT_EQ(ours, theirs) << traits(t).name << " seed " << seed;
    }
  }
}

TEST(GgmlVecDot, DotProductsMatchGgml) {
  NEED_GGML_CPU();
  int checked = 0;
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const TypeTraits& tr = traits(t);
    const GgmlCpuTraits* g = ggml_cpu()(int(t));
    ASSERT_TRUE(g && g->vec_dot) << tr.name;
    ASSERT_EQ(g->vec_dot_type, int(tr.vec_dot_type)) << tr.name;
    const int64_t n = 4096;
    for (uint32_t seed = 0; seed < 16; ++seed) {
      const std::vector<float> w = randn(size_t(n), seed), x = randn(size_t(n), 1000 + seed);
      std::vector<uint8_t> wq(row_size(t, n)), a(row_size(tr.vec_dot_type, n));
      quantize(t, w.data(), wq.data(), n);
      quantize_activations(tr.vec_dot_type, x.data(), a.data(), n);
      float theirs = 0;
      g->vec_dot(int(n), &theirs, 0, wq.data(), 0, a.data(), 0, 1);
      const float ours = tr.vec_dot(wq.data(), a.data(), n);
      // Same integer products on both sides; only the float summation order
      // of the per-block terms differs (|sum| ~ sqrt(n), terms ~ 1).
      EXPECT_NEAR(ours, theirs, 2e-5 * (std::fabs(theirs) + std::sqrt(double(n))))
          << tr.name << " seed " << seed;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 10);
}

}  // namespace
}  // namespace rlx::quant
