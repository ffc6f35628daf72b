// Graph passes: constant folding (with a test evaluator, so no kernel is
// involved), common-subexpression and dead-code elimination.
#include <gtest/gtest.h>

#include "opt/passes.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_equal;
using testing::count_op;
using testing::f32;
using testing::S;

// A tiny reference evaluator: same-shape f32 add/mul, relu, and full. Counts calls.
struct TestEval {
  int calls = 0;
  Tensor operator()(const Node& n, std::span<const Tensor> in) {
    ++calls;
    if (n.op == Op::Full) {
      Tensor t(n.shape.concrete(), DType::F32);
      for (int64_t i = 0; i < t.numel(); ++i)
        t.data<float>()[i] = float(n.attrs_as<FullAttrs>().value);
      return t;
    }
    Tensor out(in[0].dims(), DType::F32);
    for (int64_t i = 0; i < out.numel(); ++i) {
      float a = in[0].data<float>()[i];
      float b = in.size() > 1 ? in[1].data<float>()[i] : 0;
      out.data<float>()[i] = n.op == Op::Add   ? a + b
                             : n.op == Op::Mul ? a * b
                             : n.op == Op::Relu
                                 ? std::max(a, 0.0f)
                                 : throw make_error("test evaluator: no ", op_name(n.op));
    }
    return out;
  }
};

opt::Evaluator evaluator(TestEval& e) {
  return [&e](const Node& n, std::span<const Tensor> in) { return std::vector<Tensor>{e(n, in)}; };
}

TEST(Passes, FoldsConstantSubgraphsKeepingNamesAndOutputs) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4}));
  NodeId c1 = b.constant(f32({4}, {1, 2, 3, 4}));
  NodeId c2 = b.constant(f32({4}, {10, 20, 30, 40}));
  b.set_origin("bias.calc");
  NodeId s = b.op(Op::Add, {c1, c2}, {}, "s");
  NodeId m = b.mul(s, c1);
  b.set_origin("");
  NodeId y = b.add(x, m);
  g.add_output("y", y);
  g.add_output("m", m);
  TestEval ev;
  Graph f = opt::fold_constants(g, evaluator(ev), 1 << 20);
  EXPECT_EQ(ev.calls, 2);
  EXPECT_EQ(f.size(), g.size());  // folding replaces; DCE removes
  EXPECT_EQ(count_op(f, Op::Mul), 0);
  EXPECT_EQ(count_op(f, Op::Add), 1);
  const Node& folded_s = f.node(3);
  EXPECT_EQ(folded_s.op, Op::Constant);
  EXPECT_EQ(folded_s.name, "s");
  EXPECT_EQ(folded_s.origin, "bias.calc");
  ASSERT_EQ(f.outputs().size(), 2u);
  EXPECT_EQ(f.outputs()[0].name, "y");
  const Node& fm = f.node(f.outputs()[1].node);
  ASSERT_EQ(fm.op, Op::Constant);
  EXPECT_TRUE(all_equal(fm.value, f32({4}, {11, 44, 99, 176})));
  EXPECT_EQ(f.node(f.outputs()[0].node).inputs[1], f.outputs()[1].node);
  EXPECT_NO_THROW(f.verify());

  Graph d = opt::eliminate_dead_code(f);
  EXPECT_EQ(d.size(), 3u);  // x, folded m, y
  EXPECT_NO_THROW(d.verify());
  EXPECT_EQ(to_text(d),
            "%0 = input \"x\" : [4] f32\n"
            "%1 = constant : [4] f32   # bias.calc\n"
            "%2 = add %0, %1 : [4] f32\n"
            "output \"y\" = %2\n"
            "output \"m\" = %1\n");
}

TEST(Passes, FoldRespectsSizeLimitAndReportsErrors) {
  Graph g;
  Builder b(g);
  NodeId big = b.full({64}, 2.0);  // 256 bytes
  NodeId small = b.full({2}, 3.0);
  g.add_output("r", b.relu(big));
  g.add_output("s", b.relu(small));
  TestEval ev;
  Graph f = opt::fold_constants(g, evaluator(ev), 100);
  EXPECT_EQ(count_op(f, Op::Full), 1);  // the 256-byte full stays a full
  EXPECT_EQ(count_op(f, Op::Relu), 1);
  EXPECT_EQ(count_op(f, Op::Constant), 2);
  EXPECT_TRUE(all_equal(f.node(f.outputs()[1].node).value, f32({2}, {3, 3})));
  Graph all = opt::fold_constants(g, evaluator(ev), 1 << 20);
  EXPECT_EQ(count_op(all, Op::Constant), 4);

  Graph bad;
  Builder bb(bad);
  NodeId c = bb.constant(f32({2}, {1, 2}));
  bb.set_origin("head.3");
  bad.add_output("n", bb.unary(Op::Neg, c));
  try {
    opt::fold_constants(bad, evaluator(ev), 1 << 20);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("constant folding node %1 (neg)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head.3"), std::string::npos) << msg;
  }
}

