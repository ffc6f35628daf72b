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

float blocked_activate(Epilogue act, float v) {
  const std::optional<float> top = clamp_top(act);
  return !top || v != v ? v : std::min(*top, std::max(0.f, v));
}

void conv_blocked_tile_portable(const BlockedConv& g, const BlockedTile& t, const float* x,
                                const float* w, const float* bias, const float* residual,
                                float* y) {
  const int64_t B = kChannelBlock, L = g.lanes_in(), G = g.in_groups(), WG = g.weight_groups();
  const int64_t taps = g.KH * g.KW;
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
            const float* wv = w + (((ob * WG + cg) * taps + kh * g.KW + kw) * L) * B;
            for (int64_t l = 0; l < L; ++l)
              for (int64_t j = 0; j < B; ++j) acc[j] += xv[l] * wv[l * B + j];
          }
        }
      }
      const int64_t at = g.y_at(t.n, ob, t.oh, ow);
      for (int64_t j = 0; j < B; ++j)
        y[at + j] = blocked_activate(g.act, acc[j] + (residual ? residual[at + j] : 0.f));
    }
}

namespace {

// A conv's work items and the tiles of each: (image, output row, column
// chunk, block group) in the order conv_blocked describes.
class BlockedPlan {
 public:
  BlockedPlan(const BlockedConv& g, int64_t threads) : g_(g) {
    isa_ = cpu_isa();
    OB_ = channel_blocks(g.O);
    // Blocks per tile: two (32 output channels) for dense convs, one for depthwise.
    nob_ = g.depthwise ? 1 : 2;
    groups_ = (OB_ + nob_ - 1) / nob_;
    pmax_ = isa_ == Isa::avx2 ? kBlockedPixelsAvx2
            : g.depthwise     ? kBlockedDepthwisePixelsAvx512
                              : kBlockedPixelsAvx512;
    // Output columns whose taps all lie inside the row: ow * SW - PL >= 0 and
    // ow * SW - PL + KW - 1 < W.
    ow_a_ = std::min(g.OW, (g.PL + g.SW - 1) / g.SW);
    const int64_t last = g.W - g.KW + g.PL;  // the last column a whole window starts at, times SW
    ow_b_ = last < 0 ? ow_a_ : std::max(ow_a_, std::min(g.OW, last / g.SW + 1));
    // Work items: (image, output row, column chunk, block group), the group
    // fastest, so that the pool's runs of items split every conv of a chain by
    // rows (or by pixel chunks of a flat pointwise conv) alike and a thread
    // reads mostly what it wrote: cores here read each other's writes at half
    // speed. A conv whose weights outweigh its map (a late pointwise conv on a
    // 7x7 map) runs groups first instead, so each thread streams only its part
    // of them. Chunks are whole tiles, small enough to keep an item's inputs in
    // cache; a flat map split by pixels takes a multiple of the threads in them.
    by_pixels_ = g.depthwise || g.OH * g.OW >= g.O;
    const int64_t macs_per_col = (g.depthwise ? 1 : g.in_groups() * g.lanes_in()) * g.KH * g.KW;
    const int64_t cap =
        std::max<int64_t>(pmax_, (int64_t(1) << 15) / std::max<int64_t>(macs_per_col, 1));
    chunks_ = (g.OW + cap - 1) / cap;
    if (g.OH == 1 && by_pixels_) chunks_ = (chunks_ + threads - 1) / threads * threads;
    chunk_ = std::max(pmax_, ((g.OW + chunks_ - 1) / chunks_ + pmax_ - 1) / pmax_ * pmax_);
    chunks_ = (g.OW + chunk_ - 1) / chunk_;
  }

  int64_t items() const { return g_.N * g_.OH * chunks_ * groups_; }

  void run(int64_t i, const float* x, const float* w, const float* bias, const float* residual,
           float* y) const {
    const BlockedConv& g = g_;
    const int64_t n = i / (g.OH * chunks_ * groups_), j = i % (g.OH * chunks_ * groups_);
    const int64_t gi = by_pixels_ ? j % groups_ : j / (g.OH * chunks_);
    const int64_t rc = by_pixels_ ? j / groups_ : j % (g.OH * chunks_);  // row and chunk
    const int64_t oh = rc / chunks_, c = rc % chunks_;
    BlockedTile t{n, oh, 0, 1, gi * nob_, std::min(nob_, OB_ - gi * nob_), 0, g.KW};
    const int64_t c0 = c * chunk_, c1 = std::min(g.OW, c0 + chunk_);
    for (int64_t ow = c0; ow < c1;) {
      t.ow0 = ow;
      if (ow < ow_a_ || ow >= ow_b_) {  // an edge column: its taps clipped to the row
        t.P = 1;
        t.kw_lo = std::max<int64_t>(0, g.PL - ow * g.SW);
        t.kw_hi = std::min(g.KW, g.W + g.PL - ow * g.SW);
      } else {
        t.P = std::min({pmax_, c1 - ow, ow_b_ - ow});
        t.kw_lo = 0;
        t.kw_hi = g.KW;
      }
      const bool done =
          t.kw_lo < t.kw_hi &&
          (isa_ == Isa::avx512 ? conv_blocked_tile_avx512(g, t, x, w, bias, residual, y)
           : isa_ == Isa::avx2 ? conv_blocked_tile_avx2(g, t, x, w, bias, residual, y)
                               : false);
      // The portable tile also covers columns whose every tap is padding (bias and activation).
      if (!done) conv_blocked_tile_portable(g, t, x, w, bias, residual, y);
      ow += t.P;
    }
  }

