// The remat pass: nodes of the chosen ops recomputed before far uses lower
// the planned peak of a training step and change no value; a copy is made
// only where the node's inputs are alive anyway; bad op names are errors.
#include <gtest/gtest.h>

#include "opt/pass_test_util.h"
#include "opt/passes.h"
#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::count_op;
using testing::random_tensor;

// A `layers`-deep relu MLP of width 256 on a [64, 256] batch with a sum-of-squares
// loss, and its gradient graph (every weight's gradient).
struct Mlp {
  Graph g;
  TensorMap weights;
};

Mlp deep_mlp(int layers) {
  Mlp m;
  Graph fwd;
  Builder b(fwd);
  NodeId h = b.input("x", Shape(Dims{64, 256}, DType::F32));
  for (int i = 0; i < layers; ++i) {
    const std::string name = "w" + std::to_string(i);
    h = b.relu(b.matmul(h, b.param(name, Shape(Dims{256, 256}, DType::F32))));
    m.weights[name] = random_tensor({256, 256}, DType::F32, uint64_t(10 + i), -0.1, 0.1);
  }
  fwd.add_output("loss", b.reduce(Op::ReduceSum, b.mul(h, h), {}));
  m.g = gradient_graph(fwd).graph;
  return m;
}

TEST(Remat, RecomputedActivationsLowerThePeakAndKeepEveryValue) {
  const Mlp m = deep_mlp(6);
  const TensorMap in{{"x", random_tensor({64, 256}, DType::F32, 1)}};
  CompileOptions plain, remat;
  remat.rematerialize = {"relu"};
  const auto a = Executable::compile(m.g, m.weights, plain);
  const auto b = Executable::compile(m.g, m.weights, remat);
  // Each hidden relu is held from its forward use to its weight's gradient;
  // recomputed from its input (alive for relu's own gradient) it is not.
  EXPECT_GT(count_op(b->graph(), Op::Relu), count_op(a->graph(), Op::Relu)) << to_text(b->graph());
  const size_t peak_a = a->static_plan()->arena_bytes, peak_b = b->static_plan()->arena_bytes;
  EXPECT_LT(peak_b, peak_a);
  const TensorMap want = Session(a).run(in), got = Session(b).run(in);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want)  // the same kernels on the same values: bit for bit
    EXPECT_TRUE(testing::all_equal(got.at(name), t)) << name;
  RecordProperty("peak_bytes_plain", std::to_string(peak_a));
  RecordProperty("peak_bytes_remat", std::to_string(peak_b));
}

TEST(Remat, CopiesOnlyWhereTheInputsAreAliveAnyway) {
  // r = relu(a) is read right away and again much later; a is read by
  // nothing else, so a copy would hold a across the gap instead of r: none.
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{4, 4}, DType::F32));
  const NodeId r = b.relu(b.unary(Op::Exp, x));
  NodeId chain = b.mul(r, r);
  for (int i = 0; i < 6; ++i) chain = b.unary(Op::Exp, chain);
  g.add_output("y", b.add(chain, r));
  EXPECT_EQ(count_op(opt::rematerialize(g, {Op::Relu}), Op::Relu), 1);
  // With x read at the end too, relu(x) is recomputed there.
  Graph h;
  Builder c(h);
  const NodeId x2 = c.input("x", Shape(Dims{4, 4}, DType::F32));
  const NodeId r2 = c.relu(x2);
  NodeId chain2 = c.mul(r2, r2);
  for (int i = 0; i < 6; ++i) chain2 = c.unary(Op::Exp, chain2);
  h.add_output("y", c.add(chain2, r2));
  const Graph out = opt::rematerialize(h, {Op::Relu});
  EXPECT_EQ(count_op(out, Op::Relu), 2) << to_text(out);
  const TensorMap in{{"x", random_tensor({4, 4}, DType::F32, 3)}};
  EXPECT_TRUE(
      testing::all_equal(testing::run_graph(out, in).at("y"), testing::run_graph(h, in).at("y")));
}

TEST(Remat, NamesThatCannotBeRecomputedAreErrors) {
  const Mlp m = deep_mlp(2);
  CompileOptions o;
  o.rematerialize = {"param"};
  const std::string leaf = testing::error_of([&] { Executable::compile(m.g, m.weights, o); });
  EXPECT_NE(leaf.find("remat: 'param' cannot be recomputed"), std::string::npos) << leaf;
  o.rematerialize = {"no_such_op"};
  const std::string unknown = testing::error_of([&] { Executable::compile(m.g, m.weights, o); });
  EXPECT_NE(unknown.find("no_such_op"), std::string::npos) << unknown;
}

}  // namespace
}  // namespace rlx
