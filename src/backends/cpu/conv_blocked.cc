// Convs on channel-blocked activations (conv_blocked.h): the portable tile,
// the split of a conv into tiles over the pool, and the kernel entry. Own code
// (the layout is ONNX Runtime's NCHWc idea; no library runs it on rlx's pool).
#include "backends/cpu/conv_blocked.h"

#include <algorithm>
#include <optional>

#include "backends/cpu/epilogue.h"
#include "backends/cpu/kernels.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

namespace {

// relu / relu6 as min(top, max(0, v)), NaN passing as in the vector stores.
float activate(Epilogue act, float v) {
  const std::optional<float> top = clamp_top(act);
  return !top || v != v ? v : std::min(*top, std::max(0.f, v));
}

}  // namespace

void conv_blocked_tile_portable(const BlockedConv& g, const BlockedTile& t, const float* x,
                                const float* w, const float* bias, const float* residual,
                                float* y) {
  const int64_t B = kChannelBlock, L = g.lanes_in(), G = g.in_groups(), taps = g.KH * g.KW;
  for (int64_t ob = t.ob0; ob < t.ob0 + t.nob; ++ob)
    for (int64_t p = 0; p < t.P; ++p) {
      const int64_t ow = t.ow0 + p;
      float acc[kChannelBlock];
      for (int64_t j = 0; j < B; ++j) acc[j] = bias ? bias[ob * B + j] : 0.f;
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t ih = t.oh * g.SH - g.PT + kh;
        if (ih < 0 || ih >= g.H) continue;
        for (int64_t kw = t.kw_lo; kw < t.kw_hi; ++kw) {
          const int64_t iw = ow * g.SW - g.PL + kw;
          if (g.depthwise) {
            const float* xv = x + g.x_at(t.n, ob) + (ih * g.W + iw) * B;
            const float* wv = w + (ob * taps + kh * g.KW + kw) * B;
            for (int64_t j = 0; j < B; ++j) acc[j] += xv[j] * wv[j];
            continue;
          }
          for (int64_t cg = 0; cg < G; ++cg) {
            const float* xv = x + g.x_at(t.n, cg) + (ih * g.W + iw) * L;
            const float* wv = w + (((ob * G + cg) * taps + kh * g.KW + kw) * L) * B;
            for (int64_t l = 0; l < L; ++l)
              for (int64_t j = 0; j < B; ++j) acc[j] += xv[l] * wv[l * B + j];
          }
        }
      }
      const int64_t at = g.y_at(t.n, ob, t.oh, ow);
      for (int64_t j = 0; j < B; ++j)
        y[at + j] = activate(g.act, acc[j] + (residual ? residual[at + j] : 0.f));
    }
}

