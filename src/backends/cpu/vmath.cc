#include "backends/cpu/vmath.h"

#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"

#include <cmath>

namespace rlx::cpu {

bool has_avx2_fma() { return cpu_isa() >= Isa::avx2; }

namespace {

RLX_AVX2 __m256 exp8(__m256 x) { return vm::exp(x); }
RLX_AVX2 __m256 tanh8(__m256 x) { return vm::tanh(x); }
RLX_AVX2 __m256 erf8(__m256 x) { return vm::erf(x); }
RLX_AVX2 __m256 sigmoid8(__m256 x) { return vm::sigmoid(x); }
RLX_AVX512_MATH __m512 exp16(__m512 x) { return vm16::exp(x); }
RLX_AVX512_MATH __m512 tanh16(__m512 x) { return vm16::tanh(x); }
RLX_AVX512_MATH __m512 erf16(__m512 x) { return vm16::erf(x); }
RLX_AVX512_MATH __m512 sigmoid16(__m512 x) { return vm16::sigmoid(x); }

bool has_avx512() { return cpu_isa() >= Isa::avx512; }

}  // namespace

// The portable loops compute in double: float's exp overflows in
// 1 / (1 + exp(-x)) for x < -88 where sigmoid is still a (subnormal) nonzero,
// and libm's float tanh is off by 2 ulp; both miss vmath.h's error bounds.
void vexp(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<exp16>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<exp8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::exp(double(x[i])));
}
void vtanh(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<tanh16>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<tanh8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::tanh(double(x[i])));
}
void verf(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<erf16>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<erf8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::erf(double(x[i])));
}
void vsigmoid(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<sigmoid16>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<sigmoid8>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(1.0 / (1.0 + std::exp(-double(x[i]))));
}

}  // namespace rlx::cpu
