// The group kernels of row_groups.h (q4_0, q8_0, q4_K, q5_K, q6_K): AVX2 (two halves of 8
// rows, maddubs) and AVX-512 VNNI (16 rows per vpdpbusd). Each block's integer sum is exact and
// is added as fma(float(sum), d_w * d_a, total), as the portable kernel does,
// so all three give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "quant/row_groups.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() to the unmasked
// intrinsics, which -Wmaybe-uninitialized reports falsely (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_GROUPS_AVX2 __attribute__((target("avx2,fma,f16c")))
#define RLX_GROUPS_VNNI512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vnni")))

namespace rlx::quant::detail {
namespace {

// A block's V lines of quants, kAhead bytes ahead of the block being summed:
// the hardware prefetcher alone left one core's GEMV waiting on memory (q4_0
// decode of the 100M test model on Zen 5, 1 thread: 361 tok/s without, 514
// with 4 KiB ahead; 1 and 16 KiB gave 389 and 507).
constexpr int64_t kAhead = 4096;
template <int64_t V>
inline void prefetch_ahead(const uint8_t* q) {
  for (int64_t j = 0; j < V; ++j)
    _mm_prefetch(reinterpret_cast<const char*>(q + kAhead + j * 64), _MM_HINT_T0);
}
// A K-quant super-block of `stride` bytes is read in 4 steps; step i
// prefetches the i-th quarter of the bytes kAhead past the super-block, so
// its scales and high bits are fetched ahead too, not only its nibbles (the
// q5_K / q6_K kernels waited on those: slower than the file layout until then).
inline void prefetch_quarter(const uint8_t* sb, size_t stride, int64_t i) {
  const size_t quarter = (stride / 4 + 63) / 64 * 64;
  for (size_t o = size_t(i) * quarter; o < std::min(stride, size_t(i + 1) * quarter); o += 64)
    _mm_prefetch(reinterpret_cast<const char*>(sb + kAhead + o), _MM_HINT_T0);
}

inline int32_t i32at(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 4 activation quants that meet dword lane j of every row.

// Block sums start at -8 sum(a) (q4_0: nibbles taken unsigned) or, on VNNI,
// -128 sum(a) (q8_0 taken as q + 128, since vpdpbusd's first operand is unsigned).

// u8 x s8 pairs -> i32 per 4 bytes; q4_0's nibbles are unsigned as stored,
// q8_0 moves its sign onto the activation (|q| <= 128, |a| <= 127: no
// saturation of maddubs' 16-bit pair sums).
template <bool kQ4>
RLX_GROUPS_AVX2 inline __m256i dot_avx2(__m256i w, __m256i act) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kQ4) return _mm256_madd_epi16(_mm256_maddubs_epi16(w, act), ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(act, w)),
                           ones);
}

template <bool kQ4>
RLX_GROUPS_AVX2 void q_blocks_avx2(const uint8_t* g, size_t scale_bytes, int64_t nb,
                                   const GroupActivation& a, float* out) {
  constexpr int64_t V = kQ4 ? 4 : 8;
  const uint8_t* q = g + scale_bytes;
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b, q += V * 64) {
    const uint8_t* ab = q8_0_quants(a, b);
    prefetch_ahead<V>(q);
    const __m256i start = _mm256_set1_epi32(kQ4 ? -8 * a.sum[b] : 0);
    __m256i s[2][2] = {{start, _mm256_setzero_si256()}, {start, _mm256_setzero_si256()}};
    for (int64_t j = 0; j < V; ++j) {
      const __m256i lo_act = _mm256_set1_epi32(i32at(ab + 4 * j));
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + j * 64 + h * 32));
        if constexpr (kQ4) {
          const __m256i hi_act = _mm256_set1_epi32(i32at(ab + 16 + 4 * j));
          s[h][0] = _mm256_add_epi32(s[h][0], dot_avx2<true>(_mm256_and_si256(v, low), lo_act));
          s[h][1] = _mm256_add_epi32(
              s[h][1], dot_avx2<true>(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), hi_act));
        } else {
          s[h][j % 2] = _mm256_add_epi32(s[h][j % 2], dot_avx2<false>(v, lo_act));
        }
      }
    }
    const __m256 da = _mm256_set1_ps(a.d[b]);
    for (int h = 0; h < 2; ++h) {
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(g + b * 32 + h * 16)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(s[h][0], s[h][1])),
                               _mm256_mul_ps(dw, da), acc[h]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// R activation rows (1..4) against one q4_0 / q8_0 group: each weight vector is loaded (and