void conv_blocked(const BlockedConv& conv, const float* x, const float* w, const float* bias,
                  const float* residual, float* y) {
  BlockedConv g = conv;
  // A pointwise stride-1 conv is one row of H * W pixels: tiles then span rows.
  if (g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PT == 0 && g.PL == 0) {
    g.W = g.OW = g.H * g.W;
    g.H = g.OH = 1;
  }
  const Isa isa = cpu_isa();
  const int64_t OB = channel_blocks(g.O);
  // Blocks per tile: two (32 output channels) for dense convs, one for depthwise.
  const int64_t nob = g.depthwise ? 1 : 2, groups = (OB + nob - 1) / nob;
  const int64_t pmax = isa == Isa::avx2 ? kBlockedPixelsAvx2
                       : g.depthwise    ? kBlockedDepthwisePixelsAvx512
                                        : kBlockedPixelsAvx512;
  // Output columns whose taps all lie inside the row: ow * SW - PL >= 0 and
  // ow * SW - PL + KW - 1 < W.
  const int64_t ow_a = std::min(g.OW, (g.PL + g.SW - 1) / g.SW);
  const int64_t last = g.W - g.KW + g.PL;  // the last column a whole window starts at, times SW
  const int64_t ow_b = last < 0 ? ow_a : std::max(ow_a, std::min(g.OW, last / g.SW + 1));
  // Work items: (image, output row, column chunk, block group), the group
  // fastest, so that the pool's runs of items split every conv of a chain by
  // rows (or by pixel chunks of a flat pointwise conv) alike and a thread
  // reads mostly what it wrote: cores here read each other's writes at half
  // speed. A conv whose weights outweigh its map (a late pointwise conv on a
  // 7x7 map) runs groups first instead, so each thread streams only its part
  // of them. Chunks are whole tiles, small enough to keep an item's inputs in
  // cache; a flat map split by pixels takes a multiple of the threads in them.
  const bool by_pixels = g.depthwise || g.OH * g.OW >= g.O;
  const int64_t macs_per_col = (g.depthwise ? 1 : g.in_groups() * g.lanes_in()) * g.KH * g.KW;
  const int64_t cap =
      std::max<int64_t>(pmax, (int64_t(1) << 15) / std::max<int64_t>(macs_per_col, 1));
  int64_t chunks = (g.OW + cap - 1) / cap;
  if (g.OH == 1 && by_pixels) chunks = (chunks + num_threads() - 1) / num_threads() * num_threads();
  const int64_t chunk = std::max(pmax, ((g.OW + chunks - 1) / chunks + pmax - 1) / pmax * pmax);
  chunks = (g.OW + chunk - 1) / chunk;
  const int64_t items = g.N * g.OH * chunks * groups;
  auto tile = [&](const BlockedTile& t) {
    const bool done = isa == Isa::avx512 ? conv_blocked_tile_avx512(g, t, x, w, bias, residual, y)
                      : isa == Isa::avx2 ? conv_blocked_tile_avx2(g, t, x, w, bias, residual, y)
                                         : false;
    if (!done) conv_blocked_tile_portable(g, t, x, w, bias, residual, y);
  };
  parallel_for(items, 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t n = i / (g.OH * chunks * groups), j = i % (g.OH * chunks * groups);
      const int64_t gi = by_pixels ? j % groups : j / (g.OH * chunks);
      const int64_t rc = by_pixels ? j / groups : j % (g.OH * chunks);  // row and chunk
      const int64_t oh = rc / chunks, c = rc % chunks;
      BlockedTile t{n, oh, 0, 1, gi * nob, std::min(nob, OB - gi * nob), 0, g.KW};
      const int64_t c0 = c * chunk, c1 = std::min(g.OW, c0 + chunk);
      for (int64_t ow = c0; ow < c1;) {
        t.ow0 = ow;
        if (ow < ow_a || ow >= ow_b) {  // an edge column: its taps clipped to the row
          t.P = 1;
          t.kw_lo = std::max<int64_t>(0, g.PL - ow * g.SW);
          t.kw_hi = std::min(g.KW, g.W + g.PL - ow * g.SW);
        } else {
          t.P = std::min({pmax, c1 - ow, ow_b - ow});
          t.kw_lo = 0;
          t.kw_hi = g.KW;
        }
        if (t.kw_lo < t.kw_hi)
          tile(t);
        else  // every tap in the padding: bias and activation only
          conv_blocked_tile_portable(g, t, x, w, bias, residual, y);
        ow += t.P;
      }
    }
  });
}

void conv_blocked_kernel(const KernelCall& c) {
  const auto& a = c.node.attrs_as<ConvBlockedAttrs>();
  const Tensor &x = c.in[0], &w = c.in[1];
  RLX_CHECK(x.dtype() == DType::F32 && c.out.dtype() == DType::F32, c.node.label(),
            ": conv_blocked runs f32 only");
  BlockedConv g;
  g.N = x.dim(0);
  g.C = a.channels;
  g.O = a.out_channels;
  g.H = x.dim(2);
  g.W = x.dim(3);
  g.OH = c.out.dim(2);
  g.OW = c.out.dim(3);
  g.depthwise = a.depthwise;
  g.in_blocked = a.in_blocked;
  g.KH = w.dim(a.depthwise ? 1 : 2);
  g.KW = w.dim(a.depthwise ? 2 : 3);
  g.SH = a.stride[0];
  g.SW = a.stride[1];
  g.PT = a.pads[0];
  g.PL = a.pads[1];
  g.act = a.activation;
  RLX_CHECK(g.act == Epilogue::none || g.act == Epilogue::relu || g.act == Epilogue::relu6,
            c.node.label(), ": conv_blocked fuses none, relu or relu6, not ", to_string(g.act));
  conv_blocked(g, x.data<float>(), w.data<float>(), c.in[2].data<float>(),
               a.residual ? c.in[3].data<float>() : nullptr, c.out.data<float>());
}

}  // namespace rlx::cpu
