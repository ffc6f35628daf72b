// The blocked_conv pass, conv_blocked and conv_blocked_chain: which convs it
// takes, which inverted residual blocks it fuses and where the layout moves
// go, outputs against the NCHW convs on every kernel path (the portable tiles
// and the AVX-512 ones), and the primitive spelling (CoreML, autodiff)
// against the kernel.
#include <gtest/gtest.h>

#include "opt/pass_test_util.h"
#include "opt/passes.h"
#include "rlx/autodiff.h"

namespace rlx {
namespace {
using testing::count_op;
using testing::random_tensor;
using testing::S;
using Ints = std::vector<int64_t>;

// A mobilenet in miniature, batch 2 on a 19 x 17 image: a 3x3/2 stem on the
// NCHW input, a depthwise 3x3, a pointwise 24 -> 40 (channels that fill no
// whole block), an inverted residual (expand, depthwise, project + the skip),
// a 5x5/2 depthwise with uneven pads, and a last pointwise. The residual
// block's output is also read by a relu outside the chain (a second output).
struct MiniMobilenet {
  Graph g;
  TensorMap inputs;
  uint64_t seed = 10;
  bool fused;  // activations and residual adds in the convs (the epilogue pass's form), or as ops
  explicit MiniMobilenet(bool fused_epilogues = true) : fused(fused_epilogues) {
    Builder b(g);
    NodeId x = b.input("x", S({2, 3, 19, 17}));
    NodeId t = conv(b, x, 24, 3, 3, 2, {1, 1, 1, 1}, 1, "relu6");
    t = conv(b, t, 24, 1, 3, 1, {1, 1, 1, 1}, 24, "relu6");
    NodeId skip = conv(b, t, 40, 24, 1, 1, {0, 0, 0, 0}, 1, "none", false);
    t = conv(b, skip, 72, 40, 1, 1, {0, 0, 0, 0}, 1, "relu6");
    t = conv(b, t, 72, 1, 3, 1, {1, 1, 1, 1}, 72, "relu6");
    NodeId block = conv(b, t, 40, 72, 1, 1, {0, 0, 0, 0}, 1, "none", true, skip);
    t = conv(b, block, 40, 1, 5, 2, {1, 2, 2, 1}, 40, "relu");
    g.add_output("y", conv(b, t, 20, 40, 1, 1, {0, 0, 0, 0}, 1, "none"));
    g.add_output("side", b.unary(Op::Relu, block));
    inputs = {{"x", random_tensor({2, 3, 19, 17}, DType::F32, 1)}};
  }
  NodeId conv(Builder& b, NodeId x, int64_t O, int64_t Cg, int64_t k, int64_t s, Ints pads,
              int64_t groups, const char* act, bool bias = true, NodeId residual = -1) {
    std::vector<NodeId> in{x,
                           b.constant(random_tensor({O, Cg, k, k}, DType::F32, ++seed, -0.3, 0.3))};
    if (bias) in.push_back(b.constant(random_tensor({O}, DType::F32, ++seed)));
    if (fused && residual >= 0) in.push_back(residual);
    NodeId y = b.op(Op::Conv, std::move(in),
                    {{"stride", Ints{s, s}},
                     {"pads", pads},
                     {"groups", groups},
                     {"activation", std::string(fused ? act : "none")},
                     {"residual", fused && residual >= 0}});
    if (fused) return y;
    if (residual >= 0) y = b.add(y, residual);
    if (std::string(act) == "relu") y = b.unary(Op::Relu, y);
    if (std::string(act) == "relu6") y = b.op(Op::Clamp, {y}, {{"min", 0.0}, {"max", 6.0}});
    return y;
  }
};

::testing::AssertionResult close_outputs(const TensorMap& got, const TensorMap& want) {
  for (const auto& [name, t] : want) {
    auto r = testing::all_close(got.at(name), t, 2e-5, 2e-5);
    if (!r) return r << " (output '" << name << "')";
  }
  return ::testing::AssertionSuccess();
}

TEST(BlockedConv, AChainRunsBlockedWithLayoutMovesOnlyWhereValuesLeaveIt) {
  if (cpu_isa() < Isa::avx512) GTEST_SKIP() << "the pass runs where it pays: on AVX-512";
  MiniMobilenet m;
  const Graph g = testing::compiled_graph(m.g, {});
  // The inverted residual block is one chain: 72 channels on 10 x 9 outweigh its pointwise
  // weights (40 x 72 twice).
  EXPECT_EQ(count_op(g, Op::ConvBlocked), 5) << to_text(g);
  EXPECT_EQ(count_op(g, Op::ConvBlockedChain), 1) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Conv), 0);
  // The stem reads the NCHW input in place; "y" and the relu read NCHW forms.
  EXPECT_EQ(count_op(g, Op::Transpose), 2) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Pad), 0);
  const TensorMap want = testing::run_without(m.g, m.inputs, {}, {"blocked_conv"});
  EXPECT_TRUE(close_outputs(testing::run_without(m.g, m.inputs, {}, {}), want));
}

TEST(BlockedConv, KernelsMatchTheNchwConvsOnEveryIsaPath) {
  MiniMobilenet m;
  const TensorMap want = testing::run_without(m.g, m.inputs, {}, {"blocked_conv"});
  const Graph blocked = opt::block_pointwise_depthwise_convs(m.g);
  ASSERT_EQ(count_op(blocked, Op::ConvBlocked), 5);
  ASSERT_EQ(count_op(blocked, Op::ConvBlockedChain), 1);
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
    testing::IsaLimit limit(isa);
    EXPECT_TRUE(close_outputs(testing::run_graph(blocked, m.inputs, {}, 0), want)) << isa_name(isa);
  }
}