TEST(Passes, CseMergesEqualNodesOnly) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3}));
  NodeId x2 = b.input("x2", S({2, 3}));  // same shape, still a separate input
  NodeId r1 = b.relu(x);
  NodeId r2 = b.relu(x);
  NodeId r3 = b.relu(x2);
  NodeId s0 = b.softmax(r1, 0);
  NodeId s1 = b.softmax(r2, -1);  // different attrs: kept
  NodeId s2 = b.softmax(r2, 0);   // same as s0 once r2 == r1
  NodeId c1 = b.constant(f32({3}, {1, 2, 3}));
  NodeId c2 = b.constant(f32({3}, {1, 2, 3}));
  NodeId ci = b.constant(Tensor::from_vector<int32_t>({3}, {0, 0, 0}, DType::I32));
  NodeId cf = b.constant(Tensor({3}, DType::F32));  // same zero bytes, other dtype
  NodeId big1 = b.constant(Tensor({100}, DType::F32));
  NodeId big2 = b.constant(Tensor({100}, DType::F32));
  NodeId w1 = b.param("w", S({3}));
  NodeId w2 = b.param("w", S({3}));
  g.add_output("a", b.add(s0, b.add(c1, w1)));
  g.add_output("b", b.add(s2, b.add(c2, w2)));
  g.add_output("c", s1);
  g.add_output("d", r3);
  g.add_output("e", b.add(b.cast(ci, DType::F32), cf));
  g.add_output("f", b.add(big1, big2));
  Graph c = opt::eliminate_common_subexpressions(g);
  EXPECT_NO_THROW(c.verify());
  EXPECT_EQ(count_op(c, Op::Input), 2);
  EXPECT_EQ(count_op(c, Op::Relu), 2);     // relu(x) once, relu(x2)
  EXPECT_EQ(count_op(c, Op::Softmax), 2);  // axis 0 and axis -1
  EXPECT_EQ(count_op(c, Op::Param), 2);    // params are never merged
  // c1 == c2 merge; ci and cf differ by dtype; big constants compare by identity.
  EXPECT_EQ(count_op(c, Op::Constant), 5);
  auto out = [&](const char* name) {
    for (const auto& o : c.outputs())
      if (o.name == name) return o.node;
    return NodeId(-1);
  };
  EXPECT_NE(out("a"), out("b"));                                      // different params
  EXPECT_EQ(c.node(out("a")).inputs[0], c.node(out("b")).inputs[0]);  // s0 == s2
  EXPECT_EQ(c.outputs().size(), g.outputs().size());
  (void)x2;
}

TEST(Passes, DceDropsUnusedNodesButKeepsInputs) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3}));
  b.input("unused", S({5}));
  NodeId w = b.param("w", S({3}));
  b.param("dead_w", S({3}));
  NodeId dead = b.relu(b.add(x, x));
  b.relu(dead);
  NodeId y = b.mul(x, w);
  g.add_output("y", y);
  g.add_output("x_again", x);
  Graph d = opt::eliminate_dead_code(g);
  EXPECT_NO_THROW(d.verify());
  EXPECT_EQ(d.size(), 4u);  // x, unused, w, mul
  EXPECT_EQ(count_op(d, Op::Input), 2);
  EXPECT_EQ(count_op(d, Op::Param), 1);
  EXPECT_EQ(d.node(2).name, "w");
  ASSERT_EQ(d.outputs().size(), 2u);
  EXPECT_EQ(d.outputs()[0].name, "y");
  EXPECT_EQ(d.node(d.outputs()[0].node).op, Op::Mul);
  EXPECT_EQ(d.outputs()[1].node, 0);
  // Idempotent.
  EXPECT_EQ(to_text(opt::eliminate_dead_code(d)), to_text(d));
}

}  // namespace
}  // namespace rlx
