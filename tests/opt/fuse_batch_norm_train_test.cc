// The bn_train pass and its ops: BatchNorm's training-form decomposition (as
// rlx_torch's train=True export spells it) becomes one batch_norm_train node,
// with the same forward values and, through batch_norm_train_grad, the same
// gradients as the decomposition; the kernels agree with their primitive
// spelling (what CoreML runs) on several ranks, in f32 and f64.
#include <gtest/gtest.h>

#include "opt/autodiff/primitives.h"
#include "opt/passes.h"
#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::random_tensor;

int count(const Graph& g, Op op) {
  int k = 0;
  for (const Node& n : g.nodes()) k += n.op == op;
  return k;
}

// torch._decomp's native_batch_norm in training mode on x [N, C, ...]: the
// normalization, the affine, and the running statistics' momentum updates
// (the variance unbiased, from its own sum of squares without keepdims).
struct Decomposed {
  Graph g;
  NodeId x, gamma, beta;
};

Decomposed decomposition(const Dims& xd) {
  Decomposed d;
  Builder b(d.g);
  const int64_t C = xd[1];
  int64_t n = 1;
  for (size_t i = 0; i < xd.size(); ++i)
    if (i != 1) n *= xd[i];
  std::vector<int64_t> axes{0}, bc(xd.size(), 1);
  for (size_t i = 2; i < xd.size(); ++i) axes.push_back(int64_t(i));
  bc[1] = C;
  d.x = b.input("x", Shape(xd, DType::F32));
  d.gamma = b.param("bn.weight", Shape(Dims{C}, DType::F32));
  d.beta = b.param("bn.bias", Shape(Dims{C}, DType::F32));
  const NodeId rm = b.param("bn.running_var", Shape(Dims{C}, DType::F32));
  const NodeId mean = b.reduce(Op::ReduceMean, d.x, axes, true);
  const NodeId dev = b.sub(d.x, mean);
  const NodeId sq = b.mul(dev, dev);
  const NodeId var = b.div(b.reduce(Op::ReduceSum, sq, axes, true), b.scalar(float(n)));
  const NodeId again = b.sub(d.x, b.reduce(Op::ReduceMean, d.x, axes, true));  // CSE merges it
  const NodeId xhat = b.mul(again, b.unary(Op::Rsqrt, b.add(var, b.scalar(1e-5f))));
  const NodeId y = b.add(b.mul(xhat, b.reshape(d.gamma, bc)), b.reshape(d.beta, bc));
  const NodeId unbiased = b.div(b.reduce(Op::ReduceSum, sq, axes, false), b.scalar(float(n - 1)));
  d.g.add_output("y", y);
  d.g.add_output("loss", b.reduce(Op::ReduceSum, b.mul(b.relu(y), y), {}));
  d.g.add_output("update::bn.running_var",
                 b.add(b.mul(rm, b.scalar(0.9f)), b.mul(unbiased, b.scalar(0.1f))));
  d.g.add_output("batch_mean", mean);
  return d;
}

