// AVX2 micro-kernel of the integer GEMM (layouts in qgemm_impl.h): RM
// activation rows x 8 weight rows (one ymm of 8 lanes). Per 4 k, one
// broadcast of 4 activation bytes, maddubs (u8 x i8 -> i16 pairs) and madd
// with ones (-> i32 per lane). maddubs saturates at 16 bits, so the unsigned
// operand is the activation + 128 only for types whose weights stay within
// [-32, 31] (255 * 32 * 2 < 32768); q8_0's weights span int8, so there the
// activations stay signed and the sign moves onto them (|w| x sign(a, w), as
// the vec_dot kernels do). The library is built for baseline x86-64:
// everything here carries its own target attribute and only runs after
// qgemm::path_for has checked the CPU.
#include <immintrin.h>

#include <cstring>

#include "quant/qgemm_impl.h"

#define RLX_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace rlx::quant::qgemm::detail {
namespace {

inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int G, bool kMin, bool kSigned, bool kSB, int RM>
RLX_AVX2 void rows256(const TileArgs& t, int64_t r0) {
  constexpr int NR = 8;
  constexpr size_t gb = group_bytes(G, NR, kMin);
  constexpr int64_t per = kSB ? 256 / G : 1;  // groups per activation scale
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[RM];
  for (int r = 0; r < RM; ++r) f[r] = _mm256_setzero_ps();
  const uint8_t* a[RM];
  const float* da[RM];
  const float* mt[RM];
  for (int r = 0; r < RM; ++r) {
    a[r] = t.aq + (r0 + r) * t.lda;
    da[r] = t.da + (r0 + r) * t.ldd;
    mt[r] = t.mt + (r0 + r) * t.ldd;
  }
  const uint8_t* p = t.pack;
  for (int64_t g0 = 0; g0 < t.ngroups; g0 += per) {
    __m256 e[RM];  // the super-block's sum before da (kSB)
    if constexpr (kSB)
      for (int r = 0; r < RM; ++r) e[r] = _mm256_setzero_ps();
    for (int64_t g = g0; g < g0 + per; ++g, p += gb) {
      const uint8_t* tail = p + G * NR;
      __m256i acc[RM];
      const __m256i corr = kSigned ? _mm256_setzero_si256()
                                   : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tail));
      for (int r = 0; r < RM; ++r) acc[r] = corr;
      const int64_t k0 = g * G;
      for (int c = 0; c < G / 4; ++c) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + c * 32));
        const __m256i aw = kSigned ? _mm256_abs_epi8(w) : w;
        for (int r = 0; r < RM; ++r) {
          const __m256i av = _mm256_set1_epi32(load_i32(a[r] + k0 + 4 * c));
          const __m256i prod = kSigned ? _mm256_maddubs_epi16(aw, _mm256_sign_epi8(av, w))
                                       : _mm256_maddubs_epi16(av, w);
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(prod, ones));
        }
      }
      const __m256 s = _mm256_loadu_ps(reinterpret_cast<const float*>(tail + 32));
      for (int r = 0; r < RM; ++r) {
        if constexpr (kSB)
          e[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]), s, e[r]);
        else
          f[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r]),
                                 _mm256_mul_ps(s, _mm256_set1_ps(da[r][g])), f[r]);
      }
      if constexpr (kMin) {
        const __m256 o = _mm256_loadu_ps(reinterpret_cast<const float*>(tail + 64));
        for (int r = 0; r < RM; ++r) {
          if constexpr (kSB)
            e[r] = _mm256_fmadd_ps(o, _mm256_set1_ps(mt[r][g]), e[r]);
          else
            f[r] = _mm256_fmadd_ps(o, _mm256_set1_ps(mt[r][g]), f[r]);
        }
      }
    }
    if constexpr (kSB)
      for (int r = 0; r < RM; ++r) f[r] = _mm256_fmadd_ps(e[r], _mm256_set1_ps(da[r][g0]), f[r]);
  }
  for (int r = 0; r < RM; ++r) {
    float* y = t.y + (r0 + r) * t.ldy;
    if (t.nvalid == NR) {
      __m256 v = f[r];
      if (t.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(t.bias));
      _mm256_storeu_ps(y, v);
    } else {
      alignas(32) float tmp[NR];
      _mm256_store_ps(tmp, f[r]);
      for (int n = 0; n < t.nvalid; ++n) y[n] = t.bias ? tmp[n] + t.bias[n] : tmp[n];
    }
  }
}

template <int G, bool kMin, bool kSigned, bool kSB>
RLX_AVX2 void run(const TileArgs& t) {
  constexpr int RM = 4;
  int64_t r = 0;
  for (; r + RM <= t.rows; r += RM) rows256<G, kMin, kSigned, kSB, RM>(t, r);
  switch (t.rows - r) {
    case 3:
      rows256<G, kMin, kSigned, kSB, 3>(t, r);
      break;
    case 2:
      rows256<G, kMin, kSigned, kSB, 2>(t, r);
      break;
    case 1:
      rows256<G, kMin, kSigned, kSB, 1>(t, r);
      break;
    default:
      break;
  }
}

}  // namespace

void run_avx2(int G, bool has_min, bool signed_act, bool superblock, const TileArgs& t) {
  if (signed_act)
    run<32, false, true, false>(t);  // q8_0
  else if (G == 16)
    run<16, false, false, true>(t);  // q6_K
  else if (superblock)
    has_min ? run<32, true, false, true>(t) : run<32, false, false, true>(t);
  else
    has_min ? run<32, true, false, false>(t) : run<32, false, false, false>(t);
}

}  // namespace rlx::quant::qgemm::detail
