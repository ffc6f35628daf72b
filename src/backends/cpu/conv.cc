// Convolution and transposed convolution, 1-d to 3-d, as im2col/col2im + GEMM.
// All spatial ranks run one code path: dims are padded to (D, H, W) with
// leading unit dims. Special cases: 1x1 stride-1 unpadded convs feed the input
// to GEMM directly; depthwise convs (groups == C == O, up to 2-d) use a direct
// loop that is vectorized along the output row; 3x3 stride-1 f32 convs with a
// constant weight take Winograd (conv_winograd.h) where rlx's sgemm runs.
//
// Threading: conv splits work into (image, group, output-tile) tasks over
// rlx's pool, each with its own im2col buffer and a single-threaded GEMM; with
// fewer tasks than threads the tasks run in turn and the GEMM itself is split
// (gemm.h). conv_transpose parallelizes over (image, group), since col2im of
// different tiles overlaps in the output; with too few of those it splits the
// GEMM and runs col2im over output channels.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "backends/cpu/conv_phase_gemm.h"
#include "backends/cpu/conv_winograd.h"
#include "backends/cpu/depthwise_avx512.h"
#include "backends/cpu/epilogue.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/weight_pack.h"
#include "core/scratch.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// `in` is the input's spatial dims and `out` the output's, for both ops.
struct Geom {
  int sp = 0;
  int64_t N = 0, C = 0, O = 0, G = 1, Cg = 0, Og = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0}, pe[3] = {0, 0, 0};
  int64_t in_sz = 1, k_sz = 1, out_sz = 1;
  bool pointwise() const {  // GEMM straight on the input, no im2col/col2im
    for (int i = 0; i < 3; ++i)
      if (k[i] != 1 || s[i] != 1 || pb[i] != 0 || pe[i] != 0 || in[i] != out[i]) return false;
    return true;
  }
};

// An optional list attribute: `sp * mult` values, `fill` when empty.
std::vector<int64_t> attr_ints(const std::vector<int64_t>& given, const char* name, int sp,
                               int64_t fill, int mult, const std::string& where) {
  auto v = list_or(given, size_t(sp * mult), fill);
  RLX_CHECK(int64_t(v.size()) == sp * mult, where, ": ", name, " needs ", sp * mult,
            " values, got ", v.size());
  return v;
}

// conv_transpose's attributes, or conv's with no output_padding.
ConvTransposeAttrs conv_attrs(const Node& n, bool transpose) {
  if (transpose) return n.attrs_as<ConvTransposeAttrs>();
  const auto& a = n.attrs_as<ConvAttrs>();
  return {.stride = a.stride,
          .pads = a.pads,
          .dilation = a.dilation,
          .groups = a.groups,
          .output_padding = {}};
}

Geom conv_geom(const KernelCall& c, bool transpose) {
  const char* op = transpose ? "conv_transpose" : "conv";
  const Tensor &x = c.in[0], &w = c.in[1];
  const std::string where =
      c.node.label() + ": " + op + " x " + dims_str(x.dims()) + ", w " + dims_str(w.dims());
  RLX_CHECK(x.dtype() == w.dtype() && c.out.dtype() == x.dtype(), where, ": dtypes differ");
  RLX_CHECK(x.rank() >= 3 && x.rank() <= 5 && w.rank() == x.rank(), where,
            ": expected x [N,C,...] and w of the same rank, 1 to 3 spatial dims");
  Geom g;
  g.sp = x.rank() - 2;
  const int off = 3 - g.sp;
  g.N = x.dim(0);
  g.C = x.dim(1);
  const ConvTransposeAttrs a = conv_attrs(c.node, transpose);
  g.G = a.groups;
  RLX_CHECK(g.G >= 1, where, ": groups must be >= 1, got ", g.G);
  if (transpose) {
    RLX_CHECK(w.dim(0) == g.C && g.C % g.G == 0, where, ": input has ", g.C,
              " channels, weight [C, O/groups, ...] expects ", w.dim(0), " (groups=", g.G, ")");
    g.Cg = g.C / g.G;
    g.Og = w.dim(1);
    g.O = g.Og * g.G;
  } else {
    g.O = w.dim(0);
    g.Cg = w.dim(1);
    RLX_CHECK(g.O % g.G == 0, where, ": groups=", g.G, " does not divide ", g.O, " out channels");
    RLX_CHECK(g.C == g.Cg * g.G, where, ": input has ", g.C, " channels, weight expects ",
              g.Cg * g.G, " (groups=", g.G, ")");
    g.Og = g.O / g.G;
  }
  // conv_transpose takes no residual: its ConvTransposeAttrs-made copy has none.
  const bool residual = !transpose && c.node.attrs_as<ConvAttrs>().residual;
  if (conv_has_bias(residual, c.in.size()))
    RLX_CHECK(c.in[2].rank() == 1 && c.in[2].dim(0) == g.O && c.in[2].dtype() == x.dtype(), where,
              ": bias ", dims_str(c.in[2].dims()), " does not match ", g.O, " out channels");
  auto stride = attr_ints(a.stride, "stride", g.sp, 1, 1, where);
  auto dil = attr_ints(a.dilation, "dilation", g.sp, 1, 1, where);
  auto pads = attr_ints(a.pads, "pads", g.sp, 0, 2, where);
  auto opad = attr_ints(a.output_padding, "output_padding", g.sp, 0, 1, where);
  Dims want{g.N, g.O};
  for (int i = 0; i < g.sp; ++i) {
    const size_t u = size_t(i);
    const int j = off + i;
    g.in[j] = x.dim(2 + i);
    g.k[j] = w.dim(2 + i);
    g.s[j] = stride[u];
    g.d[j] = dil[u];
    g.pb[j] = pads[u];
    g.pe[j] = pads[u + size_t(g.sp)];
    RLX_CHECK(g.s[j] >= 1 && g.d[j] >= 1 && g.pb[j] >= 0 && g.pe[j] >= 0 && opad[u] >= 0, where,
              ": stride and dilation must be >= 1 and paddings >= 0");
    const int64_t eff = g.d[j] * (g.k[j] - 1) + 1;
    if (transpose) {
      RLX_CHECK(opad[u] < g.s[j] || opad[u] < g.d[j], where,
                ": output_padding must be smaller than stride or dilation");
      g.out[j] = (g.in[j] - 1) * g.s[j] - g.pb[j] - g.pe[j] + eff + opad[u];
    } else {
      const int64_t span = g.in[j] + g.pb[j] + g.pe[j] - eff;
      RLX_CHECK(span >= 0, where, ": kernel of extent ", eff, " exceeds the padded input");
      g.out[j] = span / g.s[j] + 1;
    }
    want.push_back(g.out[j]);
  }
  RLX_CHECK(c.out.dims() == want, where, ": output ", dims_str(c.out.dims()), ", expected ",
            dims_str(want));
  g.in_sz = g.in[0] * g.in[1] * g.in[2];
  g.k_sz = g.k[0] * g.k[1] * g.k[2];
  g.out_sz = g.out[0] * g.out[1] * g.out[2];
  return g;
}

