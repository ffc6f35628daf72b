// Winograd F(m x m, 3 x 3) convolution (see conv_winograd.h). Per image and
// block of tile rows: the input transform writes V[xi][c][t] (xi = one of the
// A x A transform positions, t = a tile of the block), one GEMM per xi gives
// M[xi][o][t] = U[xi][o][:] . V[xi][:][t], and the output transform turns each
// tile's A x A values of M back into its m x m outputs. The transform
// matrices are compile-time constants; their zero terms are dropped at
// compile time and +-1 terms become adds, so each tile costs only the
// arithmetic the algorithm needs.
#include "backends/cpu/conv_winograd.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "backends/cpu/conv_winograd_avx2.h"
#include "backends/cpu/epilogue.h"
#include "backends/cpu/sgemm.h"
#include "backends/cpu/weight_pack.h"
#include "core/scratch.h"
#include "rlx/checked.h"
#include "rlx/cpu_isa.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// The matrices of Lavin & Gray: V = B^T d B, U = G g G^T, Y = A^T M A.
template <int M>
struct Variant;

template <>
struct Variant<2> {
  static constexpr int m = 2, a = 4;
  static constexpr float BT[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr double G[4][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};
  static constexpr float AT[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

// F(4,3): only G is needed here; its B^T and A^T transforms are
// conv_winograd_avx2.cc's factored forms (F(4,3) runs only on rlx's sgemm).
template <>
struct Variant<4> {
  static constexpr int m = 4, a = 6;
  static constexpr double G[6][3] = {{1. / 4, 0, 0},
                                     {-1. / 6, -1. / 6, -1. / 6},
                                     {-1. / 6, 1. / 6, -1. / 6},
                                     {1. / 24, 1. / 12, 1. / 6},
                                     {1. / 24, -1. / 12, 1. / 6},
                                     {0, 0, 1}};
};

// sum_k Mx[i][k] * in(k) over the nonzero Mx[i][k] only, starting from the
// first of them (so no 0 * x or 0 + x is left for the compiler to keep).
template <const auto& Mx, int i, int k, int K, class In>
inline float combo_rest(float acc, const In& in) {
  if constexpr (k == K)
    return acc;
  else if constexpr (Mx[i][k] == 0)
    return combo_rest<Mx, i, k + 1, K>(acc, in);
  else
    return combo_rest<Mx, i, k + 1, K>(acc + Mx[i][k] * in(k), in);
}

template <const auto& Mx, int i, int k, int K, class In>
inline float combo(const In& in) {
  if constexpr (Mx[i][k] == 0)
    return combo<Mx, i, k + 1, K>(in);
  else
    return combo_rest<Mx, i, k + 1, K>(Mx[i][k] * in(k), in);
}

// out(i, sum_k Mx[i][k] in(k)) for i < R.
template <const auto& Mx, int R, int K, class In, class Out>
inline void apply_rows(const In& in, const Out& out) {
  [&]<int... i>(std::integer_sequence<int, i...>) { (out(i, combo<Mx, i, 0, K>(in)), ...); }
  (std::make_integer_sequence<int, R>{});
}

// v[(i * A + j) * stride] = (B^T d B)[i][j] for one A x A input tile d.
template <class F>
inline void input_tile(const float (&d)[F::a][F::a], float* v, int64_t stride) {
  constexpr int A = F::a;
  float t[A][A];
  for (int j = 0; j < A; ++j)
    apply_rows<F::BT, A, A>([&](int k) { return d[k][j]; }, [&](int i, float x) { t[i][j] = x; });
  for (int i = 0; i < A; ++i)
    apply_rows<F::BT, A, A>([&](int k) { return t[i][k]; },
                            [&](int j, float x) { v[(i * A + j) * stride] = x; });
}

// y[r][c] = (A^T Mt A)[r][c] for the m x m outputs of one tile.
template <class F>
inline void output_tile(const float (&mt)[F::a][F::a], float (&y)[F::m][F::m]) {
  constexpr int A = F::a, M = F::m;
  float s[M][A];
  for (int j = 0; j < A; ++j)
    apply_rows<F::AT, M, A>([&](int k) { return mt[k][j]; }, [&](int r, float x) { s[r][j] = x; });
  for (int r = 0; r < M; ++r)
    apply_rows<F::AT, M, A>([&](int k) { return s[r][k]; }, [&](int c, float x) { y[r][c] = x; });
}

// The variant for an output map: F(4,3) needs maps of a few 4x4 tiles to
// keep its GEMMs wide; smaller maps (7x7) take F(2,3).
int tile_for(const Conv3x3& s) { return std::min(s.OH, s.OW) >= 12 ? 4 : 2; }

int64_t round_up(int64_t v, int64_t to) { return (v + to - 1) / to * to; }

// U[xi][o][c] stacked as A*A blocks of `orows` (O rounded up to the kernel's
// micro-tile) rows, so each block starts a packed sliver; computed in double.
template <class F>
PackedOperand pack_weights(const Conv3x3& s, const float* w, int64_t orows,
                           const SgemmKernel& kernel) {
  constexpr int A = F::a;
  std::vector<float> u(size_t(checked_mul(A * A * orows, s.C, "winograd weights")), 0.f);
  parallel_for(s.O, 4, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t c = 0; c < s.C; ++c) {
        const float* g = w + (o * s.C + c) * 9;
        double gg[A][3];
        for (int i = 0; i < A; ++i)
          for (int l = 0; l < 3; ++l)
            gg[i][l] = F::G[i][0] * g[l] + F::G[i][1] * g[3 + l] + F::G[i][2] * g[6 + l];
        for (int i = 0; i < A; ++i)
          for (int j = 0; j < A; ++j) {
            const double v = gg[i][0] * F::G[j][0] + gg[i][1] * F::G[j][1] + gg[i][2] * F::G[j][2];
            u[size_t(((i * A + j) * orows + o) * s.C + c)] = float(v);
          }
      }
  });
  PackedOperand p = pack_a_operand(false, u.data(), s.C, A * A * orows, s.C, &kernel);
  p.source = w;  // what WeightPack compares: the conv's own weight
  return p;
}

// The distance between the A*A transform positions' blocks in V and M: at
// least n floats, an odd number of 64-byte lines. The transforms read or
// write all A*A blocks at once; a distance of a multiple of 4 KiB (C * tiles
// is often one) put those 36 streams in one L1 set, and the input transform
// spent half its time on that store conflict (perf, a 16-channel 32x32 map).
int64_t position_stride(int64_t n) {
  const int64_t lines = (n + 15) / 16;
  return (lines | 1) * 16;
}

template <class F>
void winograd_run(const Conv3x3& s, const float* x, const float* bias, Epilogue act,
                  const float* res, float* y, const PackedOperand& u, int64_t orows) {
  constexpr int A = F::a, M = F::m, AA = A * A;
  const SgemmKernel& kernel = *u.kernel;
  const int64_t th = (s.OH + M - 1) / M, tw = (s.OW + M - 1) / M;
  // Blocks of whole tile rows, about 128 tiles each (wide enough GEMMs, V and
  // M small enough to stay in cache between the three steps).
  int64_t nblk = std::max<int64_t>(1, std::min(th, th * tw / 128));
  // With at least a block per thread (of 16 tiles or more), each thread takes
  // whole blocks through all three steps: its V and M never move to another
  // core. This VM's cores are ~250 ns apart, and splitting each step over the
  // pool instead made a 16 -> 32 channel 32x32 conv 2x slower at 2 threads
  // than at 1.
  const int64_t threads = num_threads();
  if (s.N * nblk < threads && th * tw >= 16 * threads)
    nblk = std::min(th, (threads + s.N - 1) / s.N);
  const bool by_blocks = threads > 1 && s.N * nblk >= threads;
  const int64_t rows_per_blk = (th + nblk - 1) / nblk, tb_max = rows_per_blk * tw;
  nblk = (th + rows_per_blk - 1) / rows_per_blk;
  const int64_t vs_max = position_stride(s.C * tb_max), ms_max = position_stride(orows * tb_max);
  const int64_t in_plane = s.H * s.W, out_plane = s.OH * s.OW;
  // One block of image n, tile rows [ty0, ty1): its steps split over the pool
  // unless this runs as one of by_blocks' tasks (then they run inline).
  auto block = [&](int64_t n, int64_t ty0) {
    thread_local ScratchBuffer<float> v_buf, m_buf;  // reused run after run: no page faults
    float* V = v_buf.get(size_t(AA * vs_max));
    float* Mb = m_buf.get(size_t(AA * ms_max) + 8);  // + the vector output's overread
    const float* xn = x + n * s.C * in_plane;
    float* yn = y + n * s.O * out_plane;
    const int64_t ty1 = std::min(th, ty0 + rows_per_blk), tb = (ty1 - ty0) * tw;
    const int64_t vs = position_stride(s.C * tb), ms = position_stride(orows * tb);
    parallel_for(s.C, 1, [&](int64_t c0, int64_t c1) {
      thread_local std::vector<float> padded;
      for (int64_t c = c0; c < c1; ++c) {
        const float* xc = xn + c * in_plane;
        if constexpr (M == 4)  // this path needs rlx's sgemm, so AVX2
          winograd43_input_avx2(xc, s.H, s.W, s.pad_top, s.pad_left, ty0, ty1, tw, V + c * tb, vs,
                                padded);
        else
          for (int64_t ty = ty0; ty < ty1; ++ty)
            for (int64_t tx = 0; tx < tw; ++tx) {
              const int64_t iy = ty * M - s.pad_top, ix = tx * M - s.pad_left;
              float d[A][A];
              if (iy >= 0 && iy + A <= s.H && ix >= 0 && ix + A <= s.W) {
                for (int i = 0; i < A; ++i)
                  for (int j = 0; j < A; ++j) d[i][j] = xc[(iy + i) * s.W + ix + j];
              } else {
                for (int i = 0; i < A; ++i)
                  for (int j = 0; j < A; ++j) {
                    const int64_t r = iy + i, q = ix + j;
                    d[i][j] = r >= 0 && r < s.H && q >= 0 && q < s.W ? xc[r * s.W + q] : 0.f;
                  }
              }
              input_tile<F>(d, V + c * tb + (ty - ty0) * tw + tx, vs);
            }
      }
    });
    // All `orows` rows: a packed A's slivers are only read whole (the
    // padding rows are zeros and their products are never read).
    // One task per GEMM: 36 (or 16) in few chunks left a thread a whole chunk behind.
    parallel_tasks(AA, [&](int64_t xi) {
      sgemm(kernel, false, false, orows, tb, s.C, 1.f, nullptr, s.C, V + xi * vs, tb, 0.f,
            Mb + xi * ms, tb, {}, 0, 0, {&u, xi * orows}, {});
    });
    parallel_for(s.O, 1, [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        float* yo = yn + o * out_plane;
        if constexpr (M == 4)
          winograd43_output_avx2(Mb + o * tb, ms, ty0, ty1, tw, s.OH, s.OW, yo);
        else
          for (int64_t ty = ty0; ty < ty1; ++ty)
            for (int64_t tx = 0; tx < tw; ++tx) {
              const float* mo = Mb + o * tb + (ty - ty0) * tw + tx;
              float mt[A][A], out[M][M];
              for (int i = 0; i < A; ++i)
                for (int j = 0; j < A; ++j) mt[i][j] = mo[(i * A + j) * ms];
              output_tile<F>(mt, out);
              const int64_t oy = ty * M, ox = tx * M;
              const int64_t hr = std::min<int64_t>(M, s.OH - oy),
                            wc = std::min<int64_t>(M, s.OW - ox);
              for (int64_t r = 0; r < hr; ++r)
                for (int64_t c = 0; c < wc; ++c) yo[(oy + r) * s.OW + ox + c] = out[r][c];
            }
        // Bias and activation on this block's rows of the plane, while in cache.
        const int64_t r0 = ty0 * M, r1 = std::min(s.OH, ty1 * M);
        const int64_t at = (n * s.O + o) * out_plane + r0 * s.OW;  // in y, for the residual
        const GemmEpilogue<float> epi{act, bias ? bias + o : nullptr, true,
                                      res ? res + at : nullptr, 0};
        if (epi.active()) apply_epilogue(epi, yo + r0 * s.OW, 0, 1, (r1 - r0) * s.OW, 0, 0);
      }
    });
  };
  if (by_blocks)
    parallel_tasks(s.N * nblk, [&](int64_t t) { block(t / nblk, t % nblk * rows_per_blk); });
  else
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t ty0 = 0; ty0 < th; ty0 += rows_per_blk) block(n, ty0);
}

