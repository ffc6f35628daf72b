// conv_blocked_chain (conv_blocked.h): an inverted residual block (pointwise
// expand, depthwise, pointwise project) band by band of output rows, or split
// by hidden channels on small maps. Own code.
//
// Run as three conv_blocked nodes, mobilenet_v2's expand convs write E-channel
// maps (up to 4.8 MB at 112x112) that the depthwise conv reads back, and the
// depthwise conv writes another for the project conv: at 2 threads each pass
// waits on memory and on lines the other core wrote. Here a thread expands
// the input rows one band's depthwise windows read into scratch, runs the
// depthwise conv on them into a second scratch and the project conv from
// there into y, so the E-channel maps never leave its cache. The next band on
// the same thread keeps the input rows both bands read (moved to the top of
// the scratch) instead of expanding them again; only where the pool's chunks
// meet are rows expanded twice. The tiles and their sums are conv_blocked's,
// so the result equals the three convs' bit for bit.
//
// A block whose hidden map holds fewer values than its pointwise weights (7x7
// maps of 960 channels) would read those weights once per band. It splits by
// hidden channel blocks instead: each thread expands, filters and projects
// its share of the hidden channels, reading only its part of each weight, and
// the threads' partial projections are summed in the end (in another order
// than one conv's sums, so not bit for bit).
#include <algorithm>
#include <cstring>

#include "backends/cpu/conv_blocked.h"
#include "core/scratch.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// Per-thread scratch for one band's expanded input rows: about a quarter of a
// Zen 3 core's 512 KiB L2, so the depthwise band and the weights fit beside it.
constexpr int64_t kBandBytes = int64_t(128) << 10;

// The block split by hidden channel blocks, a share per task; see the top of the file.
void chain_by_channels(const BlockedChain& c, const float* x, const float* const (&w)[3],
                       const float* const (&bias)[3], const float* residual, float* y) {
  const BlockedConv &ge = c.expand, &gd = c.depthwise, &gp = c.project;
  constexpr int64_t B = kChannelBlock;
  const int64_t EB = channel_blocks(gd.C), OB = channel_blocks(gp.O);
  const int64_t in_px = gd.H * gd.W, out_px = gd.OH * gd.OW, part = gd.N * OB * out_px * B;
  const int64_t tasks = std::min<int64_t>(num_threads(), EB);
  thread_local ScratchBuffer<float> parts_buf;
  float* parts = parts_buf.get(size_t(tasks * part));
  parallel_tasks(tasks, [&](int64_t t) {
    const int64_t e0 = t * EB / tasks, eb = (t + 1) * EB / tasks - e0;
    thread_local ScratchBuffer<float> e_buf, d_buf;
    float* E = e_buf.get(size_t(eb * in_px * B));
    float* D = d_buf.get(size_t(eb * out_px * B));
    for (int64_t n = 0; n < gd.N; ++n) {
      BlockedConv g = ge;  // hidden blocks [e0, e0 + eb) of every pixel, flat
      g.N = 1;
      g.O = eb * B;
      g.H = g.OH = 1;
      g.W = g.OW = in_px;
      conv_blocked_serial(g, x + ge.x_at(n, 0), w[0] + e0 * ge.in_groups() * ge.lanes_in() * B,
                          bias[0] + e0 * B, nullptr, E);
      g = gd;
      g.N = 1;
      g.C = g.O = eb * B;
      conv_blocked_serial(g, E, w[1] + e0 * gd.KH * gd.KW * B, bias[1] + e0 * B, nullptr, D);
      g = gp;  // their part of the projection: no bias, residual or activation yet
      g.N = 1;
      g.C = eb * B;
      g.w_groups = EB;
      g.H = g.OH = 1;
      g.W = g.OW = out_px;
      g.act = Epilogue::none;
      conv_blocked_serial(g, D, w[2] + e0 * B * B, nullptr, nullptr,
                          parts + t * part + n * OB * out_px * B);
    }
  });
  parallel_for(gd.N * OB, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)  // image i / OB, output block i % OB
      for (int64_t p = 0; p < out_px; ++p)
        for (int64_t j = 0; j < B; ++j) {
          const int64_t at = (i * out_px + p) * B + j;
          float v = bias[2][i % OB * B + j];
          for (int64_t t = 0; t < tasks; ++t) v += parts[t * part + at];
          if (residual) v += residual[at];
          y[at] = blocked_activate(gp.act, v);
        }
  });
}

}  // namespace