// For j in [0, n): position (start + j) * s + off lies in [0, W) exactly for
// j in [lo, hi).
void conv_valid_range(int64_t start, int64_t n, int64_t s, int64_t off, int64_t W, int64_t& lo,
                      int64_t& hi) {
  const int64_t a = -off - start * s;         // need j * s >= a
  const int64_t b = W - 1 - off - start * s;  // need j * s <= b
  if (s == 1) {                               // the common case, without two divisions
    lo = std::max<int64_t>(a, 0);
    hi = b < 0 ? 0 : b + 1;
  } else {
    lo = a <= 0 ? 0 : (a + s - 1) / s;
    hi = b < 0 ? 0 : b / s + 1;
  }
  lo = std::min(lo, n);
  hi = std::clamp(hi, lo, n);
}

// Columns per im2col tile: keeps a tile (rows x cols) near 256 KiB of f32.
int64_t tile_cols(int64_t rows, int64_t total) {
  int64_t t = std::max<int64_t>(64, (int64_t(1) << 16) / std::max<int64_t>(rows, 1));
  t = (t + 15) / 16 * 16;
  return std::max<int64_t>(1, std::min(t, total));
}

// dst[j] = src[2 * j] for j < n, where src[2 * n - 1] may be read (the
// row holds the element after the last one taken).
RLX_AVX2 void gather_stride2_avx2(float* dst, const float* src, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, vm::strided8<2>(src + 2 * j));
  for (; j < n; ++j) dst[j] = src[2 * j];
}

RLX_AVX2 void copy_run_avx2(const float* src, int64_t n, float* dst) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(dst + j, _mm256_loadu_ps(src + j));
  if (j < n) {
    const __m256i m = vm::first_lanes(n - j);
    _mm256_maskstore_ps(dst + j, m, _mm256_maskload_ps(src + j, m));
  }
}

// dst[0, 4) = src[0, 4) as one move (an inline SSE load and store).
template <typename T>
inline void copy4(const T* src, T* dst) {
  if constexpr (std::is_same_v<T, float>) _mm_storeu_ps(dst, _mm_loadu_ps(src));
}

// dst[0, n) = src[0, n) for the short runs of small maps, where the memmove
// call std::copy_n becomes costs more than the copy. The padded-plane
// routines below that call it take Simd = true only inside an AVX2 wrapper
// that inlines them whole (flatten), so each run is one or two vector moves.
template <typename T, bool Simd>
inline void copy_run(const T* src, int64_t n, T* dst) {
  if constexpr (Simd && std::is_same_v<T, float>)
    copy_run_avx2(src, n, dst);
  else
    std::copy_n(src, n, dst);
}

// A 2-d geometry with stride 1 and no dilation: its windows are shifted
// copies of a zero-padded plane.
bool is_2d_unit_stride(const Geom& g) {
  return g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && g.s[1] == 1 && g.s[2] == 1 &&
         g.d[1] == 1 && g.d[2] == 1;
}

// A 2-d geometry without dilation (any stride): its windows are KH runs of
// KW elements of a zero-padded plane.
bool is_2d_undilated(const Geom& g) {
  return g.k[0] == 1 && g.in[0] == 1 && g.out[0] == 1 && g.d[1] == 1 && g.d[2] == 1;
}

// A zero plane big enough for an H x W plane placed at (pt, pl) and for every
// window of OH x OW outputs of KH x KW taps at strides (sh, sw), per thread.
template <typename T>
struct PaddedPlane {
  int64_t H, W, Hp, Wp, pt, pl;
  std::vector<T>& buf;
  PaddedPlane(int64_t H_, int64_t W_, int64_t pt_, int64_t pl_, int64_t OH, int64_t OW, int64_t KH,
              int64_t KW, std::vector<T>& b, int64_t sh = 1, int64_t sw = 1)
      : H(H_),
        W(W_),
        Hp(std::max(pt_ + H_, (OH - 1) * sh + KH)),
        Wp(std::max(pl_ + W_, (OW - 1) * sw + KW)),
        pt(pt_),
        pl(pl_),
        buf(b) {
    buf.assign(size_t(Hp * Wp + 4), T(0));  // + 4: copy4 from the last window may read past it
  }
  T* at(int64_t r, int64_t c) { return buf.data() + r * Wp + c; }
  // The H x W plane into its place, and back out.
  template <bool Simd>
  void load(const T* plane) {
    for (int64_t h = 0; h < H; ++h) copy_run<T, Simd>(plane + h * W, W, at(pt + h, pl));
  }
  template <bool Simd>
  void store(T* plane) {
    for (int64_t h = 0; h < H; ++h) copy_run<T, Simd>(at(pt + h, pl), W, plane + h * W);
  }
};

// im2col of whole small stride-1 maps: each plane is copied once into a
// zero-padded buffer, so a (kh, kw) row of col is OH runs of OW elements read
// with no bounds checks (the general loop below spent ~25 cycles per run on
// the 8x8 maps of the digits CNN).
template <typename T, bool Simd>
void im2col_padded(const T* x, const Geom& g, T* col, int64_t tl) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2];
  thread_local std::vector<T> buf;
  PaddedPlane<T> pad(H, W, g.pb[1], g.pb[2], OH, OW, g.k[1], g.k[2], buf);
  T* dst = col;
  for (int64_t c = 0; c < g.Cg; ++c) {
    pad.template load<Simd>(x + c * H * W);
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, dst += tl)
        for (int64_t oh = 0; oh < OH; ++oh)
          copy_run<T, Simd>(pad.at(oh + kh, kw), OW, dst + oh * OW);
  }
}

// Rows [p0, p1) of col^T[out_sz, Cg * k_sz] for undilated maps (any
// stride), plane by plane through a zero-padded copy, as im2col_padded: each
// window row is one short run with no bounds checks. Strided, the general
// loop below took 8 of the small CNN's 15 us 3x3/2 conv at 1 thread (a
// memmove call per 3-float run).
template <typename T, bool Simd>
void im2row_padded(const T* x, const Geom& g, T* colT, int64_t p0, int64_t p1) {
  const int64_t H = g.in[1], W = g.in[2], KH = g.k[1], KW = g.k[2], rows = g.Cg * g.k_sz;
  const int64_t sh = g.s[1], sw = g.s[2];
  thread_local std::vector<T> buf;
  thread_local std::vector<int64_t> corner;
  PaddedPlane<T> pad(H, W, g.pb[1], g.pb[2], g.out[1], g.out[2], KH, KW, buf, sh, sw);
  // Each position's window corner in the padded plane, once for every channel
  // (two divisions per position and channel were half of the copy's time).
  corner.resize(size_t(p1 - p0));
  for (int64_t p = p0; p < p1; ++p)
    corner[size_t(p - p0)] = pad.at(p / g.out[2] * sh, p % g.out[2] * sw) - pad.at(0, 0);
  for (int64_t c = 0; c < g.Cg; ++c) {
    pad.template load<Simd>(x + c * H * W);
    const T* plane = pad.at(0, 0);
    T* dst = colT + p0 * rows + c * g.k_sz;
    // 3-wide windows (most convs) as 4-float moves: the extra float lands in
    // the next run's slot, written after it, except past a row's last run.
    const bool wide3 = Simd && std::is_same_v<T, float> && KW == 3;
    for (int64_t p = p0; p < p1; ++p, dst += rows) {
      const T* window = plane + corner[size_t(p - p0)];
      for (int64_t kh = 0; kh < KH; ++kh) {
        if (wide3 && (c + 1 < g.Cg || kh + 1 < KH))
          copy4(window + kh * pad.Wp, dst + kh * KW);
        else
          copy_run<T, Simd>(window + kh * pad.Wp, KW, dst + kh * KW);
      }
    }
  }
}

