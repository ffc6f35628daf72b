// The group kernels of row_groups.h (q4_0, q8_0, q4_K): AVX2 (two halves of 8
// rows, maddubs) and AVX-512 VNNI (16 rows per vpdpbusd). Each block's integer sum is exact and
// is added as fma(float(sum), d_w * d_a, total), as the portable kernel does,
// so all three give the same bits.
#include <immintrin.h>

#include <cstring>

#include "quant/row_groups.h"

// GCC 12's AVX-512 headers pass _mm512_undefined_*() to the unmasked
// intrinsics, which -Wmaybe-uninitialized reports falsely (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_AVX2 __attribute__((target("avx2,fma,f16c")))
#define RLX_VNNI512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vnni")))

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

inline int32_t u32at(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 4 activation quants that meet dword lane j of every row.
inline const uint8_t* act_quants(const GroupActivation& a, int64_t b) { return a.q8 + b * 34 + 2; }

// Block sums start at -8 sum(a) (q4_0: nibbles taken unsigned) or, on VNNI,
// -128 sum(a) (q8_0 taken as q + 128, since vpdpbusd's first operand is unsigned).

// u8 x s8 pairs -> i32 per 4 bytes; q4_0's nibbles are unsigned as stored,
// q8_0 moves its sign onto the activation (|q| <= 128, |a| <= 127: no
// saturation of maddubs' 16-bit pair sums).
template <bool kQ4>
RLX_AVX2 inline __m256i dot_avx2(__m256i w, __m256i act) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (kQ4) return _mm256_madd_epi16(_mm256_maddubs_epi16(w, act), ones);
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(act, w)),
                           ones);
}

template <bool kQ4>
RLX_AVX2 void group_dot_avx2(const uint8_t* g, size_t scale_bytes, int64_t nb,
                             const GroupActivation& a, float* out) {
  constexpr int64_t V = kQ4 ? 4 : 8;
  const uint8_t* q = g + scale_bytes;
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < nb; ++b, q += V * 64) {
    const uint8_t* ab = act_quants(a, b);
    prefetch_ahead<V>(q);
    const __m256i start = _mm256_set1_epi32(kQ4 ? -8 * a.sum[b] : 0);
    __m256i s[2][2] = {{start, _mm256_setzero_si256()}, {start, _mm256_setzero_si256()}};
    for (int64_t j = 0; j < V; ++j) {
      const __m256i lo_act = _mm256_set1_epi32(u32at(ab + 4 * j));
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(q + j * 64 + h * 32));
        if constexpr (kQ4) {
          const __m256i hi_act = _mm256_set1_epi32(u32at(ab + 16 + 4 * j));
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

template <bool kQ4>
RLX_VNNI512 void group_dot_vnni(const uint8_t* g, size_t scale_bytes, int64_t nb,
                                const GroupActivation& a, float* out) {
  constexpr int64_t V = kQ4 ? 4 : 8;
  const uint8_t* q = g + scale_bytes;
  const __m512i low = _mm512_set1_epi8(0x0F), flip = _mm512_set1_epi8(char(0x80));
  __m512 acc = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b, q += V * 64) {
    const uint8_t* ab = act_quants(a, b);
    prefetch_ahead<V>(q);
    // Two chains of vpdpbusd per block, added at its end.
    __m512i s0 = _mm512_set1_epi32((kQ4 ? -8 : -128) * a.sum[b]), s1 = _mm512_setzero_si512();
    for (int64_t j = 0; j < V; ++j) {
      const __m512i v = _mm512_load_si512(q + j * 64);
      const __m512i lo_act = _mm512_set1_epi32(u32at(ab + 4 * j));
      if constexpr (kQ4) {
        const __m512i hi_act = _mm512_set1_epi32(u32at(ab + 16 + 4 * j));
        s0 = _mm512_dpbusd_epi32(s0, _mm512_and_si512(v, low), lo_act);
        s1 = _mm512_dpbusd_epi32(s1, _mm512_and_si512(_mm512_srli_epi16(v, 4), low), hi_act);
      } else if (j % 2 == 0) {
        s0 = _mm512_dpbusd_epi32(s0, _mm512_xor_si512(v, flip), lo_act);
      } else {
        s1 = _mm512_dpbusd_epi32(s1, _mm512_xor_si512(v, flip), lo_act);
      }
    }
    const __m512 dw =
        _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(g + b * 32)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)),
                          _mm512_mul_ps(dw, _mm512_set1_ps(a.d[b])), acc);
  }
  _mm512_storeu_ps(out, acc);
}

// q4_K, per super-block: for each sub-block pair p the nibble sums of both
// sub-blocks (s_lo, s_hi), times their scales, summed as integers; the mins
// times the activation's sub-block sums likewise.
inline const uint8_t* q4k_quants(const uint8_t* sb, int64_t p) { return sb + 320 + p * 8 * 64; }