template <class F>
bool winograd_dispatch(const Conv3x3& s, const float* x, const float* w, const float* bias,
                       Epilogue act, const float* res, float* y, WeightPack& pack,
                       const SgemmKernel& kernel) {
  const int64_t orows = round_up(s.O, kernel.mr);
  const PackedOperand* u =
      pack.get(w, size_t(s.O * s.C * 9), [&] { return pack_weights<F>(s, w, orows, kernel); });
  // Another packing in this slot (another variant, or the im2col path's, or
  // for another kernel after an ISA change): not ours to use.
  if (!u || u->kernel != &kernel || u->rows != F::a * F::a * orows || u->cols != s.C) return false;
  winograd_run<F>(s, x, bias, act, res, y, *u, orows);
  return true;
}

}  // namespace

bool winograd_applies(const Conv3x3& s, bool weight_is_constant) {
  return weight_is_constant && sgemm_kernel() && s.C >= 8 && s.O >= 16 && s.OH >= 4 && s.OW >= 4;
}

// bf16 on F(2x2,3x3) only: its transforms add and subtract (entries 0 and
// +-1), where F(4x4,3x3)'s scale by up to 8 and amplify bf16's rounding
// (resnet18 against PyTorch: cosine 0.99971 with every Winograd GEMM in bf16).
bool conv3x3_winograd(const Conv3x3& s, const float* x, const float* w, const float* bias,
                      Epilogue act, const float* res, float* y, WeightPack& pack, bool bf16) {
  if (tile_for(s) == 4)
    return winograd_dispatch<Variant<4>>(s, x, w, bias, act, res, y, pack, *sgemm_kernel());
  return winograd_dispatch<Variant<2>>(s, x, w, bias, act, res, y, pack,
                                       bf16 ? *sgemm_kernel_bf16() : *sgemm_kernel());
}

}  // namespace rlx::cpu
