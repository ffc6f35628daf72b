// K-quants: 256-element super-blocks Q2_K..Q6_K and the Q8_K activation
// format. Quantizers follow ggml's quantize_row_*_K_ref step for step (the
// same search over candidate scales, the same float operation order).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "quant/quant_impl.h"

namespace rlx::quant::detail {
namespace {
constexpr int QK = 256;
constexpr float kGroupMaxEps = 1e-15f;

// Symmetric signed quants with a scale search (ggml make_qx_quants, rmse_type 1, no weights).
float make_qx_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = int8_t(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i)
        L[i] = int8_t(nmax + std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i]))));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ggml make_q3_quants with do_rmse: iterative per-element refinement.
float make_q3_quants(int n, int nmax, const float* x, int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = int8_t(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = int8_t(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = int8_t(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Asymmetric quants (scale and min) with a weighted search (ggml make_qkx2_quants).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                       float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                       bool use_mad) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = nmax / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = uint8_t(std::max(0, std::min(nmax, l)));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
      Laux[i] = uint8_t(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, size_t(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < QK; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] =
          uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Q4_K / Q5_K share everything but nmax, the search parameters and packing.
void quantize_qk45(const float* x, uint8_t* y, uint8_t* scales_out, uint8_t* L, int nmax,
                   float rmin, float rdelta, int nstep) {
  uint8_t Laux[32];
  float weights[32], mins[8], scales[8];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                                 rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t* s = scales_out;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
    uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
    ls = std::min<uint8_t>(63, ls);
    lm = std::min<uint8_t>(63, lm);
    if (j < 4) {
      s[j] = ls;
      s[j + 4] = lm;
    } else {
      s[j + 4] = uint8_t((ls & 0xF) | ((lm & 0xF) << 4));
      s[j - 4] |= uint8_t((ls >> 4) << 6);
      s[j] |= uint8_t((lm >> 4) << 6);
    }
  }
  put_fp16(y, max_scale / 63.f);
  put_fp16(y + 2, max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, s, sc, m);
    const float d = fp16(y) * sc;
    if (!d) continue;
    const float dm = fp16(y + 2) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = nearest_int((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = uint8_t(std::max(0, std::min(nmax, l)));
    }
  }
}
}  // namespace

// ---- Q2_K {u8 scales[16]; u8 qs[64]; fp16 d; fp16 dmin}
void dequantize_row_q2_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i) {
    const uint8_t* b = B(src) + 84 * i;
    const float d = fp16(b + 80), min = fp16(b + 82);
    const uint8_t* q = b + 16;
    int is = 0;
    for (int nn = 0; nn < QK; nn += 128, q += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[is++];
          const float dl = d * float(sc & 0xF), ml = min * float(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
        }
  }
}
void quantize_row_q2_K(const float* x, void* dst, int64_t n) {
  uint8_t L[QK], Laux[16];
  float weights[16], mins[16], scales[16];
  const float q4scale = 15.f;
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 84 * i;
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                                   0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = q4scale / max_scale;
      for (int j = 0; j < 16; ++j) y[j] = uint8_t(nearest_int(iscale * scales[j]));
      put_fp16(y + 80, max_scale / q4scale);
    } else {
      for (int j = 0; j < 16; ++j) y[j] = 0;
      put_fp16(y + 80, 0.f);
    }
    if (max_min > 0) {
      const float iscale = q4scale / max_min;
      for (int j = 0; j < 16; ++j) y[j] |= uint8_t(nearest_int(iscale * mins[j]) << 4);
      put_fp16(y + 82, max_min / q4scale);
    } else {
      put_fp16(y + 82, 0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16(y + 80) * float(y[j] & 0xF);
      if (!d) continue;
      const float dm = fp16(y + 82) * float(y[j] >> 4);
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int((x[16 * j + ii] + dm) / d);
        L[16 * j + ii] = uint8_t(std::max(0, std::min(3, l)));
      }
    }
    pack_2bit(L, y + 16);
  }
}

// ---- Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d}
namespace {
int q3k_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  return (lo | (((s[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}
}  // namespace
void dequantize_row_q3_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i) {
    const uint8_t* b = B(src) + 110 * i;
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const uint8_t* s = b + 96;
    const float d_all = fp16(b + 108);
    int is = 0;
    uint8_t m = 1;
    for (int nn = 0; nn < QK; nn += 128, q += 32)
      for (int shift = 0; shift < 8; shift += 2, m = uint8_t(m << 1))
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * float(q3k_scale(s, is++));
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            *y++ = dl * float(int((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
  }
}
void quantize_row_q3_K(const float* x, void* dst, int64_t n) {
  int8_t L[QK];
  float scales[16];
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 110 * i;
    uint8_t* hmask = y;
    uint8_t* s = y + 96;
    float max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
      const float scale = std::fabs(scales[j]);
      if (scale > amax) amax = scale, max_scale = scales[j];
    }
    std::memset(s, 0, 12);
    if (max_scale) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < 16; ++j) {
        int8_t l = int8_t(nearest_int(iscale * scales[j]));
        l = int8_t(std::max(-32, std::min(31, int(l))) + 32);
        if (j < 8)
          s[j] = uint8_t(l & 0xF);
        else
          s[j - 8] |= uint8_t((l & 0xF) << 4);
        l = int8_t(l >> 4);
        s[j % 4 + 8] |= uint8_t(l << (2 * (j / 4)));
      }
      put_fp16(y + 108, 1 / iscale);
    } else {
      put_fp16(y + 108, 0.f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = fp16(y + 108) * float(int8_t(q3k_scale(s, j)));
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-4, std::min(3, l)) + 4);
      }
    }
    std::memset(hmask, 0, 32);
    int m = 0;
    uint8_t hm = 1;
    for (int j = 0; j < QK; ++j) {
      if (L[j] > 3) {
        hmask[m] |= hm;
        L[j] = int8_t(L[j] - 4);
      }
      if (++m == 32) m = 0, hm = uint8_t(hm << 1);
    }
    pack_2bit(reinterpret_cast<const uint8_t*>(L), y + 32);
  }
}

