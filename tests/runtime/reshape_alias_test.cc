// Reshapes run as views of their input's buffer: no copy, no arena slot, and
// the viewed buffer stays live until the view's last reader.
#include <gtest/gtest.h>

#include <cmath>

#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::all_equal;
using testing::compile0;
using testing::random_tensor;
using testing::S;

TEST(ReshapeAlias, ChainsOfReshapesTakeNoArena) {
  // relu -> 3 reshapes -> exp: only relu's result lives in the arena.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({8, 16}));
  NodeId r = b.relu(x);
  NodeId v = b.reshape(b.reshape(b.reshape(r, {128}), {2, 64}), {16, 8});
  g.add_output("y", b.unary(Op::Exp, v));
  auto exe = compile0(g);
  auto plan = exe->static_plan();
  EXPECT_EQ(plan->arena_bytes, 8u * 16 * 4);
  for (const Node& n : exe->graph().nodes())
    if (n.op == Op::Reshape) {
      EXPECT_EQ(plan->alias[size_t(n.id)], r) << n.label();
      EXPECT_EQ(plan->offset[size_t(n.id)], -1) << n.label();
    }

  // The same graph without reshapes plans the same arena and computes the same values.
  Graph h;
  Builder c(h);
  NodeId hx = c.input("x", S({8, 16}));
  h.add_output("y", c.unary(Op::Exp, c.relu(hx)));
  EXPECT_EQ(compile0(h)->static_plan()->arena_bytes, plan->arena_bytes);
  Tensor in = random_tensor({8, 16}, DType::F32, 1);
  Session s(exe), t(compile0(h));
  Tensor got = s.run({{"x", in}}).at("y");
  EXPECT_EQ(got.dims(), (Dims{16, 8}));
  EXPECT_TRUE(all_equal(got.reshape({8, 16}), t.run({{"x", in}}).at("y")));
}

TEST(ReshapeAlias, ViewedValueOutlivesItsLastDirectReader) {
  // a = relu(x) is read directly only by the reshape; the view is read after
  // three more nodes that, without the liveness extension, would reuse a's slot.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4, 8}));
  NodeId a = b.relu(x);
  NodeId view = b.reshape(a, {32});
  NodeId e = b.unary(Op::Sin, b.unary(Op::Exp, b.unary(Op::Neg, x)));
  g.add_output("y", b.add(b.reshape(e, {32}), view));
  auto exe = compile0(g);
  auto plan = exe->static_plan();
  EXPECT_EQ(plan->alias[size_t(view)], a);
  // a stays live while neg/exp/sin run: a and two of neg/exp/sin at once
  // (without the extension a's slot would be reused: 2 slots).
  EXPECT_EQ(plan->arena_bytes, 3u * 128);

  Tensor in = random_tensor({4, 8}, DType::F32, 2, -3, 3);
  Session s(exe);
  Tensor y = s.run({{"x", in}}).at("y");
  Tensor want({32}, DType::F32);
  for (int i = 0; i < 32; ++i) {
    float v = in.data<float>()[i];
    want.data<float>()[i] = std::sin(std::exp(-v)) + std::max(v, 0.0f);
  }
  EXPECT_TRUE(all_close(y, want, 1e-6, 1e-6));
  // Same values as running the reshapes as copies (they are outputs there).
  Graph h = g;
  h.add_output("view", view);
  EXPECT_EQ(compile0(h)->static_plan()->alias[size_t(view)], -1);
  Session t(compile0(h));
  EXPECT_TRUE(all_equal(t.run({{"x", in}}).at("y"), y));
}

TEST(ReshapeAlias, OutputsNeverPointIntoTheArenaOrTheCallersData) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 6}));
  g.add_output("r", b.reshape(b.relu(x), {3, 4}));  // views relu's own output buffer
  g.add_output("xr", b.reshape(x, {12}));           // would view the caller's input: a copy
  auto exe = compile0(g);
  auto plan = exe->static_plan();
  const auto& outs = exe->graph().outputs();
  const NodeId relu = plan->alias[size_t(outs[0].node)];
  ASSERT_GE(relu, 0);
  EXPECT_EQ(exe->graph().node(relu).op, Op::Relu);
  EXPECT_LT(plan->offset[size_t(relu)], 0);  // not an arena slot
  EXPECT_EQ(plan->alias[size_t(outs[1].node)], -1);

  Session s(exe);
  Tensor in1 = random_tensor({2, 6}, DType::F32, 3);
  TensorMap first = s.run({{"x", in1}});
  Tensor keep = first.at("r").clone();
  EXPECT_NE(first.at("xr").buffer(), in1.buffer());
  s.run({{"x", random_tensor({2, 6}, DType::F32, 4)}});  // must not overwrite `first`
  EXPECT_TRUE(all_equal(first.at("r"), keep));
  in1.data<float>()[0] += 1;
  EXPECT_NE(first.at("xr").data<float>()[0], in1.data<float>()[0]);
}

TEST(ReshapeAlias, ViewsOfInputsAndConstants) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3}));
  NodeId c = b.constant(random_tensor({3, 2}, DType::F32, 5));
  g.add_output("y", b.add(b.reshape(x, {3, 2}), b.reshape(c, {3, 2})));
  auto exe = compile0(g);
  EXPECT_EQ(exe->static_plan()->arena_bytes, 0u);
  Tensor in = random_tensor({2, 3}, DType::F32, 6);
  Session s(exe);
  Tensor y = s.run({{"x", in}}).at("y");
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(y.data<float>()[i], in.data<float>()[i] + g.node(c).value.data<float>()[i]);
}

}  // namespace
}  // namespace rlx