TEST(BnTrainPass, FusesTheDecompositionWithTheSameValuesAndGradients) {
  for (const Dims& xd : {Dims{8, 3, 4, 5}, Dims{16, 4}, Dims{4, 2, 6}}) {
    SCOPED_TRACE(dims_str(xd));
    const Decomposed d = decomposition(xd);
    const Graph fused = opt::fuse_batch_norm_training(d.g);
    EXPECT_EQ(count(fused, Op::BatchNormTrain), 1) << to_text(fused);
    EXPECT_EQ(count(fused, Op::Rsqrt), 0) << to_text(fused);
    EXPECT_EQ(count(fused, Op::ReduceMean), 0) << to_text(fused);
    EXPECT_EQ(count(fused, Op::ReduceSum), 1) << to_text(fused);  // the loss's
    const int64_t C = xd[1];
    const TensorMap w{{"bn.weight", random_tensor({C}, DType::F32, 2)},
                      {"bn.bias", random_tensor({C}, DType::F32, 3)},
                      {"bn.running_var", random_tensor({C}, DType::F32, 4, 0.5, 1.5)}};
    const TensorMap in{{"x", random_tensor(xd, DType::F32, 1, -2, 3)}};
    // Forward outputs, and d loss / (x, gamma, beta) through each graph.
    TensorMap got[2];
    for (int i = 0; i < 2; ++i) {
      Graph g = i ? fused : d.g;
      NodeId loss = -1;
      for (const auto& o : g.outputs())
        if (o.name == "loss") loss = o.node;
      std::vector<NodeId> wrt{d.x};
      for (const char* p : {"bn.weight", "bn.bias"})
        for (const Node& n : g.nodes())
          if (n.op == Op::Param && n.name == p) wrt.push_back(n.id);
      const auto gr = grad(g, loss, wrt);
      for (size_t k = 0; k < gr.size(); ++k) g.add_output("grad" + std::to_string(k), gr[k]);
      got[i] = testing::run_graph(g, in, w);
    }
    for (const auto& [name, want] : got[0])
      EXPECT_TRUE(testing::all_close(got[1].at(name), want, 2e-5, 2e-5)) << name;
  }
}

TEST(BnTrainPass, LeavesOtherGraphsAlone) {
  // A mean over other axes (layer-norm-like) and a variance without rsqrt stay as they are.
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{4, 3, 2}, DType::F32));
  const NodeId m = b.reduce(Op::ReduceMean, x, {2}, true);
  const NodeId d = b.sub(x, m);
  g.add_output("y",
               b.mul(d, b.unary(Op::Rsqrt, b.add(b.reduce(Op::ReduceMean, b.mul(d, d), {2}, true),
                                                 b.scalar(1e-5f)))));
  EXPECT_EQ(count(opt::fuse_batch_norm_training(g), Op::BatchNormTrain), 0);
}

TEST(NormBatchTrain, KernelsMatchTheirPrimitives) {
  // batch_norm_train and batch_norm_train_grad against the primitive spelling
  // CoreML lowers, on the CPU, over ranks 2 to 5, f32 and f64.
  uint64_t seed = 10;
  for (const Dims& xd : {Dims{7, 3}, Dims{4, 5, 9}, Dims{6, 2, 5, 7}, Dims{2, 3, 2, 3, 4}})
    for (DType t : {DType::F32, DType::F64}) {
      SCOPED_TRACE(dims_str(xd) + " " + std::string(dtype_name(t)));
      Graph g;
      Builder b(g);
      const NodeId x = b.input("x", Shape(xd, t));
      const NodeId dy = b.input("dy", Shape(xd, t));
      const auto fused = b.results(Op::BatchNormTrain, {x}, {{"eps", 1e-3}});
      g.add_output("xhat", fused[0]);
      g.add_output("mean", fused[1]);
      g.add_output("var", fused[2]);
      g.add_output("dx", b.op(Op::BatchNormTrainGrad, {x, dy}, {{"eps", 1e-3}}));
      opt::ad::Emit e(g);
      const auto prim = opt::ad::batch_norm_train_primitives(e, x, 1e-3);
      g.add_output("p_xhat", prim[0]);
      g.add_output("p_mean", prim[1]);
      g.add_output("p_var", prim[2]);
      g.add_output("p_dx", opt::ad::batch_norm_train_grad_primitives(e, x, dy, 1e-3));
      const TensorMap out = testing::run_graph(
          g, {{"x", random_tensor(xd, t, seed++, -1, 4)}, {"dy", random_tensor(xd, t, seed++)}});
      const double tol = t == DType::F64 ? 1e-12 : 2e-5;
      for (const char* k : {"xhat", "mean", "var", "dx"})
        EXPECT_TRUE(testing::all_close(out.at(k), out.at(std::string("p_") + k), tol, tol)) << k;
    }
}

}  // namespace
}  // namespace rlx
