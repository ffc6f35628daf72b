// The fusion passes: epilogue (conv/matmul + bias + activation, a conv's
// residual add) and conv_bn
// (inference BatchNorm and per-channel constant affines folded into the conv). Graph before/after,
// and outputs with and without each pass: bit-identical for the epilogue (the fused kernel rounds
// like the separate ops), within float rounding for conv_bn (new weights).
#include <gtest/gtest.h>

#include "opt/pass_test_util.h"
#include "opt/passes.h"

namespace rlx {
namespace {
using testing::count_op;
using testing::random_tensor;
using testing::S;

struct FusionModel {
  Graph g;
  TensorMap weights, inputs;
};

// x @ w1^T + b1 -> gelu -> @ w2^T + b2 -> (tanh, and read a second time).
FusionModel gelu_mlp() {
  FusionModel m;
  Builder b(m.g);
  NodeId x = b.input("x", S({3, 8}));
  NodeId w1 = b.param("w1", S({16, 8})), b1 = b.param("b1", S({16}));
  NodeId w2 = b.param("w2", S({4, 16})), b2 = b.param("b2", S({4}));
  NodeId h = b.unary(Op::Gelu, b.linear(x, w1, b1));
  NodeId y = b.linear(h, w2, b2);
  m.g.add_output("y", b.unary(Op::Tanh, y));
  m.g.add_output("y_pre", y);  // y is read twice: its tanh must not fuse
  m.weights = {{"w1", random_tensor({16, 8}, DType::F32, 1)},
               {"b1", random_tensor({16}, DType::F32, 2)},
               {"w2", random_tensor({4, 16}, DType::F32, 3)},
               {"b2", random_tensor({4}, DType::F32, 4)}};
  m.inputs = {{"x", random_tensor({3, 8}, DType::F32, 5)}};
  return m;
}

// conv -> batch_norm -> relu -> depthwise conv -> clamp(0, 6) -> 1x1 conv -> + residual.
FusionModel cnn() {
  FusionModel m;
  Builder b(m.g);
  NodeId x = b.input("x", S({1, 3, 12, 12}));
  NodeId w = b.param("w", S({8, 3, 3, 3}));
  Attrs pad{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  NodeId c = b.op(Op::Conv, {x, w}, pad);
  std::vector<NodeId> bn{c};
  for (const char* s : {"mean", "var", "gamma", "beta"}) bn.push_back(b.param(s, S({8})));
  NodeId r = b.relu(b.op(Op::BatchNorm, bn));
  NodeId dw = b.op(Op::Conv, {r, b.param("dw", S({8, 1, 3, 3})), b.param("dwb", S({8}))},
                   {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"groups", int64_t(8)}});
  NodeId six = b.op(Op::Clamp, {dw}, {{"min", 0.0}, {"max", 6.0}});
  NodeId pw = b.op(Op::Conv, {six, b.param("pw", S({8, 8, 1, 1}))});
  m.g.add_output("y", b.add(pw, r));
  m.weights = {{"w", random_tensor({8, 3, 3, 3}, DType::F32, 1)},
               {"mean", random_tensor({8}, DType::F32, 2)},
               {"var", random_tensor({8}, DType::F32, 3, 0.5, 2)},
               {"gamma", random_tensor({8}, DType::F32, 4)},
               {"beta", random_tensor({8}, DType::F32, 5)},
               {"dw", random_tensor({8, 1, 3, 3}, DType::F32, 6)},
               {"dwb", random_tensor({8}, DType::F32, 7)},
               {"pw", random_tensor({8, 8, 1, 1}, DType::F32, 8)}};
  m.inputs = {{"x", random_tensor({1, 3, 12, 12}, DType::F32, 9, -3, 3)}};
  return m;
}

TEST(Fusion, EpilogueFusesBiasAndActivationIntoMatmul) {
  const FusionModel m = gelu_mlp();
  const Graph g = testing::compiled_graph(m.g, m.weights);
  EXPECT_EQ(count_op(g, Op::MatMul), 2);
  EXPECT_EQ(count_op(g, Op::Add), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Gelu), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Tanh), 1) << to_text(g);  // y_pre is an output too
  int gelu = 0, biased = 0;
  for (const Node& n : g.nodes())
    if (n.op == Op::MatMul) {
      gelu += n.attrs_as<MatMulAttrs>().activation == Epilogue::gelu;
      biased += n.inputs.size() == 3;
    }
  EXPECT_EQ(gelu, 1);
  EXPECT_EQ(biased, 2);
  EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue"));
}

