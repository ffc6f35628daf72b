// The AVX-512 depthwise planes (depthwise_avx512.h). Own code: the AVX2 path
// (conv.cc) copies each plane into a zero-padded buffer (split into parity
// planes for stride 2) and runs flat rows over it; profiled on 7x7-56x56
// maps, the copies, the copy back and their memcpy calls took two thirds of
// the time, and stride 2 ran at half ONNX Runtime's speed. Here masked loads
// (which do not touch masked-off lanes) read the taps straight from the
// input, each lane's mask clearing the columns that fall in the padding;
// stride 2 loads 32 input columns and keeps the even ones with one permute;
// masked stores write each output row in place.
#include "backends/cpu/depthwise_avx512.h"

#include <immintrin.h>

#include <algorithm>

#if defined(__GNUC__) && !defined(__clang__)  // GCC bug 105593, as in sgemm_avx512.cc
#pragma GCC diagnostic push                   // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

#define RLX_DW_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

constexpr int kMaxKW = 16;  // conv.cc sends kernels up to 16 wide

// Lanes l < 16 with lo <= l < hi.
inline __mmask16 lanes_between(int64_t lo, int64_t hi) {
  lo = std::clamp<int64_t>(lo, 0, 16);
  hi = std::clamp<int64_t>(hi, lo, 16);
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Lanes l of in[0..16) then in[16..32) kept at their even positions: in[2 l].
RLX_DW_AVX512 inline __m512 even_lanes(__m512 lo, __m512 hi) {
  const __m512i idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  return _mm512_permutex2var_ps(lo, idx, hi);
}

// The stored value: the plane's fused clamp, if any (x second: NaN lanes come through).
RLX_DW_AVX512 inline __m512 finish(const DwPlane& g, __m512 x) {
  if (!g.clamp) return x;
  return _mm512_min_ps(_mm512_set1_ps(g.top), _mm512_max_ps(_mm512_setzero_ps(), x));
}

// R output rows x columns [j0, j0 + 16 V) from row oh (the last vector masked
// to OW); with PAIR (stride 2, OW <= 8), R pairs of rows, each pair in one
// vector: lanes 0-7 one row, lanes 8-15 the next (the even lanes of two rows'
// loads), so 7x7 outputs do not leave half of every vector empty.
// KK > 0 fixes a KK x KK kernel at compile time. R * V independent
// accumulator chains, so that even rows of one vector keep the FMA units busy
// (one chain per row ran at the FMA latency: 7x7 maps at a third of ONNX
// Runtime's speed). Tap rows outside the plane read g.zeros, so edge rows take
// the same code. Lane l of vector v reads input column S (j0 + 16 v + l) +
// kw - pl of each tap row; lo / hi: the masks of its 16 (S == 2: 32) input
// columns from S c + kw - pl.
template <int S, int V, int R, int KK, bool PAIR = false>
RLX_DW_AVX512 void row_block(const DwPlane& g, const float* x, const float* w, float b, float* y,
                             int64_t j0, int64_t oh, const __mmask16 (*lo)[kMaxKW],
                             const __mmask16 (*hi)[kMaxKW], const __mmask16* next,
                             const __mmask16* store) {
  static_assert(!PAIR || (S == 2 && V == 1));
  constexpr int kRows = PAIR ? 2 * R : R;  // input rows read per tap row
  const int64_t KH = KK > 0 ? KK : g.KH, KW = KK > 0 ? KK : g.KW, H = g.H, W = g.W;
  const int64_t top = S * oh - g.pt, shift = S * j0 - g.pl;  // input row of tap row 0
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_set1_ps(b);
      // Unrolled whole for a fixed kernel: GCC otherwise keeps the accumulators on
      // the stack across tap rows, a store and a reload in every chain.
#pragma GCC unroll 8
  for (int64_t kh = 0; kh < KH; ++kh) {
    // Column 0 of each input row, offset by the tap: lanes before the row are masked off.
    const float* row[kRows];
    for (int r = 0; r < kRows; ++r) {
      const int64_t ih = top + S * r + kh;
      row[r] = (ih >= 0 && ih < H ? x + ih * W : g.zeros) + shift;
    }
    if constexpr (S == 1 && KK == 3) {
      // The three taps of a row from two 16-column reads: columns 0-15, then
      // the same moved on by one and two lanes with the next read shifted in;
      // that next read is the following vector's first, so a row of V vectors
      // reads V + 1 times instead of 3 V.
      const __m512 w0 = _mm512_set1_ps(w[kh * 3]), w1 = _mm512_set1_ps(w[kh * 3 + 1]),
                   w2 = _mm512_set1_ps(w[kh * 3 + 2]);
      for (int r = 0; r < R; ++r) {
        __m512i cur = _mm512_castps_si512(_mm512_maskz_loadu_ps(lo[0][0], row[r]));
        for (int v = 0; v < V; ++v) {
          const __m512i nxt =
              _mm512_castps_si512(_mm512_maskz_loadu_ps(next[v], row[r] + 16 * (v + 1)));
          acc[r][v] = _mm512_fmadd_ps(w0, _mm512_castsi512_ps(cur), acc[r][v]);
          acc[r][v] =
              _mm512_fmadd_ps(w1, _mm512_castsi512_ps(_mm512_alignr_epi32(nxt, cur, 1)), acc[r][v]);
          acc[r][v] =
              _mm512_fmadd_ps(w2, _mm512_castsi512_ps(_mm512_alignr_epi32(nxt, cur, 2)), acc[r][v]);
          cur = nxt;
        }
      }
      continue;
    }
    if constexpr (S == 2 && KK == 3 && !PAIR) {
      // The three taps of a row from one 48-column read: kw = 0 the even
      // columns, kw = 1 the odd ones, kw = 2 the even ones moved on by one
      // lane with column 32 shifted in; masked to the plane once for all three.
      const __m512 w0 = _mm512_set1_ps(w[kh * 3]), w1 = _mm512_set1_ps(w[kh * 3 + 1]),
                   w2 = _mm512_set1_ps(w[kh * 3 + 2]);
      const __m512i even =
          _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
      const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) {
          const float* p = row[r] + 32 * v;
          const __m512 a = _mm512_maskz_loadu_ps(lo[v][0], p);
          const __m512 b = _mm512_maskz_loadu_ps(hi[v][0], p + 16);
          const __m512 c = _mm512_maskz_loadu_ps(next[v], p + 32);
          const __m512 e = _mm512_permutex2var_ps(a, even, b);
          const __m512 e2 = _mm512_castsi512_ps(
              _mm512_alignr_epi32(_mm512_castps_si512(c), _mm512_castps_si512(e), 1));
          acc[r][v] = _mm512_fmadd_ps(w0, e, acc[r][v]);
          acc[r][v] = _mm512_fmadd_ps(w1, _mm512_permutex2var_ps(a, odd, b), acc[r][v]);
          acc[r][v] = _mm512_fmadd_ps(w2, e2, acc[r][v]);
        }
      continue;
    }
#pragma GCC unroll 8
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m512 wt = _mm512_set1_ps(w[kh * KW + kw]);
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) {
          __m512 t;
          if constexpr (PAIR) {
            t = even_lanes(_mm512_maskz_loadu_ps(lo[0][kw], row[2 * r] + kw),
                           _mm512_maskz_loadu_ps(lo[0][kw], row[2 * r + 1] + kw));
          } else {
            const float* p = row[r] + kw + S * 16 * v;
            if constexpr (S == 1)
              t = _mm512_maskz_loadu_ps(lo[v][kw], p);
            else
              t = even_lanes(_mm512_maskz_loadu_ps(lo[v][kw], p),
                             _mm512_maskz_loadu_ps(hi[v][kw], p + 16));
          }
          acc[r][v] = _mm512_fmadd_ps(wt, t, acc[r][v]);
        }
    }
  }
  const int64_t OW = g.OW;
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      if constexpr (PAIR) {
        // Lanes 8 + l go to column l of the second row: the store starts 8 before it.
        float* first = y + (oh + 2 * r) * OW + j0;
        const __m512 out = finish(g, acc[r][0]);
        _mm512_mask_storeu_ps(first, store[0], out);
        _mm512_mask_storeu_ps(first + OW - 8, __mmask16(store[0] << 8), out);
      } else {
        _mm512_mask_storeu_ps(y + (oh + r) * OW + j0 + 16 * v, store[v], finish(g, acc[r][v]));
      }
    }
}

