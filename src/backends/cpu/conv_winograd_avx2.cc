#include "backends/cpu/conv_winograd_avx2.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/vmath.h"

namespace rlx::cpu {
namespace {

// e_j[l] = p[4 * l + j] for l < 8, j < 4: an 8 x 4 -> 4 x 8 transpose of 32 floats.
RLX_AVX2_INLINE void deinterleave4(const float* p, __m256 (&e)[4]) {
  const __m256 v0 = _mm256_loadu_ps(p), v1 = _mm256_loadu_ps(p + 8);
  const __m256 v2 = _mm256_loadu_ps(p + 16), v3 = _mm256_loadu_ps(p + 24);
  const __m256 u0 = _mm256_permute2f128_ps(v0, v2, 0x20), u1 = _mm256_permute2f128_ps(v0, v2, 0x31);
  const __m256 u2 = _mm256_permute2f128_ps(v1, v3, 0x20), u3 = _mm256_permute2f128_ps(v1, v3, 0x31);
  const __m256 t0 = _mm256_unpacklo_ps(u0, u1), t1 = _mm256_unpackhi_ps(u0, u1);
  const __m256 t2 = _mm256_unpacklo_ps(u2, u3), t3 = _mm256_unpackhi_ps(u2, u3);
  e[0] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  e[1] = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  e[2] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  e[3] = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
}

// The inverse: out[4 * l + j] = e_j[l], 32 floats.
RLX_AVX2_INLINE void interleave4(const __m256 (&e)[4], float* out) {
  const __m256 t0 = _mm256_unpacklo_ps(e[0], e[1]), t1 = _mm256_unpackhi_ps(e[0], e[1]);
  const __m256 t2 = _mm256_unpacklo_ps(e[2], e[3]), t3 = _mm256_unpackhi_ps(e[2], e[3]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
  const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u1, 0x20));
  _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
  _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
  _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}

// r = B^T d for F(4,3)'s 6 x 6 B^T, factored into shared sums.
RLX_AVX2_INLINE void bt6(const __m256 (&d)[6], __m256 (&r)[6]) {
  const __m256 four = _mm256_set1_ps(4.f), five = _mm256_set1_ps(5.f), two = _mm256_set1_ps(2.f);
  const __m256 a = _mm256_fnmadd_ps(four, d[2], d[4]);  // d4 - 4 d2
  const __m256 b = _mm256_fnmadd_ps(four, d[1], d[3]);  // d3 - 4 d1
  const __m256 c = _mm256_sub_ps(d[4], d[2]);
  const __m256 e = _mm256_mul_ps(two, _mm256_sub_ps(d[3], d[1]));
  r[0] = _mm256_fmadd_ps(four, d[0], _mm256_fnmadd_ps(five, d[2], d[4]));
  r[1] = _mm256_add_ps(a, b);
  r[2] = _mm256_sub_ps(a, b);
  r[3] = _mm256_add_ps(c, e);
  r[4] = _mm256_sub_ps(c, e);
  r[5] = _mm256_fmadd_ps(four, d[1], _mm256_fnmadd_ps(five, d[3], d[5]));
}

// y = A^T m for F(4,3)'s 4 x 6 A^T.
RLX_AVX2_INLINE void at6(const __m256 (&m)[6], __m256 (&y)[4]) {
  const __m256 s12 = _mm256_add_ps(m[1], m[2]), d12 = _mm256_sub_ps(m[1], m[2]);
  const __m256 s34 = _mm256_add_ps(m[3], m[4]), d34 = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], s12), s34);
  y[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), d34, d12);
  y[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), s34, s12);
  y[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), d34, d12), m[5]);
}

}  // namespace