TEST(Fusion, MatmulResidualAddsFuse) {
  // A transformer's projection + skip connection (with its bias, then a relu
  // after the add), a 3-d input, and batched products with their own b (each
  // product's residual is its own block of the output).
  FusionModel m;
  Builder b(m.g);
  NodeId x = b.input("x", S({2, 5, 8}));
  NodeId w = b.param("w", S({8, 8})), bias = b.param("b", S({8}));
  NodeId skip = b.add(b.linear(x, w, bias), x);
  m.g.add_output("skip", skip);
  m.g.add_output("relu", b.relu(b.add(b.linear(skip, w, bias), skip)));
  NodeId y = b.input("y", S({2, 8, 6}));
  NodeId r = b.input("r", S({2, 5, 6}));
  m.g.add_output("batched", b.add(r, b.matmul(x, y)));
  // GPT-2's skip connection: x + view(addmm(view(x), w, bias)).
  NodeId flat = b.linear(b.reshape(x, {10, 8}), w, bias);
  m.g.add_output("viewed", b.add(x, b.reshape(flat, {2, 5, 8})));
  m.weights = {{"w", random_tensor({8, 8}, DType::F32, 1)},
               {"b", random_tensor({8}, DType::F32, 2)}};
  m.inputs = {{"x", random_tensor({2, 5, 8}, DType::F32, 3)},
              {"y", random_tensor({2, 8, 6}, DType::F32, 4)},
              {"r", random_tensor({2, 5, 6}, DType::F32, 5)}};
  const Graph g = testing::compiled_graph(m.g, m.weights);
  EXPECT_EQ(count_op(g, Op::Add), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Relu), 0) << to_text(g);
  int residual = 0;
  for (const Node& n : g.nodes())
    residual += n.op == Op::MatMul && n.attrs_as<MatMulAttrs>().residual;
  EXPECT_EQ(residual, 4) << to_text(g);
  EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue"));
}

TEST(Fusion, AnActivationAfterAViewFusesAndTheViewMovesAfterIt) {
  // torch's addmm -> view -> gelu (GPT-2's MLP), with the bias already an
  // input of the matmul (addmm's import) and as a separate add.
  for (bool bias_input : {true, false}) {
    FusionModel m;
    Builder b(m.g);
    NodeId x = b.input("x", S({6, 8}));
    NodeId w = b.param("w", S({16, 8})), bias = b.param("b", S({16}));
    NodeId mm = bias_input ? b.op(Op::MatMul, {x, w, bias}, {{"transpose_b", true}})
                           : b.add(b.op(Op::MatMul, {x, w}, {{"transpose_b", true}}), bias);
    NodeId view = b.reshape(mm, {2, 3, 16});
    m.g.add_output("y", b.unary(Op::GeluTanh, view));
    m.weights = {{"w", random_tensor({16, 8}, DType::F32, 1)},
                 {"b", random_tensor({16}, DType::F32, 2)}};
    m.inputs = {{"x", random_tensor({6, 8}, DType::F32, 3)}};
    const Graph g = testing::compiled_graph(m.g, m.weights);
    EXPECT_EQ(count_op(g, Op::GeluTanh), 0) << to_text(g);
    EXPECT_EQ(count_op(g, Op::Add), 0) << to_text(g);
    int fused = 0;
    for (const Node& n : g.nodes())
      fused += n.op == Op::MatMul && n.attrs_as<MatMulAttrs>().activation == Epilogue::gelu_tanh;
    EXPECT_EQ(fused, 1) << to_text(g);
    EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue"));
  }
}

