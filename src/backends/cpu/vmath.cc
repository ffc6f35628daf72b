#include "backends/cpu/vmath.h"

#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"

#include <cmath>

namespace rlx::cpu {

bool has_avx2_fma() { return cpu_isa() >= Isa::avx2; }

namespace {

bool has_avx512() { return cpu_isa() >= Isa::avx512; }

}  // namespace

// The portable loops compute in double: float's exp overflows in
// 1 / (1 + exp(-x)) for x < -88 where sigmoid is still a (subnormal) nonzero,
// and libm's float tanh is off by 2 ulp; both miss vmath.h's error bounds.
void vexp(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<vm16::exp>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<vm::exp>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::exp(double(x[i])));
}
void vtanh(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<vm16::tanh>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<vm::tanh>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::tanh(double(x[i])));
}
void verf(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<vm16::erf>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<vm::erf>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(std::erf(double(x[i])));
}
void vsigmoid(const float* x, float* y, int64_t n) {
  if (has_avx512()) return vm16::map<vm16::sigmoid>(x, y, n);
  if (has_avx2_fma()) return vm::map_avx2<vm::sigmoid>(x, y, n);
  for (int64_t i = 0; i < n; ++i) y[i] = float(1.0 / (1.0 + std::exp(-double(x[i]))));
}

}  // namespace rlx::cpu
