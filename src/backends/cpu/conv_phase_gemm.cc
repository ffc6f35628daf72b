// Dense 2-d convs as GEMMs over phase planes (conv_phase_gemm.h); own code.
//
// Per image and band of output rows, the band's input is copied once into
// SH x SW phase planes (those some tap reads): plane (a, b) of channel c
// holds the zero-padded input's rows a, a + SH, a + 2 SH, ... and columns
// b, b + SW, ..., Wq columns wide. Window tap (c, kh, kw) of output (oh, ow)
// then lies in plane (kh % SH, kw % SW) at row oh + kh / SH, column
// ow + kw / SW, so over the output grid numbered oh * Wq + ow every tap reads
// one stride-1 run of the plane: row (c, kh, kw) of the product's B.
// SgemmKernel::pack_b_rows packs those runs directly, so the im2col matrix
// (K x positions) is never written and read back, and no strided gather runs
// per tap: each input element is copied once per band. The grid's columns
// past OW (Wq - OW per row, one for a 3x3/2 conv) are computed and dropped as
// the band is copied into y.
//
// Measured on resnet18's 3x3/2 convs at 1 thread (Zen 5, AVX-512 path):
// im2col (strided gathers) and the GEMM's own packing of it took 26% and 3%
// of the 64 -> 128 channel conv's time; see the README for the per-conv times.
#include "backends/cpu/conv_phase_gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backends/cpu/epilogue.h"
#include "backends/cpu/sgemm.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/weight_pack.h"
#include "core/scratch.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

int64_t div_up(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// dst[j] = src[j * step] for j < n, reading nothing past src[(n - 1) * step].
RLX_AVX2 void phase_row_copy(const float* src, int64_t step, int64_t n, float* dst) {
  int64_t j = 0;
  if (step == 1) {
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
  } else if (step == 2) {
    // strided8<2> at 2j reads src[2j, 2j + 16): in bounds while 2j + 15 <= 2(n - 1).
    for (; j + 9 <= n; j += 8) _mm256_storeu_ps(dst + j, vm::strided8<2>(src + 2 * j));
  }
  for (; j < n; ++j) dst[j] = src[j * step];
}

// Columns of a phase plane: enough for every tap of OW outputs and for every input column.
int64_t phase_width(const ConvPlanar& s) {
  return std::max(s.OW + (s.KW - 1) / s.SW, div_up(s.pad_left + s.W, s.SW));
}

// The bands' layout: `bands` bands of output rows whose sizes differ by one
// at most, each with PA x PB planes per channel of bh rows of Wq. Only the
// phases some tap reads are kept: a 1x1/2 conv needs one of four.
struct PhaseGrid {
  int64_t bands, rows_max, PA, PB, Wq, bh, plane;
  PhaseGrid(const ConvPlanar& s, int64_t n_bands) {
    bands = n_bands;
    rows_max = div_up(s.OH, bands);
    PA = std::min(s.SH, s.KH);
    PB = std::min(s.SW, s.KW);
    Wq = phase_width(s);
    bh = rows_max + (s.KH - 1) / s.SH;
    plane = bh * Wq;
  }
};

// dst[j] = 0 for j in [from, to).
inline void zero_run(float* dst, int64_t from, int64_t to) {
  for (int64_t j = from; j < to; ++j) dst[j] = 0.f;
}

// Every channel's planes for output rows [r0, r0 + rows) of image xn, zeros
// where the windows read padding.
RLX_AVX2 void fill_phase_planes(const ConvPlanar& s, const PhaseGrid& g, const float* xn,
                                int64_t r0, float* planes) {
  // Phase b's columns [lo, hi) read input columns SW * j + b - pad_left in the row.
  auto columns = [&](int64_t b) {
    const int64_t lo = std::min(g.Wq, div_up(s.pad_left - b, s.SW));
    return std::pair{lo, std::max(lo, std::min(g.Wq, div_up(s.W + s.pad_left - b, s.SW)))};
  };
  // Stride 2 splits each input row by parity in one pass: even columns go to
  // phase pad_left % 2, odd ones to the other.
  const bool split2 = s.SW == 2 && g.PB == 2;
  const int64_t first = s.pad_left % 2;
  const std::pair<int64_t, int64_t> cols2[2] = {columns(0),
                                                columns(std::min<int64_t>(1, g.PB - 1))};
  for (int64_t c = 0; c < s.C; ++c) {
    const float* xc = xn + c * s.H * s.W;
    for (int64_t a = 0; a < g.PA; ++a)
      for (int64_t i = 0; i < g.bh; ++i) {
        const int64_t ih = s.SH * (r0 + i) + a - s.pad_top;
        float* row = planes + (c * g.PA + a) * g.PB * g.plane + i * g.Wq;
        if (ih < 0 || ih >= s.H) {
          for (int64_t b = 0; b < g.PB; ++b) zero_run(row + b * g.plane, 0, g.Wq);
          continue;
        }
        const float* src = xc + ih * s.W;
        if (split2) {
          float* even = row + first * g.plane;
          float* odd = row + (1 - first) * g.plane;
          vm::deinterleave2(src, s.W, even + cols2[first].first, odd + cols2[1 - first].first);
          for (int64_t b = 0; b < 2; ++b) {
            zero_run(row + b * g.plane, 0, cols2[b].first);
            zero_run(row + b * g.plane, cols2[b].second, g.Wq);
          }
          continue;
        }
        for (int64_t b = 0; b < g.PB; ++b) {
          float* dst = row + b * g.plane;
          const auto [l, h] = columns(b);
          zero_run(dst, 0, l);
          if (h > l) phase_row_copy(src + s.SW * l + b - s.pad_left, s.SW, h - l, dst + l);
          zero_run(dst, h, g.Wq);
        }
      }
  }
}

}  // namespace