TEST(Fusion, ConvBatchNormAndActivationsBecomeConvs) {
  const FusionModel m = cnn();
  // blocked_conv would take these convs on (tests/opt/blocked_conv_test.cc).
  const Graph g = testing::compiled_graph(m.g, m.weights, {"blocked_conv"});
  EXPECT_EQ(count_op(g, Op::BatchNorm), 0) << to_text(g);
  // relu reads the folded conv only (its own output is read twice): it fuses.
  EXPECT_EQ(count_op(g, Op::Relu), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Clamp), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Conv), 3);
  EXPECT_TRUE(
      testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue", {"blocked_conv"}));
  const TensorMap folded = testing::run_without(m.g, m.inputs, m.weights, {});
  const TensorMap plain = testing::run_without(m.g, m.inputs, m.weights, {"conv_bn"});
  EXPECT_TRUE(testing::all_close(folded.at("y"), plain.at("y"), 1e-5, 1e-5));
}

TEST(Fusion, ConvReluFusesWhenTheConvHasOneReader) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({1, 2, 6, 6}));
  NodeId c = b.op(Op::Conv, {x, b.param("w", S({4, 2, 3, 3})), b.param("b", S({4}))});
  g.add_output("y", b.relu(c));
  const TensorMap w{{"w", random_tensor({4, 2, 3, 3}, DType::F32, 1)},
                    {"b", random_tensor({4}, DType::F32, 2)}};
  const Graph fused = opt::fuse_epilogues(g);
  EXPECT_NO_THROW(fused.verify());
  const Graph after = opt::eliminate_dead_code(fused);
  EXPECT_EQ(count_op(after, Op::Relu), 0);
  EXPECT_EQ(after.node(after.outputs()[0].node).attrs_as<ConvAttrs>().activation, Epilogue::relu);
  // Read twice, the conv keeps its own output.
  g.add_output("conv", c);
  EXPECT_EQ(count_op(opt::eliminate_dead_code(opt::fuse_epilogues(g)), Op::Relu), 1);
}

