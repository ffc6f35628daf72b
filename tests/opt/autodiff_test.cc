// Autodiff as an IR transform: what the backward graph is made of (matmuls
// with folded transposes, the backward ops), accumulation over several uses,
// integer paths, unreached values, and the errors.
#include <gtest/gtest.h>

#include <cmath>

#include "opt/autodiff/primitives.h"
#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::error_of;
using testing::random_tensor;

// Ops of the nodes appended after `from`, with counts.
std::map<Op, int> new_ops(const Graph& g, size_t from) {
  std::map<Op, int> m;
  for (size_t i = from; i < g.size(); ++i) ++m[g.node(NodeId(i)).op];
  return m;
}

TEST(Autodiff, LinearFoldsTransposesIntoMatmul) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{4, 8}, DType::F32));
  const NodeId w = b.param("w", Shape(Dims{16, 8}, DType::F32));
  const NodeId bias = b.param("b", Shape(Dims{16}, DType::F32));
  const NodeId loss = b.reduce(Op::ReduceSum, b.relu(b.linear(x, w, bias)), {});
  const size_t before = g.size();
  const auto grads = grad(g, loss, {x, w, bias});
  const auto ops = new_ops(g, before);
  EXPECT_EQ(ops.count(Op::Transpose), 0u);
  EXPECT_EQ(ops.at(Op::MatMul), 2);
  EXPECT_EQ(ops.at(Op::ActivationGrad), 1);
  // dx = dy @ w reads w in place; dw = dy^T @ x reads dy transposed.
  const auto& dx = g.node(grads[0]).attrs_as<MatMulAttrs>();
  EXPECT_FALSE(dx.transpose_a || dx.transpose_b);
  const auto& dw = g.node(grads[1]).attrs_as<MatMulAttrs>();
  EXPECT_TRUE(dw.transpose_a && !dw.transpose_b);
  EXPECT_EQ(g.node(grads[2]).op, Op::Reshape);  // the bias: dy summed over rows
  g.verify();
}

TEST(Autodiff, NormsUseTheirBackwardOps) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{2, 4, 6}, DType::F32));
  const NodeId gamma = b.param("g", Shape(Dims{6}, DType::F32));
  const NodeId gc = b.param("gc", Shape(Dims{4}, DType::F32));
  NodeId h = b.op(Op::LayerNorm, {x, gamma, b.param("b", Shape(Dims{6}, DType::F32))});
  h = b.op(Op::RmsNorm, {h, gamma});
  h = b.op(Op::GroupNorm, {h, gc}, {{"groups", 2}});
  const size_t before = g.size();
  grad(g, b.reduce(Op::ReduceSum, h, {}), {x, gamma, gc});
  const auto ops = new_ops(g, before);
  EXPECT_EQ(ops.at(Op::LayerNormGrad), 1);
  EXPECT_EQ(ops.at(Op::RmsNormGrad), 1);
  EXPECT_EQ(ops.at(Op::GroupNormGrad), 1);
  g.verify();
}

TEST(Autodiff, GradientsOfSeveralUsesAccumulate) {
  // y = x*x + sin(x) + x: dy/dx = 2x + cos(x) + 1.
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{5}, DType::F64));
  const NodeId y = b.add(b.add(b.mul(x, x), b.unary(Op::Sin, x)), x);
  const NodeId ct = g.input("ct", Shape(Dims{5}, DType::F64));
  g.add_output("dx", vjp(g, {y}, {ct}, {x})[0]);
  const Tensor xv = random_tensor({5}, DType::F64, 1), cv = random_tensor({5}, DType::F64, 2);
  const Tensor got = testing::run_graph(g, {{"x", xv}, {"ct", cv}}).at("dx");
  for (int64_t i = 0; i < 5; ++i) {
    const double xi = xv.item_as_double(i);
    EXPECT_NEAR(got.item_as_double(i), cv.item_as_double(i) * (2 * xi + std::cos(xi) + 1), 1e-12);
  }
}