 private:
  BlockedConv g_;
  Isa isa_;
  int64_t OB_, nob_, groups_, pmax_, ow_a_, ow_b_, chunks_, chunk_;
  bool by_pixels_;
};

}  // namespace

void conv_blocked(const BlockedConv& conv, const float* x, const float* w, const float* bias,
                  const float* residual, float* y) {
  BlockedConv g = conv;
  // A pointwise stride-1 conv is one row of H * W pixels: tiles then span rows.
  if (g.KH == 1 && g.KW == 1 && g.SH == 1 && g.SW == 1 && g.PT == 0 && g.PL == 0) {
    g.W = g.OW = g.H * g.W;
    g.H = g.OH = 1;
  }
  const BlockedPlan plan(g, num_threads());
  parallel_for(plan.items(), 1, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) plan.run(i, x, w, bias, residual, y);
  });
}

void conv_blocked_serial(const BlockedConv& g, const float* x, const float* w, const float* bias,
                         const float* residual, float* y) {
  const BlockedPlan plan(g, 1);
  for (int64_t i = 0; i < plan.items(); ++i) plan.run(i, x, w, bias, residual, y);
}

namespace {

// The geometry of a conv_blocked node (or a chain's stage) with attributes a, reading x of dims
// xd with weight dims wd and writing y of dims yd.
BlockedConv blocked_geometry(const ConvBlockedAttrs& a, const Dims& xd, const Dims& wd,
                             const Dims& yd, const std::string& where) {
  BlockedConv g;
  g.N = xd[0];
  g.C = a.channels;
  g.O = a.out_channels;
  g.H = xd[2];
  g.W = xd[3];
  g.OH = yd[2];
  g.OW = yd[3];
  g.depthwise = a.depthwise;
  g.in_blocked = a.in_blocked;
  g.KH = wd[a.depthwise ? 1 : 2];
  g.KW = wd[a.depthwise ? 2 : 3];
  g.SH = a.stride[0];
  g.SW = a.stride[1];
  g.PT = a.pads[0];
  g.PL = a.pads[1];
  g.act = a.activation;
  RLX_CHECK(g.act == Epilogue::none || g.act == Epilogue::relu || g.act == Epilogue::relu6, where,
            ": conv_blocked fuses none, relu or relu6, not ", to_string(g.act));
  return g;
}

}  // namespace

void conv_blocked_kernel(const KernelCall& c) {
  const auto& a = c.node.attrs_as<ConvBlockedAttrs>();
  const Tensor &x = c.in[0], &w = c.in[1];
  RLX_CHECK(x.dtype() == DType::F32 && c.out.dtype() == DType::F32, c.node.label(),
            ": conv_blocked runs f32 only");
  const BlockedConv g = blocked_geometry(a, x.dims(), w.dims(), c.out.dims(), c.node.label());
  conv_blocked(g, x.data<float>(), w.data<float>(), c.in[2].data<float>(),
               a.residual ? c.in[3].data<float>() : nullptr, c.out.data<float>());
}

void conv_blocked_chain_kernel(const KernelCall& c) {
  const auto& a = c.node.attrs_as<ConvBlockedChainAttrs>();
  const Tensor& x = c.in[0];
  RLX_CHECK(x.dtype() == DType::F32 && c.out.dtype() == DType::F32, c.node.label(),
            ": conv_blocked_chain runs f32 only");
  // The hidden maps' dims: x's with the hidden channels, then the depthwise conv's output.
  const int64_t EB = channel_blocks(a.hidden);
  const Dims hidden{x.dim(0), EB, x.dim(2), x.dim(3), kChannelBlock};
  const Dims after{x.dim(0), EB, c.out.dim(2), c.out.dim(3), kChannelBlock};
  BlockedChain ch;
  ch.expand =
      blocked_geometry(conv_chain_stage(a, 0), x.dims(), c.in[1].dims(), hidden, c.node.label());
  ch.depthwise =
      blocked_geometry(conv_chain_stage(a, 1), hidden, c.in[3].dims(), after, c.node.label());
  ch.project =
      blocked_geometry(conv_chain_stage(a, 2), after, c.in[5].dims(), c.out.dims(), c.node.label());
  const float* const w[3] = {c.in[1].data<float>(), c.in[3].data<float>(), c.in[5].data<float>()};
  const float* const b[3] = {c.in[2].data<float>(), c.in[4].data<float>(), c.in[6].data<float>()};
  conv_blocked_chain(ch, x.data<float>(), w, b, a.residual ? c.in[7].data<float>() : nullptr,
                     c.out.data<float>());
}

}  // namespace rlx::cpu