// ---- Q4_K {fp16 d; fp16 dmin; u8 scales[12]; u8 qs[128]}
void dequantize_row_q4_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i) {
    const uint8_t* b = B(src) + 144 * i;
    const float d = fp16(b), min = fp16(b + 2);
    const uint8_t* q = b + 16;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, b + 4, sc, m);
      const float d1 = d * sc, m1 = min * m;
      scale_min_k4(is + 1, b + 4, sc, m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    }
  }
}
void quantize_row_q4_K(const float* x, void* dst, int64_t n) {
  uint8_t L[QK];
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 144 * i;
    quantize_qk45(x, y, y + 4, L, 15, -1.f, 0.1f, 20);
    uint8_t* q = y + 16;
    for (int j = 0; j < QK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
  }
}

// ---- Q5_K {fp16 d; fp16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
void dequantize_row_q5_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i) {
    const uint8_t* b = B(src) + 176 * i;
    const float d = fp16(b), min = fp16(b + 2);
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32, u1 = uint8_t(u1 << 2), u2 = uint8_t(u2 << 2)) {
      uint8_t sc, m;
      scale_min_k4(is, b + 4, sc, m);
      const float d1 = d * sc, m1 = min * m;
      scale_min_k4(is + 1, b + 4, sc, m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}
void quantize_row_q5_K(const float* x, void* dst, int64_t n) {
  uint8_t L[QK];
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 176 * i;
    quantize_qk45(x, y, y + 4, L, 31, -0.5f, 0.1f, 15);
    uint8_t* qh = y + 16;
    uint8_t* ql = y + 48;
    std::memset(qh, 0, 32);
    uint8_t m1 = 1, m2 = 2;
    for (int nn = 0; nn < QK; nn += 64, ql += 32, m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2))
      for (int j = 0; j < 32; ++j) {
        int l1 = L[nn + j], l2 = L[nn + j + 32];
        if (l1 > 15) l1 -= 16, qh[j] |= m1;
        if (l2 > 15) l2 -= 16, qh[j] |= m2;
        ql[j] = uint8_t(l1 | (l2 << 4));
      }
  }
}

// ---- Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d}
void dequantize_row_q6_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i) {
    const uint8_t* b = B(src) + 210 * i;
    const float d = fp16(b + 208);
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    for (int nn = 0; nn < QK; nn += 128, y += 128, ql += 64, qh += 32, sc += 8)
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q1);
        y[l + 32] = d * float(sc[is + 2]) * float(q2);
        y[l + 64] = d * float(sc[is + 4]) * float(q3);
        y[l + 96] = d * float(sc[is + 6]) * float(q4);
      }
  }
}
void quantize_row_q6_K(const float* x, void* dst, int64_t n) {
  int8_t L[QK];
  float scales[16];
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 210 * i;
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = make_qx_quants(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) max_abs_scale = std::fabs(scale), max_scale = scale;
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(y, 0, 210);
      continue;
    }
    const float iscale = -128.f / max_scale;
    put_fp16(y + 208, 1 / iscale);
    int8_t* sc = reinterpret_cast<int8_t*>(y + 192);
    for (int ib = 0; ib < 16; ++ib)
      sc[ib] = int8_t(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = fp16(y + 208) * float(sc[j]);
      if (!d) continue;
      for (int ii = 0; ii < 16; ++ii) {
        const int l = nearest_int(x[16 * j + ii] / d);
        L[16 * j + ii] = int8_t(std::max(-32, std::min(31, l)) + 32);
      }
    }
    uint8_t* ql = y;
    uint8_t* qh = y + 128;
    for (int j = 0; j < QK; j += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF;
        const uint8_t q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = uint8_t(q1 | (q3 << 4));
        ql[l + 32] = uint8_t(q2 | (q4 << 4));
        qh[l] = uint8_t((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                        ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
      }
  }
}

// ---- Q8_K {f32 d; i8 qs[256]; i16 bsums[16]}
void dequantize_row_q8_K(const void* src, float* y, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i, y += QK) {
    const uint8_t* b = B(src) + 292 * i;
    float d;
    std::memcpy(&d, b, 4);
    for (int j = 0; j < QK; ++j) y[j] = d * float(int8_t(b[4 + j]));
  }
}
void quantize_row_q8_K(const float* x, void* dst, int64_t n) {
  for (int64_t i = 0; i < n / QK; ++i, x += QK) {
    uint8_t* y = B(dst) + 292 * i;
    float max = 0, amax = 0;
    for (int j = 0; j < QK; ++j)
      if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
    if (!amax) {
      std::memset(y, 0, 292);
      continue;
    }
    const float iscale = -127.f / max;
    int8_t* qs = reinterpret_cast<int8_t*>(y + 4);
    for (int j = 0; j < QK; ++j) qs[j] = int8_t(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < 16; ++j) {
      int16_t sum = 0;
      for (int ii = 0; ii < 16; ++ii) sum = int16_t(sum + qs[16 * j + ii]);
      std::memcpy(y + 260 + 2 * j, &sum, 2);
    }
    const float d = 1 / iscale;
    std::memcpy(y, &d, 4);
  }
}

}  // namespace rlx::quant::detail
