// AVX2 + FMA + F16C dot products of one weight row against one activation
// row (Q8_0 for 32-element types, Q8_K for k-quants, f32 for float weights).
// Integer products are formed with maddubs (u8 x i8 -> i16 pairs) and madd
// (i16 x i16 -> i32), scaled to float once per block (per super-block for
// k-quants). The library is built for baseline x86-64: every function here
// carries its own target attribute and is only called after the CPU check in
// vec_dot.cc.
#include <immintrin.h>

#include <cstring>

#include "quant/vec_dot.h"

#define RLX_VDOT_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace rlx::quant::detail {
namespace {

RLX_VDOT_AVX2 inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
RLX_VDOT_AVX2 inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
RLX_VDOT_AVX2 inline __m256i load256(const void* p) {
  return _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
// Signed i8 x signed i8 -> 8 x i32 (each the sum of 4 products): maddubs
// needs an unsigned operand, so move a's sign onto b.
RLX_VDOT_AVX2 inline __m256i dot_i8(__m256i a, __m256i b) {
  const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
  return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
// 16 bytes of packed nibbles -> 32 bytes: low nibbles (elements 0..15), then
// high nibbles (16..31): ggml's 32-element block order.
RLX_VDOT_AVX2 inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i v = _mm256_set_m128i(_mm_srli_epi16(t, 4), t);
  return _mm256_and_si256(v, _mm256_set1_epi8(0x0F));
}

// Bit j of a u32 -> byte j = 0xFF (set) or 0 (clear), j = 0..31.
RLX_VDOT_AVX2 inline __m256i bits_to_bytes(uint32_t bits) {
  const __m256i idx = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2,
                                       2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(int(bits)), idx);
  const __m256i mask = _mm256_set1_epi64x(int64_t(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, mask), mask);
}
// Unsigned u8 x signed i8 -> 8 x i32.
RLX_VDOT_AVX2 inline __m256i dot_u8i8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
inline uint32_t u32at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Scales and mins of a Q4_K / Q5_K super-block as 8 x i16 each; the min
// term sum_j m_j * (sum of sub-block j's 32 activations) as 4 x i32 (Q8_K's
// bsums are per 16, so adjacent pairs are added first).
struct KScales {
  __m256i sc;  // the 8 scales as i16, in both 128-bit halves
  __m128i min_dot;
};
RLX_VDOT_AVX2 inline KScales k_scales(const uint8_t* s12, const uint8_t* y) {
  // 12 bytes s: sub-block j < 4: sc = s[j] & 63, m = s[j+4] & 63; j >= 4:
  // sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4.
  // Done four bytes at a time in registers (storing bytes one by one and
  // reloading them as a qword stalls store forwarding: 1.5x slower GEMV).
  const uint32_t w0 = u32at(s12), w1 = u32at(s12 + 4), w2 = u32at(s12 + 8);
  const uint32_t sc_lo = w0 & 0x3f3f3f3f, m_lo = w1 & 0x3f3f3f3f;
  const uint32_t sc_hi = (w2 & 0x0f0f0f0f) | ((w0 >> 2) & 0x30303030);
  const uint32_t m_hi = ((w2 >> 4) & 0x0f0f0f0f) | ((w1 >> 2) & 0x30303030);
  const __m128i sc16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(uint64_t(sc_hi) << 32 | sc_lo)));
  const __m128i m16 = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(int64_t(uint64_t(m_hi) << 32 | m_lo)));
  const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 260));
  const __m128i b1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(y + 276));
  return {_mm256_broadcastsi128_si256(sc16), _mm_madd_epi16(m16, _mm_hadd_epi16(b0, b1))};
}
// Broadcast i16 lane j of v (both halves hold the same 8 lanes).
RLX_VDOT_AVX2 inline __m256i lane16(__m256i v, int j) {
  return _mm256_shuffle_epi8(v, _mm256_set1_epi16(int16_t((2 * j) | ((2 * j + 1) << 8))));
}

