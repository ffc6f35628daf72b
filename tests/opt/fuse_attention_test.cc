// The attention pass: attention written out as ops the way torch 1.13
// exports a GPT block (views to [B*H, S, D] for the products, a scale, a
// masked_fill from a constant mask, softmax) becomes one attention node with
// the same outputs (to float rounding: the kernel sums in another order);
// what it must leave alone stays.
#include <gtest/gtest.h>

#include "opt/pass_test_util.h"
#include "opt/passes.h"

namespace rlx::fuse_attention_test {
namespace {

using testing::count_op;
using testing::random_tensor;

constexpr int64_t B = 2, H = 3, S = 10, D = 8;

struct Spelled {
  Graph g;
  TensorMap weights, inputs;
};

// softmax(masked_fill(q @ k^T * scale, mask, fill)) @ v from [B, S, H, D]
// projections, as GPT's code writes it. The mask is a [1, 1, S, S] bool
// param (true: masked), which folding makes a constant.
Spelled spelled(const std::vector<bool>& masked, float fill, bool k_pre_transposed) {
  Spelled m;
  Builder b(m.g);
  auto heads = [&](const char* n) {
    return b.transpose(b.input(n, Shape(Dims{B, S, H, D}, DType::F32)), {0, 2, 1, 3});
  };
  const NodeId q = b.reshape(heads("q"), {B * H, S, D}), v = b.reshape(heads("v"), {B * H, S, D});
  NodeId scores;
  if (k_pre_transposed) {
    const NodeId kt = b.reshape(b.transpose(heads("k"), {0, 1, 3, 2}), {B * H, D, S});
    scores = b.matmul(q, kt);
  } else {
    scores = b.op(Op::MatMul, {q, b.reshape(heads("k"), {B * H, S, D})}, {{"transpose_b", true}});
  }
  scores = b.mul(b.reshape(scores, {B, H, S, S}), b.scalar(0.3f));
  const NodeId mask = b.param("mask", Shape(Dims{1, 1, S, S}, DType::Bool));
  const NodeId p =
      b.op(Op::Softmax, {b.op(Op::Where, {mask, b.scalar(fill), scores})}, {{"axis", int64_t(-1)}});
  const NodeId o = b.reshape(b.matmul(b.reshape(p, {B * H, S, S}), v), {B, H, S, D});
  m.g.add_output("y", b.transpose(o, {0, 2, 1, 3}));
  Tensor mt({1, 1, S, S}, DType::Bool);
  for (int64_t i = 0; i < S * S; ++i) mt.data<bool>()[i] = masked[size_t(i)];
  m.weights = {{"mask", mt}};
  for (const char* n : {"q", "k", "v"})
    m.inputs[n] = random_tensor({B, S, H, D}, DType::F32, uint64_t(n[0]));
  return m;
}

std::vector<bool> causal_mask() {  // masked: a key after the query
  std::vector<bool> m(size_t(S * S));
  for (int64_t i = 0; i < S; ++i)
    for (int64_t j = 0; j < S; ++j) m[size_t(i * S + j)] = j > i;
  return m;
}

::testing::AssertionResult close_with_and_without(const Spelled& m) {
  const TensorMap with = testing::run_without(m.g, m.inputs, m.weights, {});
  const TensorMap without = testing::run_without(m.g, m.inputs, m.weights, {"attention"});
  return testing::all_close(with.at("y"), without.at("y"), 1e-6, 1e-5);
}

TEST(AttentionPass, CausalSpellingBecomesOneCausalAttention) {
  for (bool pre : {true, false})
    for (float fill : {-INFINITY, -1e9f}) {
      SCOPED_TRACE(std::to_string(pre) + " " + std::to_string(fill));
      const Spelled m = spelled(causal_mask(), fill, pre);
      const Graph g = testing::compiled_graph(m.g, m.weights);
      EXPECT_EQ(count_op(g, Op::Attention), 1) << to_text(g);
      EXPECT_EQ(count_op(g, Op::Softmax), 0) << to_text(g);
      EXPECT_EQ(count_op(g, Op::MatMul), 0) << to_text(g);
      EXPECT_EQ(count_op(g, Op::Transpose), 0) << to_text(g);  // [B, S, H, D] read in place
      for (const Node& n : g.nodes()) {
        if (n.op != Op::Attention) continue;
        EXPECT_EQ(n.attrs_as<AttentionAttrs>().mask, MaskKind::causal);
        EXPECT_NEAR(*n.attrs_as<AttentionAttrs>().scale, 0.3, 1e-7);
      }
      EXPECT_TRUE(close_with_and_without(m));
    }
}

TEST(AttentionPass, OtherMasksBecomeABoolBias) {
  std::vector<bool> m(size_t(S * S));
  for (int64_t i = 0; i < S * S; ++i) m[size_t(i)] = (i * 7 + 3) % 5 == 0 && i % S != 0;
  const Spelled s = spelled(m, -INFINITY, true);
  const Graph g = testing::compiled_graph(s.g, s.weights);
  EXPECT_EQ(count_op(g, Op::Attention), 1) << to_text(g);
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Attention) {
      EXPECT_EQ(n.inputs.size(), 4u) << to_text(g);  // the bias
    }
  }
  EXPECT_TRUE(close_with_and_without(s));
}

TEST(AttentionPass, LeavesAMaskThatHidesAWholeRowOrAMildFill) {
  // A row with no visible key: softmax gives NaN (-inf fill) where attention gives zeros.
  std::vector<bool> whole = causal_mask();
  for (int64_t j = 0; j < S; ++j) whole[size_t(3 * S + j)] = true;
  // A fill that does not mask (-10 still leaves weight on the key).
  for (const auto& [mask, fill] :
       std::vector<std::pair<std::vector<bool>, float>>{{whole, -INFINITY}, {causal_mask(), -10}}) {
    const Spelled s = spelled(mask, fill, true);
    const Graph g = testing::compiled_graph(s.g, s.weights);
    EXPECT_EQ(count_op(g, Op::Attention), 0) << to_text(g);
  }
}

}  // namespace
}  // namespace rlx::fuse_attention_test