// q4_0's unpacked) once for every row, out[r * ldo + 0..15]; each row's sums and their order
// are the one-row kernel's, so its result is the same bits.
template <bool kQ4, int R>
RLX_GROUPS_VNNI512 void q_blocks_vnni_rows(const uint8_t* g, size_t scale_bytes, int64_t nb,
                                           const GroupActivation* a, float* out, int64_t ldo) {
  constexpr int64_t V = kQ4 ? 4 : 8;
  const uint8_t* q = g + scale_bytes;
  const __m512i low = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8(char(0x80));
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += V * 64) {
    const uint8_t* ab[R];
    // Two chains of vpdpbusd per block and row, added at its end.
    __m512i s0[R], s1[R];
    for (int r = 0; r < R; ++r) {
      ab[r] = q8_0_quants(a[r], b);
      s0[r] = _mm512_set1_epi32((kQ4 ? -8 : -128) * a[r].sum[b]);
      s1[r] = _mm512_setzero_si512();
    }
    prefetch_ahead<V>(q);
    for (int64_t j = 0; j < V; ++j) {
      const __m512i v = _mm512_load_si512(q + j * 64);
      if constexpr (kQ4) {
        const __m512i lo = _mm512_and_si512(v, low),
                      hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        for (int r = 0; r < R; ++r) {
          s0[r] = _mm512_dpbusd_epi32(s0[r], lo, _mm512_set1_epi32(i32at(ab[r] + 4 * j)));
          s1[r] = _mm512_dpbusd_epi32(s1[r], hi, _mm512_set1_epi32(i32at(ab[r] + 16 + 4 * j)));
        }
      } else {
        const __m512i u = _mm512_xor_si512(v, flip);
        for (int r = 0; r < R; ++r) {
          __m512i& chain = j % 2 == 0 ? s0[r] : s1[r];
          chain = _mm512_dpbusd_epi32(chain, u, _mm512_set1_epi32(i32at(ab[r] + 4 * j)));
        }
      }
    }
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(g + b * 32)));
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0[r], s1[r])),
                               _mm512_mul_ps(dw, _mm512_set1_ps(a[r].d[b])), acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * ldo, acc[r]);
}

template <bool kQ4>
RLX_GROUPS_VNNI512 void q_blocks_vnni(const uint8_t* g, size_t scale_bytes, int64_t nb,
                                      const GroupActivation& a, float* out) {
  q_blocks_vnni_rows<kQ4, 1>(g, scale_bytes, nb, &a, out, 0);
}

template <bool kQ4>
void q_blocks_vnni_any_rows(const uint8_t* g, size_t scale_bytes, int64_t nb,
                            const GroupActivation* a, int rows, float* out, int64_t ldo) {
  switch (rows) {
    case 1:
      return q_blocks_vnni_rows<kQ4, 1>(g, scale_bytes, nb, a, out, ldo);
    case 2:
      return q_blocks_vnni_rows<kQ4, 2>(g, scale_bytes, nb, a, out, ldo);
    case 3:
      return q_blocks_vnni_rows<kQ4, 3>(g, scale_bytes, nb, a, out, ldo);
    default:
      return q_blocks_vnni_rows<kQ4, 4>(g, scale_bytes, nb, a, out, ldo);
  }
}

// q4_K / q5_K, per super-block: for each sub-block pair p the sums of both
// sub-blocks (lo, hi), times their scales, summed as integers; the mins times
// the activation's sub-block sums likewise. q5_K's fifth bits: bit 2p / 2p+1
// of each qh byte, moved to bit 4 with 16-bit shifts (the bits never cross a
// byte, since they are taken from bit 7 down).
inline const uint8_t* qs_vectors(const uint8_t* sb, int64_t p) {
  return sb + kKQuants + p * 8 * 64;
}
inline int32_t sub_block_sum(const GroupActivation& a, int64_t s, int64_t j) {
  return a.sum[s * 16 + 2 * j] + a.sum[s * 16 + 2 * j + 1];  // two bsums of 16
}

