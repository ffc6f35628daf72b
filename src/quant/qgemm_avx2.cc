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
#include "rlx/dtype.h"

#define RLX_QGEMM_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace rlx::quant::qgemm::detail {
namespace {

// kAcc: chunks of 4 k whose maddubs results are summed in i16 before one
// madd to i32; the weights' range bounds each chunk's pair sums by 2 * 255 *
// max|v| (q4_0 |v| <= 8: 8 chunks; q5_0 16 and q4_1 / q4_K 15: 4; q5_1 /
// q5_K 31 and q6_K 32: 2; q8_0: 1), so the i16 sum stays within +-32767.
template <int G, bool kMin, bool kSigned, bool kSB, int kAcc, int RM>
RLX_QGEMM_AVX2 void rows256(const TileArgs& t, int64_t r0) {
  constexpr int NR = 8;
  constexpr size_t gb = group_bytes(G, NR, kMin);
  constexpr int64_t per = kSB ? 256 / G : 1;  // groups per activation scale
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[RM];
  for (int r = 0; r < RM; ++r) f[r] = _mm256_setzero_ps();
  const ActivationRows<RM> rows(t, r0);
  const auto& a = rows.a;
  const auto& da = rows.da;
  const auto& mt = rows.mt;
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
      for (int c0 = 0; c0 < G / 4; c0 += kAcc) {
        __m256i s16[RM];
        for (int c = c0; c < c0 + kAcc; ++c) {
          const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + c * 32));
          const __m256i aw = kSigned ? _mm256_abs_epi8(w) : w;
          for (int r = 0; r < RM; ++r) {
            const __m256i av = _mm256_set1_epi32(load_i32(a[r] + k0 + 4 * c));
            const __m256i prod = kSigned ? _mm256_maddubs_epi16(aw, _mm256_sign_epi8(av, w))
                                         : _mm256_maddubs_epi16(av, w);
            s16[r] = c == c0 ? prod : _mm256_add_epi16(s16[r], prod);
          }
        }
        for (int r = 0; r < RM; ++r)
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(s16[r], ones));
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

template <int G, bool kMin, bool kSigned, bool kSB, int kAcc>
RLX_QGEMM_AVX2 void tiles_avx2(const TileArgs& t) {
  constexpr int RM = 4;
  int64_t r = 0;
  for (; r + RM <= t.rows; r += RM) rows256<G, kMin, kSigned, kSB, kAcc, RM>(t, r);
  switch (t.rows - r) {
    case 3:
      rows256<G, kMin, kSigned, kSB, kAcc, 3>(t, r);
      break;
    case 2:
      rows256<G, kMin, kSigned, kSB, kAcc, 2>(t, r);
      break;
    case 1:
      rows256<G, kMin, kSigned, kSB, kAcc, 1>(t, r);
      break;
    default:
      break;
  }
}

}  // namespace

RLX_QGEMM_AVX2 void interleave_avx2(const int8_t* v, const float* s, const float* o, int64_t K,
                                    int G, bool has_min, uint8_t* dst) {
  constexpr int NR = 8;
  const int64_t ng = K / G;
  const size_t gb = group_bytes(G, NR, has_min);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i rows = _mm256_mullo_epi32(lane, _mm256_set1_epi32(int(K)));
  const __m256i scales = _mm256_mullo_epi32(lane, _mm256_set1_epi32(int(ng)));
  const __m256i b128 = _mm256_set1_epi8(char(0x80)), ones = _mm256_set1_epi16(1);
  for (int64_t g = 0; g < ng; ++g) {
    uint8_t* P = dst + size_t(g) * gb;
    uint8_t* tail = P + G * NR;
    const int8_t* base = v + size_t(g) * G;
    __m256i sum = _mm256_setzero_si256();
    for (int c = 0; c < G / 4; ++c) {
      const __m256i w = _mm256_i32gather_epi32(reinterpret_cast<const int*>(base + 4 * c), rows, 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(P + c * 32), w);
      // 128 * (v0 + v1) fits i16 for every int8 pair.
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(b128, w), ones));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(tail),
                        _mm256_sub_epi32(_mm256_setzero_si256(), sum));
    _mm256_storeu_ps(reinterpret_cast<float*>(tail + 4 * NR),
                     _mm256_i32gather_ps(s + g, scales, 4));
    if (has_min)
      _mm256_storeu_ps(reinterpret_cast<float*>(tail + 8 * NR),
                       _mm256_i32gather_ps(o + g, scales, 4));
  }
}