void conv_blocked_chain(const BlockedChain& c, const float* x, const float* const (&w)[3],
                        const float* const (&bias)[3], const float* residual, float* y) {
  const BlockedConv &ge = c.expand, &gd = c.depthwise, &gp = c.project;
  constexpr int64_t B = kChannelBlock;
  const int64_t N = gd.N, H = gd.H, W = gd.W, OH = gd.OH, OW = gd.OW, EB = channel_blocks(gd.C);
  // The two pointwise weights' values: more than the hidden map's, and the block splits by
  // hidden channels instead of by rows.
  const int64_t weights = (ge.in_groups() * ge.lanes_in() + channel_blocks(gp.O) * B) * EB * B;
  if (EB * B * H * W < weights) return chain_by_channels(c, x, w, bias, residual, y);
  // Output rows per band: as many as keep the band's input rows within kBandBytes, or as
  // read as many bytes of E-channel rows as of the pointwise weights, which every band reads
  // again (mobilenet_v2's 14x14 blocks at 1 thread ran 1.16x the three convs' time in bands
  // of 2 rows); then evened out, the bands a multiple of the threads where the images alone
  // are not.
  const int64_t in_row = EB * W * B * int64_t(sizeof(float));
  const int64_t weight_bytes = weights * int64_t(sizeof(float));
  const int64_t fit = std::max<int64_t>(
      {1, (kBandBytes / in_row - (gd.KH - gd.SH)) / gd.SH, weight_bytes / in_row / gd.SH});
  const int64_t threads = num_threads();
  int64_t bands = (OH + fit - 1) / fit;
  if (N < threads) bands = std::max(bands, (threads + N - 1) / N);
  if (N == 1) bands = std::min(OH, (bands + threads - 1) / threads * threads);
  const int64_t rows = (OH + bands - 1) / bands;
  bands = (OH + rows - 1) / rows;
  const int64_t cap_in = (rows - 1) * gd.SH + gd.KH;  // input rows of the tallest band
  const int64_t e_plane = cap_in * W * B, d_plane = rows * OW * B;
  parallel_for(N * bands, 1, [&](int64_t i0, int64_t i1) {
    thread_local ScratchBuffer<float> e_buf, d_buf;
    float* E = e_buf.get(size_t(EB * e_plane));
    float* D = d_buf.get(size_t(EB * d_plane));
    int64_t held_n = -1, h0 = 0, h1 = 0;  // E holds input rows [h0, h1) of image held_n
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / bands, r0 = item % bands * rows, r1 = std::min(OH, r0 + rows);
      const int64_t in0 = std::max<int64_t>(0, r0 * gd.SH - gd.PT);
      const int64_t in1 = std::min(H, (r1 - 1) * gd.SH - gd.PT + gd.KH);
      int64_t from = in0;  // the first row to expand; those before it are kept
      if (held_n == n && in0 >= h0 && in0 < h1) {
        if (in0 > h0)
          for (int64_t eb = 0; eb < EB; ++eb)
            std::memmove(E + eb * e_plane, E + eb * e_plane + (in0 - h0) * W * B,
                         size_t((h1 - in0) * W * B) * sizeof(float));
        from = h1;
      }
      if (from < in1) {  // expand rows [from, in1) as one flat row of pixels
        BlockedConv g = ge;
        g.N = 1;
        g.H = g.OH = 1;
        g.W = g.OW = (in1 - from) * W;
        g.x_plane = ge.H * ge.W * ge.lanes_in();
        g.y_plane = e_plane;
        conv_blocked_serial(g, x + ge.x_at(n, 0) + from * W * ge.lanes_in(), w[0], bias[0], nullptr,
                            E + (from - in0) * W * B);
      }
      held_n = n, h0 = in0, h1 = in1;
      BlockedConv g = gd;  // depthwise on the band's rows: its top pad where the band starts
      g.N = 1;
      g.H = in1 - in0;
      g.OH = r1 - r0;
      g.PT = gd.PT + in0 - r0 * gd.SH;
      g.x_plane = e_plane;
      g.y_plane = d_plane;
      conv_blocked_serial(g, E, w[1], bias[1], nullptr, D);
      g = gp;  // project the band's pixels, flat, into rows [r0, r1) of y
      g.N = 1;
      g.H = g.OH = 1;
      g.W = g.OW = (r1 - r0) * OW;
      g.x_plane = d_plane;
      g.y_plane = OH * OW * B;
      const int64_t at = gp.y_at(n, 0, r0, 0);
      conv_blocked_serial(g, D, w[2], bias[2], residual ? residual + at : nullptr, y + at);
    }
  });
}

}  // namespace rlx::cpu