RLX_AVX2 __attribute__((flatten)) void im2col_padded_avx2(const float* x, const Geom& g, float* col,
                                                          int64_t tl) {
  im2col_padded<float, true>(x, g, col, tl);
}
RLX_AVX2 __attribute__((flatten)) void im2row_padded_avx2(const float* x, const Geom& g,
                                                          float* colT, int64_t p0, int64_t p1) {
  im2row_padded<float, true>(x, g, colT, p0, p1);
}

// col[Cg * k_sz, p1 - p0] (rows `ld` apart; 0: p1 - p0) for output positions
// [p0, p1) of one image group x[Cg, in_sz].
template <typename T>
void im2col(const T* x, const Geom& g, int64_t p0, int64_t p1, T* col, int64_t ld = 0) {
  const int64_t tl = ld ? ld : p1 - p0, oHW = g.out[1] * g.out[2];
  if (p0 == 0 && p1 == g.out_sz && is_2d_unit_stride(g)) {
    if constexpr (std::is_same_v<T, float>)
      if (has_avx2_fma()) return im2col_padded_avx2(x, g, col, tl);
    return im2col_padded<T, false>(x, g, col, tl);
  }
  // Where p0 lies in the output, once: the segments below step through it
  // without a division each (a weight gradient's im2col has thousands of rows).
  const int64_t od0 = p0 / oHW, oh0 = p0 / g.out[2] % g.out[1], ow00 = p0 % g.out[2];
  T* dst = col;
  for (int64_t c = 0; c < g.Cg; ++c) {
    const T* xc = x + c * g.in_sz;
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw, dst += tl) {
          const int64_t offw = kw * g.d[2] - g.pb[2];
          int64_t od = od0, oh = oh0, ow0 = ow00;
          for (int64_t p = p0; p < p1; ow0 = 0, oh = oh + 1 == g.out[1] ? (++od, 0) : oh + 1) {
            const int64_t n = std::min(p1 - p, g.out[2] - ow0);
            const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            T* o = dst + (p - p0);
            p += n;
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(o, o + n, T(0));
              continue;
            }
            const T* row = xc + (id * g.in[1] + ih) * g.in[2];
            int64_t lo, hi;
            conv_valid_range(ow0, n, g.s[2], offw, g.in[2], lo, hi);
            std::fill(o, o + lo, T(0));
            std::fill(o + hi, o + n, T(0));
            const int64_t base = ow0 * g.s[2] + offw;  // row index of j = 0 (may be < 0)
            if (g.s[2] == 1 && hi > lo) {
              // Short runs (small maps, a weight gradient's 3-wide rows) by a
              // loop: a memcpy call costs more than the copy there.
              if (hi - lo <= 8)
                for (int64_t j = lo; j < hi; ++j) o[j] = row[base + j];
              else
                std::memcpy(o + lo, row + base + lo, size_t(hi - lo) * sizeof(T));
              continue;
            }
            if constexpr (std::is_same_v<T, float>)
              if (g.s[2] == 2 && hi > lo && has_avx2_fma()) {
                // The vector loop reads one past the last element taken: keep
                // the last element, whose neighbour may lie past the row, scalar.
                const bool last_in_row = base + 2 * (hi - 1) + 1 >= g.in[2];
                const int64_t n = hi - lo - (last_in_row ? 1 : 0);
                gather_stride2_avx2(o + lo, row + base + 2 * lo, n);
                if (last_in_row) o[hi - 1] = row[base + 2 * (hi - 1)];
                continue;
              }
            for (int64_t j = lo; j < hi; ++j) o[j] = row[base + j * g.s[2]];
          }
        }
  }
}

// col2im of whole small stride-1 maps, as im2col_padded: each output plane
// is accumulated in a zero-padded buffer, (kh, kw) row by row as runs of IW
// additions, and its interior copied back.
template <typename T, bool Simd>
void col2im_padded(const T* col, const Geom& g, int64_t o0, int64_t o1, T* out) {
  const int64_t IH = g.in[1], IW = g.in[2], H = g.out[1], W = g.out[2], tl = g.in_sz;
  thread_local std::vector<T> buf;
  for (int64_t o = o0; o < o1; ++o) {
    PaddedPlane<T> pad(H, W, g.pb[1], g.pb[2], IH, IW, g.k[1], g.k[2], buf);
    T* oc = out + o * g.out_sz;
    pad.template load<Simd>(oc);
    const T* src = col + o * g.k_sz * tl;
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, src += tl)
        for (int64_t ih = 0; ih < IH; ++ih) {
          T* d = pad.at(ih + kh, kw);
          const T* s = src + ih * IW;
          for (int64_t j = 0; j < IW; ++j) d[j] += s[j];
        }
    pad.template store<Simd>(oc);
  }
}

RLX_AVX2 __attribute__((flatten)) void col2im_padded_avx2(const float* col, const Geom& g,
                                                          int64_t o0, int64_t o1, float* out) {
  col2im_padded<float, true>(col, g, o0, o1, out);
}

// Transposed conv: adds col[Og * k_sz, q1 - q0] (input positions [q0, q1)) into
// out[Og, out_sz], for output channels [o0, o1).
template <typename T>
void col2im(const T* col, const Geom& g, int64_t q0, int64_t q1, int64_t o0, int64_t o1, T* out) {
  const int64_t tl = q1 - q0, iHW = g.in[1] * g.in[2];
  if (q0 == 0 && q1 == g.in_sz && is_2d_unit_stride(g)) {
    if constexpr (std::is_same_v<T, float>)
      if (has_avx2_fma()) return col2im_padded_avx2(col, g, o0, o1, out);
    return col2im_padded<T, false>(col, g, o0, o1, out);
  }
  // Where q0 lies in the input, once (as im2col does for p0).
  const int64_t id0 = q0 / iHW, ih0 = q0 / g.in[2] % g.in[1], iw00 = q0 % g.in[2];
  for (int64_t o = o0; o < o1; ++o) {
    T* oc = out + o * g.out_sz;
    const T* src = col + o * g.k_sz * tl;
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw, src += tl) {
          const int64_t offw = kw * g.d[2] - g.pb[2];
          int64_t id = id0, ih = ih0, iw0 = iw00;
          for (int64_t q = q0; q < q1; iw0 = 0, ih = ih + 1 == g.in[1] ? (++id, 0) : ih + 1) {
            const int64_t n = std::min(q1 - q, g.in[2] - iw0);
            const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
            const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
            const T* s = src + (q - q0);
            q += n;
            if (od < 0 || od >= g.out[0] || oh < 0 || oh >= g.out[1]) continue;
            T* row = oc + (od * g.out[1] + oh) * g.out[2];
            const int64_t base = iw0 * g.s[2] + offw;
            int64_t lo, hi;
            conv_valid_range(iw0, n, g.s[2], offw, g.out[2], lo, hi);
            if (g.s[2] == 1)
              for (int64_t j = lo; j < hi; ++j) row[base + j] += s[j];
            else
              for (int64_t j = lo; j < hi; ++j) row[base + j * g.s[2]] += s[j];
          }
        }
  }
}

