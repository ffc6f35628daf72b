// Training graphs through the CoreML exporter with no special case: the
// gradient graphs of an MLP with a cross-entropy loss, a CNN (conv, batch
// norm, padded max pool, avg pool) and a transformer block (layer norm,
// causal attention, GELU MLP) are exported, run by the MIL interpreter and
// compared gradient by gradient with the CPU runtime.
#include <gtest/gtest.h>

#include <cstdio>

#include "backends/coreml/interp_support.h"
#include "backends/coreml/mil.h"
#include "rlx/autodiff.h"

namespace rlx {
namespace {

struct GradNet {
  Graph g;
  TensorMap w, inputs;
  Builder b{g};
  uint64_t seed = 1;
  NodeId param(const std::string& name, Dims d, double lo = -0.5, double hi = 0.5) {
    w[name] = testing::random_tensor(d, DType::F32, seed++, lo, hi);
    return b.param(name, Shape(d, DType::F32));
  }
  NodeId input(const std::string& name, Dims d, DType t = DType::F32, double lo = -1,
               double hi = 1) {
    inputs[name] = testing::random_tensor(d, t, seed++, lo, hi);
    return b.input(name, Shape(d, t));
  }
  NodeId linear(const std::string& n, NodeId x, int64_t din, int64_t dout, bool bias = true) {
    return b.linear(x, param(n + ".w", {dout, din}), bias ? param(n + ".b", {dout}) : -1);
  }
};

void check_coreml_gradients(const std::string& name, GradNet& n, bool cotangents) {
  SCOPED_TRACE(name);
  GradientGraphOptions o;
  o.cotangents = cotangents;
  GradientGraph gg = gradient_graph(n.g, o);
  for (NodeId id : gg.graph.inputs()) {
    const Node& in = gg.graph.node(id);
    if (!n.inputs.count(in.name))  // a cotangent
      n.inputs[in.name] = testing::random_tensor(in.shape.concrete(), DType::F32, n.seed++);
  }
  const TensorMap want = testing::run_graph(gg.graph, n.inputs, n.w);
  const TensorMap got = coreml_test::export_and_interpret(gg.graph, n.w, n.inputs, {});
  for (const std::string& k : gg.grads) {
    const std::string mk = coreml::sanitize_name(k);
    ASSERT_EQ(got.count(mk), 1u) << k;
    const Tensor &g = got.at(mk), &t = want.at(k);
    const double cos = coreml_test::cosine(g, t), err = coreml_test::max_abs_diff(g, t);
    const double ref = coreml_test::max_abs_diff(t, Tensor(t.dims(), t.dtype()));
    std::printf("[coreml-grad] %-12s %-16s cosine %.9f max|err| %.2e (max|ref| %.2e)\n",
                name.c_str(), k.c_str(), cos, err, ref);
    EXPECT_GE(cos, 0.9999) << k;
    EXPECT_LE(err, 1e-4 * std::max(ref, 1e-6)) << k;
  }
}

TEST(AutodiffCoreML, MlpWithCrossEntropyLoss) {
  GradNet n;
  const NodeId x = n.input("x", {8, 16});
  const NodeId labels = n.input("labels", {8}, DType::I64, 0, 4);
  const NodeId h = n.b.unary(Op::Gelu, n.linear("fc1", x, 16, 32));
  const NodeId logits = n.linear("fc2", n.b.relu(n.linear("fc2a", h, 32, 32)), 32, 5);
  n.g.add_output("loss", n.b.op(Op::SoftmaxCrossEntropy, {logits, labels}));
  check_coreml_gradients("mlp_ce", n, false);
}

TEST(AutodiffCoreML, CnnWithBatchNormAndPools) {
  GradNet n;
  const NodeId x = n.input("x", {2, 3, 8, 8});
  NodeId h = n.b.op(Op::Conv, {x, n.param("c1.w", {6, 3, 3, 3}), n.param("c1.b", {6})},
                    {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  h = n.b.op(Op::BatchNorm,
             {h, n.param("bn.mean", {6}, -0.1, 0.1), n.param("bn.var", {6}, 0.5, 1.5),
              n.param("bn.g", {6}, 0.5, 1.5), n.param("bn.b", {6})});
  h = n.b.op(Op::MaxPool2d, {n.b.relu(h)},
             {{"kernel", std::vector<int64_t>{3, 3}},
              {"stride", std::vector<int64_t>{2, 2}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  h = n.b.op(Op::Conv, {h, n.param("c2.w", {4, 6, 3, 3})},
             {{"stride", std::vector<int64_t>{2, 2}}});
  h = n.b.op(Op::AvgPool2d, {n.b.relu(h)}, {{"kernel", std::vector<int64_t>{1, 1}}});
  n.g.add_output("y", n.linear("fc", n.b.reshape(h, {2, 4}), 4, 3));
  check_coreml_gradients("cnn", n, true);
}

TEST(AutodiffCoreML, TransformerBlock) {
  GradNet n;
  const int64_t B = 2, S = 5, D = 16, H = 2, Dh = D / H;
  const NodeId x = n.input("x", {B, S, D});
  auto ln = [&](const std::string& name, NodeId v) {
    return n.b.op(Op::LayerNorm,
                  {v, n.param(name + ".g", {D}, 0.8, 1.2), n.param(name + ".b", {D})});
  };
  auto heads = [&](NodeId v) { return n.b.transpose(n.b.reshape(v, {B, S, H, Dh}), {0, 2, 1, 3}); };
  const NodeId h = ln("ln1", x);
  // No key bias: it shifts every score of a row equally, so its gradient is 0
  // and only rounding noise would be compared.
  const NodeId q = heads(n.linear("q", h, D, D)), k = heads(n.linear("k", h, D, D, false)),
               v = heads(n.linear("v", h, D, D));
  NodeId a = n.b.op(Op::Attention, {q, k, v}, {{"mask", std::string("causal")}});
  a = n.b.reshape(n.b.transpose(a, {0, 2, 1, 3}), {B, S, D});
  const NodeId x1 = n.b.add(x, n.linear("o", a, D, D));
  const NodeId m = n.b.unary(Op::Gelu, n.linear("fc1", ln("ln2", x1), D, 2 * D));
  n.g.add_output("y", n.b.add(x1, n.linear("fc2", m, 2 * D, D)));
  check_coreml_gradients("transformer", n, true);
}

}  // namespace
}  // namespace rlx
