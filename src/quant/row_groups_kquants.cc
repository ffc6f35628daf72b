// The K-quant side of row_groups.h: q4_K / q5_K / q6_K super-blocks
// regrouped, and their portable group kernels (the references the SIMD ones
// equal bit for bit). Offsets inside a regrouped super-block are those of
// row_groups.h's layout table.
#include <cmath>
#include <cstring>

#include "quant/quant_impl.h"
#include "quant/row_groups.h"

namespace rlx::quant::detail {
namespace {

constexpr int64_t R = kGroupRows;

// Row r's dword j of a 64-byte vector at v.
const uint8_t* lane(const uint8_t* v, int64_t r) { return v + r * 4; }

// q4_K / q5_K: d, dmin, the unpacked scales and mins, the nibbles, and for
// q5_K the fifth bits (qh) as 8 vectors after them.
void regroup_q45_K(bool five, const uint8_t* row, int64_t nsb, int64_t r, uint8_t* g) {
  const size_t bytes = five ? 176 : 144, qs_at = five ? 48 : 16;
  const size_t stride = five ? kQ5KGroupBytes : kQ4KGroupBytes;
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = row + size_t(s) * bytes;  // d, dmin, scales[12], [qh[32]], qs[128]
    uint8_t* sb = g + size_t(s) * stride;
    std::memcpy(sb + r * 2, blk, 2);
    std::memcpy(sb + kKDmin + r * 2, blk + 2, 2);
    for (int j = 0; j < 8; ++j)
      scale_min_k4(j, blk + 4, sb[kKScales + j * R + r], sb[kKMins + j * R + r]);
    for (int64_t v = 0; v < 32; ++v)  // vector (p, j) = v holds qs[32p + 4j..]
      std::memcpy(sb + kKQuants + v * 64 + r * 4, blk + qs_at + 4 * v, 4);
    if (five)
      for (int64_t j = 0; j < 8; ++j)
        std::memcpy(sb + kQ4KGroupBytes + j * 64 + r * 4, blk + 16 + 4 * j, 4);
  }
}

// q6_K: d, the 16 signed scales, ql as vectors (h, c, j) = bytes 64h + 32c +
// 4j.. and qh as vectors (h, j) = bytes 32h + 4j...
void regroup_q6_K(const uint8_t* row, int64_t nsb, int64_t r, uint8_t* g) {
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* blk = row + size_t(s) * 210;  // ql[128], qh[64], scales[16], d
    uint8_t* sb = g + size_t(s) * kQ6KGroupBytes;
    std::memcpy(sb + r * 2, blk + 208, 2);
    for (int64_t k = 0; k < 16; ++k) sb[kKScales + k * R + r] = blk[192 + k];
    for (int64_t v = 0; v < 32; ++v) std::memcpy(sb + kKQuants + v * 64 + r * 4, blk + 4 * v, 4);
    for (int64_t v = 0; v < 16; ++v)
      std::memcpy(sb + kQ6KQhAt + v * 64 + r * 4, blk + 128 + 4 * v, 4);
  }
}

// Sums of one row: sum_j sc_j sum(q a) and sum_j m_j sum(a) per super-block,
// added as fma(isum, d d_a) and fma(msum, -(dmin d_a)).
void dot_q45_K(bool five, const uint8_t* g, int64_t nsb, const GroupActivation& a, float* out) {
  const size_t stride = five ? kQ5KGroupBytes : kQ4KGroupBytes;
  for (int64_t r = 0; r < R; ++r) {
    float acc = 0.f;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = g + size_t(s) * stride;
      const int8_t* aq = reinterpret_cast<const int8_t*>(q8_K_quants(a, s));
      int32_t isum = 0, msum = 0;
      for (int64_t p = 0; p < 4; ++p) {
        int32_t lo = 0, hi = 0;
        for (int64_t i = 0; i < 32; ++i) {  // element i of both sub-blocks of pair p
          const uint8_t q = lane(sb + kKQuants + (p * 8 + i / 4) * 64, r)[i % 4];
          const uint8_t h = five ? lane(sb + kQ4KGroupBytes + (i / 4) * 64, r)[i % 4] : 0;
          lo += (int32_t(q & 0x0F) | (((h >> (2 * p)) & 1) << 4)) * aq[64 * p + i];
          hi += (int32_t(q >> 4) | (((h >> (2 * p + 1)) & 1) << 4)) * aq[64 * p + 32 + i];
        }
        isum += sb[kKScales + (2 * p) * R + r] * lo + sb[kKScales + (2 * p + 1) * R + r] * hi;
      }
      for (int64_t j = 0; j < 8; ++j)
        msum += sb[kKMins + j * R + r] * (a.sum[s * 16 + 2 * j] + a.sum[s * 16 + 2 * j + 1]);
      acc = std::fma(float(isum), fp16(sb + r * 2) * a.d[s], acc);
      acc = std::fma(float(msum), -(fp16(sb + kKDmin + r * 2) * a.d[s]), acc);
    }
    out[r] = acc;
  }
}

// q6_K: sum_k sc_k sum((q - 32) a) over the 16 sub-blocks of 16, as
// fma(isum, d d_a).
void dot_q6_K(const uint8_t* g, int64_t nsb, const GroupActivation& a, float* out) {
  for (int64_t r = 0; r < R; ++r) {
    float acc = 0.f;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = g + size_t(s) * kQ6KGroupBytes;
      const int8_t* aq = reinterpret_cast<const int8_t*>(q8_K_quants(a, s));
      int32_t isum = 0;
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t e = 0; e < 4; ++e) {  // elements 128h + 32e + l, l < 32
          int32_t sub[2] = {0, 0};
          for (int64_t l = 0; l < 32; ++l) {
            const uint8_t ql = lane(sb + kKQuants + ((h * 2 + e % 2) * 8 + l / 4) * 64, r)[l % 4];
            const uint8_t qh = lane(sb + kQ6KQhAt + (h * 8 + l / 4) * 64, r)[l % 4];
            const int32_t q = ((e < 2 ? ql & 0x0F : ql >> 4) | (((qh >> (2 * e)) & 3) << 4)) - 32;
            sub[l / 16] += q * aq[128 * h + 32 * e + l];
          }
          for (int64_t k = 0; k < 2; ++k)
            isum += int32_t(int8_t(sb[kKScales + (8 * h + 2 * e + k) * R + r])) * sub[k];
        }
      acc = std::fma(float(isum), fp16(sb + r * 2) * a.d[s], acc);
    }
    out[r] = acc;
  }
}

}  // namespace

size_t k_group_bytes(GgmlType t) {
  return t == GgmlType::Q6_K   ? kQ6KGroupBytes
         : t == GgmlType::Q5_K ? kQ5KGroupBytes
                               : kQ4KGroupBytes;
}

void regroup_k_row(GgmlType t, const uint8_t* row, int64_t nsb, int64_t r, uint8_t* g) {
  if (t == GgmlType::Q6_K) return regroup_q6_K(row, nsb, r, g);
  regroup_q45_K(t == GgmlType::Q5_K, row, nsb, r, g);
}

void group_dot_k_portable(GgmlType t, const uint8_t* g, int64_t nsb, const GroupActivation& a,
                          float* out) {
  if (t == GgmlType::Q6_K) return dot_q6_K(g, nsb, a, out);
  dot_q45_K(t == GgmlType::Q5_K, g, nsb, a, out);
}

}  // namespace rlx::quant::detail