// y[i] += a * x[i]
template <typename T>
void axpy_scalar(T* y, const T* x, T a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

__attribute__((target("avx2,fma"))) void conv_axpy_avx2(float* y, const float* x, float a,
                                                        int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}

template <typename T>
void axpy(T* y, const T* x, T a, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return conv_axpy_avx2(y, x, a, n);
  axpy_scalar(y, x, a, n);
}

// V vectors (8V outputs from column j) of one depthwise output row with
// stride S and no dilation, over a zero-padded copy of the plane: rows[kh] is
// the padded input row of tap row kh. The V accumulators are independent
// chains: one chain of KH * KW dependent FMAs would wait on FMA latency.
// KK > 0 fixes a KK x KK kernel at compile time (taps unrolled); `n` outputs
// are stored (the last block may be partial).
template <int S, int V, int KK>
RLX_AVX2_INLINE void dw_block(const float* const* rows, const float* wc, int64_t KH, int64_t KW,
                              int64_t j, int64_t n, float b, float* yr) {
  if constexpr (KK > 0) KH = KW = KK;
  __m256 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm256_set1_ps(b);
  for (int64_t kh = 0; kh < KH; ++kh) {
    const float* xr = rows[kh] + j * S;
    for (int64_t kw = 0; kw < KW; ++kw) {
      const __m256 w = _mm256_set1_ps(wc[kh * KW + kw]);
      for (int v = 0; v < V; ++v)
        acc[v] = _mm256_fmadd_ps(w, vm::strided8<S>(xr + kw + v * 8 * S), acc[v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int64_t left = n - v * 8;
    if (left >= 8)
      _mm256_storeu_ps(yr + j + v * 8, acc[v]);
    else if (left > 0)
      _mm256_maskstore_ps(yr + j + v * 8, vm::first_lanes(left), acc[v]);
  }
}

// One output row: blocks of 32, then 16, then 8 (masked) outputs. The padded
// row is readable for (OW rounded up to 8) * S + KW + S floats.
template <int S, int KK>
RLX_AVX2 void dw_row_avx2(const float* const* rows, const float* wc, int64_t KH, int64_t KW,
                          int64_t OW, float b, float* yr) {
  int64_t j = 0;
  for (; j + 32 <= OW; j += 32) dw_block<S, 4, KK>(rows, wc, KH, KW, j, 32, b, yr);
  if (j + 16 <= OW) {
    dw_block<S, 2, KK>(rows, wc, KH, KW, j, 16, b, yr);
    j += 16;
  }
  for (; j < OW; j += 8)
    dw_block<S, 1, KK>(rows, wc, KH, KW, j, std::min<int64_t>(8, OW - j), b, yr);
}

using DwRow = void (*)(const float* const*, const float*, int64_t, int64_t, int64_t, float, float*);
template <int S>
DwRow dw_row_for(int64_t KH, int64_t KW) {
  if (KH == 3 && KW == 3) return dw_row_avx2<S, 3>;
  if (KH == 5 && KW == 5) return dw_row_avx2<S, 5>;
  return dw_row_avx2<S, 0>;
}

// The activation, and the residual from element `offset` of the output on
// (bias already added by the kernel): the epilogue of a depthwise plane or row.
template <typename T>
GemmEpilogue<T> plane_epilogue(Epilogue act, const T* res, int64_t offset) {
  return {.act = act, .residual = res ? res + offset : nullptr};
}

// V vectors of a flat depthwise row from output q: out[q + i] = b +
// sum_t wc[t] * taps[t][q + i], every tap read with unit stride. NT > 0 fixes
// the tap count at compile time. `out` is readable and writable up to a
// multiple of 8.
template <int V, int NT>
RLX_AVX2_INLINE void dw_taps_block(const float* const* taps, const float* wc, int64_t nt, int64_t q,
                                   float b, float* out) {
  if constexpr (NT > 0) nt = NT;
  __m256 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = _mm256_set1_ps(b);
  for (int64_t t = 0; t < nt; ++t) {
    const __m256 w = _mm256_set1_ps(wc[t]);
    for (int v = 0; v < V; ++v)
      acc[v] = _mm256_fmadd_ps(w, _mm256_loadu_ps(taps[t] + q + v * 8), acc[v]);
  }
  for (int v = 0; v < V; ++v) _mm256_storeu_ps(out + q + v * 8, acc[v]);
}

template <int NT>
RLX_AVX2 void dw_taps_row(const float* const* taps, const float* wc, int64_t nt, int64_t n, float b,
                          float* out) {
  int64_t q = 0;
  for (; q + 32 <= n; q += 32) dw_taps_block<4, NT>(taps, wc, nt, q, b, out);
  for (; q < n; q += 8) dw_taps_block<1, NT>(taps, wc, nt, q, b, out);
}

using DwTaps = void (*)(const float* const*, const float*, int64_t, int64_t, float, float*);
DwTaps dw_taps_for(int64_t taps) {
  if (taps == 9) return dw_taps_row<9>;
  if (taps == 25) return dw_taps_row<25>;
  return dw_taps_row<0>;
}

// The AVX2 depthwise path, planes over the pool. Each plane is copied once
// into a zero-padded buffer (cheap next to its KH * KW passes of taps), so no
// tap needs a bounds check, and then computed as one flat row over the padded
// grid: output q = oh * Wg + ow reads tap (kh, kw) at q + kh * Wg + kw, which
// is output (oh, ow)'s window; the Wg - OW outputs of each grid row that lie
// in the padding are computed and dropped. Stride 2 splits the padded plane
// into its four (row, column) parity planes of Wg = Wp / 2 columns as it copies:
// output (oh, ow) reads tap (kh, kw) at plane (kh % 2, kw % 2), row oh + kh / 2,
// column ow + kw / 2, so it is a flat stride-1 row too. Row by row (what wide
// stride-1 maps take), 7x7-28x28 maps spent most of each row in partial
// blocks and ran 1.5-5x slower than ONNX Runtime's channel-blocked kernel.
void depthwise_flat(const Geom& g, const float* x, const float* w, const float* bias, Epilogue act,
                    const float* res, float* y) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2], KH = g.k[1], KW = g.k[2];
  const int64_t S = g.s[2], pt = g.pb[1], pl = g.pb[2];
  auto round_up = [](int64_t v, int64_t to) { return (v + to - 1) / to * to; };
  // The padded plane (even sizes for stride 2) and the grid the flat row runs on.
  const int64_t Hp = round_up(std::max(pt + H, (OH - 1) * S + KH), S);
  const int64_t Wp = round_up(std::max(pl + W, (OW - 1) * S + KW), S);
  const int64_t Hg = Hp / S, Wg = Wp / S, ext = round_up(OH * Wg, 8);
  // The parity planes follow each other; the flat row reads up to ext past a
  // plane's last window, so the buffer ends with that much to spare.
  const int64_t plane = Hg * Wg, buf = S * S * plane + ext + Wg + 8;
  const int64_t work = std::max<int64_t>(1, g.out_sz * g.k_sz);
  const DwTaps row = dw_taps_for(KH * KW);
  parallel_for(g.N * g.C, std::max<int64_t>(1, 16384 / work), [&](int64_t p0, int64_t p1) {
    // Zeroed once per chunk: its planes all write the same interior.
    thread_local std::vector<float> grid, flat_out;
    // Stride 1 reads the flat row up to 2 * Wp past the plane's last window.
    grid.assign(size_t(S == 2 ? buf : (Hp + 2) * Wp + 16), 0.f);
    flat_out.resize(size_t(ext));
    float* planes = grid.data();
    const float* taps[64];
    for (int64_t kh = 0, t = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw, ++t)
        taps[t] = planes + ((kh % S) * S + kw % S) * plane + (kh / S) * Wg + kw / S;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      const float* xp = x + p * g.in_sz;
      for (int64_t ih = 0; ih < H; ++ih) {
        const float* src = xp + ih * W;
        const int64_t r = pt + ih;
        if (S == 1) {
          std::memcpy(planes + r * Wp + pl, src, size_t(W) * sizeof(float));
          continue;
        }
        // Padded column pl + iw: parity (pl + iw) % 2, column (pl + iw) / 2.
        float* row0 = planes + (r % 2) * 2 * plane + (r / 2) * Wg;
        float* first = row0 + (pl % 2) * plane + pl / 2;
        float* second = row0 + ((pl + 1) % 2) * plane + (pl + 1) / 2;
        vm::deinterleave2(src, W, first, second);
      }
      row(taps, w + c * g.k_sz, KH * KW, OH * Wg, bias ? bias[c] : 0.0f, flat_out.data());
      float* yp = y + p * g.out_sz;
      for (int64_t oh = 0; oh < OH; ++oh) std::copy_n(flat_out.data() + oh * Wg, OW, yp + oh * OW);
      apply_epilogue(plane_epilogue(act, res, p * g.out_sz), yp, g.out_sz, 1, g.out_sz, 0, 0);
    }
  });
}

// The AVX2 depthwise path for wide stride-1 maps (and unequal strides): each
// plane copied once into a zero-padded buffer, rows through dw_row_avx2.
void depthwise_rows(const Geom& g, const float* x, const float* w, const float* bias, Epilogue act,
                    const float* res, float* y) {
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2], KH = g.k[1], KW = g.k[2];
  const int64_t S = g.s[2], pt = g.pb[1], pl = g.pb[2];
  const int64_t Wp = std::max(pl + W, ((OW + 7) / 8 * 8 - 1) * S + KW + S) + 8;
  const int64_t Hp = std::max(pt + H, (OH - 1) * g.s[1] + KH);
  const int64_t work = std::max<int64_t>(1, g.out_sz * g.k_sz);
  const DwRow row = S == 1 ? dw_row_for<1>(KH, KW) : dw_row_for<2>(KH, KW);
  parallel_for(g.N * g.C, std::max<int64_t>(1, 16384 / work), [&](int64_t p0, int64_t p1) {
    thread_local std::vector<float> padded;
    padded.assign(size_t(Hp * Wp), 0.f);
    const float* rows[16];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      const float* xp = x + p * g.in_sz;
      for (int64_t ih = 0; ih < H; ++ih)
        std::memcpy(&padded[size_t((pt + ih) * Wp + pl)], xp + ih * W, size_t(W) * sizeof(float));
      float* yp = y + p * g.out_sz;
      for (int64_t oh = 0; oh < OH; ++oh) {
        for (int64_t kh = 0; kh < KH; ++kh) rows[kh] = &padded[size_t((oh * g.s[1] + kh) * Wp)];
        row(rows, w + c * g.k_sz, KH, KW, OW, bias ? bias[c] : 0.0f, yp + oh * OW);
        // The activation on the row while it is in L1 (a plane may not fit).
        apply_epilogue(plane_epilogue(act, res, p * g.out_sz + oh * OW), yp + oh * OW, OW, 1, OW, 0,
                       0);
      }
    }
  });
}

