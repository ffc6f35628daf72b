// Convs on channel-blocked activations ([N, ceil(C/16), H, W, 16], "NCHW16c"),
// the layout the `blocked_conv` pass gives chains of pointwise and depthwise
// convs (mobilenets). Each output vector is 16 channels of one pixel, so a
// pointwise conv is a GEMM whose activations are read in place (no panel
// copy per call) with every lane busy whatever the map's width, and a
// depthwise tap is one plain vector load (no masks or shuffles).
#pragma once
#include <cstdint>

#include "rlx/op_attrs.h"

namespace rlx::cpu {

constexpr int64_t kChannelBlock = kConvChannelBlock;
constexpr int64_t channel_blocks(int64_t c) { return conv_channel_blocks(c); }

// One conv_blocked node's geometry (2-d, no dilation). Input: blocked
// [N, CB, H, W, 16] when `in_blocked`, else NCHW [N, C, H, W]; output blocked
// [N, OB, OH, OW, 16]; weights packed as ops.def's conv_blocked says; bias
// and residual (blocked, the output's shape) optional.
struct BlockedConv {
  int64_t N = 1, C = 0, O = 0;
  int64_t H = 0, W = 0, OH = 0, OW = 0;
  int64_t KH = 1, KW = 1, SH = 1, SW = 1, PT = 0, PL = 0;
  bool in_blocked = true;
  bool depthwise = false;         // groups == C == O: one filter per channel
  Epilogue act = Epilogue::none;  // none, relu or relu6
  // Floats between the channel blocks' planes of x and of y; 0: H * W * lanes_in() and
  // OH * OW * 16. Set when x or y is a band of rows of a bigger map (conv_blocked_chain).
  int64_t x_plane = 0, y_plane = 0;
  // Input groups of a dense weight's rows; 0: in_groups(). Set when x holds only some of them
  // (conv_blocked_chain's split by hidden channels), w then pointing at the first one's.
  int64_t w_groups = 0;
  // Packed weights (the blocked_conv pass packs them): dense [OB][in_groups][KH][KW][lanes_in][16],
  // depthwise [CB][KH][KW][16].
  int64_t in_groups() const { return in_blocked ? channel_blocks(C) : C; }
  int64_t lanes_in() const { return in_blocked ? kChannelBlock : 1; }
  int64_t weight_groups() const { return w_groups ? w_groups : in_groups(); }
  // Where input group `cg` (a block, or a channel of an NCHW x) of image n starts, and where
  // output (n, block ob, oh, ow) is.
  int64_t x_at(int64_t n, int64_t cg) const {
    return (n * in_groups() + cg) * (x_plane ? x_plane : H * W * lanes_in());
  }
  int64_t y_at(int64_t n, int64_t ob, int64_t oh, int64_t ow) const {
    return (n * channel_blocks(O) + ob) * (y_plane ? y_plane : OH * OW * kChannelBlock) +
           (oh * OW + ow) * kChannelBlock;
  }
};

// relu / relu6 as min(top, max(0, v)), NaN passing as in the vector stores; none: v.
float blocked_activate(Epilogue act, float v);

// y = act(conv(x, w) + bias (+ residual)) over the pool; chooses the ISA path.
void conv_blocked(const BlockedConv& g, const float* x, const float* w, const float* bias,
                  const float* residual, float* y);
// The same on the calling thread, g taken as is (a pointwise conv is not flattened into one row).
void conv_blocked_serial(const BlockedConv& g, const float* x, const float* w, const float* bias,
                         const float* residual, float* y);

// An inverted residual block (mobilenet_v2's) on blocked activations: a pointwise conv C -> E
// (`expand`), a depthwise conv on its output (`depthwise`), a pointwise conv E -> O on that
// (`project`), each with its bias and activation, the project's residual optional. Run band by
// band of output rows, or split by hidden channels where the maps are smaller than the
// weights, the E-channel maps in per-thread scratch, so they never reach memory (see
// conv_blocked_chain.cc). The geometries are the three convs' own, N images.
struct BlockedChain {
  BlockedConv expand, depthwise, project;
};
void conv_blocked_chain(const BlockedChain& c, const float* x, const float* const (&w)[3],
                        const float* const (&bias)[3], const float* residual, float* y);

// The paths, for tests and conv_blocked's dispatch. A tile: outputs
// [ow0, ow0 + P) of row oh, blocks [ob0, ob0 + nob) (nob 1 or 2; depthwise: the
// one block ob0), taps kw in [kw_lo, kw_hi) for every pixel of the tile.
struct BlockedTile {
  int64_t n, oh, ow0, P, ob0, nob, kw_lo, kw_hi;
};
void conv_blocked_tile_portable(const BlockedConv& g, const BlockedTile& t, const float* x,
                                const float* w, const float* bias, const float* residual, float* y);
// The widest tiles (pixels) of each path: AVX-512 dense and depthwise, AVX2 both.
constexpr int kBlockedPixelsAvx512 = 14, kBlockedDepthwisePixelsAvx512 = 8;
constexpr int kBlockedPixelsAvx2 = 6;
// Return false when the path does not cover the tile (P too large).
bool conv_blocked_tile_avx512(const BlockedConv& g, const BlockedTile& t, const float* x,
                              const float* w, const float* bias, const float* residual, float* y);
bool conv_blocked_tile_avx2(const BlockedConv& g, const BlockedTile& t, const float* x,
                            const float* w, const float* bias, const float* residual, float* y);

}  // namespace rlx::cpu