bool conv_phase_gemm(const ConvPlanar& s, const float* x, const float* w, const float* bias,
                     Epilogue act, const float* res, float* y, WeightPack& pack,
                     const SgemmKernel* kernel) {
  if (!kernel || s.OH * s.OW == 0) return false;
  const int64_t K = s.C * s.KH * s.KW, threads = num_threads();
  // Few products per output (a 3-channel 3x3 stem: 27) leave the copy of each band into y as
  // costly as the GEMM: mobilenet_v2's stem on the AVX2 path took 0.37-0.46 ms here against
  // 0.25-0.32 on im2col.
  if (K < 64) return false;
  // Bands of up to 256 KiB of packed B (K x grid columns), or 512 KiB where
  // the weight passes 256 KiB, as many as the threads at least. Each band
  // reads the whole weight, so wide bands pay where it is big, narrow ones
  // where it is small (resnet18 at 2 threads: its 3x3/2 128 -> 256 conv
  // 0.42-0.43 ms in 2 bands of 512 KiB, 0.48-0.59 in 7 of 128 KiB; its stem
  // 0.78-0.81 ms in bands of 256 KiB, 0.81-0.99 in bands of 512 KiB).
  const int64_t band_floats = s.O * K >= (int64_t(1) << 16) ? int64_t(1) << 17 : int64_t(1) << 16;
  int64_t bands = std::max(div_up(s.OH * phase_width(s) * K, band_floats), div_up(threads, s.N));
  if (s.N == 1) bands = div_up(bands, threads) * threads;
  const PhaseGrid g(s, std::min(bands, s.OH));
  const int64_t cols_max = (g.rows_max - 1) * g.Wq + s.OW;
  if (s.N * g.bands < threads || cols_max <= kernel->nr / 2) return false;
  const PackedOperand* packed = pack.get(w, size_t(s.O * K), [&] {
    return pack_a_operand(false, w, K, s.O, K, kernel);  // the im2col path's packing too
  });
  if (!packed || packed->kernel != kernel || packed->rows != s.O || packed->cols != K) return false;
  const int64_t out_plane = s.OH * s.OW;
  parallel_tasks(s.N * g.bands, [&](int64_t t) {
    const int64_t n = t / g.bands, band = t % g.bands;
    const int64_t r0 = band * s.OH / g.bands, rows = (band + 1) * s.OH / g.bands - r0;
    const int64_t cols = (rows - 1) * g.Wq + s.OW;
    thread_local ScratchBuffer<float> planes_buf, b_buf, c_buf;
    thread_local ScratchBuffer<const float*> taps_buf;
    float* planes = planes_buf.get(size_t(s.C * g.PA * g.PB * g.plane));
    fill_phase_planes(s, g, x + n * s.C * s.H * s.W, r0, planes);
    const float** taps = taps_buf.get(size_t(K));
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t kh = 0; kh < s.KH; ++kh)
        for (int64_t kw = 0; kw < s.KW; ++kw)
          taps[(c * s.KH + kh) * s.KW + kw] =
              planes + ((c * g.PA + kh % s.SH) * g.PB + kw % s.SW) * g.plane + kh / s.SH * g.Wq +
              kw / s.SW;
    PackedOperand b;
    b.rows = K;
    b.cols = cols;
    b.kernel = kernel;
    b.data = b_buf.get(size_t(K * ((cols + kernel->nr - 1) / kernel->nr * kernel->nr)));
    kernel->pack_b_rows(taps, K, cols, b.data);
    float* ct = c_buf.get(size_t(s.O * cols));
    // Bias and relu / relu6 in the GEMM's registers; a residual is laid out
    // as y, so it waits for the copy into y.
    const GemmEpilogue<float> epi{act, bias, true};
    sgemm(*kernel, false, false, s.O, cols, K, 1.f, nullptr, K, nullptr, 0, 0.f, ct, cols,
          res ? GemmEpilogue<float>{} : epi, 0, 0, {packed, 0}, {&b, 0});
    const int64_t at = n * s.O * out_plane + r0 * s.OW;  // the band's offset in y
    for (int64_t o = 0; o < s.O; ++o) {
      float* yo = y + at + o * out_plane;
      for (int64_t i = 0; i < rows; ++i)
        std::memcpy(yo + i * s.OW, ct + o * cols + i * g.Wq, size_t(s.OW) * sizeof(float));
      if (res) {
        const GemmEpilogue<float> e{act, bias, true, res + at + o * out_plane, 0};
        apply_epilogue(e, yo, 0, 1, rows * s.OW, o, 0);
      }
    }
  });
  return true;
}

}  // namespace rlx::cpu