RLX_AVX2 void group_dot_q4_K_avx2_impl(const uint8_t* g, int64_t nsb, const GroupActivation& a,
                                       float* out) {
  const __m256i low = _mm256_set1_epi8(0x0F);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * kQ4KGroupBytes;
    const uint8_t* aq = a.q8 + s * 292 + 4;
    __m256i isum[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int64_t p = 0; p < 4; ++p) {
      const uint8_t* q = q4k_quants(sb, p);
      prefetch_ahead<8>(q);
      __m256i lo[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      __m256i hi[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      for (int64_t j = 0; j < 8; ++j) {
        const __m256i lo_act = _mm256_set1_epi32(u32at(aq + 64 * p + 4 * j));
        const __m256i hi_act = _mm256_set1_epi32(u32at(aq + 64 * p + 32 + 4 * j));
        for (int h = 0; h < 2; ++h) {
          const __m256i v =
              _mm256_load_si256(reinterpret_cast<const __m256i*>(q + j * 64 + h * 32));
          lo[h] = _mm256_add_epi32(lo[h], dot_avx2<true>(_mm256_and_si256(v, low), lo_act));
          hi[h] = _mm256_add_epi32(
              hi[h], dot_avx2<true>(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), hi_act));
        }
      }
      for (int h = 0; h < 2; ++h) {
        const __m256i sc_lo = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 64 + 2 * p * 16 + h * 8)));
        const __m256i sc_hi = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 64 + (2 * p + 1) * 16 + h * 8)));
        isum[h] = _mm256_add_epi32(isum[h], _mm256_add_epi32(_mm256_mullo_epi32(lo[h], sc_lo),
                                                             _mm256_mullo_epi32(hi[h], sc_hi)));
      }
    }
    const __m256 da = _mm256_set1_ps(a.d[s]);
    for (int h = 0; h < 2; ++h) {
      __m256i msum = _mm256_setzero_si256();
      for (int64_t j = 0; j < 8; ++j) {
        const __m256i m = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 192 + j * 16 + h * 8)));
        msum = _mm256_add_epi32(msum, _mm256_mullo_epi32(m, _mm256_set1_epi32(a.sum[s * 8 + j])));
      }
      const __m256 dw =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + h * 16)));
      const __m256 dm =
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 32 + h * 16)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[h]), _mm256_mul_ps(dw, da), acc[h]);
      acc[h] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_mul_ps(dm, da), acc[h]);
    }
  }
  _mm256_storeu_ps(out, acc[0]);
  _mm256_storeu_ps(out + 8, acc[1]);
}

RLX_VNNI512 void group_dot_q4_K_vnni_impl(const uint8_t* g, int64_t nsb, const GroupActivation& a,
                                          float* out) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t s = 0; s < nsb; ++s) {
    const uint8_t* sb = g + size_t(s) * kQ4KGroupBytes;
    const uint8_t* aq = a.q8 + s * 292 + 4;
    __m512i isum = _mm512_setzero_si512();
    for (int64_t p = 0; p < 4; ++p) {
      const uint8_t* q = q4k_quants(sb, p);
      prefetch_ahead<8>(q);
      __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
      for (int64_t j = 0; j < 8; ++j) {
        const __m512i v = _mm512_load_si512(q + j * 64);
        lo = _mm512_dpbusd_epi32(lo, _mm512_and_si512(v, low),
                                 _mm512_set1_epi32(u32at(aq + 64 * p + 4 * j)));
        hi = _mm512_dpbusd_epi32(hi, _mm512_and_si512(_mm512_srli_epi16(v, 4), low),
                                 _mm512_set1_epi32(u32at(aq + 64 * p + 32 + 4 * j)));
      }
      const __m512i sc_lo = _mm512_cvtepu8_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + 2 * p * 16)));
      const __m512i sc_hi = _mm512_cvtepu8_epi32(
          _mm_load_si128(reinterpret_cast<const __m128i*>(sb + 64 + (2 * p + 1) * 16)));
      isum = _mm512_add_epi32(
          isum, _mm512_add_epi32(_mm512_mullo_epi32(lo, sc_lo), _mm512_mullo_epi32(hi, sc_hi)));
    }
    __m512i msum = _mm512_setzero_si512();
    for (int64_t j = 0; j < 8; ++j) {
      const __m512i m =
          _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(sb + 192 + j * 16)));
      msum = _mm512_add_epi32(msum, _mm512_mullo_epi32(m, _mm512_set1_epi32(a.sum[s * 8 + j])));
    }
    const __m512 da = _mm512_set1_ps(a.d[s]);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb)));
    const __m512 dm = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(sb + 32)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dw, da), acc);
    acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum), _mm512_mul_ps(dm, da), acc);
  }
  _mm512_storeu_ps(out, acc);
}

}  // namespace

void group_dot_q4_K_avx2(const uint8_t* g, size_t, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_q4_K_avx2_impl(g, nb, a, out);
}
void group_dot_q4_K_vnni(const uint8_t* g, size_t, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_q4_K_vnni_impl(g, nb, a, out);
}

void group_dot_q4_0_avx2(const uint8_t* g, size_t sb, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_avx2<true>(g, sb, nb, a, out);
}
void group_dot_q8_0_avx2(const uint8_t* g, size_t sb, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_avx2<false>(g, sb, nb, a, out);
}
void group_dot_q4_0_vnni(const uint8_t* g, size_t sb, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_vnni<true>(g, sb, nb, a, out);
}
void group_dot_q8_0_vnni(const uint8_t* g, size_t sb, int64_t nb, const GroupActivation& a,
                         float* out) {
  group_dot_vnni<false>(g, sb, nb, a, out);
}

}  // namespace rlx::quant::detail
