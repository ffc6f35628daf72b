// f16 <-> f32 over contiguous runs, eight lanes at a time with F16C where the
// CPU has it (every AVX2 machine of rlx's paths), scalar otherwise. Both
// round to nearest even, as rlx::f32_to_f16 does.
#pragma once
#include <cstdint>

namespace rlx::cpu {

void f16_to_f32_run(const uint16_t* src, float* dst, int64_t n);
void f32_to_f16_run(const float* src, uint16_t* dst, int64_t n);

}  // namespace rlx::cpu