template <bool kFive>
RLX_GROUPS_AVX2 void q45_K_avx2(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                                const GroupActivation& a, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  constexpr size_t stride = kFive ? kQ5KGroupBytes : kQ4KGroupBytes;
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * stride;
    const uint8_t* aq = q8_K_quants(a, s);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t p = 0; p < 4; ++p) {
      const uint8_t* q = qs_vectors(sb, p);
      prefetch_quarter(sb, stride, p);
      const __m128i shift = _mm_cvtsi32_si128(int(2 * p));
      __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      __m256i hi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int64_t j = 0; j < 8; ++j) {
        const __m256i lo_act = _mm256_set1_epi32(i32at(aq + 64 * p + 4 * j));
        const __m256i hi_act = _mm256_set1_epi32(i32at(aq + 64 * p + 32 + 4 * j));
        for (int h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(q + j * 64 + h * 32));
          __m256i ql = _mm256_and_si256(v, low),
                  qh = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
          if constexpr (kFive) {
            const __m256i bits = _mm256_srl_epi16(
                _mm256_load_si256(
                    reinterpret_cast<const __m256i*>(sb + kQ4KGroupBytes + j * 64 + h * 32)),
                shift);
            ql = _mm256_or_si256(ql, _mm256_and_si256(_mm256_slli_epi16(bits, 4), bit4));
            qh = _mm256_or_si256(qh, _mm256_and_si256(_mm256_slli_epi16(bits, 3), bit4));
          }
          lo[h] = _mm256_add_epi32(lo[h], dot_avx2<true>(ql, lo_act));
          hi[h] = _mm256_add_epi32(hi[h], dot_avx2<true>(qh, hi_act));
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i sc_lo = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kKScales + 2 * p * 16 + h * 8)));
        const __m256i sc_hi = _mm256_cvtepu8_epi32(_mm_loadl_epi64(
            reinterpret_cast<const __m128i*>(sb + kKScales + (2 * p + 1) * 16 + h * 8)));
        isum[h] = _mm256_add_epi32(isum[h], _mm256_add_epi32(_mm256_mullo_epi32(lo[h], sc_lo),
                                                             _mm256_mullo_epi32(hi[h], sc_hi)));
      }
    }
    const __m256 da = _mm256_set1_ps(a.d[s]);
    for (int h = 0; h < 2; ++h) {
      __m256i msum = _mm256_setzero_si256();
      for (int64_t j = 0; j < 8; ++j) {
        const __m256i m = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kKMins + j * 16 + h * 8)));
        msum = _mm256_add_epi32(msum,
                                _mm256_mullo_epi32(m, _mm256_set1_epi32(sub_block_sum(a, s, j))));
      }
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + h * 16)));
      const __m256 dm =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKDmin + h * 16)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(dw, da), acc[h]);
      acc[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dm, da), acc[h]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// R activation rows (1..4) against one group: each 64-byte vector of weights is unpacked once