TEST(Autodiff, IntegerPathsCarryNone) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{2, 3}, DType::F32));
  const NodeId ids = b.input("ids", Shape(Dims{2}, DType::I64));
  // Through a cast to integers and back nothing flows; through gather's data it does.
  const NodeId round_trip = b.cast(b.cast(x, DType::I64), DType::F32);
  const NodeId am = b.op(Op::ArgMax, {x}, {{"axis", 1}});
  const NodeId picked = b.op(Op::Gather, {x, am}, {{"axis", 1}});
  const NodeId loss =
      b.add(b.reduce(Op::ReduceSum, round_trip, {}), b.reduce(Op::ReduceSum, picked, {}));
  const auto dx = grad(g, loss, {x});
  g.add_output("dx", dx[0]);
  const Tensor xv =
      Tensor::from_vector<float>({2, 3}, {0.5f, 2.5f, 1.f, 3.f, -1.f, 2.f}, DType::F32);
  const Tensor got = testing::run_graph(g, {{"x", xv}, {"ids", Tensor({2}, DType::I64)}}).at("dx");
  // argmax = [1, 0], so gather along axis 1 picks columns 1 and 0 of each row.
  const Tensor want = Tensor::from_vector<float>({2, 3}, {1, 1, 0, 1, 1, 0}, DType::F32);
  EXPECT_TRUE(testing::all_equal(got, want));
  EXPECT_NE(error_of([&] { grad(g, loss, {ids}); }).find("not a single float value"),
            std::string::npos);
}

TEST(Autodiff, UnreachedValuesGetZeros) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
  const NodeId unused = b.param("unused", Shape(Dims{2, 2}, DType::F32));
  const auto d = grad(g, b.reduce(Op::ReduceSum, x, {}), {unused});
  EXPECT_EQ(g.node(d[0]).op, Op::Full);
  EXPECT_EQ(g.node(d[0]).shape, Shape(Dims{2, 2}, DType::F32));
}

TEST(Autodiff, ErrorsNameTheNode) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
  const NodeId dy = b.input("dy", Shape(Dims{3}, DType::F32));
  const NodeId ag = b.op(Op::ActivationGrad, {x, dy}, {{"kind", std::string("tanh")}});
  std::string e = error_of([&] { grad(g, b.reduce(Op::ReduceSum, ag, {}), {x}); });
  EXPECT_NE(e.find("activation_grad"), std::string::npos) << e;
  EXPECT_NE(e.find("second derivatives"), std::string::npos) << e;
  e = error_of([&] { grad(g, ag, {x}); });
  EXPECT_NE(e.find("must be a float of one element, got [3] f32"), std::string::npos) << e;
  e = error_of([&] { vjp(g, {ag}, {b.input("c", Shape(Dims{4}, DType::F32))}, {x}); });
  EXPECT_NE(e.find("cotangent"), std::string::npos) << e;

  // Symbolic dims: a rule that needs them static asks for specialization.
  Graph s;
  Builder sb(s);
  const NodeId sx = sb.input(
      "x", Shape(std::vector<Dim>{Dim::symbol("batch"), Dim(2), Dim(4), Dim(4)}, DType::F32));
  const NodeId pooled = sb.op(Op::AvgPool2d, {sx}, {{"kernel", std::vector<int64_t>{2, 2}}});
  e = error_of([&] { vjp(s, {pooled}, {sb.input("ct", s.node(pooled).shape)}, {sx}); });
  EXPECT_NE(e.find("avg_pool2d"), std::string::npos) << e;
  EXPECT_NE(e.find("specialize"), std::string::npos) << e;
}