// Q8_K block: f32 d, i8 qs[256], i16 bsums[16] (sums of 16 activations).
constexpr size_t kQ8K = 292;
inline float q8k_d(const uint8_t* y) {
  float d;
  std::memcpy(&d, y, 4);
  return d;
}
inline void q8k_bsums(const uint8_t* y, int16_t* bs) { std::memcpy(bs, y + 260, 32); }

}  // namespace

RLX_VDOT_AVX2 float vec_dot_f32_avx2(const void* w, const void* a, int64_t n) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
  }
  float sum = hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += x[i] * y[i];
  return sum;
}

RLX_VDOT_AVX2 float vec_dot_f16_avx2(const void* w, const void* a, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i + 8)));
    s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(y + i + 8), s1);
  }
  float sum = hsum(_mm256_add_ps(s0, s1));
  for (; i < n; ++i) sum += _cvtsh_ss(x[i]) * y[i];
  return sum;
}

RLX_VDOT_AVX2 float vec_dot_bf16_avx2(const void* w, const void* a, int64_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const float* y = static_cast<const float*>(a);
  // Four chains (32 elements a step): one left the loop waiting on FMA latency.
  auto w8 = [x](int64_t i) RLX_VDOT_AVX2 {
    const __m256i h =
        _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
  };
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    s0 = _mm256_fmadd_ps(w8(i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(w8(i + 8), _mm256_loadu_ps(y + i + 8), s1);
    s2 = _mm256_fmadd_ps(w8(i + 16), _mm256_loadu_ps(y + i + 16), s2);
    s3 = _mm256_fmadd_ps(w8(i + 24), _mm256_loadu_ps(y + i + 24), s3);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(w8(i), _mm256_loadu_ps(y + i), s0);
  float sum = hsum(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
  for (; i < n; ++i) {
    const uint32_t bits = uint32_t(x[i]) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    sum += f * y[i];
  }
  return sum;
}

// Q4_0 {fp16 d; u8 qs[16]} x Q8_0 {fp16 d; i8 qs[32]}.
RLX_VDOT_AVX2 float vec_dot_q4_0_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int64_t nb = n / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, x += 36, y += 68) {
    const __m256i q0 = _mm256_sub_epi8(unpack_nibbles(x + 2), eight);
    const __m256i q1 = _mm256_sub_epi8(unpack_nibbles(x + 20), eight);
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(q0, load256(y + 2)));
    const __m256 p1 = _mm256_cvtepi32_ps(dot_i8(q1, load256(y + 36)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x + 18) * h2f(y + 34)), p1, acc1);
  }
  for (; b < nb; ++b, x += 18, y += 34) {
    const __m256i q0 = _mm256_sub_epi8(unpack_nibbles(x + 2), eight);
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(q0, load256(y + 2)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p0, acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// Q8_0 x Q8_0.
RLX_VDOT_AVX2 float vec_dot_q8_0_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  const int64_t nb = n / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, x += 68, y += 68) {
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(load256(x + 2), load256(y + 2)));
    const __m256 p1 = _mm256_cvtepi32_ps(dot_i8(load256(x + 36), load256(y + 36)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p0, acc0);
    acc1 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x + 34) * h2f(y + 34)), p1, acc1);
  }
  for (; b < nb; ++b, x += 34, y += 34) {
    const __m256 p0 = _mm256_cvtepi32_ps(dot_i8(load256(x + 2), load256(y + 2)));
    acc0 = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p0, acc0);
  }
  return hsum(_mm256_add_ps(acc0, acc1));
}

// Four weight rows of Q4_0 (kQ4) or Q8_0, `stride` bytes apart, against one
// Q8_0 activation row, each summed exactly as the one-row kernel above (even
// and odd blocks in two chains, added at the end): the activation block is
// loaded once for the four rows, and the eight chains overlap where one row's
// two left decode GEMVs at the FMA and load latency. The next four rows are
// prefetched a whole group ahead: a GEMV streams its weights once from
// memory, and one core's demand misses alone ran at ~12 GB/s.
// Block sums: Block<kQ4, kVnni>::dot(x, y) is sum (q - 8 or q) * a per 4 lanes as
// i32. AVX2 moves signs for maddubs; VNNI's vpdpbusd takes q4_0's nibbles as
// unsigned directly, starting from -8 sum(a) (one vpdpbusd per activation block,
// shared by the four rows): the same integers, so the same floats.
#define RLX_VDOT_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512vnni")))