// and multiplied into every row's sums (batched decode), out[r * ldo + 0..15]. Each row's sums
// and their order are the one-row kernel's, so its result is the same bits.
template <bool kFive, int R>
RLX_GROUPS_VNNI512 void q45_K_vnni_rows(const uint8_t* g, int64_t nsb, const GroupActivation* a,
                                        float* out, int64_t ldo) {
  const __m512i low = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  constexpr size_t stride = kFive ? kQ5KGroupBytes : kQ4KGroupBytes;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * stride;
    const uint8_t* aq[R];
    __m512i isum[R];
    for (int r = 0; r < R; ++r) aq[r] = q8_K_quants(a[r], s), isum[r] = _mm512_setzero_si512();
    for (int64_t p = 0; p < 4; ++p) {
      const uint8_t* q = qs_vectors(sb, p);
      prefetch_quarter(sb, stride, p);
      const __m128i shift = _mm_cvtsi32_si128(int(2 * p));
      __m512i lo[R], hi[R];
      for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_si512();
      for (int64_t j = 0; j < 8; ++j) {
        const __m512i v = _mm512_load_si512(q + j * 64);
        __m512i ql = _mm512_and_si512(v, low), qh = _mm512_and_si512(_mm512_srli_epi16(v, 4), low);
        if constexpr (kFive) {
          const __m512i bits =
              _mm512_srl_epi16(_mm512_load_si512(sb + kQ4KGroupBytes + j * 64), shift);
          ql = _mm512_or_si512(ql, _mm512_and_si512(_mm512_slli_epi16(bits, 4), bit4));
          qh = _mm512_or_si512(qh, _mm512_and_si512(_mm512_slli_epi16(bits, 3), bit4));
        }
        for (int r = 0; r < R; ++r) {
          lo[r] = _mm512_dpbusd_epi32(lo[r], ql, _mm512_set1_epi32(i32at(aq[r] + 64 * p + 4 * j)));
          hi[r] =
              _mm512_dpbusd_epi32(hi[r], qh, _mm512_set1_epi32(i32at(aq[r] + 64 * p + 32 + 4 * j)));
        }
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKScales + 2 * p * 16)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKScales + (2 * p + 1) * 16)));
      for (int r = 0; r < R; ++r)
        isum[r] = _mm512_add_epi32(isum[r], _mm512_add_epi32(_mm512_mullo_epi32(lo[r], sc_lo),
                                                             _mm512_mullo_epi32(hi[r], sc_hi)));
    }
    __m512i msum[R];
    for (int r = 0; r < R; ++r) msum[r] = _mm512_setzero_si512();
    for (int64_t j = 0; j < 8; ++j) {
      const __m512i m = _mm512_cvtepu8_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKMins + j * 16)));
      for (int r = 0; r < R; ++r)
        msum[r] = _mm512_add_epi32(
            msum[r], _mm512_mullo_epi32(m, _mm512_set1_epi32(sub_block_sum(a[r], s, j))));
    }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb)));
    const __m512 dm =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + kKDmin)));
    for (int r = 0; r < R; ++r) {
      const __m512 da = _mm512_set1_ps(a[r].d[s]);
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]), _mm512_mul_ps(dw, da), acc[r]);
      acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum[r]), _mm512_mul_ps(dm, da), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * ldo, acc[r]);
}

template <bool kFive>
RLX_GROUPS_VNNI512 void q45_K_vnni(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                                   const GroupActivation& a, float* out) {
  q45_K_vnni_rows<kFive, 1>(g, nsb, &a, out, 0);
}

template <bool kFive>
void q45_K_vnni_any_rows(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                         const GroupActivation* a, int rows, float* out, int64_t ldo) {
  switch (rows) {
    case 1:
      return q45_K_vnni_rows<kFive, 1>(g, nsb, a, out, ldo);
    case 2:
      return q45_K_vnni_rows<kFive, 2>(g, nsb, a, out, ldo);
    case 3:
      return q45_K_vnni_rows<kFive, 3>(g, nsb, a, out, ldo);
    default:
      return q45_K_vnni_rows<kFive, 4>(g, nsb, a, out, ldo);
  }
}

// q6_K, per super-block: for each half h and ql column c, the ql vector's
// low nibbles are quarter e = c, its high nibbles quarter e = c + 2 (32
// elements each, two sub-blocks of 16), topped with qh's bits 2e..2e+1 at
// bits 4-5. Each sub-block's sum starts at -32 sum(a) (the quants are q + 32)
// and is multiplied by its signed scale.
inline const uint8_t* ql_vectors(const uint8_t* sb, int64_t h, int64_t c) {
  return sb + kKQuants + (h * 2 + c) * 8 * 64;
}
inline const uint8_t* qh_vectors(const uint8_t* sb, int64_t h) {
  return sb + kQ6KQhAt + h * 8 * 64;
}