namespace {
RLX_QGEMM_AVX2 inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
RLX_QGEMM_AVX2 inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// Four vectors of 8 i32 -> 32 saturated i8 in element order.
RLX_QGEMM_AVX2 inline __m256i pack_i8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i x = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(x, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
inline float round_f16(float f) { return f16_to_f32(f32_to_f16(f)); }
}  // namespace

// The scalar quantizers' operations in the same order: Q8_0 / Q8_1 as
// quantize_act_q8 (d = amax / 127, q = round-half-even(x * 127 / amax)),
// Q8_K as quantize_row_q8_K (the first element of largest magnitude sets
// iscale = -127 / max, q = min(127, round(iscale * x)), d = 1 / iscale);
// cvtps rounds half to even as nearest_int does.
RLX_QGEMM_AVX2 void quantize_row_avx2(GgmlType vdt, int G, bool offset, const float* x, int64_t K,
                                      uint8_t* q, float* da, float* mt) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  const __m256i flip = _mm256_set1_epi8(offset ? char(0x80) : 0);
  if (vdt == GgmlType::Q8_0 || vdt == GgmlType::Q8_1) {
    for (int64_t b = 0; b < K / 32; ++b, x += 32, q += 32) {
      __m256 v[4];
      __m256 m = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(x + 8 * i);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[i]));
      }
      const float amax = hmax(m);
      const float d = amax / 127.f;
      const __m256 id = _mm256_set1_ps(amax != 0.f ? 127.f / amax : 0.f);
      __m256i qi[4];
      for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
      const __m256i bytes = pack_i8(qi[0], qi[1], qi[2], qi[3]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_xor_si256(bytes, flip));
      da[b] = round_f16(d);
      if (vdt == GgmlType::Q8_1) {
        const int sum = hsum_i32(
            _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3])));
        mt[b] = round_f16(d * float(sum));
      } else {
        mt[b] = 0.f;
      }
    }
    return;
  }
  // Q8_K
  const int per = 256 / G;
  const __m256i top = _mm256_set1_epi32(127);
  for (int64_t b = 0; b < K / 256; ++b, x += 256, q += 256, da += per, mt += per) {
    __m256 m = _mm256_setzero_ps();
    for (int i = 0; i < 32; ++i)
      m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)));
    const float amax = hmax(m);
    if (!(amax > 0.f)) {
      std::memset(q, offset ? 0x80 : 0, 256);
      for (int g = 0; g < per; ++g) da[g] = mt[g] = 0.f;
      continue;
    }
    int first = 0;
    const __m256 am = _mm256_set1_ps(amax);
    for (int i = 0; i < 32; ++i) {
      const int hit = _mm256_movemask_ps(
          _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * i)), am, _CMP_EQ_OQ));
      if (hit) {
        first = 8 * i + __builtin_ctz(unsigned(hit));
        break;
      }
    }
    const float iscale = -127.f / x[first];
    const __m256 is = _mm256_set1_ps(iscale);
    int sums[16];
    for (int c = 0; c < 8; ++c) {  // 32 elements per step
      __m256i qi[4];
      for (int i = 0; i < 4; ++i)
        qi[i] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * i), is)), top);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + 32 * c),
                          _mm256_xor_si256(pack_i8(qi[0], qi[1], qi[2], qi[3]), flip));
      sums[2 * c] = hsum_i32(_mm256_add_epi32(qi[0], qi[1]));
      sums[2 * c + 1] = hsum_i32(_mm256_add_epi32(qi[2], qi[3]));
    }
    const float d = 1 / iscale;
    for (int g = 0; g < per; ++g) {
      da[g] = d;
      mt[g] = float(G == 32 ? sums[2 * g] + sums[2 * g + 1] : sums[g]);
    }
  }
}

void run_avx2(GgmlType type, bool signed_act, const TileArgs& t) {
  switch (type) {
    case GgmlType::Q8_0:
      return signed_act ? tiles_avx2<32, false, true, false, 1>(t)
                        : tiles_avx2<32, false, false, false, 1>(t);
    case GgmlType::Q4_0:
      return tiles_avx2<32, false, false, false, 8>(t);
    case GgmlType::Q5_0:
      return tiles_avx2<32, false, false, false, 4>(t);
    case GgmlType::Q4_1:
      return tiles_avx2<32, true, false, false, 4>(t);
    case GgmlType::Q5_1:
      return tiles_avx2<32, true, false, false, 2>(t);
    case GgmlType::Q4_K:
      return tiles_avx2<32, true, false, true, 4>(t);
    case GgmlType::Q5_K:
      return tiles_avx2<32, true, false, true, 2>(t);
    case GgmlType::Q6_K:
      return tiles_avx2<16, false, false, true, 2>(t);
    default:
      return;
  }
}

}  // namespace rlx::quant::qgemm::detail