TEST(Autodiff, MaxPoolGradKernelMatchesItsPrimitives) {
  // The CoreML lowering spells max_pool2d_grad with primitives: on the CPU
  // they must agree with the kernel, ties included (padding, overlapping
  // windows, dilation, ceil_mode, unbatched, f64).
  using V = std::vector<int64_t>;
  struct Geo {
    Dims x;
    Attrs a;
  };
  const std::vector<Geo> geos = {
      {{2, 3, 8, 8}, {{"kernel", V{2, 2}}}},
      {{1, 2, 7, 9}, {{"kernel", V{3, 3}}, {"stride", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}},
      {{1, 2, 7, 6}, {{"kernel", V{2, 2}}, {"dilation", V{2, 2}}, {"stride", V{1, 2}}}},
      {{2, 5, 5}, {{"kernel", V{2, 3}}, {"stride", V{2, 2}}, {"ceil_mode", true}}},
  };
  uint64_t seed = 30;
  for (const Geo& geo : geos)
    for (DType t : {DType::F32, DType::F64}) {
      SCOPED_TRACE(dims_str(geo.x) + " " + geo.a.str() + " " + std::string(dtype_name(t)));
      Graph g;
      Builder b(g);
      const NodeId x = b.input("x", Shape(geo.x, t));
      const NodeId y = b.op(Op::MaxPool2d, {x}, geo.a);
      const NodeId dy = b.input("dy", g.node(y).shape);
      g.add_output("kernel", b.op(Op::MaxPool2dGrad, {x, dy}, geo.a));
      opt::ad::Emit e(g);
      g.add_output("primitives",
                   opt::ad::max_pool_grad_primitives(
                       e, x, dy, g.node(g.outputs()[0].node).attrs_as<MaxPoolAttrs>()));
      Tensor xt = random_tensor(geo.x, DType::F64, seed++);
      for (int64_t i = 0; i < xt.numel(); ++i)  // a coarse grid: ties
        xt.data<double>()[i] = std::round(xt.data<double>()[i] * 3) / 3;
      const Tensor dyv = random_tensor(g.node(dy).shape.concrete(), t, seed++);
      const TensorMap out = testing::run_graph(g, {{"x", xt.to(t)}, {"dy", dyv}});
      EXPECT_TRUE(testing::all_close(out.at("kernel"), out.at("primitives"), 1e-6, 1e-6));
    }
}

TEST(Autodiff, GradientGraphNamesEveryTrainedLeaf) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{2, 3}, DType::F32));
  const NodeId w = b.param("w", Shape(Dims{3}, DType::F32));
  const NodeId mean = b.param("running_mean", Shape(Dims{3}, DType::F32));
  g.add_output("loss", b.reduce(Op::ReduceSum, b.mul(b.sub(x, mean), w), {}));
  GradientGraphOptions o;
  o.non_trainable = {"running_mean"};
  const GradientGraph gg = gradient_graph(g, o);
  EXPECT_EQ(gg.grads, (std::vector<std::string>{"grad::x", "grad::w"}));
  ASSERT_EQ(gg.graph.outputs().size(), 3u);
  EXPECT_EQ(gg.graph.outputs()[0].name, "loss");
  o.cotangents = true;
  const GradientGraph ct = gradient_graph(g, o);
  EXPECT_EQ(ct.cotangents, (std::map<std::string, std::string>{{"loss", "cotangent_loss"}}));
  g.add_output("out::1", x);
  g.input("cotangent_out__1", Shape(Dims{1}, DType::F32));  // taken: the next free name
  const GradientGraph two = gradient_graph(g, o);
  EXPECT_EQ(two.cotangents.at("out::1"), "cotangent_out__1_2");
  // Without cotangents the output named "loss" is the loss; the others ride along
  // (a train=True torch export's logits and buffer updates).
  const GradientGraph named = gradient_graph(g);
  EXPECT_EQ(named.graph.outputs()[0].name, "loss");
  EXPECT_EQ(named.graph.outputs()[1].name, "out::1");
  EXPECT_EQ(named.grads[1], "grad::w");
  // No output named loss: it must be the only float output.
  Graph g2;
  Builder b2(g2);
  const NodeId x2 = b2.input("x", Shape(Dims{2, 3}, DType::F32));
  g2.add_output("l", b2.reduce(Op::ReduceSum, x2, {}));
  g2.add_output("out::1", x2);
  const std::string e = error_of([&] { gradient_graph(g2); });
  EXPECT_NE(e.find("exactly one scalar float output"), std::string::npos) << e;
  EXPECT_NE(e.find("l [] f32, out::1 [2,3] f32"), std::string::npos) << e;
}

TEST(Autodiff, EveryOpIsInTheTable) {
  for (int i = 0; i < num_ops(); ++i) {
    const OpGradient og = op_gradient(Op(i));
    EXPECT_TRUE(og.support == GradSupport::rule || !og.why.empty()) << op_name(Op(i));
  }
}

}  // namespace
}  // namespace rlx
