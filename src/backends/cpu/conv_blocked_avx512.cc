// The AVX-512 tiles of conv_blocked.h. Dense convs: P pixels x one or two
// 16-channel output blocks accumulate in P * NOB zmm registers (up to 28);
// per input channel, NOB weight vectors are loaded and each pixel's input
// value is broadcast straight from memory into its FMAs (the activations are
// read in place, no packing). Depthwise: P pixels of one block, each tap one
// vector load and one FMA.
#include <immintrin.h>

#include <array>
#include <utility>

#include "backends/cpu/conv_blocked.h"

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as in sgemm_avx512.cc
#pragma GCC diagnostic push                   // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

#define RLX_CB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

constexpr int kLanes512 = int(kChannelBlock);

#define RLX_CB_AVX512_INLINE RLX_CB_AVX512 __attribute__((always_inline)) inline

// acc[0..P) = block ob's bias (zero without one).
template <int P>
RLX_CB_AVX512_INLINE void start_block(__m512 (&acc)[P], const float* bias, int64_t ob) {
  const __m512 b = bias ? _mm512_loadu_ps(bias + ob * kLanes512) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) acc[p] = b;
}

// Pixels [ow0, ow0 + P) of block ob stored as act(acc + residual) (v second in max / min: NaN
// comes through). The bounds are constants, not clamp_top's value: a broadcast of that was
// hoisted out of the tile's loop and took a register the dense tile's weights needed (14 of its
// 28 FMAs then read a weight from the stack; mobilenet_v2 ran 18% slower).
template <int P>
RLX_CB_AVX512_INLINE void store_block(const BlockedConv& g, const BlockedTile& t, int64_t ob,
                                      const __m512 (&acc)[P], const float* residual, float* y) {
  const int64_t at0 = g.y_at(t.n, ob, t.oh, t.ow0);  // a row's pixels lie 16 floats apart
#pragma GCC unroll 16
  for (int p = 0; p < P; ++p) {
    const int64_t at = at0 + p * kLanes512;
    __m512 v = acc[p];
    if (residual) v = _mm512_add_ps(v, _mm512_loadu_ps(residual + at));
    if (g.act == Epilogue::relu) v = _mm512_max_ps(_mm512_setzero_ps(), v);
    if (g.act == Epilogue::relu6)
      v = _mm512_min_ps(_mm512_set1_ps(6.f), _mm512_max_ps(_mm512_setzero_ps(), v));
    _mm512_storeu_ps(y + at, v);
  }
}

template <int P, int NOB, int L>
RLX_CB_AVX512 void dense_tile(const BlockedConv& g, const BlockedTile& t, const float* x,
                              const float* w, const float* bias, const float* residual, float* y) {
  const int64_t G = g.in_groups(), WG = g.weight_groups(), taps = g.KH * g.KW;
  const int64_t w_block = WG * taps * L * kLanes512;  // floats between output blocks' weights
  const int64_t xs = g.SW * L;                        // floats between neighbouring pixels' taps
  __m512 acc[NOB][P];
#pragma GCC unroll 2
  for (int j = 0; j < NOB; ++j) start_block(acc[j], bias, t.ob0 + j);
  for (int64_t cg = 0; cg < G; ++cg) {
    const float* xg = x + g.x_at(t.n, cg);
    const float* wg = w + (t.ob0 * WG + cg) * taps * L * kLanes512;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = t.oh * g.SH - g.PT + kh;
      if (ih < 0 || ih >= g.H) continue;
      const float* xr = xg + (ih * g.W + t.ow0 * g.SW - g.PL) * L;
      const float* wr = wg + kh * g.KW * L * kLanes512;
      for (int64_t kw = t.kw_lo; kw < t.kw_hi; ++kw) {
        const float* xp = xr + kw * L;
        const float* wp = wr + kw * L * kLanes512;
#pragma GCC unroll 4
        for (int l = 0; l < L; ++l) {
          __m512 wv[NOB];
#pragma GCC unroll 2
          for (int j = 0; j < NOB; ++j) wv[j] = _mm512_loadu_ps(wp + j * w_block + l * kLanes512);
#pragma GCC unroll 16
          for (int p = 0; p < P; ++p) {
            const __m512 xv = _mm512_set1_ps(xp[p * xs + l]);
#pragma GCC unroll 2
            for (int j = 0; j < NOB; ++j) acc[j][p] = _mm512_fmadd_ps(xv, wv[j], acc[j][p]);
          }
        }
      }
    }
  }
#pragma GCC unroll 2
  for (int j = 0; j < NOB; ++j) store_block(g, t, t.ob0 + j, acc[j], residual, y);
}

