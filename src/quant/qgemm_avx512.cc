// AVX-512 VNNI micro-kernel of the integer GEMM (layouts in qgemm_impl.h):
// RM activation rows x 32 weight rows (two zmm of 16 lanes). Per 4 k, one
// broadcast of 4 activation bytes feeds two vpdpbusd (u8 activation + 128
// times int8 weight, summed into int32 per lane), so a group of G weights
// costs G / 4 broadcasts and G / 2 vpdpbusd per row, then one
// convert + multiply-add by s * da. The library is built for baseline x86-64:
// everything here carries its own target attribute and only runs after
// qgemm::path_for has checked the CPU.
#include <immintrin.h>

#include <cstring>

#include "quant/qgemm_impl.h"

#define RLX_QGEMM_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

namespace rlx::quant::qgemm::detail {
namespace {

// kSB: Q8_K activations, one da per 256: the groups of a super-block are
// summed as cvt(i) * s (+ o * group sum) and scaled by da once.
// i32 -> f32. The zero-masked form (as for the gathers below): GCC 12's
// unmasked intrinsics pass an _mm512_undefined_*() that -Wmaybe-uninitialized
// flags once inlined here.
RLX_QGEMM_AVX512 inline __m512 to_f32(__m512i v) {
  return _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), v);
}

template <int G, bool kMin, bool kSB, int RM>
RLX_QGEMM_AVX512 void rows512(const TileArgs& t, int64_t r0) {
  constexpr int NR = 32;
  constexpr size_t gb = group_bytes(G, NR, kMin);
  constexpr int64_t per = kSB ? 256 / G : 1;  // groups per activation scale
  __m512 f0[RM], f1[RM];
  for (int r = 0; r < RM; ++r) f0[r] = f1[r] = _mm512_setzero_ps();
  const ActivationRows<RM> rows(t, r0);
  const auto& a = rows.a;
  const auto& da = rows.da;
  const auto& mt = rows.mt;
  const uint8_t* p = t.pack;
  for (int64_t g0 = 0; g0 < t.ngroups; g0 += per) {
    __m512 e0[RM], e1[RM];  // the super-block's sum before da (kSB)
    if constexpr (kSB)
      for (int r = 0; r < RM; ++r) e0[r] = e1[r] = _mm512_setzero_ps();
    for (int64_t g = g0; g < g0 + per; ++g, p += gb) {
      const uint8_t* tail = p + G * NR;
      __m512i i0[RM], i1[RM];
      for (int r = 0; r < RM; ++r) {
        i0[r] = _mm512_loadu_si512(tail);
        i1[r] = _mm512_loadu_si512(tail + 64);
      }
      const int64_t k0 = g * G;
      for (int c = 0; c < G / 4; ++c) {
        const __m512i w0 = _mm512_loadu_si512(p + c * 128);
        const __m512i w1 = _mm512_loadu_si512(p + c * 128 + 64);
        for (int r = 0; r < RM; ++r) {
          const __m512i av = _mm512_set1_epi32(load_i32(a[r] + k0 + 4 * c));
          i0[r] = _mm512_dpbusd_epi32(i0[r], av, w0);
          i1[r] = _mm512_dpbusd_epi32(i1[r], av, w1);
        }
      }
      const __m512 s0 = _mm512_loadu_ps(tail + 128), s1 = _mm512_loadu_ps(tail + 192);
      if constexpr (kSB) {
        for (int r = 0; r < RM; ++r) {
          e0[r] = _mm512_fmadd_ps(to_f32(i0[r]), s0, e0[r]);
          e1[r] = _mm512_fmadd_ps(to_f32(i1[r]), s1, e1[r]);
        }
      } else {
        for (int r = 0; r < RM; ++r) {
          const __m512 d = _mm512_set1_ps(da[r][g]);
          f0[r] = _mm512_fmadd_ps(to_f32(i0[r]), _mm512_mul_ps(s0, d), f0[r]);
          f1[r] = _mm512_fmadd_ps(to_f32(i1[r]), _mm512_mul_ps(s1, d), f1[r]);
        }
      }
      if constexpr (kMin) {
        const __m512 o0 = _mm512_loadu_ps(tail + 256), o1 = _mm512_loadu_ps(tail + 320);
        for (int r = 0; r < RM; ++r) {
          const __m512 m = _mm512_set1_ps(mt[r][g]);
          if constexpr (kSB) {
            e0[r] = _mm512_fmadd_ps(o0, m, e0[r]);
            e1[r] = _mm512_fmadd_ps(o1, m, e1[r]);
          } else {
            f0[r] = _mm512_fmadd_ps(o0, m, f0[r]);
            f1[r] = _mm512_fmadd_ps(o1, m, f1[r]);
          }
        }
      }
    }
    if constexpr (kSB)
      for (int r = 0; r < RM; ++r) {
        const __m512 d = _mm512_set1_ps(da[r][g0]);
        f0[r] = _mm512_fmadd_ps(e0[r], d, f0[r]);
        f1[r] = _mm512_fmadd_ps(e1[r], d, f1[r]);
      }
  }
  const __mmask16 k0 = t.nvalid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << t.nvalid) - 1);
  const __mmask16 k1 = t.nvalid >= 32   ? __mmask16(0xFFFF)
                       : t.nvalid <= 16 ? __mmask16(0)
                                        : __mmask16((1u << (t.nvalid - 16)) - 1);
  __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps();
  if (t.bias) {
    b0 = _mm512_maskz_loadu_ps(k0, t.bias);
    b1 = _mm512_maskz_loadu_ps(k1, t.bias + 16);
  }
  for (int r = 0; r < RM; ++r) {
    float* y = t.y + (r0 + r) * t.ldy;
    _mm512_mask_storeu_ps(y, k0, _mm512_add_ps(f0[r], b0));
    _mm512_mask_storeu_ps(y + 16, k1, _mm512_add_ps(f1[r], b1));
  }
}

