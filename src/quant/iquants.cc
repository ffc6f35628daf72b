// Dequantization of the IQ codebook formats (grids in iq_grids.cc).
#include <cstring>

#include "quant/iq_grids.h"
#include "quant/quant_impl.h"

namespace rlx::quant::detail {
namespace {
constexpr float kIq1sDelta = 0.125f;

// 7-bit sign index -> 8 sign bits (bit 7 = parity, so the count is even).
uint8_t ksign(uint32_t k) { return uint8_t(k | (uint32_t(__builtin_parity(k)) << 7)); }
uint8_t gbyte(uint64_t g, int j) { return uint8_t(g >> (8 * j)); }
float sgn(uint8_t signs, int j) { return (signs >> j) & 1 ? -1.f : 1.f; }

// 8 outputs: y = dl * grid[j] * sign (ggml's order).
void emit8(float* y, float dl, uint64_t grid, uint8_t signs) {
  for (int j = 0; j < 8; ++j) y[j] = dl * float(gbyte(grid, j)) * sgn(signs, j);
}
}  // namespace

void dequantize_row_iq2_xxs(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 66 * i;
    const float d = fp16(b);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t a0 = u32le(b + 2 + 8 * ib), a1 = u32le(b + 6 + 8 * ib);
      const float db = d * (0.5f + float(a1 >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l, y += 8)
        emit8(y, db, iq2xxs_grid[(a0 >> 8 * l) & 255], ksign((a1 >> 7 * l) & 127));
    }
  }
}

void dequantize_row_iq2_xs(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 74 * i;
    const float d = fp16(b);
    const uint8_t* scales = b + 66;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + float(scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + float(scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint16_t q = u16le(b + 2 + 2 * (4 * ib + l));
        emit8(y, db[l / 2], iq2xs_grid[q & 511], ksign(q >> 9));
      }
    }
  }
}

void dequantize_row_iq2_s(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 82 * i;
    const float d = fp16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* signs = qs + 32;
    const uint8_t* qh = b + 66;
    const uint8_t* scales = b + 74;
    for (int ib = 0; ib < 8; ++ib) {
      const float db[2] = {d * (0.5f + float(scales[ib] & 0xf)) * 0.25f,
                           d * (0.5f + float(scales[ib] >> 4)) * 0.25f};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int idx = qs[4 * ib + l] | ((qh[ib] << (8 - 2 * l)) & 0x300);
        emit8(y, db[l / 2], iq2s_grid[idx], signs[4 * ib + l]);
      }
    }
  }
}

void dequantize_row_iq3_xxs(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 98 * i;
    const float d = fp16(b);
    const uint8_t* qs = b + 2;
    for (int ib = 0; ib < 8; ++ib, qs += 8) {
      const uint32_t a = u32le(b + 2 + 64 + 4 * ib);
      const float db = d * (0.5f + float(a >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint8_t s = ksign((a >> 7 * l) & 127);
        const uint32_t g1 = iq3xxs_grid[qs[2 * l]], g2 = iq3xxs_grid[qs[2 * l + 1]];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * float(uint8_t(g1 >> 8 * j)) * sgn(s, j);
          y[j + 4] = db * float(uint8_t(g2 >> 8 * j)) * sgn(s, j + 4);
        }
      }
    }
  }
}

void dequantize_row_iq3_s(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 110 * i;
    const float d = fp16(b);
    const uint8_t* qs = b + 2;
    const uint8_t* qh = b + 66;
    const uint8_t* signs = b + 74;
    const uint8_t* scales = b + 106;
    for (int ib = 0; ib < 8; ++ib, qs += 8, signs += 4) {
      const int nib = (scales[ib / 2] >> 4 * (ib % 2)) & 0xf;
      const float db = d * float(1 + 2 * nib);
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint32_t g1 = iq3s_grid[qs[2 * l] | ((qh[ib] << (8 - 2 * l)) & 256)];
        const uint32_t g2 = iq3s_grid[qs[2 * l + 1] | ((qh[ib] << (7 - 2 * l)) & 256)];
        for (int j = 0; j < 4; ++j) {
          y[j] = db * float(uint8_t(g1 >> 8 * j)) * sgn(signs[l], j);
          y[j + 4] = db * float(uint8_t(g2 >> 8 * j)) * sgn(signs[l], j + 4);
        }
      }
    }
  }
}

void dequantize_row_iq1_s(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 50 * i;
    const float d = fp16(b);
    const uint8_t* qs = b + 2;
    for (int ib = 0; ib < 8; ++ib) {
      const uint16_t h = u16le(b + 34 + 2 * ib);
      const float dl = d * float(2 * ((h >> 12) & 7) + 1);
      const float delta = h & 0x8000 ? -kIq1sDelta : kIq1sDelta;
      for (int l = 0; l < 4; ++l, y += 8) {
        const uint64_t g = iq1s_grid[qs[4 * ib + l] | (((h >> 3 * l) & 7) << 8)];
        for (int j = 0; j < 8; ++j) y[j] = dl * (float(int8_t(gbyte(g, j))) + delta);
      }
    }
  }
}

void dequantize_row_iq1_m(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / 256; ++i) {
    const uint8_t* b = B(src) + 56 * i;
    const uint8_t* qs = b;
    const uint8_t* qh = b + 32;
    uint16_t sc[4];
    for (int k = 0; k < 4; ++k) sc[k] = u16le(b + 48 + 2 * k);
    const uint16_t dbits = uint16_t((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                    ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
    const float d = f16_to_f32(dbits);
    for (int ib = 0; ib < 8; ++ib, qs += 4, qh += 2) {
      const int w = sc[ib / 2] >> (6 * (ib % 2));
      const float dl[2] = {d * float(2 * (w & 7) + 1), d * float(2 * ((w >> 3) & 7) + 1)};
      for (int l = 0; l < 4; ++l, y += 8) {
        const int nib = (qh[l / 2] >> (4 * (l % 2))) & 15;
        const uint64_t g = iq1s_grid[qs[l] | ((nib & 7) << 8)];
        const float delta = nib & 8 ? -kIq1sDelta : kIq1sDelta;
        for (int j = 0; j < 8; ++j) y[j] = dl[l / 2] * (float(int8_t(gbyte(g, j))) + delta);
      }
    }
  }
}

}  // namespace rlx::quant::detail
