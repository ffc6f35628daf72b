// Which SIMD instruction set the CPU kernels use. Detected once; a limit
// (RLX_ISA=portable|avx2|avx512 in the environment, or set_isa_limit) forces a
// lower path, so tests cover every path on any machine and a user can rule
// out a kernel when a result looks wrong.
#pragma once

namespace rlx {

enum class Isa { portable = 0, avx2 = 1, avx512 = 2 };  // avx2 implies FMA and F16C

Isa detected_isa();  // what the CPU has
Isa cpu_isa();       // what kernels use: min(detected, limit)
// Caps cpu_isa() at `limit` (cannot raise it above the detected set).
void set_isa_limit(Isa limit);
Isa isa_limit();
const char* isa_name(Isa isa);
// AVX512_BF16 (vdpbf16ps), beside the avx512 level: MatmulPrecision::bf16's kernel needs it.
bool has_avx512_bf16();

}  // namespace rlx