template <bool kQ4, bool kVnni>
struct Block;
template <bool kQ4>
struct Block<kQ4, false> {
  RLX_VDOT_AVX2 static __m256i start(__m256i) { return _mm256_setzero_si256(); }
  RLX_VDOT_AVX2 static __m256i dot(const uint8_t* x, __m256i a, __m256i) {
    const __m256i q =
        kQ4 ? _mm256_sub_epi8(unpack_nibbles(x + 2), _mm256_set1_epi8(8)) : load256(x + 2);
    return dot_i8(q, a);
  }
};
template <bool kQ4>
struct Block<kQ4, true> {
  RLX_VDOT_VNNI static __m256i start(__m256i a) {
    if constexpr (!kQ4) return _mm256_setzero_si256();
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), a);
    return _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sums, 3));
  }
  RLX_VDOT_VNNI static __m256i dot(const uint8_t* x, __m256i a, __m256i start) {
    if constexpr (kQ4) return _mm256_dpbusd_epi32(start, unpack_nibbles(x + 2), a);
    const __m256i q = load256(x + 2);
    return _mm256_dpbusd_epi32(start, _mm256_sign_epi8(q, q), _mm256_sign_epi8(a, q));
  }
};

template <bool kQ4, bool kVnni>
RLX_VDOT_AVX2 __attribute__((always_inline)) inline void dot4_q8_0(const uint8_t* x, size_t stride,
                                                                   const uint8_t* y, int64_t n,
                                                                   float* out) {
  using B = Block<kQ4, kVnni>;
  constexpr int64_t BW = kQ4 ? 18 : 34;  // weight block bytes
  __m256 even[4], odd[4];
  for (int r = 0; r < 4; ++r) even[r] = odd[r] = _mm256_setzero_ps();
  const int64_t nb = n / 32;
  int64_t b = 0;
  for (; b + 2 <= nb; b += 2, x += 2 * BW, y += 68) {
    const __m256i y0 = load256(y + 2), y1 = load256(y + 36);
    const __m256i s0 = B::start(y0), s1 = B::start(y1);
    const float d0 = h2f(y), d1 = h2f(y + 34);
    for (int r = 0; r < 4; ++r) {
      const uint8_t* xr = x + size_t(r) * stride;
      _mm_prefetch(reinterpret_cast<const char*>(xr + 4 * stride), _MM_HINT_T0);
      const __m256 p0 = _mm256_cvtepi32_ps(B::dot(xr, y0, s0));
      const __m256 p1 = _mm256_cvtepi32_ps(B::dot(xr + BW, y1, s1));
      even[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(xr) * d0), p0, even[r]);
      odd[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(xr + BW) * d1), p1, odd[r]);
    }
  }
  if (b < nb) {
    const __m256i y0 = load256(y + 2), s0 = B::start(y0);
    const float d0 = h2f(y);
    for (int r = 0; r < 4; ++r) {
      const uint8_t* xr = x + size_t(r) * stride;
      const __m256 p0 = _mm256_cvtepi32_ps(B::dot(xr, y0, s0));
      even[r] = _mm256_fmadd_ps(_mm256_set1_ps(h2f(xr) * d0), p0, even[r]);
    }
  }
  for (int r = 0; r < 4; ++r) out[r] = hsum(_mm256_add_ps(even[r], odd[r]));
}

