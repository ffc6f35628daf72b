// The algebraic simplification pass: each identity, what it must leave alone,
// and equal outputs with and without it.
#include <gtest/gtest.h>

#include "opt/passes.h"
#include "pass_test_util.h"

namespace rlx {
namespace {

using testing::count_op;
using testing::random_tensor;
using testing::S;

Tensor splat(const Dims& d, float v, DType t = DType::F32) {
  return Tensor::from_vector<float>(d, std::vector<float>(size_t(numel(d)), v), DType::F32).to(t);
}

// simplify, then DCE (so forwarded constants disappear), both verified.
Graph simplified(const Graph& g) {
  Graph s = opt::simplify_algebra(g);
  s.verify();
  Graph d = opt::eliminate_dead_code(s);
  d.verify();
  return d;
}

TEST(Simplify, ArithmeticIdentitiesDisappear) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 4}));
  NodeId v = b.mul(x, b.constant(splat({4}, 1)));  // x*1
  v = b.mul(b.constant(splat({1, 4}, 1)), v);      // 1*x
  v = b.add(v, b.constant(splat({}, 0)));          // x+0
  v = b.add(b.full({2, 4}, 0), v);                 // 0+x (a full node)
  v = b.sub(v, b.constant(splat({4}, 0)));         // x-0
  v = b.div(v, b.constant(splat({2, 4}, 1)));      // x/1
  g.add_output("y", b.relu(v));
  Graph s = simplified(g);
  EXPECT_EQ(
      count_op(s, Op::Mul) + count_op(s, Op::Add) + count_op(s, Op::Sub) + count_op(s, Op::Div), 0)
      << to_text(s);
  EXPECT_EQ(s.size(), 2u) << to_text(s);  // x, relu
  TensorMap in{{"x", random_tensor({2, 4}, DType::F32, 1)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

// pow by a constant 2, 3, 0.5, -0.5 or -1 as PyTorch's CPU kernel computes it; other exponents,
// and an exponent that widens x, stay pow.
TEST(Simplify, PowByTheExponentsPyTorchSpecialises) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3, 5}));
  auto pow = [&](float e, Dims d = {}) { return b.binary(Op::Pow, x, b.constant(splat(d, e))); };
  const std::vector<float> exps{2, 3, 0.5f, -0.5f, -1, 2.5f};
  for (size_t i = 0; i < exps.size(); ++i)
    g.add_output("p" + std::to_string(i), b.relu(pow(exps[i])));
  g.add_output("wide", pow(2, {2, 3, 5}));
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Pow), 2) << to_text(s);  // 2.5 and the widening one
  EXPECT_EQ(count_op(s, Op::Mul), 3) << to_text(s);  // x*x and (x*x)*x
  EXPECT_EQ(count_op(s, Op::Sqrt), 1);
  EXPECT_EQ(count_op(s, Op::Rsqrt), 1);
  EXPECT_EQ(count_op(s, Op::Reciprocal), 1);
  const Tensor xv = random_tensor({3, 5}, DType::F32, 1, 0.1, 3);
  const TensorMap out = testing::run_graph(s, {{"x", xv}}, {}, 0);
  for (int64_t i = 0; i < 15; ++i) {
    const float v = xv.data<float>()[i];
    EXPECT_EQ(out.at("p0").data<float>()[i], v * v);
    EXPECT_EQ(out.at("p1").data<float>()[i], v * v * v);
    EXPECT_EQ(out.at("p2").data<float>()[i], std::sqrt(v));
  }
}

