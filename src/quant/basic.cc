// Plain float/int types and the 32/64/128-element block formats.
#include <cfloat>
#include <cmath>
#include <cstring>

#include "quant/quant_impl.h"

namespace rlx::quant::detail {
namespace {

// E2M1 code values times two (ggml's kvalues_mxfp4), and IQ4_NL's codebook.
const int8_t kMxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
const int8_t kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                           1,    13,   25,  38,  53,  69,  89,  113};

template <typename S>
void ints_to_float(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    S v;
    std::memcpy(&v, B(src) + i * sizeof(S), sizeof(S));
    dst[i] = float(v);
  }
}

// 2^(e-128) exactly, also for e = 0, 1 (subnormal), as ggml's E8M0_TO_FP32_HALF.
float e8m0_half(uint8_t e) {
  uint32_t bits = e < 2 ? 0x00200000u << e : uint32_t(e - 1) << 23;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Unsigned E4M3 scale (bias 7), halved to match the doubled E2M1 table.
float ue4m3_half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  int e = (x >> 3) & 15, m = x & 7;
  float v = e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + float(m) / 8.0f, e - 7);
  return v * 0.5f;
}
}  // namespace

void dequantize_row_f32(const void* src, float* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * 4);
}
void quantize_row_f32(const float* src, void* dst, int64_t n) {
  std::memcpy(dst, src, size_t(n) * 4);
}
void dequantize_row_f16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = fp16(B(src) + 2 * i);
}
void quantize_row_f16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) put_fp16(B(dst) + 2 * i, src[i]);
}
void dequantize_row_bf16(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(u16le(B(src) + 2 * i));
}
void quantize_row_bf16(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h = f32_to_bf16(src[i]);
    std::memcpy(B(dst) + 2 * i, &h, 2);
  }
}
void dequantize_row_f64(const void* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v;
    std::memcpy(&v, B(src) + 8 * i, 8);
    dst[i] = float(v);
  }
}
void quantize_row_f64(const float* src, void* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double v = src[i];
    std::memcpy(B(dst) + 8 * i, &v, 8);
  }
}
void dequantize_row_i8(const void* s, float* d, int64_t n) { ints_to_float<int8_t>(s, d, n); }
void dequantize_row_i16(const void* s, float* d, int64_t n) { ints_to_float<int16_t>(s, d, n); }
void dequantize_row_i32(const void* s, float* d, int64_t n) { ints_to_float<int32_t>(s, d, n); }
void dequantize_row_i64(const void* s, float* d, int64_t n) { ints_to_float<int64_t>(s, d, n); }

// ---- Q4_0 {fp16 d; u8 qs[16]}
void dequantize_row_q4_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 18 * i;
    const float d = fp16(b);
    for (int j = 0; j < 16; ++j) {
      y[j] = float((b[2 + j] & 15) - 8) * d;
      y[j + 16] = float((b[2 + j] >> 4) - 8) * d;
    }
  }
}
void quantize_row_q4_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 18 * i;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    for (int j = 0; j < 16; ++j) {
      // (int8_t) truncation of x*id + 8.5 as ggml does; clamp to 15.
      const uint8_t a = uint8_t(std::min(15, int(int8_t(x[j] * id + 8.5f))));
      const uint8_t c = uint8_t(std::min(15, int(int8_t(x[j + 16] * id + 8.5f))));
      b[2 + j] = uint8_t(a | c << 4);
    }
  }
}

// ---- Q4_1 {fp16 d; fp16 m; u8 qs[16]}
void dequantize_row_q4_1(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 20 * i;
    const float d = fp16(b), m = fp16(b + 2);
    for (int j = 0; j < 16; ++j) {
      y[j] = float(b[4 + j] & 15) * d + m;
      y[j + 16] = float(b[4 + j] >> 4) * d + m;
    }
  }
}
void quantize_row_q4_1(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 20 * i;
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    put_fp16(b + 2, min);
    for (int j = 0; j < 16; ++j) {
      const uint8_t a = uint8_t(std::min(15, int(int8_t((x[j] - min) * id + 0.5f))));
      const uint8_t c = uint8_t(std::min(15, int(int8_t((x[j + 16] - min) * id + 0.5f))));
      b[4 + j] = uint8_t(a | c << 4);
    }
  }
}