RLX_AVX2 void winograd43_input_avx2(const float* xc, int64_t H, int64_t W, int64_t pad_top,
                                    int64_t pad_left, int64_t ty0, int64_t ty1, int64_t tw,
                                    float* v, int64_t stride, std::vector<float>& padded) {
  // Rows ty0*4 - pad_top .. + rows of the input, columns -pad_left .. + Wp:
  // zeros outside x, and wide enough for the last group of 8 tiles.
  const int64_t rows = (ty1 - ty0) * 4 + 2, Wp = (tw + 7) / 8 * 32 + 8;
  padded.assign(size_t(rows * Wp), 0.f);
  // Padded column q holds input column q - pad_left.
  const int64_t iy0 = ty0 * 4 - pad_top, cnt = std::min(W, Wp - pad_left);
  for (int64_t r = 0; r < rows && cnt > 0; ++r) {
    const int64_t iy = iy0 + r;
    if (iy >= 0 && iy < H)
      std::memcpy(&padded[size_t(r * Wp + pad_left)], xc + iy * W, size_t(cnt) * sizeof(float));
  }
  for (int64_t ty = ty0; ty < ty1; ++ty) {
    const float* base = &padded[size_t((ty - ty0) * 4 * Wp)];
    for (int64_t tx = 0; tx < tw; tx += 8) {
      __m256 d[6][6];
      for (int i = 0; i < 6; ++i) {
        __m256 lo[4], hi[4];
        deinterleave4(base + i * Wp + 4 * tx, lo);
        deinterleave4(base + i * Wp + 4 * tx + 4, hi);  // columns 4 and 5 of each tile
        d[i][0] = lo[0], d[i][1] = lo[1], d[i][2] = lo[2], d[i][3] = lo[3];
        d[i][4] = hi[0], d[i][5] = hi[1];
      }
      __m256 t[6][6];
      for (int j = 0; j < 6; ++j) {
        const __m256 col[6] = {d[0][j], d[1][j], d[2][j], d[3][j], d[4][j], d[5][j]};
        __m256 r[6];
        bt6(col, r);
        for (int i = 0; i < 6; ++i) t[i][j] = r[i];
      }
      const int64_t t0 = (ty - ty0) * tw + tx, count = std::min<int64_t>(8, tw - tx);
      const __m256i mask = vm::first_lanes(count);
      for (int i = 0; i < 6; ++i) {
        __m256 r[6];
        bt6(t[i], r);
        for (int j = 0; j < 6; ++j) {
          float* dst = v + (i * 6 + j) * stride + t0;
          if (count == 8)
            _mm256_storeu_ps(dst, r[j]);
          else
            _mm256_maskstore_ps(dst, mask, r[j]);
        }
      }
    }
  }
}

RLX_AVX2 void winograd43_output_avx2(const float* m, int64_t stride, int64_t ty0, int64_t ty1,
                                     int64_t tw, int64_t OH, int64_t OW, float* yo) {
  for (int64_t ty = ty0; ty < ty1; ++ty)
    for (int64_t tx = 0; tx < tw; tx += 8) {
      const int64_t t0 = (ty - ty0) * tw + tx;
      __m256 s[4][6];
      for (int j = 0; j < 6; ++j) {
        __m256 col[6], y[4];
        for (int i = 0; i < 6; ++i) col[i] = _mm256_loadu_ps(m + (i * 6 + j) * stride + t0);
        at6(col, y);
        for (int r = 0; r < 4; ++r) s[r][j] = y[r];
      }
      const int64_t oy = ty * 4, ox = tx * 4;
      const int64_t hr = std::min<int64_t>(4, OH - oy),
                    cols = std::min(4 * std::min<int64_t>(8, tw - tx), OW - ox);
      for (int64_t r = 0; r < hr; ++r) {
        __m256 y[4];
        at6(s[r], y);
        float* dst = yo + (oy + r) * OW + ox;
        if (cols == 32) {
          interleave4(y, dst);
        } else {
          alignas(32) float tmp[32];
          interleave4(y, tmp);
          std::memcpy(dst, tmp, size_t(cols) * sizeof(float));
        }
      }
    }
}

}  // namespace rlx::cpu