TEST(Simplify, KeepsWhatIsNotAnIdentity) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4}));
  NodeId i = b.input("i", S({4}, DType::I32));
  std::vector<NodeId> keep = {
      b.mul(x, b.constant(splat({2, 4}, 1))),  // broadcasting grows the shape
      b.sub(b.constant(splat({4}, 0)), x),     // 0-x is -x
      b.mul(x, b.constant(splat({4}, 2))),     // not ones
      b.op(Op::Div, {x, b.constant(splat({4}, 1))}, {{"rounding", std::string("floor")}}),
      b.mul(x, b.constant(Tensor::from_vector<float>({4}, {1, 1, 1, 0.5f}, DType::F32))),
  };
  for (size_t k = 0; k < keep.size(); ++k) g.add_output("y" + std::to_string(k), b.relu(keep[k]));
  // Integer division by one rounds nothing: it goes.
  g.add_output("z", b.relu(b.op(Op::Div, {i, b.constant(splat({4}, 1, DType::I32))},
                                {{"rounding", std::string("floor")}})));
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Mul) + count_op(s, Op::Sub) + count_op(s, Op::Div), 5) << to_text(s);
  TensorMap in{{"x", random_tensor({4}, DType::F32, 2)},
               {"i", random_tensor({4}, DType::I32, 3, -9, 9)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

TEST(Simplify, GraphOutputsKeepTheirNodeNameAndOrigin) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3}));
  b.set_origin("aten.mul.Tensor");
  NodeId y = b.op(Op::Mul, {x, b.constant(splat({3}, 1))}, {}, "scaled");
  g.add_output("y", y);
  Graph s = simplified(g);
  const Node& out = s.node(s.outputs().at(0).node);
  EXPECT_EQ(out.op, Op::Mul);
  EXPECT_EQ(out.name, "scaled");
  EXPECT_EQ(out.origin, "aten.mul.Tensor");
}

TEST(Simplify, TransposeChainsCompose) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3, 4}));
  // Two swaps of the first axes cancel; two rotations make one rotation.
  NodeId back = b.transpose(b.transpose(x, {1, 0, 2}), {1, 0, 2});
  NodeId rot = b.transpose(b.transpose(x, {1, 2, 0}), {1, 2, -3});
  NodeId same = b.transpose(x, {0, 1, 2});
  g.add_output("back", b.relu(back));
  g.add_output("rot", b.relu(rot));
  g.add_output("same", b.relu(same));
  Graph s = simplified(g);
  ASSERT_EQ(count_op(s, Op::Transpose), 1) << to_text(s);
  for (const Node& n : s.nodes())
    if (n.op == Op::Transpose) {
      EXPECT_EQ(n.inputs[0], 0);
      EXPECT_EQ(n.attrs_as<TransposeAttrs>().perm, (std::vector<int64_t>{2, 0, 1}));
      EXPECT_EQ(n.shape, S({4, 2, 3}));
    }
  TensorMap in{{"x", random_tensor({2, 3, 4}, DType::F32, 4)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

// x @ w^T (and w^T @ x) read w in place; a transpose of other dims stays.
TEST(Simplify, LastTwoDimsTransposeFoldsIntoMatmul) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 5, 4}));
  NodeId w = b.input("w", S({3, 4}));
  NodeId xw = b.matmul(x, b.transpose(w, {1, 0}));                              // [2,5,4] @ [4,3]
  NodeId wx = b.matmul(b.transpose(x, {0, 2, 1}), b.input("y", S({2, 5, 6})));  // [2,4,5] @ [2,5,6]
  NodeId kept =
      b.matmul(b.transpose(b.input("z", S({4, 2, 3})), {1, 0, 2}), b.input("v", S({3, 7})));
  g.add_output("xw", xw);
  g.add_output("wx", wx);
  g.add_output("kept", kept);
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Transpose), 1) << to_text(s);
  int flagged = 0;
  for (const Node& n : s.nodes())
    if (n.op == Op::MatMul) {
      const auto& a = n.attrs_as<MatMulAttrs>();
      flagged += a.transpose_a + a.transpose_b;
    }
  EXPECT_EQ(flagged, 2) << to_text(s);
  TensorMap in{{"x", random_tensor({2, 5, 4}, DType::F32, 1)},
               {"w", random_tensor({3, 4}, DType::F32, 2)},
               {"y", random_tensor({2, 5, 6}, DType::F32, 3)},
               {"z", random_tensor({4, 2, 3}, DType::F32, 4)},
               {"v", random_tensor({3, 7}, DType::F32, 5)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

TEST(Simplify, HeadTransposesFoldIntoAttention) {
  // BERT's pattern: [B, S, H, D] projections transposed to [B, H, S, D] for
  // attention and back: no transpose is left, attention reads them in place.
  // With the output not transposed back, one transpose stays after it.
  for (bool back : {true, false}) {
    Graph g;
    Builder b(g);
    auto proj = [&](const char* n) {
      return b.transpose(b.input(n, S({2, 6, 4, 8})), {0, 2, 1, 3});
    };
    NodeId y =
        b.op(Op::Attention, {proj("q"), proj("k"), proj("v")}, {{"mask", std::string("causal")}});
    g.add_output("y", back ? b.transpose(y, {0, 2, 1, 3}) : y);
    Graph s = simplified(g);
    EXPECT_EQ(count_op(s, Op::Transpose), back ? 0 : 1) << to_text(s);
    int in_place = 0;
    for (const Node& n : s.nodes())
      in_place +=
          n.op == Op::Attention && n.attrs_as<AttentionAttrs>().layout == AttentionLayout::bshd;
    EXPECT_EQ(in_place, 1) << to_text(s);
    TensorMap in;
    for (const char* n : {"q", "k", "v"}) in[n] = random_tensor({2, 6, 4, 8}, DType::F32, n[0]);
    EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
  }
}

// A linear layer's weight is read in place: compiling binds it without a
// transposed copy (simplify runs before fold, and fold skips the dead transpose).
TEST(Simplify, LinearWeightsAreNotCopiedAtLoad) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 4}));
  g.add_output("y", b.matmul(x, b.transpose(b.param("w", S({3, 4})), {1, 0})));
  TensorMap weights{{"w", random_tensor({3, 4}, DType::F32, 7)}};
  Graph c = testing::compiled_graph(g, weights);
  EXPECT_EQ(count_op(c, Op::Transpose), 0) << to_text(c);
  for (const Node& n : c.nodes()) {
    if (n.op != Op::Constant) continue;
    EXPECT_EQ(n.value.raw(), weights.at("w").raw()) << "weight was copied";
  }
  EXPECT_TRUE(testing::same_with_and_without(g, {{"x", random_tensor({2, 4}, DType::F32, 8)}},
                                             weights, "simplify"));
}

