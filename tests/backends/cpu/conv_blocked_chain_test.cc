// conv_blocked_chain against the three conv_blocked calls it replaces, on
// every ISA path, at 1 and 2 threads. By bands of rows (bands that keep rows
// from the band before, bands that start where the pool's chunks meet) the
// tiles and sums are the same, so equal bit for bit; split by hidden channels
// (maps smaller than the weights) the partial projections are summed in
// another order, so within f32 rounding.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/conv_blocked.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"

namespace rlx {
namespace {
using cpu::BlockedChain;
using cpu::BlockedConv;
using cpu::channel_blocks;
using cpu::kChannelBlock;

struct ChainCase {
  std::string name;
  int64_t N, C, E, O, H, W, K, S, pad_top, pad_left;
  bool residual;
};

BlockedConv pointwise(int64_t N, int64_t C, int64_t O, int64_t H, int64_t W, Epilogue act) {
  BlockedConv g;
  g.N = N, g.C = C, g.O = O, g.H = g.OH = H, g.W = g.OW = W, g.act = act;
  return g;
}

BlockedChain chain_of(const ChainCase& c) {
  BlockedChain ch;
  ch.expand = pointwise(c.N, c.C, c.E, c.H, c.W, Epilogue::relu6);
  BlockedConv& d = ch.depthwise;
  d.N = c.N, d.C = d.O = c.E, d.H = c.H, d.W = c.W, d.KH = d.KW = c.K, d.SH = d.SW = c.S;
  d.PT = c.pad_top, d.PL = c.pad_left, d.depthwise = true, d.act = Epilogue::relu;
  d.OH = (c.H + 2 * c.pad_top - c.K) / c.S + 1;
  d.OW = (c.W + 2 * c.pad_left - c.K) / c.S + 1;
  ch.project = pointwise(c.N, c.E, c.O, d.OH, d.OW, Epilogue::none);
  return ch;
}

Tensor blocked_map(int64_t N, int64_t C, int64_t H, int64_t W, uint64_t seed) {
  return testing::random_tensor({N, channel_blocks(C), H, W, kChannelBlock}, DType::F32, seed);
}

TEST(ConvBlockedChain, EqualsTheThreeConvsItReplaces) {
  const std::vector<ChainCase> cases = {
      // mobilenet_v2's first expanding block in small: 3x3/2, bands of a few rows
      {"s2", 1, 16, 96, 24, 45, 41, 3, 2, 1, 1, false},
      // stride 1 with the skip, two images, channels that fill no whole block
      {"s1_residual", 2, 24, 72, 24, 30, 19, 3, 1, 1, 1, true},
      // a 5x5 window with pads that differ from K / 2, one row per band
      {"k5", 1, 32, 160, 40, 9, 70, 5, 2, 2, 1, false},
      // a map of fewer rows than threads' bands
      {"tiny", 1, 16, 48, 16, 2, 3, 3, 1, 1, 1, true},
      // split by hidden channels: mobilenet_v2's 7x7 block, and its 14x14 -> 7x7 one twice
      {"channels", 1, 160, 960, 160, 7, 7, 3, 1, 1, 1, true},
      {"channels_s2", 2, 96, 576, 160, 14, 14, 3, 2, 1, 1, false},
  };
  uint64_t seed = 40;
  for (const ChainCase& c : cases) {
    const BlockedChain ch = chain_of(c);
    const Tensor x = blocked_map(c.N, c.C, c.H, c.W, ++seed);
    const int64_t EB = channel_blocks(c.E);
    const Tensor w[3] = {
        testing::random_tensor({EB, channel_blocks(c.C), 1, 1, 16, 16}, DType::F32, ++seed),
        testing::random_tensor({EB, c.K, c.K, 16}, DType::F32, ++seed),
        testing::random_tensor({channel_blocks(c.O), EB, 1, 1, 16, 16}, DType::F32, ++seed, -0.2,
                               0.2)};
    const Tensor b[3] = {testing::random_tensor({EB * 16}, DType::F32, ++seed),
                         testing::random_tensor({EB * 16}, DType::F32, ++seed),
                         testing::random_tensor({channel_blocks(c.O) * 16}, DType::F32, ++seed)};
    const BlockedConv& gd = ch.depthwise;
    const Tensor res = blocked_map(c.N, c.O, gd.OH, gd.OW, ++seed);
    const float* r = c.residual ? res.data<float>() : nullptr;
    const float* const wp[3] = {w[0].data<float>(), w[1].data<float>(), w[2].data<float>()};
    const float* const bp[3] = {b[0].data<float>(), b[1].data<float>(), b[2].data<float>()};
    for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
      if (isa > cpu_isa()) continue;
      testing::IsaLimit limit(isa);
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        Tensor e = blocked_map(c.N, c.E, c.H, c.W, 0), d = blocked_map(c.N, c.E, gd.OH, gd.OW, 0);
        Tensor want = blocked_map(c.N, c.O, gd.OH, gd.OW, 0);
        cpu::conv_blocked(ch.expand, x.data<float>(), wp[0], bp[0], nullptr, e.data<float>());
        cpu::conv_blocked(gd, e.data<float>(), wp[1], bp[1], nullptr, d.data<float>());
        cpu::conv_blocked(ch.project, d.data<float>(), wp[2], bp[2], r, want.data<float>());
        Tensor got = blocked_map(c.N, c.O, gd.OH, gd.OW, 0);
        cpu::conv_blocked_chain(ch, x.data<float>(), wp, bp, r, got.data<float>());
        // Split by channels: the project's sums of up to 960 products whose magnitudes add up
        // to a few hundred, in two halves, differ by f32 rounding of those (~3e-5).
        const bool by_channels = c.E * c.H * c.W < (c.C + c.O) * c.E;
        EXPECT_TRUE(by_channels ? testing::all_close(got, want, 2e-4, 1e-5)
                                : testing::all_equal(got, want))
            << c.name << " on " << isa_name(isa) << " at " << threads << " threads";
      }
    }
  }
  set_num_threads(0);
}

}  // namespace
}  // namespace rlx