// The AVX-512 path (stride 1 or 2): each plane straight from the input
// (depthwise_avx512.h), its epilogue while it is in cache.
void depthwise_direct(const Geom& g, const float* x, const float* w, const float* bias,
                      Epilogue act, const float* res, float* y) {
  const std::vector<float> zeros(size_t(g.in[2]), 0.f);
  DwPlane plane{g.in[1], g.in[2], g.k[1],   g.k[2],   g.pb[1],
                g.pb[2], g.s[2],  g.out[1], g.out[2], zeros.data()};
  // relu / relu6 without a residual in the kernel's stores; the rest after each plane.
  const std::optional<float> top = res ? std::nullopt : clamp_top(act);
  plane.clamp = top.has_value();
  plane.top = top.value_or(0.f);
  const Epilogue after = plane.clamp ? Epilogue::none : act;
  const std::vector<uint16_t> flat = dw_flat_masks(plane);
  const int64_t work = std::max<int64_t>(1, g.out_sz * g.k_sz);
  parallel_for(g.N * g.C, std::max<int64_t>(1, 16384 / work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      float* yp = y + p * g.out_sz;
      dw_plane_avx512(plane, x + p * g.in_sz, w + c * g.k_sz, bias ? bias[c] : 0.0f, yp, flat);
      apply_epilogue(plane_epilogue(after, res, p * g.out_sz), yp, g.out_sz, 1, g.out_sz, 0, 0);
    }
  });
}

// Depthwise (groups == C == O), at most 2 spatial dims (so D == 1).
template <typename T>
void depthwise(const Geom& g, const T* x, const T* w, const T* bias, Epilogue act, const T* res,
               T* y) {
  if constexpr (std::is_same_v<T, float>) {
    const bool direct = g.d[1] == 1 && g.d[2] == 1 && g.s[1] == g.s[2] && g.s[2] <= 2;
    if (direct && g.k[2] <= 16 && cpu_isa() >= Isa::avx512)
      return depthwise_direct(g, x, w, bias, act, res, y);
    const bool fast = has_avx2_fma() && g.d[1] == 1 && g.d[2] == 1 && g.s[2] <= 2 && g.k[1] <= 16;
    const bool flat = g.s[1] == g.s[2] && (g.s[2] == 2 || g.out[2] < 32) && g.k_sz <= 64;
    if (fast)
      return flat ? depthwise_flat(g, x, w, bias, act, res, y)
                  : depthwise_rows(g, x, w, bias, act, res, y);
  }
  const int64_t H = g.in[1], W = g.in[2], OH = g.out[1], OW = g.out[2], KH = g.k[1], KW = g.k[2];
  const int64_t work = std::max<int64_t>(1, g.out_sz * g.k_sz);
  parallel_for(g.N * g.C, std::max<int64_t>(1, 16384 / work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % g.C;
      const T* xp = x + p * g.in_sz;
      const T* wc = w + c * g.k_sz;
      T* yp = y + p * g.out_sz;
      std::fill(yp, yp + g.out_sz, bias ? bias[c] : T(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        T* yr = yp + oh * OW;
        for (int64_t kh = 0; kh < KH; ++kh) {
          const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
          if (ih < 0 || ih >= H) continue;
          const T* xr = xp + ih * W;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t off = kw * g.d[2] - g.pb[2];
            int64_t lo, hi;
            conv_valid_range(0, OW, g.s[2], off, W, lo, hi);
            if (hi <= lo) continue;
            const T wv = wc[kh * KW + kw];
            if (g.s[2] == 1)
              axpy(yr + lo, xr + lo + off, wv, hi - lo);
            else
              for (int64_t j = lo; j < hi; ++j) yr[j] += wv * xr[j * g.s[2] + off];
          }
        }
      }
      apply_epilogue(plane_epilogue(act, res, p * g.out_sz), yp, g.out_sz, 1, g.out_sz, 0, 0);
    }
  });
}