TEST(Simplify, ReshapeChainsCollapseAndNoOpReshapesGo) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3, 4}));
  NodeId two = b.reshape(b.reshape(b.reshape(x, {6, 4}), {24}), {4, -1});
  NodeId same = b.reshape(x, {2, 3, 4});
  g.add_output("two", b.relu(two));
  g.add_output("same", b.relu(same));
  Graph s = simplified(g);
  ASSERT_EQ(count_op(s, Op::Reshape), 1) << to_text(s);
  for (const Node& n : s.nodes())
    if (n.op == Op::Reshape) {
      EXPECT_EQ(n.inputs[0], 0);
      EXPECT_EQ(n.shape, S({4, 6}));
    }
  TensorMap in{{"x", random_tensor({2, 3, 4}, DType::F32, 5)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

TEST(Simplify, CastChainsCollapseOnlyThroughLosslessCasts) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({8}));
  NodeId i = b.input("i", S({8}, DType::I32));
  g.add_output("wide", b.relu(b.cast(b.cast(x, DType::F64), DType::F32)));    // goes
  g.add_output("narrow", b.relu(b.cast(b.cast(x, DType::F16), DType::F32)));  // rounds: stays
  g.add_output("same", b.relu(b.cast(x, DType::F32)));                        // goes
  g.add_output("int", b.relu(b.cast(b.cast(i, DType::I64), DType::F32)));     // one cast
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Cast), 3) << to_text(s);
  int from_i = 0;
  for (const Node& n : s.nodes())
    if (n.op == Op::Cast && n.inputs[0] == 1) {
      ++from_i;
      EXPECT_EQ(n.shape.dtype, DType::F32);
    }
  EXPECT_EQ(from_i, 1);
  Tensor xs = random_tensor({8}, DType::F32, 6, -100, 100);
  xs.data<float>()[0] = 1.0001f;  // not representable in f16
  TensorMap in{{"x", xs}, {"i", random_tensor({8}, DType::I32, 7, -1000, 1000)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
  auto out = testing::run_without(g, in, {}, {});
  EXPECT_NE(out.at("narrow").data<float>()[0], out.at("wide").data<float>()[0]);
}

TEST(Simplify, NoOpExpandAndWholeSlicesGo) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3, 5}));
  auto slice = [&](int64_t axis, int64_t start, int64_t end, int64_t step) {
    return b.op(Op::Slice, {x}, {{"axis", axis}, {"start", start}, {"end", end}, {"step", step}});
  };
  g.add_output("e_same", b.relu(b.op(Op::Expand, {x}, {{"shape", std::vector<int64_t>{3, 5}}})));
  g.add_output("e_grow", b.relu(b.op(Op::Expand, {x}, {{"shape", std::vector<int64_t>{2, 3, 5}}})));
  g.add_output("s_all", b.relu(slice(1, 0, INT64_MAX, 1)));
  g.add_output("s_neg", b.relu(slice(-1, -5, 5, 1)));
  g.add_output("s_part", b.relu(slice(1, 0, 4, 1)));
  g.add_output("s_step", b.relu(slice(0, 0, 3, 2)));
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Expand), 1) << to_text(s);
  EXPECT_EQ(count_op(s, Op::Slice), 2) << to_text(s);
  TensorMap in{{"x", random_tensor({3, 5}, DType::F32, 8)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

// Chains after an earlier rewrite: node ids in the new graph no longer match
// the source graph's, so the chain must follow new ids (a GPT export caught this).
TEST(Simplify, ChainsAfterEarlierRewritesFollowTheNewGraph) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3, 4}));
  NodeId a = b.unary(Op::Neg, x);
  NodeId e = b.op(Op::Expand, {a}, {{"shape", std::vector<int64_t>{2, 3, 4}}});  // goes
  NodeId v = b.unary(Op::Exp, e);
  NodeId t = b.transpose(b.transpose(v, {0, 2, 1}), {2, 1, 0});
  NodeId r = b.reshape(b.reshape(v, {6, 4}), {4, 6});
  NodeId c = b.cast(b.cast(v, DType::F64), DType::I32);
  g.add_output("t", b.relu(t));
  g.add_output("r", b.relu(r));
  g.add_output("c", b.relu(c));
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Expand), 0) << to_text(s);
  EXPECT_EQ(count_op(s, Op::Transpose) + count_op(s, Op::Reshape) + count_op(s, Op::Cast), 3)
      << to_text(s);
  for (const Node& n : s.nodes()) {
    if (n.op == Op::Transpose || n.op == Op::Reshape || n.op == Op::Cast) {
      EXPECT_EQ(s.node(n.inputs[0]).op, Op::Exp) << to_text(s);
    }
  }
  TensorMap in{{"x", random_tensor({2, 3, 4}, DType::F32, 10)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

TEST(Simplify, SymbolicDimsAreOnlyEqualByName) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({Dim::symbol("n"), 4}));
  NodeId r = b.reshape(x, {-1, 2});  // [?,2]: n * 2 has no name
  g.add_output("y", b.relu(b.op(Op::Expand, {r}, {{"shape", std::vector<int64_t>{-1, 2}}})));
  g.add_output("z", b.relu(b.cast(x, DType::F32)));
  Graph s = simplified(g);
  EXPECT_EQ(count_op(s, Op::Reshape), 1) << to_text(s);
  EXPECT_EQ(count_op(s, Op::Cast), 0) << to_text(s);
  TensorMap in{{"x", random_tensor({3, 4}, DType::F32, 9)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
}

TEST(Simplify, HardSwishWrittenOutBecomesOneNode) {
  for (bool swapped : {false, true}) {
    Graph g;
    Builder b(g);
    NodeId x = b.input("x", S({2, 8}));
    NodeId three = b.constant(splat({}, 3)), six = b.constant(splat({1}, 6));
    NodeId clamp = b.op(Op::Clamp, {swapped ? b.add(three, x) : b.add(x, three)},
                        {{"min", 0.0}, {"max", 6.0}});
    g.add_output("y", b.div(swapped ? b.mul(clamp, x) : b.mul(x, clamp), six));
    Graph s = simplified(g);
    EXPECT_EQ(count_op(s, Op::HardSwish), 1) << to_text(s);
    EXPECT_EQ(count_op(s, Op::Clamp) + count_op(s, Op::Div) + count_op(s, Op::Add), 0)
        << to_text(s);
    const TensorMap in{{"x", random_tensor({2, 8}, DType::F32, 1, -5, 5)}};
    EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "simplify"));
  }
  // clamp(x + 3, 0, 5) or a division by 7 is not hardswish.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4}));
  NodeId clamp =
      b.op(Op::Clamp, {b.add(x, b.constant(splat({}, 3)))}, {{"min", 0.0}, {"max", 5.0}});
  g.add_output("y", b.div(b.mul(x, clamp), b.constant(splat({}, 6))));
  NodeId c6 = b.op(Op::Clamp, {b.add(x, b.constant(splat({}, 3)))}, {{"min", 0.0}, {"max", 6.0}});
  g.add_output("z", b.div(b.mul(x, c6), b.constant(splat({}, 7))));
  EXPECT_EQ(count_op(simplified(g), Op::HardSwish), 0);
}

}  // namespace
}  // namespace rlx