// Q4_1 {fp16 d, m; u8 qs[16]} x Q8_1 {fp16 d, s = d * sum(q); i8 qs[32]}:
// sum (q d_w + m) a = d_w d_a sum(q qa) + m s_a.
RLX_VDOT_AVX2 float vec_dot_q4_1_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;
  for (int64_t b = 0; b < n / 32; ++b, x += 20, y += 36) {
    const __m256 p = _mm256_cvtepi32_ps(dot_u8i8(unpack_nibbles(x + 4), load256(y + 4)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p, acc);
    mins += h2f(x + 2) * h2f(y + 2);
  }
  return hsum(acc) + mins;
}

// Q5_0 {fp16 d; u8 qh[4]; u8 qs[16]} x Q8_0: q = nibble | bit j of qh << 4,
// value q - 16.
RLX_VDOT_AVX2 float vec_dot_q5_0_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b, x += 22, y += 34) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(u32at(x + 2)), b4);
    const __m256i q = _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(x + 6), hi), b4);
    const __m256 p = _mm256_cvtepi32_ps(dot_i8(q, load256(y + 2)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p, acc);
  }
  return hsum(acc);
}

// Q5_1 {fp16 d, m; u8 qh[4]; u8 qs[16]} x Q8_1: q in 0..31, as Q4_1.
RLX_VDOT_AVX2 float vec_dot_q5_1_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i b4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;
  for (int64_t b = 0; b < n / 32; ++b, x += 24, y += 36) {
    const __m256i hi = _mm256_and_si256(bits_to_bytes(u32at(x + 4)), b4);
    const __m256i q = _mm256_or_si256(unpack_nibbles(x + 8), hi);
    const __m256 p = _mm256_cvtepi32_ps(dot_u8i8(q, load256(y + 4)));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(h2f(x) * h2f(y)), p, acc);
    mins += h2f(x + 2) * h2f(y + 2);
  }
  return hsum(acc) + mins;
}