// Depthwise, 3 taps wide at stride S: each kernel row's (P - 1) S + 3 input
// vectors are loaded once and shared by the taps that read them.
template <int P, int S>
RLX_CB_AVX512 void depthwise3_tile(const BlockedConv& g, const BlockedTile& t, const float* x,
                                   const float* w, const float* bias, const float* residual,
                                   float* y) {
  constexpr int kCols = (P - 1) * S + 3;
  const int64_t ob = t.ob0;
  __m512 acc[P];
  start_block(acc, bias, ob);
  const float* xb = x + g.x_at(t.n, ob);
  const float* wb = w + ob * g.KH * 3 * kLanes512;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = t.oh * g.SH - g.PT + kh;
    if (ih < 0 || ih >= g.H) continue;
    const float* xr = xb + (ih * g.W + t.ow0 * S - g.PL) * kLanes512;
    __m512 xv[kCols];
#pragma GCC unroll 32
    for (int c = 0; c < kCols; ++c) xv[c] = _mm512_loadu_ps(xr + c * kLanes512);
#pragma GCC unroll 3
    for (int kw = 0; kw < 3; ++kw) {
      const __m512 wv = _mm512_loadu_ps(wb + (kh * 3 + kw) * kLanes512);
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p) acc[p] = _mm512_fmadd_ps(xv[p * S + kw], wv, acc[p]);
    }
  }
  store_block(g, t, ob, acc, residual, y);
}

// Depthwise, any kernel: one load per tap and pixel.
template <int P>
RLX_CB_AVX512 void depthwise_tile(const BlockedConv& g, const BlockedTile& t, const float* x,
                                  const float* w, const float* bias, const float* residual,
                                  float* y) {
  const int64_t ob = t.ob0;
  __m512 acc[P];
  start_block(acc, bias, ob);
  const float* xb = x + g.x_at(t.n, ob);
  const float* wb = w + ob * g.KH * g.KW * kLanes512;
  const int64_t xs = g.SW * kLanes512;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = t.oh * g.SH - g.PT + kh;
    if (ih < 0 || ih >= g.H) continue;
    const float* xr = xb + (ih * g.W + t.ow0 * g.SW - g.PL) * kLanes512;
    for (int64_t kw = t.kw_lo; kw < t.kw_hi; ++kw) {
      const __m512 wv = _mm512_loadu_ps(wb + (kh * g.KW + kw) * kLanes512);
      const float* xp = xr + kw * kLanes512;
#pragma GCC unroll 16
      for (int p = 0; p < P; ++p)
        acc[p] = _mm512_fmadd_ps(_mm512_loadu_ps(xp + p * xs), wv, acc[p]);
    }
  }
  store_block(g, t, ob, acc, residual, y);
}

using TileFn512 = void (*)(const BlockedConv&, const BlockedTile&, const float*, const float*,
                           const float*, const float*, float*);

template <int NOB, int L, int... Ps>
constexpr std::array<TileFn512, sizeof...(Ps)> dense_table(std::integer_sequence<int, Ps...>) {
  return {&dense_tile<Ps + 1, NOB, L>...};
}
template <int... Ps>
constexpr std::array<TileFn512, sizeof...(Ps)> depthwise_table(std::integer_sequence<int, Ps...>) {
  return {&depthwise_tile<Ps + 1>...};
}
template <int S, int... Ps>
constexpr std::array<TileFn512, sizeof...(Ps)> depthwise3_table(std::integer_sequence<int, Ps...>) {
  return {&depthwise3_tile<Ps + 1, S>...};
}

constexpr int kDenseP512 = kBlockedPixelsAvx512, kDepthwiseP512 = kBlockedDepthwisePixelsAvx512;
constexpr auto kDense1x1_512 = dense_table<1, 1>(std::make_integer_sequence<int, kDenseP512>());
constexpr auto kDense1x16_512 =
    dense_table<1, kLanes512>(std::make_integer_sequence<int, kDenseP512>());
constexpr auto kDense2x1_512 = dense_table<2, 1>(std::make_integer_sequence<int, kDenseP512>());
constexpr auto kDense2x16_512 =
    dense_table<2, kLanes512>(std::make_integer_sequence<int, kDenseP512>());
constexpr auto kDepthwise512 = depthwise_table(std::make_integer_sequence<int, kDepthwiseP512>());
constexpr auto kDepthwise3s1_512 =
    depthwise3_table<1>(std::make_integer_sequence<int, kDepthwiseP512>());
constexpr auto kDepthwise3s2_512 =
    depthwise3_table<2>(std::make_integer_sequence<int, kDepthwiseP512>());

}  // namespace

bool conv_blocked_tile_avx512(const BlockedConv& g, const BlockedTile& t, const float* x,
                              const float* w, const float* bias, const float* residual, float* y) {
  if (t.P < 1) return false;
  if (g.depthwise) {
    if (t.P > kDepthwiseP512) return false;
    const bool three = g.KW == 3 && t.kw_lo == 0 && t.kw_hi == 3 && g.SW <= 2;
    const auto& table = !three ? kDepthwise512 : g.SW == 1 ? kDepthwise3s1_512 : kDepthwise3s2_512;
    table[size_t(t.P - 1)](g, t, x, w, bias, residual, y);
    return true;
  }
  if (t.P > kDenseP512 || t.nob < 1 || t.nob > 2) return false;
  const auto& table = t.nob == 2 ? (g.in_blocked ? kDense2x16_512 : kDense2x1_512)
                                 : (g.in_blocked ? kDense1x16_512 : kDense1x1_512);
  table[size_t(t.P - 1)](g, t, x, w, bias, residual, y);
  return true;
}

}  // namespace rlx::cpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