// conv + add(residual) [+ relu] on every conv path the CPU backend has (the
// weights are params, so packed: Winograd, the small-map transposed product,
// depthwise rows and flat rows, im2col tiles, pointwise, batched small maps),
// in f32 and f64: the residual fuses, and the outputs are bit-identical to
// the unfused add and relu (the epilogue adds bias, then residual, then
// activates, as the separate ops round).
TEST(Fusion, ConvResidualFusesOnEveryConvPath) {
  struct Case {
    const char* name;
    Dims x, w;
    int64_t stride, groups;
    bool relu;
    DType dt = DType::F32;
  };
  const Case cases[] = {
      {"winograd_f43", {1, 16, 16, 16}, {16, 16, 3, 3}, 1, 1, true},
      {"winograd_f23", {1, 16, 7, 7}, {16, 16, 3, 3}, 1, 1, false},
      {"small_map_s2", {1, 16, 8, 8}, {24, 16, 3, 3}, 2, 1, true},
      {"depthwise_rows", {1, 8, 6, 40}, {8, 1, 3, 3}, 1, 8, true},
      {"depthwise_flat_s2", {1, 8, 12, 12}, {8, 1, 3, 3}, 2, 8, false},
      {"im2col", {1, 3, 20, 20}, {8, 3, 5, 5}, 1, 1, true},
      {"pointwise", {1, 12, 9, 9}, {20, 12, 1, 1}, 1, 1, true},
      {"grouped_batched", {3, 8, 5, 5}, {8, 4, 3, 3}, 1, 2, true},
      {"f64", {2, 4, 9, 9}, {6, 4, 3, 3}, 2, 1, true, DType::F64},
  };
  uint64_t seed = 70;
  for (const Case& c : cases) {
    FusionModel m;
    Builder b(m.g);
    const int64_t k = c.w[2], pad = k / 2;
    NodeId x = b.input("x", Shape(c.x, c.dt));
    NodeId conv =
        b.op(Op::Conv, {x, b.param("w", Shape(c.w, c.dt)), b.param("b", Shape(Dims{c.w[0]}, c.dt))},
             {{"stride", std::vector<int64_t>{c.stride, c.stride}},
              {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
              {"groups", c.groups}});
    const Dims out = m.g.node(conv).shape.concrete();
    NodeId r = b.input("r", Shape(out, c.dt));
    NodeId sum = b.add(r, conv);  // the conv on either side of the add
    m.g.add_output("y", c.relu ? b.relu(sum) : sum);
    m.weights = {{"w", random_tensor(c.w, c.dt, seed++)},
                 {"b", random_tensor({c.w[0]}, c.dt, seed++)}};
    m.inputs = {{"x", random_tensor(c.x, c.dt, seed++)}, {"r", random_tensor(out, c.dt, seed++)}};
    const Graph g = testing::compiled_graph(m.g, m.weights);
    EXPECT_EQ(count_op(g, Op::Add), 0) << c.name << "\n" << to_text(g);
    EXPECT_EQ(count_op(g, Op::Relu), 0) << c.name;
    const Node& y = g.node(g.outputs()[0].node);
    ASSERT_EQ(y.op, Op::Conv) << c.name;
    EXPECT_TRUE(y.attrs_as<ConvAttrs>().residual) << c.name;
    EXPECT_EQ(y.inputs.size(), 4u) << c.name;
    for (int run = 0; run < 2; ++run)  // the second run reads the packed weights
      EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue")) << c.name;
  }
}

// A residual read by another node too, or an add of two convs: the add still
// fuses (the residual stays a value of its own); a conv read twice does not.
TEST(Fusion, ConvResidualNeedsAConvReadOnlyByTheAdd) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({1, 4, 6, 6}));
  Attrs pad{{"pads", std::vector<int64_t>{1, 1, 1, 1}}};
  NodeId c1 = b.op(Op::Conv, {x, b.param("w1", S({4, 4, 3, 3}))}, pad);
  NodeId c2 = b.op(Op::Conv, {x, b.param("w2", S({4, 4, 3, 3}))}, pad);
  g.add_output("y", b.add(c1, c2));
  g.add_output("c2", c2);  // c2 is read twice: c1 takes it as its residual
  const Graph fused = opt::eliminate_dead_code(opt::fuse_epilogues(g));
  EXPECT_NO_THROW(fused.verify());
  EXPECT_EQ(count_op(fused, Op::Add), 0);
  EXPECT_EQ(count_op(fused, Op::Conv), 2);
  g.add_output("c1", c1);  // now both convs are read twice: nothing fuses
  EXPECT_EQ(count_op(opt::eliminate_dead_code(opt::fuse_epilogues(g)), Op::Add), 1);
}