// Q2_K {u8 scales[16]; u8 qs[64]; fp16 d, dmin} x Q8_K. Element 128h + 32s + l
// is bits 2s..2s+1 of qs[32h + l]; group g = i / 16 has scale g & 15 and min
// g >> 4: y = d*sc*q - dmin*m.
RLX_VDOT_AVX2 float vec_dot_q2_K_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0;
  for (int64_t b = 0; b < n / 256; ++b, x += 84, y += kQ8K) {
    const float ad = q8k_d(y);
    int16_t bs[16];
    q8k_bsums(y, bs);
    int smin = 0;
    for (int g = 0; g < 16; ++g) smin += (x[g] >> 4) * bs[g];
    mins += ad * h2f(x + 82) * float(smin);
    const uint8_t* aq = y + 4;
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i qv = load256(x + 16 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i q = _mm256_and_si256(qv, three);
        qv = _mm256_srli_epi16(qv, 2);
        const __m256i p = _mm256_maddubs_epi16(q, load256(aq + 128 * h + 32 * k));
        const int g = 8 * h + 2 * k;
        const __m256i sc =
            _mm256_set_m128i(_mm_set1_epi16(x[g + 1] & 15), _mm_set1_epi16(x[g] & 15));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(ad * h2f(x + 80)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc) - mins;
}

// Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; fp16 d} x Q8_K. Low 2 bits as
// Q2_K; the high bit of element i is bit i / 32 of hmask[i % 32]; value
// q2 + 4*hb - 4 times d*(S[i/16] - 32). The -4 is folded in with the bsums.
RLX_VDOT_AVX2 float vec_dot_q3_K_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i three = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b, x += 110, y += kQ8K) {
    const uint8_t* s = x + 96;
    int S[16];
    for (int k = 0; k < 4; ++k) {
      S[k] = ((s[k] & 15) | (((s[8 + k] >> 0) & 3) << 4)) - 32;
      S[4 + k] = ((s[4 + k] & 15) | (((s[8 + k] >> 2) & 3) << 4)) - 32;
      S[8 + k] = ((s[k] >> 4) | (((s[8 + k] >> 4) & 3) << 4)) - 32;
      S[12 + k] = ((s[4 + k] >> 4) | (((s[8 + k] >> 6) & 3) << 4)) - 32;
    }
    int16_t bs[16];
    q8k_bsums(y, bs);
    int corr = 0;
    for (int g = 0; g < 16; ++g) corr += S[g] * bs[g];
    const uint8_t* aq = y + 4;
    __m256i hm = load256(x);
    __m256i isum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      __m256i qv = load256(x + 32 + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i hb = _mm256_slli_epi16(_mm256_and_si256(hm, one), 2);
        hm = _mm256_srli_epi16(hm, 1);
        const __m256i q = _mm256_or_si256(_mm256_and_si256(qv, three), hb);
        qv = _mm256_srli_epi16(qv, 2);
        const __m256i p = _mm256_maddubs_epi16(q, load256(aq + 128 * h + 32 * k));
        const int g = 8 * h + 2 * k;
        const __m256i sc =
            _mm256_set_m128i(_mm_set1_epi16(int16_t(S[g + 1])), _mm_set1_epi16(int16_t(S[g])));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc));
      }
    }
    isum = _mm256_sub_epi32(isum, _mm256_set_epi32(0, 0, 0, 0, 0, 0, 0, 4 * corr));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(q8k_d(y) * h2f(x + 108)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

// Q4_K {fp16 d, dmin; u8 scales[12]; u8 qs[128]} x Q8_K. Sub-block j (32
// elements) is d*sc_j*q - dmin*m_j: the min term only needs the activation
// sums of the sub-block, which Q8_K carries (bsums, per 16).
RLX_VDOT_AVX2 float vec_dot_q4_K_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b, x += 144, y += kQ8K) {
    const float ad = q8k_d(y);
    const KScales ks = k_scales(x + 4, y);
    accm = _mm_fmadd_ps(_mm_set1_ps(ad * h2f(x + 2)), _mm_cvtepi32_ps(ks.min_dot), accm);
    const uint8_t* q = x + 16;
    const uint8_t* aq = y + 4;
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load256(q + 32 * c);
      const __m256i lo = _mm256_and_si256(v, low4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      const __m256i p0 = _mm256_maddubs_epi16(lo, load256(aq + 64 * c));
      const __m256i p1 = _mm256_maddubs_epi16(hi, load256(aq + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p0, lane16(ks.sc, 2 * c)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, lane16(ks.sc, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(ad * h2f(x)), _mm256_cvtepi32_ps(isum), acc);
  }
  __m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return hsum(acc) - _mm_cvtss_f32(m);
}

// Q5_K {fp16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]} x Q8_K: as Q4_K
// with a fifth bit, bit (i / 32) of qh[i % 32], so chunk c's low nibbles take
// bit 2c and its high nibbles bit 2c + 1.
RLX_VDOT_AVX2 float vec_dot_q5_K_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F), one = _mm256_set1_epi8(1);
  __m256 acc = _mm256_setzero_ps();
  __m128 accm = _mm_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b, x += 176, y += kQ8K) {
    const float ad = q8k_d(y);
    const KScales ks = k_scales(x + 4, y);
    accm = _mm_fmadd_ps(_mm_set1_ps(ad * h2f(x + 2)), _mm_cvtepi32_ps(ks.min_dot), accm);
    __m256i hb = load256(x + 16);
    const uint8_t* q = x + 48;
    const uint8_t* aq = y + 4;
    __m256i isum = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = load256(q + 32 * c);
      // Shifting 16-bit lanes pulls the neighbour byte's bits in at the top;
      // the mask with 1 keeps only bit 0 of each byte.
      const __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(hb, one), 4);
      const __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4);
      hb = _mm256_srli_epi16(hb, 2);
      const __m256i lo = _mm256_or_si256(_mm256_and_si256(v, low4), h0);
      const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low4), h1);
      const __m256i p0 = _mm256_maddubs_epi16(lo, load256(aq + 64 * c));
      const __m256i p1 = _mm256_maddubs_epi16(hi, load256(aq + 64 * c + 32));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p0, lane16(ks.sc, 2 * c)));
      isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p1, lane16(ks.sc, 2 * c + 1)));
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(ad * h2f(x)), _mm256_cvtepi32_ps(isum), acc);
  }
  __m128 m = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
  m = _mm_add_ss(m, _mm_movehdup_ps(m));
  return hsum(acc) - _mm_cvtss_f32(m);
}

// Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; fp16 d} x Q8_K. q in 0..63 is
// used unsigned in maddubs; the -32 offset is folded in with the bsums:
// sum sc_g * 32 * sum_g(a).
RLX_VDOT_AVX2 float vec_dot_q6_K_avx2(const void* w, const void* a, int64_t n) {
  const uint8_t* x = static_cast<const uint8_t*>(w);
  const uint8_t* y = static_cast<const uint8_t*>(a);
  const __m256i low4 = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 256; ++b, x += 210, y += kQ8K) {
    // 16 scales as i16; the offset term 32 * sum_g sc_g * bsum_g by madd.
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + 192)));
    const __m256i bs16 = load256(y + 260);
    const uint8_t* aq = y + 4;
    __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                    _mm256_slli_epi32(_mm256_madd_epi16(sc16, bs16), 5));
    for (int h = 0; h < 2; ++h) {
      // Scales 8h..8h+7 in both 128-bit halves (lane order of cvtepi8_epi16:
      // low half = scales 0..7, high half = 8..15).
      const __m256i sh = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11)
                           : _mm256_permute2x128_si256(sc16, sc16, 0x00);
      const __m256i l0 = load256(x + 64 * h), l1 = load256(x + 64 * h + 32);
      const __m256i qh = load256(x + 128 + 32 * h);
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(l0, low4),
                             _mm256_slli_epi16(_mm256_and_si256(qh, three), 4));
      q[1] =
          _mm256_or_si256(_mm256_and_si256(l1, low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), three), 4));
      q[2] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), three), 4));
      q[3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), three), 4));
      for (int k = 0; k < 4; ++k) {
        const __m256i p = _mm256_maddubs_epi16(q[k], load256(aq + 128 * h + 32 * k));
        // Low half: scale 2k of this h; high half: scale 2k + 1.
        const __m256i s = _mm256_shuffle_epi8(
            sh, _mm256_set_m128i(_mm_set1_epi16(int16_t((4 * k + 2) | ((4 * k + 3) << 8))),
                                 _mm_set1_epi16(int16_t((4 * k) | ((4 * k + 1) << 8)))));
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
      }
    }
    acc = _mm256_fmadd_ps(_mm256_set1_ps(q8k_d(y) * h2f(x + 208)), _mm256_cvtepi32_ps(isum), acc);
  }
  return hsum(acc);
}

RLX_VDOT_AVX2 void vec_dot4_q4_0_avx2(const void* w, size_t stride, const void* a, int64_t n,
                                      float* out) {
  dot4_q8_0<true, false>(static_cast<const uint8_t*>(w), stride, static_cast<const uint8_t*>(a), n,
                         out);
}
RLX_VDOT_AVX2 void vec_dot4_q8_0_avx2(const void* w, size_t stride, const void* a, int64_t n,
                                      float* out) {
  dot4_q8_0<false, false>(static_cast<const uint8_t*>(w), stride, static_cast<const uint8_t*>(a), n,
                          out);
}
RLX_VDOT_VNNI void vec_dot4_q4_0_vnni(const void* w, size_t stride, const void* a, int64_t n,
                                      float* out) {
  dot4_q8_0<true, true>(static_cast<const uint8_t*>(w), stride, static_cast<const uint8_t*>(a), n,
                        out);
}
RLX_VDOT_VNNI void vec_dot4_q8_0_vnni(const void* w, size_t stride, const void* a, int64_t n,
                                      float* out) {
  dot4_q8_0<false, true>(static_cast<const uint8_t*>(w), stride, static_cast<const uint8_t*>(a), n,
                         out);
}

}  // namespace rlx::quant::detail