// Columns [j0, j0 + 16 V) of every output row, a block of rows at a time; the
// last block ends at the last row, recomputing rows the one before it wrote.
template <int S, int V, int KK>
RLX_DW_AVX512 void column_block(const DwPlane& g, const float* x, const float* w, float b, float* y,
                                int64_t j0) {
  constexpr int R = V == 1 ? 8 : V == 2 ? 4 : 2;
  // next: the 16 input columns after vector v's first 16 S (the 3-tap forms read them).
  __mmask16 lo[V][kMaxKW], hi[V][kMaxKW], next[V], store[V];
  for (int v = 0; v < V; ++v) {
    const int64_t c = j0 + 16 * v;
    store[v] = lanes_between(0, g.OW - c);
    next[v] = lanes_between(-(S * c - g.pl) - 16 * S, g.W - (S * c - g.pl) - 16 * S);
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t base = S * c + kw - g.pl;
      lo[v][kw] = lanes_between(-base, g.W - base);
      hi[v][kw] = lanes_between(-base - 16, g.W - base - 16);
    }
  }
  auto blocks = [&](int64_t rows, auto run) {
    for (int64_t oh = 0;; oh += rows) {
      const int64_t at = std::min(oh, g.OH - rows);
      run(at);
      if (at + rows == g.OH) return;
    }
  };
  if constexpr (S == 2 && V == 1) {
    if (g.OW <= 8 && g.OH >= 4)
      return blocks(4, [&](int64_t oh) {
        row_block<S, V, 2, KK, true>(g, x, w, b, y, j0, oh, lo, hi, next, store);
      });
  }
  // Blocks of RR rows; a plane with fewer rows than R takes the largest block it fills.
  auto rows_of = [&]<int RR>() {
    blocks(RR, [&](int64_t oh) {
      row_block<S, V, RR, KK>(g, x, w, b, y, j0, oh, lo, hi, next, store);
    });
  };
  if (g.OH >= R) return rows_of.template operator()<R>();
  if constexpr (R > 4)
    if (g.OH >= 4) return rows_of.template operator()<4>();
  if constexpr (R > 2)
    if (g.OH >= 2) return rows_of.template operator()<2>();
  rows_of.template operator()<1>();
}

