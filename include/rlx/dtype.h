// Element types, their sizes and names, and f16/bf16 <-> f32 conversion.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace rlx {

// X(enum, short name, C++ storage type, bytes)
#define RLX_DTYPES(X)          \
  X(F32, "f32", float, 4)      \
  X(F16, "f16", uint16_t, 2)   \
  X(BF16, "bf16", uint16_t, 2) \
  X(F64, "f64", double, 8)     \
  X(I8, "i8", int8_t, 1)       \
  X(I16, "i16", int16_t, 2)    \
  X(I32, "i32", int32_t, 4)    \
  X(I64, "i64", int64_t, 8)    \
  X(U8, "u8", uint8_t, 1)      \
  X(Bool, "bool", bool, 1)

enum class DType : uint8_t {
#define X(e, n, t, b) e,
  RLX_DTYPES(X)
#undef X
};

constexpr int kNumDTypes = 10;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
// Parses "f32", "float32", "F32" (safetensors), ...; throws rlx::Error otherwise.
DType parse_dtype(std::string_view s);
bool is_float(DType t);    // f32 f16 bf16 f64
bool is_integer(DType t);  // i8..i64 u8 (not bool)

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while (!(mant & 0x400));
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 112) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, with overflow to inf and NaN preserved.
inline uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t ax = x & 0x7fffffff;
  if (ax >= 0x7f800000) return uint16_t(sign | 0x7c00 | (ax > 0x7f800000 ? 0x200 : 0));
  if (ax >= 0x477ff000) return uint16_t(sign | 0x7c00);  // rounds to >= 65520
  if (ax < 0x38800000) {                                 // subnormal or zero in f16
    if (ax < 0x33000000) return uint16_t(sign);
    uint32_t mant = (ax & 0x7fffff) | 0x800000;
    int shift = 126 - int(ax >> 23);  // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return uint16_t(sign | half);
  }
  uint32_t r = ax + 0xfff + ((ax >> 13) & 1) - (112u << 23);
  return uint16_t(sign | (r >> 13));
}

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);  // quiet NaN
  x += 0x7fff + ((x >> 16) & 1);
  return uint16_t(x >> 16);
}

}  // namespace rlx
