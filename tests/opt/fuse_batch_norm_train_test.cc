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

using testing::count_op;
using testing::random_tensor;

// The input count of the graph's (first) batch_norm_train node; 0 without one.
size_t bn_inputs(const Graph& g) {
  for (const Node& n : g.nodes())
    if (n.op == Op::BatchNormTrain) return n.inputs.size();
  return 0;
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
    EXPECT_EQ(count_op(fused, Op::BatchNormTrain), 1) << to_text(fused);
    EXPECT_EQ(count_op(fused, Op::Rsqrt), 0) << to_text(fused);
    EXPECT_EQ(count_op(fused, Op::ReduceMean), 0) << to_text(fused);
    EXPECT_EQ(count_op(fused, Op::ReduceSum), 1) << to_text(fused);  // the loss's
    // The affine too: gamma and beta as the node's inputs, in their own [C] shape.
    EXPECT_EQ(bn_inputs(fused), 3u) << to_text(fused);
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
  EXPECT_EQ(count_op(opt::fuse_batch_norm_training(g), Op::BatchNormTrain), 0);
}

TEST(BnTrainPass, KeepsAnAffineWhoseInputHasOtherUses) {
  // xhat also read by the loss: the mul and add stay, the node takes x alone.
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{6, 3, 4}, DType::F32));
  const NodeId gamma = b.param("gamma", Shape(Dims{3, 1}, DType::F32));
  const NodeId beta = b.param("beta", Shape(Dims{3, 1}, DType::F32));
  const NodeId m = b.reduce(Op::ReduceMean, x, {0, 2}, true);
  const NodeId d = b.sub(x, m);
  const NodeId var = b.div(b.reduce(Op::ReduceSum, b.mul(d, d), {0, 2}, true), b.scalar(24.f));
  const NodeId xhat = b.mul(d, b.unary(Op::Rsqrt, b.add(var, b.scalar(1e-5f))));
  g.add_output("y", b.add(b.mul(xhat, gamma), beta));
  g.add_output("xhat", xhat);
  const Graph fused = opt::fuse_batch_norm_training(g);
  EXPECT_EQ(bn_inputs(fused), 1u) << to_text(fused);
  EXPECT_EQ(count_op(fused, Op::BatchNormTrain), 1) << to_text(fused);
  EXPECT_EQ(count_op(fused, Op::Mul), 1) << to_text(fused);
}

TEST(NormBatchTrain, KernelsMatchTheirPrimitives) {
  // batch_norm_train and batch_norm_train_grad, without and with the affine
  // (gamma and beta as [C] and as [C, 1, ...]), against the primitive spelling
  // CoreML lowers, on the CPU, over ranks 2 to 5, f32 and f64.
  uint64_t seed = 10;
  for (const Dims& xd : {Dims{7, 3}, Dims{4, 5, 9}, Dims{6, 2, 5, 7}, Dims{2, 3, 2, 3, 4}})
    for (DType t : {DType::F32, DType::F64})
      for (int affine = 0; affine < 3; ++affine) {
        SCOPED_TRACE(dims_str(xd) + " " + std::string(dtype_name(t)) + " affine " +
                     std::to_string(affine));
        Graph g;
        Builder b(g);
        const NodeId x = b.input("x", Shape(xd, t));
        const NodeId dy = b.input("dy", Shape(xd, t));
        Dims pd{xd[1]};  // affine 2: [C, 1, ...]
        if (affine == 2) pd.resize(xd.size() - 1, 1);
        const NodeId gamma = b.input("gamma", Shape(pd, t)), beta = b.input("beta", Shape(pd, t));
        std::vector<NodeId> fwd{x}, bwd{x, dy};
        if (affine) {
          fwd.insert(fwd.end(), {gamma, beta});
          bwd.push_back(gamma);
        }
        const auto fused = b.results(Op::BatchNormTrain, fwd, {{"eps", 1e-3}});
        const auto grads = b.results(Op::BatchNormTrainGrad, bwd, {{"eps", 1e-3}});
        opt::ad::Emit e(g);
        const auto prim = opt::ad::batch_norm_train_primitives(e, x, affine ? gamma : -1,
                                                               affine ? beta : -1, 1e-3);
        const auto pgrads =
            opt::ad::batch_norm_train_grad_primitives(e, x, dy, affine ? gamma : -1, 1e-3);
        const char* names[] = {"y", "mean", "var", "dx", "dgamma", "dbeta"};
        for (int k = 0; k < 6; ++k) {
          g.add_output(names[k], k < 3 ? fused[size_t(k)] : grads[size_t(k - 3)]);
          g.add_output(std::string("p_") + names[k],
                       k < 3 ? prim[size_t(k)] : pgrads[size_t(k - 3)]);
        }
        const TensorMap out =
            testing::run_graph(g, {{"x", random_tensor(xd, t, seed++, -1, 4)},
                                   {"dy", random_tensor(xd, t, seed++)},
                                   {"gamma", random_tensor(pd, t, seed++, 0.5, 2)},
                                   {"beta", random_tensor(pd, t, seed++)}});
        const double tol = t == DType::F64 ? 1e-12 : 2e-5;
        for (const char* k : names) {
          const Tensor &got = out.at(k), &want = out.at(std::string("p_") + k);
          EXPECT_EQ(got.dims(), want.dims()) << k;
          EXPECT_TRUE(testing::all_close(got, want, tol, tol)) << k;
        }
      }
}

}  // namespace
}  // namespace rlx