RLX_GROUPS_AVX2 void q6_K_avx2(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                               const GroupActivation& a, float* out) {
  const __m256i low = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * kQ6KGroupBytes;
    const uint8_t* aq = q8_K_quants(a, s);
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < 2; ++c) {
        const uint8_t* ql = ql_vectors(sb, h, c);
        const uint8_t* qhv = qh_vectors(sb, h);
        prefetch_quarter(sb, kQ6KGroupBytes, 2 * h + c);
        const __m128i up = _mm_cvtsi32_si128(int(4 - 2 * c)), down = _mm_cvtsi32_si128(int(2 * c));
        // Sub-blocks 8h + 2e + k of quarter e = c (lo) and e = c + 2 (hi).
        const int64_t slo = s * 16 + 8 * h + 2 * c, shi = slo + 4;
        __m256i lo[2][2], hi[2][2];
        for (int r = 0; r < 2; ++r)
          for (int k = 0; k < 2; ++k) {
            lo[r][k] = _mm256_set1_epi32(-32 * a.sum[slo + k]);
            hi[r][k] = _mm256_set1_epi32(-32 * a.sum[shi + k]);
          }
        for (int64_t j = 0; j < 8; ++j) {
          const __m256i lo_act = _mm256_set1_epi32(i32at(aq + 128 * h + 32 * c + 4 * j));
          const __m256i hi_act = _mm256_set1_epi32(i32at(aq + 128 * h + 64 + 32 * c + 4 * j));
          for (int r = 0; r < 2; ++r) {
            const __m256i v =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(ql + j * 64 + r * 32));
            const __m256i b =
                _mm256_load_si256(reinterpret_cast<const __m256i*>(qhv + j * 64 + r * 32));
            const __m256i qlo = _mm256_or_si256(_mm256_and_si256(v, low),
                                                _mm256_and_si256(_mm256_sll_epi16(b, up), top));
            const __m256i qhi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                                                _mm256_and_si256(_mm256_srl_epi16(b, down), top));
            lo[r][j / 4] = _mm256_add_epi32(lo[r][j / 4], dot_avx2<true>(qlo, lo_act));
            hi[r][j / 4] = _mm256_add_epi32(hi[r][j / 4], dot_avx2<true>(qhi, hi_act));
          }
        }
        for (int r = 0; r < 2; ++r)
          for (int k = 0; k < 2; ++k) {
            const int64_t at_lo = (8 * h + 2 * c + k) * 16 + r * 8, at_hi = at_lo + 4 * 16;
            const __m256i sc_lo = _mm256_cvtepi8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kKScales + at_lo)));
            const __m256i sc_hi = _mm256_cvtepi8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + kKScales + at_hi)));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(lo[r][k], sc_lo));
            isum[r] = _mm256_add_epi32(isum[r], _mm256_mullo_epi32(hi[r][k], sc_hi));
          }
      }
    const __m256 da = _mm256_set1_ps(a.d[s]);
    for (int r = 0; r < 2; ++r) {
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + r * 16)));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_mul_ps(dw, da), acc[r]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

