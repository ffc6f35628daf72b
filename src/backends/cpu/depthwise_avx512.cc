// The AVX-512 stride-1 depthwise plane (depthwise_avx512.h). Own code: the
// AVX2 path (conv.cc) copies each plane into a zero-padded buffer and runs
// flat rows over it; profiled on 7x7-56x56 maps, the copies, the copy back
// and their memcpy calls took two thirds of the time. Here masked loads
// (which do not touch masked-off lanes) read the taps straight from the
// input, each lane's mask clearing the columns that fall in the padding, and
// masked stores write each output row in place.
#include "backends/cpu/depthwise_avx512.h"

#include <immintrin.h>

#include <algorithm>

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as in sgemm_avx512.cc
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

#define RLX_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

constexpr int kMaxKW = 16;  // conv.cc sends kernels up to 16 wide

// Lanes l < 16 with lo <= l < hi.
RLX_AVX512 inline __mmask16 lanes_between(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16);
  hi = std::clamp<int64_t>(hi, lo, 16);
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Output columns [j0, j0 + 16 V) of every row (the last vector masked to OW).
// KK > 0 fixes a KK x KK kernel at compile time. V independent accumulator
// chains per row, and the rows' chains are independent of each other, so
// the out-of-order core overlaps them even for one vector per row.
template <int V, int KK>
RLX_AVX512 void column_block(const float* x, int64_t H, int64_t W, const float* w, int64_t KH,
                             int64_t KW, int64_t pt, int64_t pl, float b, float* y, int64_t OH,
                             int64_t OW, int64_t j0) {
  if constexpr (KK > 0) KH = KW = KK;
  // mask[v][kw]: lanes whose input column j0 + 16 v + l + kw - pl lies in [0, W)
  // and whose output column lies in [0, OW).
  __mmask16 mask[V][KK > 0 ? KK : kMaxKW], store[V];
  for (int v = 0; v < V; ++v) {
    const int64_t c = j0 + 16 * v;
    store[v] = lanes_between(0, OW - c);
    for (int64_t kw = 0; kw < KW; ++kw)
      mask[v][kw] = store[v] & lanes_between(pl - kw - c, W + pl - kw - c);
  }
  for (int64_t oh = 0; oh < OH; ++oh) {
    __m512 acc[V];
    for (int v = 0; v < V; ++v) acc[v] = _mm512_set1_ps(b);
    const int64_t kh0 = std::max<int64_t>(0, pt - oh), kh1 = std::min(KH, H + pt - oh);
    for (int64_t kh = kh0; kh < kh1; ++kh) {
      // Column 0 of the input row, offset by the tap: lanes before the row are masked off.
      const float* row = x + (oh + kh - pt) * W + j0 - pl;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const __m512 wt = _mm512_set1_ps(w[kh * KW + kw]);
        for (int v = 0; v < V; ++v)
          acc[v] =
              _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(mask[v][kw], row + kw + 16 * v), acc[v]);
      }
    }
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + oh * OW + j0 + 16 * v, store[v], acc[v]);
  }
}

template <int KK>
void plane(const float* x, int64_t H, int64_t W, const float* w, int64_t KH, int64_t KW, int64_t pt,
           int64_t pl, float b, float* y, int64_t OH, int64_t OW) {
  // Blocks of 4 vectors (64 columns), then one of as few vectors as the rest needs.
  int64_t j0 = 0;
  for (; j0 + 64 <= OW; j0 += 64) column_block<4, KK>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW, j0);
  switch ((OW - j0 + 15) / 16) {
    case 1:
      return column_block<1, KK>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW, j0);
    case 2:
      return column_block<2, KK>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW, j0);
    case 3:
      return column_block<3, KK>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW, j0);
    case 4:
      return column_block<4, KK>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW, j0);
    default:
      return;
  }
}

}  // namespace

void dw_plane_s1_avx512(const float* x, int64_t H, int64_t W, const float* w, int64_t KH,
                        int64_t KW, int64_t pt, int64_t pl, float b, float* y, int64_t OH,
                        int64_t OW) {
  if (KH == 3 && KW == 3) return plane<3>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW);
  if (KH == 5 && KW == 5) return plane<5>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW);
  plane<0>(x, H, W, w, KH, KW, pt, pl, b, y, OH, OW);
}

}  // namespace rlx::cpu
