// Row kernels behind the traits table (src/quant/traits.cc). Every function
// mirrors ggml's reference: same block layout and the same float operation
// order, so results are bit-identical with ggml's.
#pragma once
#include <cstdint>
#include <cstring>

#include "rlx/dtype.h"

namespace rlx::quant::detail {

inline float fp16(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}
inline void put_fp16(uint8_t* p, float f) {
  uint16_t h = f32_to_f16(f);
  std::memcpy(p, &h, 2);
}
// A block pointer as bytes.
inline const uint8_t* B(const void* p) { return static_cast<const uint8_t*>(p); }
inline uint8_t* B(void* p) { return static_cast<uint8_t*>(p); }
inline uint16_t u16le(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t u32le(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
// ggml's nearest_int: round half to even via the 1.5*2^23 trick.
inline int nearest_int(float fval) {
  float val = fval + 12582912.f;
  int i;
  std::memcpy(&i, &val, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Q4_K / Q5_K's 6-bit scale and min of sub-block j (< 8) from the 12 packed bytes q.
inline void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

#define RLX_QUANT_DECL(name)                                          \
  void dequantize_row_##name(const void* src, float* dst, int64_t n); \
  void quantize_row_##name(const float* src, void* dst, int64_t n);

RLX_QUANT_DECL(f32)
RLX_QUANT_DECL(f16)
RLX_QUANT_DECL(bf16)
RLX_QUANT_DECL(f64)
RLX_QUANT_DECL(i8)
RLX_QUANT_DECL(i16)
RLX_QUANT_DECL(i32)
RLX_QUANT_DECL(i64)
RLX_QUANT_DECL(q4_0)
RLX_QUANT_DECL(q4_1)
RLX_QUANT_DECL(q5_0)
RLX_QUANT_DECL(q5_1)
RLX_QUANT_DECL(q8_0)
RLX_QUANT_DECL(q8_1)
RLX_QUANT_DECL(q1_0)
RLX_QUANT_DECL(q2_0)
RLX_QUANT_DECL(mxfp4)
RLX_QUANT_DECL(nvfp4)
RLX_QUANT_DECL(iq4_nl)
RLX_QUANT_DECL(tq1_0)
RLX_QUANT_DECL(tq2_0)
RLX_QUANT_DECL(q2_K)
RLX_QUANT_DECL(q3_K)
RLX_QUANT_DECL(q4_K)
RLX_QUANT_DECL(q5_K)
RLX_QUANT_DECL(q6_K)
RLX_QUANT_DECL(q8_K)
RLX_QUANT_DECL(iq2_xxs)
RLX_QUANT_DECL(iq2_xs)
RLX_QUANT_DECL(iq2_s)
RLX_QUANT_DECL(iq3_xxs)
RLX_QUANT_DECL(iq3_s)
RLX_QUANT_DECL(iq1_s)
RLX_QUANT_DECL(iq1_m)
RLX_QUANT_DECL(iq4_xs)
#undef RLX_QUANT_DECL

// Direct dot products (vec_dot.cc): weight row x activation row in the
// type's vec_dot_type; AVX2 when the CPU has it, else a portable path.
float vec_dot_f32(const void* w, const void* a, int64_t n);
float vec_dot_f16(const void* w, const void* a, int64_t n);
float vec_dot_bf16(const void* w, const void* a, int64_t n);
float vec_dot_q4_0(const void* w, const void* a, int64_t n);
float vec_dot_q4_1(const void* w, const void* a, int64_t n);
float vec_dot_q5_0(const void* w, const void* a, int64_t n);
float vec_dot_q5_1(const void* w, const void* a, int64_t n);
float vec_dot_q8_0(const void* w, const void* a, int64_t n);
float vec_dot_q2_K(const void* w, const void* a, int64_t n);
float vec_dot_q3_K(const void* w, const void* a, int64_t n);
float vec_dot_q4_K(const void* w, const void* a, int64_t n);
float vec_dot_q5_K(const void* w, const void* a, int64_t n);
float vec_dot_q6_K(const void* w, const void* a, int64_t n);

}  // namespace rlx::quant::detail