// A 2-d 3x3 conv with stride 1, no dilation and one group: Winograd's shape.
bool is_3x3_s1(const Geom& g) {
  return g.sp == 2 && g.G == 1 && g.k[1] == 3 && g.k[2] == 3 && g.s[1] == 1 && g.s[2] == 1 &&
         g.d[1] == 1 && g.d[2] == 1;
}

// Rows [p0, p1) of col^T[out_sz, Cg * k_sz] of one image group x[Cg, in_sz]:
// row p holds every input window element output position p reads, in
// im2col's row order.
template <typename T>
void im2row(const T* x, const Geom& g, T* colT, int64_t p0, int64_t p1) {
  const int64_t rows = g.Cg * g.k_sz, oHW = g.out[1] * g.out[2];
  // A part of a map too when its windows outweigh padding its planes again
  // (resnet18's 7x7 parts of 14x14 maps do not).
  if (is_2d_undilated(g) && (2 * (p1 - p0) * g.k_sz >= g.in_sz || (p0 == 0 && p1 == g.out_sz))) {
    if constexpr (std::is_same_v<T, float>)
      if (has_avx2_fma()) return im2row_padded_avx2(x, g, colT, p0, p1);
    return im2row_padded<T, false>(x, g, colT, p0, p1);
  }
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t od = p / oHW, oh = p / g.out[2] % g.out[1], ow = p % g.out[2];
    T* dst = colT + p * rows;
    const int64_t iw0 = ow * g.s[2] - g.pb[2];
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
        for (int64_t kh = 0; kh < g.k[1]; ++kh, dst += g.k[2]) {
          const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
          if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
            std::fill(dst, dst + g.k[2], T(0));
            continue;
          }
          const T* row = x + c * g.in_sz + (id * g.in[1] + ih) * g.in[2];
          if (g.d[2] == 1 && iw0 >= 0 && iw0 + g.k[2] <= g.in[2]) {
            std::copy_n(row + iw0, g.k[2], dst);
            continue;
          }
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            const int64_t iw = iw0 + kw * g.d[2];
            dst[kw] = iw >= 0 && iw < g.in[2] ? row[iw] : T(0);
          }
        }
      }
  }
}

// Tasks 0..n-1 of a conv: spread over the pool with single-threaded GEMMs
// when there are enough to occupy every thread, else in turn with each GEMM
// split over the pool. task(t, scratch, serial) reuses a worker's scratch.
template <class Scratch, class Task>
void run_conv_tasks(int64_t tasks, const Task& task) {
  if (tasks >= num_threads()) {
    parallel_tasks(tasks, [&](int64_t t) {
      thread_local Scratch scratch;  // each worker's, kept between tasks and runs
      task(t, scratch, true);
    });
  } else {
    Scratch scratch;
    for (int64_t t = 0; t < tasks; ++t) task(t, scratch, false);
  }
}

// C[M, N] = op(W)[M, K] op(B)[K, N] of one task (`packed` is f32's only); W
// is [M, K], or [K, M] when transposed (conv_transpose's W^T).
template <typename T>
void conv_gemm(bool serial, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const T* W,
               const T* B, int64_t ldb, T* C, int64_t ldc, const GemmEpilogue<T>& epi = {},
               GemmPacked packed = {}) {
  const int64_t lda = trans_a ? M : K;
  if constexpr (std::is_same_v<T, float>) {
    if (serial)
      gemm_serial(trans_a, trans_b, M, N, K, 1.f, W, lda, B, ldb, 0.f, C, ldc, epi, packed);
    else
      gemm(trans_a, trans_b, M, N, K, 1.f, W, lda, B, ldb, 0.f, C, ldc, epi, packed);
  } else if (serial) {
    gemm_serial(trans_a, trans_b, M, N, K, T(1), W, lda, B, ldb, T(0), C, ldc, epi);
  } else {
    gemm(trans_a, trans_b, M, N, K, T(1), W, lda, B, ldb, T(0), C, ldc, epi);
  }
}

// Convs whose output maps are small (a weight gradient's 3x3, late CNN
// layers at batch > 1): one GEMM per chunk of images, their im2col columns
// side by side, instead of one skinny GEMM per image (each packing the same
// weight again when it is not constant). Returns false when not worth it.
// With a kernel wider than the output (a weight gradient's kernel is the
// forward output map) the transposed im2col is built instead: per output
// position a row of every input window, copied in runs of the kernel's width
// rather than of the output's.
template <typename T>
bool conv_small_maps(const Geom& g, const T* x, const T* w, const T* bias, Epilogue act,
                     const T* res, T* y) {
  const int64_t rows = g.Cg * g.k_sz;
  if (g.out_sz > 256 || g.pointwise()) return false;
  const bool by_rows = g.k[2] > g.out[2];
  // Images per GEMM: a col buffer of about 1 MiB, and at least one per thread when possible.
  int64_t nb =
      std::clamp<int64_t>((int64_t(1) << 18) / std::max<int64_t>(rows * g.out_sz, 1), 1, g.N);
  nb = std::min(nb, std::max<int64_t>(1, (g.N + num_threads() - 1) / num_threads()));
  if (nb < 2 && !by_rows) return false;
  const int64_t chunks = (g.N + nb - 1) / nb, tasks = chunks * g.G;
  struct Scratch {
    std::vector<T> col, out;
  };
  auto task = [&](int64_t t, Scratch& sc, bool serial) {
    std::vector<T>&col = sc.col, &out = sc.out;
    const int64_t n0 = t / g.G * nb, gi = t % g.G, m = std::min(nb, g.N - n0), cols = m * g.out_sz;
    col.resize(size_t(rows * cols));
    out.resize(size_t(g.Og * cols));
    for (int64_t j = 0; j < m; ++j) {
      const T* xj = x + ((n0 + j) * g.C + gi * g.Cg) * g.in_sz;
      if (by_rows)
        im2row(xj, g, col.data() + j * g.out_sz * rows, 0, g.out_sz);
      else
        im2col(xj, g, 0, g.out_sz, col.data() + j * g.out_sz, cols);
    }
    const GemmEpilogue<T> epi{act, bias ? bias + gi * g.Og : nullptr, true};
    const T* wg = w + gi * g.Og * rows;
    // B is col [rows, cols], or its transpose [cols, rows] when built by rows.
    const int64_t ldb = by_rows ? rows : cols;
    // The product's columns are several images': a residual is added once
    // the outputs are in place, before the activation, so then all of it is.
    conv_gemm(serial, false, by_rows, g.Og, cols, rows, wg, col.data(), ldb, out.data(), cols,
              res ? GemmEpilogue<T>{} : epi);
    for (int64_t j = 0; j < m; ++j) {
      T* yj = y + ((n0 + j) * g.O + gi * g.Og) * g.out_sz;
      for (int64_t o = 0; o < g.Og; ++o)
        std::copy_n(out.data() + o * cols + j * g.out_sz, g.out_sz, yj + o * g.out_sz);
      if (res) {
        GemmEpilogue<T> e = epi;
        e.residual = res + (yj - y);
        e.residual_ld = g.out_sz;
        apply_epilogue(e, yj, g.out_sz, g.Og, g.out_sz, 0, 0);
      }
    }
  };
  run_conv_tasks<Scratch>(tasks, task);
  return true;
}

