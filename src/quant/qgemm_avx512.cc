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

#define RLX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma")))

namespace rlx::quant::qgemm::detail {
namespace {

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int G, bool kMin, int RM>
RLX_AVX512 void rows512(const TileArgs& t, int64_t r0) {
  constexpr int NR = 32;
  constexpr size_t gb = group_bytes(G, NR, kMin);
  __m512 f0[RM], f1[RM];
  for (int r = 0; r < RM; ++r) f0[r] = f1[r] = _mm512_setzero_ps();
  const uint8_t* a[RM];
  const float* da[RM];
  const float* mt[RM];
  for (int r = 0; r < RM; ++r) {
    a[r] = t.aq + (r0 + r) * t.lda;
    da[r] = t.da + (r0 + r) * t.ldd;
    mt[r] = t.mt + (r0 + r) * t.ldd;
  }
  const uint8_t* p = t.pack;
  for (int64_t g = 0; g < t.ngroups; ++g, p += gb) {
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
    for (int r = 0; r < RM; ++r) {
      const __m512 d = _mm512_set1_ps(da[r][g]);
      f0[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i0[r]), _mm512_mul_ps(s0, d), f0[r]);
      f1[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i1[r]), _mm512_mul_ps(s1, d), f1[r]);
    }
    if constexpr (kMin) {
      const __m512 o0 = _mm512_loadu_ps(tail + 256), o1 = _mm512_loadu_ps(tail + 320);
      for (int r = 0; r < RM; ++r) {
        const __m512 m = _mm512_set1_ps(mt[r][g]);
        f0[r] = _mm512_fmadd_ps(o0, m, f0[r]);
        f1[r] = _mm512_fmadd_ps(o1, m, f1[r]);
      }
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

template <int G, bool kMin>
RLX_AVX512 void run(const TileArgs& t) {
  constexpr int RM = 4;
  int64_t r = 0;
  for (; r + RM <= t.rows; r += RM) rows512<G, kMin, RM>(t, r);
  switch (t.rows - r) {
    case 3:
      rows512<G, kMin, 3>(t, r);
      break;
    case 2:
      rows512<G, kMin, 2>(t, r);
      break;
    case 1:
      rows512<G, kMin, 1>(t, r);
      break;
    default:
      break;
  }
}

}  // namespace

void run_avx512(int G, bool has_min, const TileArgs& t) {
  if (G == 16)
    has_min ? run<16, true>(t) : run<16, false>(t);
  else
    has_min ? run<32, true>(t) : run<32, false>(t);
}

}  // namespace rlx::quant::qgemm::detail