// ---- Q5_0 {fp16 d; u8 qh[4]; u8 qs[16]}
void dequantize_row_q5_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 22 * i;
    const float d = fp16(b);
    const uint32_t qh = u32le(b + 2);
    for (int j = 0; j < 16; ++j) {
      const int x0 = ((b[6 + j] & 15) | (((qh >> j) << 4) & 0x10)) - 16;
      const int x1 = ((b[6 + j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
      y[j] = float(x0) * d;
      y[j + 16] = float(x1) * d;
    }
  }
}
void quantize_row_q5_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 22 * i;
    float amax = 0, max = 0;
    for (int j = 0; j < 32; ++j)
      if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t a = uint8_t(std::min(31, int(int8_t(x[j] * id + 16.5f))));
      const uint8_t c = uint8_t(std::min(31, int(int8_t(x[j + 16] * id + 16.5f))));
      b[6 + j] = uint8_t((a & 15) | (c & 15) << 4);
      qh |= uint32_t((a & 0x10) >> 4) << j;
      qh |= uint32_t((c & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b + 2, &qh, 4);
  }
}

// ---- Q5_1 {fp16 d; fp16 m; u8 qh[4]; u8 qs[16]}
void dequantize_row_q5_1(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 24 * i;
    const float d = fp16(b), m = fp16(b + 2);
    const uint32_t qh = u32le(b + 4);
    for (int j = 0; j < 16; ++j) {
      const int x0 = (b[8 + j] & 15) | (((qh >> j) << 4) & 0x10);
      const int x1 = (b[8 + j] >> 4) | ((qh >> (j + 12)) & 0x10);
      y[j] = float(x0) * d + m;
      y[j + 16] = float(x1) * d + m;
    }
  }
}
void quantize_row_q5_1(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 24 * i;
    float min = FLT_MAX, max = -FLT_MAX;
    for (int j = 0; j < 32; ++j) {
      if (x[j] < min) min = x[j];
      if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    put_fp16(b + 2, min);
    uint32_t qh = 0;
    for (int j = 0; j < 16; ++j) {
      const uint8_t a = uint8_t((x[j] - min) * id + 0.5f);
      const uint8_t c = uint8_t((x[j + 16] - min) * id + 0.5f);
      b[8 + j] = uint8_t((a & 15) | (c & 15) << 4);
      qh |= uint32_t((a & 0x10) >> 4) << j;
      qh |= uint32_t((c & 0x10) >> 4) << (j + 16);
    }
    std::memcpy(b + 4, &qh, 4);
  }
}

// ---- Q8_0 {fp16 d; i8 qs[32]}, Q8_1 {fp16 d; fp16 s; i8 qs[32]}
void dequantize_row_q8_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 34 * i;
    const float d = fp16(b);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
  }
}
void quantize_row_q8_0(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 34 * i;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    for (int j = 0; j < 32; ++j) b[2 + j] = uint8_t(int8_t(std::round(x[j] * id)));
  }
}
void dequantize_row_q8_1(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 36 * i;
    const float d = fp16(b);
    for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[4 + j])) * d;
  }
}
void quantize_row_q8_1(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, x += 32) {
    uint8_t* b = B(dst) + 36 * i;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    put_fp16(b, d);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int8_t q = int8_t(std::round(x[j] * id));
      b[4 + j] = uint8_t(q);
      sum += q;
    }
    put_fp16(b + 2, float(sum) * d);
  }
}