// PP-LCNet's block as Paddle exports it: conv -> * a -> + b (a learnable
// affine, scalars) -> x * clamp(x + 3, 0, 6) / 6 (hardswish) -> * c -> + d
// -> 1x1 conv. The affine folds into the conv, the hardswish becomes one
// hard_swish node and then the conv's epilogue; the second affine stays.
FusionModel lcnet_block() {
  FusionModel m;
  Builder b(m.g);
  NodeId x = b.input("x", S({1, 4, 10, 10}));
  auto scalar = [&](float v) {
    return b.constant(Tensor::from_vector<float>({1}, {v}, DType::F32));
  };
  NodeId c = b.op(Op::Conv, {x, b.param("w", S({8, 4, 3, 3})), b.param("b", S({8}))},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  NodeId y = b.add(b.mul(scalar(1.25f), c), scalar(-0.5f));
  NodeId hs = b.op(Op::Clamp, {b.add(y, scalar(3))}, {{"min", 0.0}, {"max", 6.0}});
  hs = b.div(b.mul(y, hs), scalar(6));
  NodeId z = b.add(b.mul(scalar(0.75f), hs), scalar(0.1f));
  // A per-channel [1, 8, 1, 1] scale after the pointwise conv folds too.
  NodeId pw = b.op(Op::Conv, {z, b.param("pw", S({8, 8, 1, 1}))});
  m.g.add_output("y", b.mul(pw, b.param("s", S({1, 8, 1, 1}))));
  m.weights = {{"w", random_tensor({8, 4, 3, 3}, DType::F32, 1)},
               {"b", random_tensor({8}, DType::F32, 2)},
               {"pw", random_tensor({8, 8, 1, 1}, DType::F32, 3)},
               {"s", random_tensor({1, 8, 1, 1}, DType::F32, 4)}};
  m.inputs = {{"x", random_tensor({1, 4, 10, 10}, DType::F32, 5, -3, 3)}};
  return m;
}

TEST(Fusion, ConvAffineAndHardSwishFoldIntoTheConv) {
  const FusionModel m = lcnet_block();
  // (elementwise off: it would fuse the mul and add these counts look at)
  const Graph g = testing::compiled_graph(m.g, m.weights, {"elementwise"});
  EXPECT_EQ(count_op(g, Op::Clamp), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::HardSwish), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Div), 0) << to_text(g);
  EXPECT_EQ(count_op(g, Op::Mul), 1) << to_text(g);  // the affine after hardswish
  EXPECT_EQ(count_op(g, Op::Add), 1) << to_text(g);
  int hard_swish = 0;
  for (const Node& n : g.nodes())
    hard_swish += n.op == Op::Conv && n.attrs_as<ConvAttrs>().activation == Epilogue::hard_swish;
  EXPECT_EQ(hard_swish, 1) << to_text(g);
  // The fused hard_swish rounds as the separate node and as the unfused ops.
  EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "epilogue"));
  EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, "simplify"));
  const TensorMap folded = testing::run_without(m.g, m.inputs, m.weights, {});
  const TensorMap plain = testing::run_without(m.g, m.inputs, m.weights, {"conv_bn"});
  EXPECT_TRUE(testing::all_close(folded.at("y"), plain.at("y"), 1e-5, 1e-5));
}

TEST(Fusion, ConvAffineNeedsAPerChannelConstantAndASoleReader) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({1, 2, 4, 4}));
  NodeId c = b.op(Op::Conv, {x, b.param("w", S({3, 2, 1, 1}))});
  // [4] broadcasts over the width, not the channels: it must stay a mul.
  NodeId y = b.mul(c, b.param("per_w", S({4})));
  NodeId c2 = b.op(Op::Conv, {x, b.param("w2", S({3, 2, 1, 1}))});
  g.add_output("y", b.add(y, b.add(c2, b.param("t", S({3, 1, 1})))));
  g.add_output("c2", c2);  // read twice: its add stays
  const TensorMap w{{"w", random_tensor({3, 2, 1, 1}, DType::F32, 1)},
                    {"per_w", random_tensor({4}, DType::F32, 2)},
                    {"w2", random_tensor({3, 2, 1, 1}, DType::F32, 3)},
                    {"t", random_tensor({3, 1, 1}, DType::F32, 4)}};
  const Graph after = testing::compiled_graph(g, w, {"elementwise"});
  EXPECT_EQ(count_op(after, Op::Mul), 1) << to_text(after);
  EXPECT_EQ(count_op(after, Op::Add), 2) << to_text(after);
}

}  // namespace
}  // namespace rlx