// Small output maps (late CNN layers: a 7x7 map is 49 positions) with a
// constant f32 weight: C^T[P, O] = col^T[P, K] W^T, so the output channels lie
// along the micro-kernel's wide side. An [O, 49] product would fill one
// 32-wide panel and leave a 17-wide remnant mostly empty; [49, O] wastes only
// part of one sliver of rows. W^T is packed once per compiled graph; the
// images' positions stack as rows of one product, then C^T is transposed into y.
// Measured on resnet18's 3x3/2 256->512 conv (7x7 out) at 1 thread: 1.55 -> 1.21
// ms. Not for 1x1 kernels (960->320 on 7x7 went 0.36 -> 0.50 ms) nor for 3x3/1,
// where Winograd's fewer products win (512->512 on 7x7: 2.1 against 3.4 ms).
bool conv_small_maps_transposed(const Geom& g, const float* x, const float* w, const float* bias,
                                Epilogue act, const float* res, float* y, WeightPack* pack,
                                const SgemmKernel* kernel) {
  if (g.G != 1 || g.out_sz > 64 || g.k_sz == 1 || !gemm_uses_packed_operands(g.O)) return false;
  // A weight that is not constant (training) is packed by the product itself,
  // once for all images, which pays in a weight gradient's form (a kernel
  // wider than its output: im2row copies long runs; the weight is the output
  // gradient, too big to pack per chunk of images as conv_small_maps would):
  // the digits CNN's 16->32 weight gradient at 1 thread, 0.343 -> 0.283 ms.
  // col^T is capped at 8 MiB.
  const int64_t K = g.C * g.k_sz, P = g.N * g.out_sz;
  if (!pack && (g.k[2] <= g.out[2] || P * K > (int64_t(1) << 21))) return false;
  const PackedOperand* wt = nullptr;
  if (pack) {
    wt = pack->get(w, size_t(K * g.O), [&] { return pack_b_operand(true, w, K, K, g.O, kernel); });
    if (!wt || wt->is_a || wt->kernel != kernel || wt->rows != K || wt->cols != g.O)
      return false;  // the slot holds another path's packing
  }
  // Named through pointers: a lambda run by a worker would see that
  // worker's thread_local, not this thread's.
  thread_local ScratchBuffer<float> colT_buf, ct_buf;
  float* colT = colT_buf.get(size_t(P * K));
  float* ct = ct_buf.get(size_t(P * g.O));
  // Positions of all images over the pool (at batch 1 there is one image).
  parallel_for(P, std::max<int64_t>(1, 8192 / K), [&](int64_t b, int64_t e) {
    for (int64_t n = b / g.out_sz; n * g.out_sz < e; ++n) {
      const int64_t p0 = std::max(b, n * g.out_sz) - n * g.out_sz;
      const int64_t p1 = std::min(e, (n + 1) * g.out_sz) - n * g.out_sz;
      im2row(x + n * g.C * g.in_sz, g, colT + n * g.out_sz * K, p0, p1);
    }
  });
  // With a residual (laid out as y) only the bias is added here, the rest
  // after the transpose.
  const GemmEpilogue<float> epi{res ? Epilogue::none : act, bias, false};
  gemm(false, true, P, g.O, K, 1.f, colT, K, w, K, 0.f, ct, g.O, epi, {nullptr, wt});
  parallel_for(g.O, std::max<int64_t>(1, 8192 / P), [&](int64_t o0, int64_t o1) {
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t p = 0; p < g.out_sz; ++p) {
        const float* src = ct + (n * g.out_sz + p) * g.O;
        float* dst = y + n * g.O * g.out_sz + p;
        for (int64_t o = o0; o < o1; ++o) dst[o * g.out_sz] = src[o];
      }
    if (res)
      for (int64_t n = 0; n < g.N; ++n) {
        const int64_t at = (n * g.O + o0) * g.out_sz;
        const GemmEpilogue<float> e{.act = act, .residual = res + at, .residual_ld = g.out_sz};
        apply_epilogue(e, y + at, g.out_sz, o1 - o0, g.out_sz, 0, 0);
      }
  });
  return true;
}

// `act` is the fused activation: applied with the bias to each output tile
// right after its GEMM (per channel plane for depthwise), while it is in cache.
// bf16 (MatmulPrecision::bf16): a constant weight's GEMMs over phase planes,
// im2col or im2row (small maps), and Winograd F(2,3)'s, run on
// sgemm_kernel_bf16() (see conv3x3_winograd for F(4,3)).
template <typename T>
void conv_impl(const Geom& g, const T* x, const T* w, const T* bias, Epilogue act, const T* res,
               T* y, WeightPack* pack, bool bf16) {
  if (g.N * g.O * g.out_sz == 0) return;
  if (g.Cg == 1 && g.Og == 1 && g.sp <= 2) return depthwise(g, x, w, bias, act, res, y);
  const SgemmKernel* kernel = bf16 ? sgemm_kernel_bf16() : sgemm_kernel();
  if constexpr (std::is_same_v<T, float>) {
    if (is_3x3_s1(g)) {
      const Conv3x3 s{g.N, g.C, g.O, g.in[1], g.in[2], g.out[1], g.out[2], g.pb[1], g.pb[2]};
      if (winograd_applies(s, pack) && conv3x3_winograd(s, x, w, bias, act, res, y, *pack, bf16))
        return;
    }
    if (conv_small_maps_transposed(g, x, w, bias, act, res, y, pack, kernel)) return;
    // Not a weight gradient's shape (a kernel wider than its output), whose
    // im2row copies long runs.
    if (pack && g.G == 1 && is_2d_undilated(g) && !g.pointwise() && g.k[2] <= g.out[2]) {
      const ConvPlanar p{g.N,    g.C,    g.O,     g.in[1], g.in[2],  g.k[1],  g.k[2],
                         g.s[1], g.s[2], g.pb[1], g.pb[2], g.out[1], g.out[2]};
      if (conv_phase_gemm(p, x, w, bias, act, res, y, *pack, kernel)) return;
    }
  }
  if (conv_small_maps(g, x, w, bias, act, res, y)) return;
  const int64_t rows = g.Cg * g.k_sz;
  const bool pw = g.pointwise();
  int64_t tile = pw ? g.out_sz : tile_cols(rows, g.out_sz);
  // Too few tiles to occupy the pool (a first layer: 1024 positions, K = 27)
  // would run im2col on one thread before a GEMM split over all; smaller
  // tiles give every thread its own im2col and GEMM.
  if (!pw && g.N * g.G * ((g.out_sz + tile - 1) / tile) < num_threads())
    tile = std::max<int64_t>(64, ((g.out_sz + num_threads() - 1) / num_threads() + 15) / 16 * 16);
  const int64_t ntiles = (g.out_sz + tile - 1) / tile, tasks = g.N * g.G * ntiles;
  auto task = [&](int64_t t, std::vector<T>& col, bool serial) {
    const int64_t ng = t / ntiles, n = ng / g.G, gi = ng % g.G;
    const int64_t p0 = t % ntiles * tile, tl = std::min(g.out_sz, p0 + tile) - p0;
    const T* xg = x + (n * g.C + gi * g.Cg) * g.in_sz;
    const T* wg = w + gi * g.Og * rows;
    const int64_t at = (n * g.O + gi * g.Og) * g.out_sz + p0;  // the tile's offset in y
    T* yg = y + at;
    const T* B = xg + p0;
    int64_t ldb = g.in_sz;
    if (!pw) {
      col.resize(size_t(rows * tl));
      im2col(xg, g, p0, p0 + tl, col.data());
      B = col.data();
      ldb = tl;
    }
    const GemmEpilogue<T> epi{act, bias ? bias + gi * g.Og : nullptr, true,
                              res ? res + at : nullptr, g.out_sz};
    // A constant f32 weight (one group) is packed once per compiled graph (the
    // slot may hold the Winograd path's packing instead: then not this).
    GemmPacked packed;
    if constexpr (std::is_same_v<T, float>)
      if (pack && g.G == 1 && gemm_uses_packed_operands(tl)) {
        packed.a = pack->get(w, size_t(g.Og * rows),
                             [&] { return pack_a_operand(false, w, rows, g.Og, rows, kernel); });
        if (packed.a && (packed.a->rows != g.Og || packed.a->cols != rows)) packed.a = nullptr;
      }
    conv_gemm(serial, false, false, g.Og, tl, rows, wg, B, ldb, yg, g.out_sz, epi, packed);
  };
  run_conv_tasks<std::vector<T>>(tasks, task);
}

