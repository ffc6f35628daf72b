// Internal: the AVX2 dot kernels (vec_dot_avx2.cc) behind the traits' vec_dot
// entries, and a switch that forces the portable path so tests can check it
// on AVX2 machines too.
#pragma once
#include <cstdint>

namespace rlx::quant::detail {

// True when vec_dot uses the AVX2+FMA+F16C kernels (CPU has them and the
// portable path is not forced).
bool vec_dot_uses_avx2();
void force_portable_vec_dot(bool on);

float vec_dot_f32_avx2(const void* w, const void* a, int64_t n);
float vec_dot_f16_avx2(const void* w, const void* a, int64_t n);
float vec_dot_bf16_avx2(const void* w, const void* a, int64_t n);
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

}  // namespace rlx::quant::detail
