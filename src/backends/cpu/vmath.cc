#include "backends/cpu/vmath.h"

#include <cmath>

namespace rlx::cpu {

bool has_avx2_fma() {
  static const bool ok = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
}

namespace {

RLX_AVX2 __m256 exp8(__m256 x) { return vm::exp(x); }
RLX_AVX2 __m256 tanh8(__m256 x) { return vm::tanh(x); }
RLX_AVX2 __m256 erf8(__m256 x) { return vm::erf(x); }
RLX_AVX2 __m256 sigmoid8(__m256 x) { return vm::sigmoid(x); }

}  // namespace

void vexp(const float* x, float* y, int64_t n) {
  if (has_avx2_fma()) return vm::map_avx2<exp8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = std::exp(x[i]);
}
void vtanh(const float* x, float* y, int64_t n) {
  if (has_avx2_fma()) return vm::map_avx2<tanh8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = std::tanh(x[i]);
}
void verf(const float* x, float* y, int64_t n) {
  if (has_avx2_fma()) return vm::map_avx2<erf8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = std::erf(x[i]);
}
void vsigmoid(const float* x, float* y, int64_t n) {
  if (has_avx2_fma()) return vm::map_avx2<sigmoid8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

}  // namespace rlx::cpu