template <int S, int KK>
void rows_plane(const DwPlane& g, const float* x, const float* w, float b, float* y) {
  // Blocks of 4 vectors (64 columns), then one of as few vectors as the rest needs.
  int64_t j0 = 0;
  for (; j0 + 64 <= g.OW; j0 += 64) column_block<S, 4, KK>(g, x, w, b, y, j0);
  switch ((g.OW - j0 + 15) / 16) {
    case 1:
      return column_block<S, 1, KK>(g, x, w, b, y, j0);
    case 2:
      return column_block<S, 2, KK>(g, x, w, b, y, j0);
    case 3:
      return column_block<S, 3, KK>(g, x, w, b, y, j0);
    case 4:
      return column_block<S, 4, KK>(g, x, w, b, y, j0);
    default:
      return;
  }
}

// NV vectors of the flat form (dw_flat_masks) from vector v0: NV chains.
template <int KK, int NV>
RLX_DW_AVX512 void flat_block(const DwPlane& g, const float* x, const float* w, float b, float* y,
                              const uint16_t* masks, int64_t v0) {
  const int64_t KH = KK > 0 ? KK : g.KH, KW = KK > 0 ? KK : g.KW, taps = KH * KW;
  const int64_t W = g.W, n = g.OH * g.OW;
  const float* origin = x + 16 * v0 - g.pt * W - g.pl;
  const uint16_t* m = masks + v0 * taps;
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_set1_ps(b);
  for (int64_t kh = 0, t = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw, ++t) {
      const __m512 wt = _mm512_set1_ps(w[t]);
      const float* tap = origin + kh * W + kw;
      for (int v = 0; v < NV; ++v)
        acc[v] = _mm512_fmadd_ps(wt, _mm512_maskz_loadu_ps(m[v * taps + t], tap + 16 * v), acc[v]);
    }
  for (int v = 0; v < NV; ++v)
    _mm512_mask_storeu_ps(y + 16 * (v0 + v), lanes_between(0, n - 16 * (v0 + v)),
                          finish(g, acc[v]));
}