// R activation rows (1..4) against one q6_K group: each 64-byte vector of quants is unpacked
// once for every row, out[r * ldo + 0..15]; each row's sums and their order are the one-row
// kernel's, so its result is the same bits.
template <int R>
RLX_GROUPS_VNNI512 void q6_K_vnni_rows(const uint8_t* g, int64_t nsb, const GroupActivation* a,
                                       float* out, int64_t ldo) {
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * kQ6KGroupBytes;
    const uint8_t* aq[R];
    __m512i isum[R];
    for (int r = 0; r < R; ++r) aq[r] = q8_K_quants(a[r], s), isum[r] = _mm512_setzero_si512();
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < 2; ++c) {
        const uint8_t* ql = ql_vectors(sb, h, c);
        const uint8_t* qhv = qh_vectors(sb, h);
        prefetch_quarter(sb, kQ6KGroupBytes, 2 * h + c);
        const __m128i up = _mm_cvtsi32_si128(int(4 - 2 * c)), down = _mm_cvtsi32_si128(int(2 * c));
        const int64_t slo = s * 16 + 8 * h + 2 * c, shi = slo + 4;
        __m512i lo[R][2], hi[R][2];
        for (int r = 0; r < R; ++r)
          for (int k = 0; k < 2; ++k) {
            lo[r][k] = _mm512_set1_epi32(-32 * a[r].sum[slo + k]);
            hi[r][k] = _mm512_set1_epi32(-32 * a[r].sum[shi + k]);
          }
        for (int64_t j = 0; j < 8; ++j) {
          const __m512i v = _mm512_load_si512(ql + j * 64), b = _mm512_load_si512(qhv + j * 64);
          const __m512i qlo = _mm512_or_si512(_mm512_and_si512(v, low),
                                              _mm512_and_si512(_mm512_sll_epi16(b, up), top));
          const __m512i qhi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                              _mm512_and_si512(_mm512_srl_epi16(b, down), top));
          for (int r = 0; r < R; ++r) {
            lo[r][j / 4] = _mm512_dpbusd_epi32(
                lo[r][j / 4], qlo, _mm512_set1_epi32(i32at(aq[r] + 128 * h + 32 * c + 4 * j)));
            hi[r][j / 4] = _mm512_dpbusd_epi32(
                hi[r][j / 4], qhi, _mm512_set1_epi32(i32at(aq[r] + 128 * h + 64 + 32 * c + 4 * j)));
          }
        }
        for (int k = 0; k < 2; ++k) {
          const int64_t at_lo = (8 * h + 2 * c + k) * 16, at_hi = at_lo + 4 * 16;
          const __m512i sc_lo = _mm512_cvtepi8_epi32(
              _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKScales + at_lo)));
          const __m512i sc_hi = _mm512_cvtepi8_epi32(
              _mm_load_si128(reinterpret_cast<const __m128i*>(sb + kKScales + at_hi)));
          for (int r = 0; r < R; ++r) {
            isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(lo[r][k], sc_lo));
            isum[r] = _mm512_add_epi32(isum[r], _mm512_mullo_epi32(hi[r][k], sc_hi));
          }
        }
      }
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb)));
    for (int r = 0; r < R; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r]),
                               _mm512_mul_ps(dw, _mm512_set1_ps(a[r].d[s])), acc[r]);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * ldo, acc[r]);
}

RLX_GROUPS_VNNI512 void q6_K_vnni(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                                  const GroupActivation& a, float* out) {
  q6_K_vnni_rows<1>(g, nsb, &a, out, 0);
}

void q6_K_vnni_any_rows(const uint8_t* g, size_t /*no scale section*/, int64_t nsb,
                        const GroupActivation* a, int rows, float* out, int64_t ldo) {
  switch (rows) {
    case 1:
      return q6_K_vnni_rows<1>(g, nsb, a, out, ldo);
    case 2:
      return q6_K_vnni_rows<2>(g, nsb, a, out, ldo);
    case 3:
      return q6_K_vnni_rows<3>(g, nsb, a, out, ldo);
    default:
      return q6_K_vnni_rows<4>(g, nsb, a, out, ldo);
  }
}

// One ISA's kernels in the order q4_0, q8_0, q4_K, q5_K, q6_K.
using Kernels = GroupDotFn[5];
constexpr Kernels kAvx2 = {q_blocks_avx2<true>, q_blocks_avx2<false>, q45_K_avx2<false>,
                           q45_K_avx2<true>, q6_K_avx2};
constexpr Kernels kVnni = {q_blocks_vnni<true>, q_blocks_vnni<false>, q45_K_vnni<false>,
                           q45_K_vnni<true>, q6_K_vnni};

GroupDotFn kernel_for(const Kernels& k, GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return k[0];
    case GgmlType::Q8_0:
      return k[1];
    case GgmlType::Q4_K:
      return k[2];
    case GgmlType::Q5_K:
      return k[3];
    case GgmlType::Q6_K:
      return k[4];
    default:
      return nullptr;
  }
}

}  // namespace

GroupDotFn group_dot_avx2(GgmlType type) { return kernel_for(kAvx2, type); }
GroupDotFn group_dot_vnni(GgmlType type) { return kernel_for(kVnni, type); }
GroupDotRowsFn group_dot_rows_vnni(GgmlType type) {
  switch (type) {
    case GgmlType::Q4_0:
      return q_blocks_vnni_any_rows<true>;
    case GgmlType::Q8_0:
      return q_blocks_vnni_any_rows<false>;
    case GgmlType::Q4_K:
      return q45_K_vnni_any_rows<false>;
    case GgmlType::Q5_K:
      return q45_K_vnni_any_rows<true>;
    case GgmlType::Q6_K:
      return q6_K_vnni_any_rows;
    default:
      return nullptr;
  }
}

}  // namespace rlx::quant::detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