// ---- Q1_0 {fp16 d; u8 qs[16]} (128), Q2_0 {fp16 d; u8 qs[16]} (64)
void dequantize_row_q1_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 128; ++i, y += 128) {
    const uint8_t* b = B(src) + 18 * i;
    const float d = fp16(b);
    for (int j = 0; j < 128; ++j) y[j] = (b[2 + j / 8] >> (j % 8)) & 1 ? d : -d;
  }
}
void dequantize_row_q2_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 64; ++i, y += 64) {
    const uint8_t* b = B(src) + 18 * i;
    const float d = fp16(b);
    for (int j = 0; j < 64; ++j) y[j] = float(((b[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
  }
}

// ---- MXFP4 {u8 e; u8 qs[16]}, NVFP4 {u8 d[4]; u8 qs[32]} (64)
void dequantize_row_mxfp4(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 17 * i;
    const float d = e8m0_half(b[0]);
    for (int j = 0; j < 16; ++j) {
      y[j] = float(kMxfp4[b[1 + j] & 15]) * d;
      y[j + 16] = float(kMxfp4[b[1 + j] >> 4]) * d;
    }
  }
}
void dequantize_row_nvfp4(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 64; ++i) {
    const uint8_t* b = B(src) + 36 * i;
    for (int s = 0; s < 4; ++s, y += 16) {
      const float d = ue4m3_half(b[s]);
      for (int j = 0; j < 8; ++j) {
        y[j] = float(kMxfp4[b[4 + 8 * s + j] & 15]) * d;
        y[j + 8] = float(kMxfp4[b[4 + 8 * s + j] >> 4]) * d;
      }
    }
  }
}

// ---- IQ4_NL {fp16 d; u8 qs[16]}
void dequantize_row_iq4_nl(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 32; ++i, y += 32) {
    const uint8_t* b = B(src) + 18 * i;
    const float d = fp16(b);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * float(kIq4nl[b[2 + j] & 15]);
      y[j + 16] = d * float(kIq4nl[b[2 + j] >> 4]);
    }
  }
}
// ---- IQ4_XS {fp16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}
void dequantize_row_iq4_xs(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 136 * i;
    const float d = fp16(b);
    const uint16_t sh = u16le(b + 2);
    const uint8_t* qs = b + 8;
    for (int ib = 0; ib < 8; ++ib, y += 32, qs += 16) {
      const int ls = ((b[4 + ib / 2] >> 4 * (ib % 2)) & 15) | ((sh >> 2 * ib) & 3) << 4;
      const float dl = d * float(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * float(kIq4nl[qs[j] & 15]);
        y[j + 16] = dl * float(kIq4nl[qs[j] >> 4]);
      }
    }
  }
}

// ---- TQ1_0 {u8 qs[48]; u8 qh[4]; fp16 d}, TQ2_0 {u8 qs[64]; fp16 d}
void dequantize_row_tq1_0(const void* src, float* y, int64_t n) {
  static const uint8_t pow3[6] = {1, 3, 9, 27, 81, 243};
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 54 * i;
    const float d = fp16(b + 52);
    auto trit = [&](uint8_t q, int k) {
      const uint8_t v = uint8_t(q * pow3[k]);
      return float(int16_t((uint16_t(v) * 3) >> 8) - 1) * d;
    };
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 32; ++m) *y++ = trit(b[m], k);
    for (int k = 0; k < 5; ++k)
      for (int m = 0; m < 16; ++m) *y++ = trit(b[32 + m], k);
    for (int k = 0; k < 4; ++k)
      for (int j = 0; j < 4; ++j) *y++ = trit(b[48 + j], k);
  }
}
void dequantize_row_tq2_0(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 66 * i;
    const float d = fp16(b + 64);
    for (int h = 0; h < 2; ++h)
      for (int l = 0; l < 4; ++l)
        for (int m = 0; m < 32; ++m) *y++ = float(((b[32 * h + m] >> 2 * l) & 3) - 1) * d;
  }
}

}  // namespace rlx::quant::detail