// A window wider than its row (5 taps over 4 columns and no left pad, stride 2): no column has
// all its taps inside, so every one takes the clipped path (the interior's bound once came out
// as 1 here and read past the row).
TEST(BlockedConv, AWindowWiderThanItsRow) {
  MiniMobilenet m;
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 16, 6, 4}));
  NodeId t = m.conv(b, x, 20, 16, 1, 1, {0, 0, 0, 0}, 1, "relu");
  t = m.conv(b, t, 20, 1, 5, 2, {0, 0, 1, 1}, 20, "none");
  g.add_output("y", m.conv(b, t, 8, 20, 1, 1, {0, 0, 0, 0}, 1, "relu6"));
  const TensorMap in{{"x", random_tensor({2, 16, 6, 4}, DType::F32, 4)}};
  const TensorMap want = testing::run_without(g, in, {}, {"blocked_conv"});
  const Graph blocked = opt::block_pointwise_depthwise_convs(g);
  ASSERT_EQ(count_op(blocked, Op::ConvBlockedChain), 1);
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
    testing::IsaLimit limit(isa);
    EXPECT_TRUE(close_outputs(testing::run_graph(blocked, in, {}, 0), want)) << isa_name(isa);
  }
}

// Inverted residual blocks stay three conv_blocked nodes where a hidden map has another reader.
// The 4x4 map (fewer values than the pointwise weights) runs split by hidden channels.
TEST(BlockedConv, ChainsOnlyWhereTheHiddenMapsAreTheBlocksOwn) {
  MiniMobilenet m;
  for (const bool shared : {false, true})
    for (const int64_t side : {8, 4}) {
      Graph g;
      Builder b(g);
      NodeId x = b.input("x", S({1, 32, side, side}));
      NodeId e = m.conv(b, x, 96, 32, 1, 1, {0, 0, 0, 0}, 1, "relu6");
      NodeId d = m.conv(b, e, 96, 1, 3, 1, {1, 1, 1, 1}, 96, "relu6");
      g.add_output("y", m.conv(b, d, 32, 96, 1, 1, {0, 0, 0, 0}, 1, "none", true, x));
      if (shared) g.add_output("hidden", e);
      const Graph blocked = opt::block_pointwise_depthwise_convs(g);
      const bool chain = !shared;
      EXPECT_EQ(count_op(blocked, Op::ConvBlockedChain), chain ? 1 : 0) << shared << " " << side;
      EXPECT_EQ(count_op(blocked, Op::ConvBlocked), chain ? 0 : 3) << shared << " " << side;
      const TensorMap in{{"x", random_tensor({1, 32, side, side}, DType::F32, 5)}};
      EXPECT_TRUE(close_outputs(testing::run_graph(blocked, in, {}, 0),
                                testing::run_without(g, in, {}, {"blocked_conv"})));
    }
}

TEST(BlockedConv, ShortChainsAndOtherConvsStayNchw) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({1, 32, 8, 8}));
  auto w = [&](Dims d) { return b.constant(random_tensor(d, DType::F32, 3)); };
  // A pointwise and a depthwise conv: a chain of two.
  NodeId t = b.op(Op::Conv, {x, w({32, 32, 1, 1})});
  t = b.op(Op::Conv, {t, w({32, 1, 3, 3})}, {{"groups", 32}, {"pads", Ints{1, 1, 1, 1}}});
  // Then dense 3x3 convs, a dilated depthwise and one with hard_swish: none have blocked kernels.
  t = b.op(Op::Conv, {t, w({32, 32, 3, 3})}, {{"pads", Ints{1, 1, 1, 1}}});
  t = b.op(Op::Conv, {t, w({32, 1, 3, 3})},
           {{"groups", 32}, {"pads", Ints{2, 2, 2, 2}}, {"dilation", Ints{2, 2}}});
  t = b.op(Op::Conv, {t, w({32, 32, 1, 1})}, {{"activation", std::string("hard_swish")}});
  g.add_output("y", t);
  EXPECT_EQ(count_op(opt::block_pointwise_depthwise_convs(g), Op::ConvBlocked), 0);
}

TEST(BlockedConv, GradientsThroughThePrimitiveSpellingMatchTheNchwGraph) {
  // Autodiff (as CoreML) sees conv_blocked as layout moves around a conv (and the epilogue
  // spelt as ops: the reference is the same model written with them).
  MiniMobilenet m, unfused(false);
  GradientGraphOptions o;
  o.cotangents = true;
  const GradientGraph blocked = gradient_graph(opt::block_pointwise_depthwise_convs(m.g), o);
  const GradientGraph nchw = gradient_graph(unfused.g, o);
  TensorMap in = m.inputs;
  in[nchw.cotangents.at("y")] = random_tensor({2, 20, 5, 4}, DType::F32, 7);
  in[nchw.cotangents.at("side")] = random_tensor({2, 40, 10, 9}, DType::F32, 8);
  const std::string dx = std::string(kGradPrefix) + "x";
  const Tensor want = testing::run_graph(nchw.graph, in, {}, 0).at(dx);
  EXPECT_TRUE(
      testing::all_close(testing::run_graph(blocked.graph, in, {}, 0).at(dx), want, 2e-5, 2e-5));
}

}  // namespace
}  // namespace rlx