template <typename T>
void conv_transpose_impl(const Geom& g, const T* x, const T* w, const T* bias, T* y) {
  if (g.N * g.O * g.out_sz == 0) return;
  const int64_t rows = g.Og * g.k_sz;  // col rows; w_g is [Cg, rows]
  const bool pw = g.pointwise();
  const int64_t tile = pw ? g.in_sz : tile_cols(rows, g.in_sz);
  const int64_t pairs = g.N * g.G;
  const bool by_pair = pairs >= num_threads();
  // Every image's product reads the same W^T: pack it once, not per image
  // (on the digits CNN's 8x8 maps the packing cost half of each product).
  GemmPacked packed;
  PackedOperand wt;
  if constexpr (std::is_same_v<T, float>)
    if (!pw && g.G == 1 && pairs > 1 && sgemm_kernel() && gemm_uses_packed_operands(tile)) {
      wt = pack_a_operand(true, w, rows, rows, g.Cg);
      packed.a = &wt;
    }
  auto pair = [&](int64_t ng, std::vector<T>& col) {
    const int64_t n = ng / g.G, gi = ng % g.G;
    const T* xg = x + (n * g.C + gi * g.Cg) * g.in_sz;
    const T* wg = w + gi * g.Cg * rows;
    T* yg = y + (n * g.O + gi * g.Og) * g.out_sz;
    for (int64_t o = 0; o < g.Og; ++o)
      std::fill(yg + o * g.out_sz, yg + (o + 1) * g.out_sz, bias ? bias[gi * g.Og + o] : T(0));
    if (pw) {  // y_g += w_g^T x_g
      if (by_pair)
        gemm_serial(true, false, g.Og, g.in_sz, g.Cg, T(1), wg, rows, xg, g.in_sz, T(1), yg,
                    g.out_sz);
      else
        gemm(true, false, g.Og, g.in_sz, g.Cg, T(1), wg, rows, xg, g.in_sz, T(1), yg, g.out_sz);
      return;
    }
    for (int64_t q0 = 0; q0 < g.in_sz; q0 += tile) {
      const int64_t tl = std::min(g.in_sz, q0 + tile) - q0;
      col.resize(size_t(rows * tl));
      conv_gemm(by_pair, true, false, rows, tl, g.Cg, wg, xg + q0, g.in_sz, col.data(), tl, {},
                packed);
      if (by_pair) {
        col2im(col.data(), g, q0, q0 + tl, 0, g.Og, yg);
      } else {
        const int64_t work = std::max<int64_t>(1, g.k_sz * tl);
        parallel_for(g.Og, std::max<int64_t>(1, 16384 / work), [&](int64_t o0, int64_t o1) {
          col2im(col.data(), g, q0, q0 + tl, o0, o1, yg);
        });
      }
    }
  };
  if (by_pair) {
    parallel_for(pairs, 1, [&](int64_t p0, int64_t p1) {
      std::vector<T> col;
      for (int64_t p = p0; p < p1; ++p) pair(p, col);
    });
  } else {
    std::vector<T> col;
    for (int64_t p = 0; p < pairs; ++p) pair(p, col);
  }
}

template <typename T>
void conv_run(const KernelCall& c, bool transpose) {
  const Geom g = conv_geom(c, transpose);
  if (transpose) {
    const T* bias = c.in.size() == 3 ? c.in[2].data<T>() : nullptr;
    return conv_transpose_impl(g, c.in[0].data<T>(), c.in[1].data<T>(), bias, c.out.data<T>());
  }
  const auto& a = c.node.attrs_as<ConvAttrs>();
  const T* bias = conv_has_bias(a.residual, c.in.size()) ? c.in[2].data<T>() : nullptr;
  const T* res = nullptr;
  if (a.residual) {
    const Tensor& r = c.in.back();
    RLX_CHECK(r.dims() == c.out.dims() && r.dtype() == c.out.dtype(), c.node.label(),
              ": conv residual ", dims_str(r.dims()), " ", dtype_name(r.dtype()),
              " does not match the output ", dims_str(c.out.dims()));
    res = r.data<T>();
  }
  // A small conv runs on the calling thread: split over this VM's two cores,
  // each of the small CNN's 3x3 convs on 32x32-4x4 maps (1-10 MFLOP, under
  // 200 KB) took 1.1-1.8x as long as on one. resnet18's 1x1/2 downsampling
  // convs (12.8 MFLOP) gain from the split: 128 -> 256 on 28x28 0.103 -> 0.069
  // ms, 256 -> 512 on 14x14 0.11 -> 0.083 at 2 threads.
  const double flop = 2.0 * double(g.N * g.O * g.out_sz) * double(g.Cg * g.k_sz);
  const double bytes = double(c.in[0].numel() + c.out.numel()) * sizeof(T);
  std::optional<SerialScope> serial;
  if (flop < 12e6 && bytes < double(1 << 20)) serial.emplace();
  conv_impl(g, c.in[0].data<T>(), c.in[1].data<T>(), bias, a.activation, res, c.out.data<T>(),
            c.pack, c.ctx.bf16_matmul);
}

void conv_dispatch(const KernelCall& c, bool transpose) {
  switch (c.in[0].dtype()) {
    case DType::F32:
      return conv_run<float>(c, transpose);
    case DType::F64:
      return conv_run<double>(c, transpose);
    default:
      throw make_error(c.node.label(), ": ", transpose ? "conv_transpose" : "conv",
                       " supports f32/f64 (f16/bf16 via f32), not ", dtype_name(c.in[0].dtype()));
  }
}

}  // namespace

void conv(const KernelCall& c) { conv_dispatch(c, false); }
void conv_transpose(const KernelCall& c) { conv_dispatch(c, true); }

}  // namespace rlx::cpu
