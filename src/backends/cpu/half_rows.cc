#include "backends/cpu/half_rows.h"

#include <immintrin.h>

#include "rlx/cpu_isa.h"
#include "rlx/dtype.h"

namespace rlx::cpu {
namespace {

#define RLX_F16C __attribute__((target("avx2,f16c")))

RLX_F16C void widen_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

RLX_F16C void narrow_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

void f16_to_f32_run(const uint16_t* src, float* dst, int64_t n) {
  if (cpu_isa() >= Isa::avx2) return widen_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void f32_to_f16_run(const float* src, uint16_t* dst, int64_t n) {
  if (cpu_isa() >= Isa::avx2) return narrow_f16c(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace rlx::cpu