// The flat form: vectors of 16 consecutive outputs of the whole plane, four
// at a time so four chains overlap.
template <int KK>
void flat_plane(const DwPlane& g, const float* x, const float* w, float b, float* y,
                const uint16_t* masks) {
  const int64_t vectors = (g.OH * g.OW + 15) / 16;
  int64_t v0 = 0;
  for (; v0 + 4 <= vectors; v0 += 4) flat_block<KK, 4>(g, x, w, b, y, masks, v0);
  switch (vectors - v0) {
    case 1:
      return flat_block<KK, 1>(g, x, w, b, y, masks, v0);
    case 2:
      return flat_block<KK, 2>(g, x, w, b, y, masks, v0);
    case 3:
      return flat_block<KK, 3>(g, x, w, b, y, masks, v0);
    default:
      return;
  }
}

template <int KK>
void plane(const DwPlane& g, const float* x, const float* w, float b, float* y,
           const std::vector<uint16_t>& flat) {
  if (!flat.empty()) return flat_plane<KK>(g, x, w, b, y, flat.data());
  if (g.S == 2) return rows_plane<2, KK>(g, x, w, b, y);
  rows_plane<1, KK>(g, x, w, b, y);
}

}  // namespace

std::vector<uint16_t> dw_flat_masks(const DwPlane& g) {
  const int64_t n = g.OH * g.OW, vectors = (n + 15) / 16;
  const int64_t row_vectors = g.OH * ((g.OW + 15) / 16);
  if (g.S != 1 || g.OW != g.W || 4 * vectors > 3 * row_vectors) return {};
  std::vector<uint16_t> masks(size_t(vectors * g.KH * g.KW), 0);
  for (int64_t v = 0; v < vectors; ++v)
    for (int64_t kh = 0, t = 0; kh < g.KH; ++kh)
      for (int64_t kw = 0; kw < g.KW; ++kw, ++t) {
        uint16_t m = 0;
        for (int64_t l = 0; l < 16; ++l) {
          const int64_t q = 16 * v + l, ih = q / g.OW + kh - g.pt, iw = q % g.OW + kw - g.pl;
          if (q < n && ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) m |= uint16_t(1u << l);
        }
        masks[size_t(v * g.KH * g.KW + t)] = m;
      }
  return masks;
}

void dw_plane_avx512(const DwPlane& g, const float* x, const float* w, float b, float* y,
                     const std::vector<uint16_t>& flat) {
  if (g.KH == 3 && g.KW == 3) return plane<3>(g, x, w, b, y, flat);
  if (g.KH == 5 && g.KW == 5) return plane<5>(g, x, w, b, y, flat);
  plane<0>(g, x, w, b, y, flat);
}

}  // namespace rlx::cpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
