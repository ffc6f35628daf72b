// The AVX2/FMA tiles of conv_blocked.h: a 16-channel block is two ymm
// vectors. Dense convs: P <= 6 pixels x one block accumulate in 12 ymm
// registers (with two weight vectors and a broadcast, 15 of the 16); a tile
// of two blocks runs as two tiles of one. Depthwise: P <= 6 pixels of one
// block, one load per tap and half-block.
#include <immintrin.h>

#include <array>
#include <utility>

#include "backends/cpu/conv_blocked.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {
namespace {

constexpr int kLanesAvx2 = int(kChannelBlock);

// acc[0..P) = block ob's bias (zero without one), as two halves of 8 lanes.
template <int P>
RLX_AVX2_INLINE void start_block_avx2(__m256 (&acc)[P][2], const float* bias, int64_t ob) {
  for (int h = 0; h < 2; ++h) {
    const __m256 b = bias ? _mm256_loadu_ps(bias + ob * kLanesAvx2 + 8 * h) : _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) acc[p][h] = b;
  }
}

// Pixels [ow0, ow0 + P) of block ob stored as act(acc + residual) (v second in max / min: NaN
// comes through); constant bounds, as in the AVX-512 tiles' store_block.
template <int P>
RLX_AVX2_INLINE void store_block_avx2(const BlockedConv& g, const BlockedTile& t, int64_t ob,
                                      const __m256 (&acc)[P][2], const float* residual, float* y) {
  const int64_t at0 = g.y_at(t.n, ob, t.oh, t.ow0);  // a row's pixels lie 16 floats apart
#pragma GCC unroll 8
  for (int p = 0; p < P; ++p)
    for (int h = 0; h < 2; ++h) {
      const int64_t at = at0 + p * kLanesAvx2 + 8 * h;
      __m256 v = acc[p][h];
      if (residual) v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at));
      if (g.act == Epilogue::relu) v = _mm256_max_ps(_mm256_setzero_ps(), v);
      if (g.act == Epilogue::relu6)
        v = _mm256_min_ps(_mm256_set1_ps(6.f), _mm256_max_ps(_mm256_setzero_ps(), v));
      _mm256_storeu_ps(y + at, v);
    }
}

template <int P, int L>
RLX_AVX2 void dense_tile_avx2(const BlockedConv& g, const BlockedTile& t, const float* x,
                              const float* w, const float* bias, const float* residual, float* y) {
  const int64_t G = g.in_groups(), WG = g.weight_groups(), taps = g.KH * g.KW;
  const int64_t xs = g.SW * L;
  __m256 acc[P][2];
  start_block_avx2(acc, bias, t.ob0);
  for (int64_t cg = 0; cg < G; ++cg) {
    const float* xg = x + g.x_at(t.n, cg);
    const float* wg = w + (t.ob0 * WG + cg) * taps * L * kLanesAvx2;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = t.oh * g.SH - g.PT + kh;
      if (ih < 0 || ih >= g.H) continue;
      const float* xr = xg + (ih * g.W + t.ow0 * g.SW - g.PL) * L;
      const float* wr = wg + kh * g.KW * L * kLanesAvx2;
      for (int64_t kw = t.kw_lo; kw < t.kw_hi; ++kw) {
        const float* xp = xr + kw * L;
        const float* wp = wr + kw * L * kLanesAvx2;
        for (int l = 0; l < L; ++l) {
          const __m256 w0 = _mm256_loadu_ps(wp + l * kLanesAvx2),
                       w1 = _mm256_loadu_ps(wp + l * kLanesAvx2 + 8);
#pragma GCC unroll 8
          for (int p = 0; p < P; ++p) {
            const __m256 xv = _mm256_set1_ps(xp[p * xs + l]);
            acc[p][0] = _mm256_fmadd_ps(xv, w0, acc[p][0]);
            acc[p][1] = _mm256_fmadd_ps(xv, w1, acc[p][1]);
          }
        }
      }
    }
  }
  store_block_avx2(g, t, t.ob0, acc, residual, y);
}

template <int P>
RLX_AVX2 void depthwise_tile_avx2(const BlockedConv& g, const BlockedTile& t, const float* x,
                                  const float* w, const float* bias, const float* residual,
                                  float* y) {
  const int64_t ob = t.ob0;
  __m256 acc[P][2];
  start_block_avx2(acc, bias, ob);
  const float* xb = x + g.x_at(t.n, ob);
  const float* wb = w + ob * g.KH * g.KW * kLanesAvx2;
  const int64_t xs = g.SW * kLanesAvx2;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = t.oh * g.SH - g.PT + kh;
    if (ih < 0 || ih >= g.H) continue;
    const float* xr = xb + (ih * g.W + t.ow0 * g.SW - g.PL) * kLanesAvx2;
    for (int64_t kw = t.kw_lo; kw < t.kw_hi; ++kw) {
      const float* wp = wb + (kh * g.KW + kw) * kLanesAvx2;
      const __m256 w0 = _mm256_loadu_ps(wp), w1 = _mm256_loadu_ps(wp + 8);
      const float* xp = xr + kw * kLanesAvx2;
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        acc[p][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + p * xs), w0, acc[p][0]);
        acc[p][1] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + p * xs + 8), w1, acc[p][1]);
      }
    }
  }
  store_block_avx2(g, t, ob, acc, residual, y);
}

using TileFnAvx2 = void (*)(const BlockedConv&, const BlockedTile&, const float*, const float*,
                            const float*, const float*, float*);

template <int L, int... Ps>
constexpr std::array<TileFnAvx2, sizeof...(Ps)> dense_table_avx2(
    std::integer_sequence<int, Ps...>) {
  return {&dense_tile_avx2<Ps + 1, L>...};
}
template <int... Ps>
constexpr std::array<TileFnAvx2, sizeof...(Ps)> depthwise_table_avx2(
    std::integer_sequence<int, Ps...>) {
  return {&depthwise_tile_avx2<Ps + 1>...};
}

constexpr auto kDense1Avx2 =
    dense_table_avx2<1>(std::make_integer_sequence<int, kBlockedPixelsAvx2>());
constexpr auto kDense16Avx2 =
    dense_table_avx2<kLanesAvx2>(std::make_integer_sequence<int, kBlockedPixelsAvx2>());
constexpr auto kDepthwiseAvx2 =
    depthwise_table_avx2(std::make_integer_sequence<int, kBlockedPixelsAvx2>());

}  // namespace

bool conv_blocked_tile_avx2(const BlockedConv& g, const BlockedTile& t, const float* x,
                            const float* w, const float* bias, const float* residual, float* y) {
  if (t.P < 1 || t.P > kBlockedPixelsAvx2) return false;
  if (g.depthwise) {
    kDepthwiseAvx2[size_t(t.P - 1)](g, t, x, w, bias, residual, y);
    return true;
  }
  const auto& table = g.in_blocked ? kDense16Avx2 : kDense1Avx2;
  for (int64_t j = 0; j < t.nob; ++j) {  // one block at a time
    BlockedTile one = t;
    one.ob0 = t.ob0 + j;
    one.nob = 1;
    table[size_t(t.P - 1)](g, one, x, w, bias, residual, y);
  }
  return true;
}

}  // namespace rlx::cpu