template <int G, bool kMin, bool kSB>
RLX_QGEMM_AVX512 void tiles_avx512(const TileArgs& t) {
  constexpr int RM = 4;
  int64_t r = 0;
  for (; r + RM <= t.rows; r += RM) rows512<G, kMin, kSB, RM>(t, r);
  switch (t.rows - r) {
    case 3:
      rows512<G, kMin, kSB, 3>(t, r);
      break;
    case 2:
      rows512<G, kMin, kSB, 2>(t, r);
      break;
    case 1:
      rows512<G, kMin, kSB, 1>(t, r);
      break;
    default:
      break;
  }
}

}  // namespace

RLX_QGEMM_AVX512 void interleave_avx512(const int8_t* v, const float* s, const float* o, int64_t K,
                                        int G, bool has_min, uint8_t* dst) {
  constexpr int NR = 32, L = 16;
  const int64_t ng = K / G;
  const size_t gb = group_bytes(G, NR, has_min);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i rows = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int(K)));
  const __m512i scales = _mm512_mullo_epi32(lane, _mm512_set1_epi32(int(ng)));
  const __m512i b128 = _mm512_set1_epi32(int(0x80808080u));
  for (int64_t g = 0; g < ng; ++g) {
    uint8_t* P = dst + size_t(g) * gb;
    uint8_t* tail = P + G * NR;
    for (int h = 0; h < 2; ++h) {
      const int8_t* base = v + size_t(h) * L * size_t(K) + size_t(g) * G;
      __m512i sum = _mm512_setzero_si512();
      for (int c = 0; c < G / 4; ++c) {
        const __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), __mmask16(0xFFFF),
                                                      rows, base + 4 * c, 1);
        _mm512_storeu_si512(P + (c * 2 + h) * 64, w);
        sum = _mm512_dpbusd_epi32(sum, b128, w);  // 128 * v, summed per lane
      }
      _mm512_storeu_si512(tail + h * 64, _mm512_sub_epi32(_mm512_setzero_si512(), sum));
      const size_t so = size_t(h) * L * size_t(ng) + size_t(g);
      _mm512_storeu_ps(
          tail + 4 * NR + h * 64,
          _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16(0xFFFF), scales, s + so, 4));
      if (has_min)
        _mm512_storeu_ps(
            tail + 8 * NR + h * 64,
            _mm512_mask_i32gather_ps(_mm512_setzero_ps(), __mmask16(0xFFFF), scales, o + so, 4));
    }
  }
}

void run_avx512(int G, bool has_min, bool superblock, const TileArgs& t) {
  if (G == 16)
    tiles_avx512<16, false, true>(t);  // q6_K
  else if (superblock)
    has_min ? tiles_avx512<32, true, true>(t) : tiles_avx512<32, false, true>(t);
  else
    has_min ? tiles_avx512<32, true, false>(t) : tiles_avx512<32, false, false>(t);
}

}  // namespace rlx::quant::qgemm::detail
