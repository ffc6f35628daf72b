// Internal: the AVX2 dot kernels (vec_dot_avx2.cc) behind the traits' vec_dot
// entries, and a switch that forces the portable path so tests can check it
// on AVX2 machines too.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rlx/quant.h"

namespace rlx::quant::detail {

// True when vec_dot uses the AVX2+FMA+F16C kernels (CPU has them and the
// portable path is not forced).
bool vec_dot_uses_avx2();
void force_portable_vec_dot(bool on);

float vec_dot_f32_avx2(const void* w, const void* a, int64_t n);
float vec_dot_f16_avx2(const void* w, const void* a, int64_t n);
float vec_dot_bf16_avx2(const void* w, const void* a, int64_t n);
// The float rows on AVX-512 (vec_dot_avx512.cc), used where cpu_isa() allows.
float vec_dot_f32_avx512(const void* w, const void* a, int64_t n);
float vec_dot_f16_avx512(const void* w, const void* a, int64_t n);
float vec_dot_bf16_avx512(const void* w, const void* a, int64_t n);
float vec_dot_q4_0_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q4_1_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q5_0_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q5_1_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q8_0_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q2_K_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q3_K_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q4_K_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q5_K_avx2(const void* w, const void* a, int64_t n);
float vec_dot_q6_K_avx2(const void* w, const void* a, int64_t n);

// out[r] = vec_dot(w + r * stride, a, n) for r < 4, bit for bit, in one pass
// over the activation row (decode GEMVs: dequant_matmul's direct path).
using VecDot4Fn = void (*)(const void* w, size_t stride, const void* a, int64_t n, float* out);
void vec_dot4_q4_0_avx2(const void* w, size_t stride, const void* a, int64_t n, float* out);
void vec_dot4_q8_0_avx2(const void* w, size_t stride, const void* a, int64_t n, float* out);
// The same on AVX-512 VNNI (256-bit vpdpbusd): the same integer sums, fewer steps.
void vec_dot4_q4_0_vnni(const void* w, size_t stride, const void* a, int64_t n, float* out);
void vec_dot4_q8_0_vnni(const void* w, size_t stride, const void* a, int64_t n, float* out);
bool cpu_has_avx512_vnni();
// The four-row kernel of a weight type on the current path, or null (then one
// vec_dot per row).
VecDot4Fn vec_dot4(GgmlType t);

}  // namespace rlx::quant::detail
