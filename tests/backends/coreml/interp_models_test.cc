// Whole models through export + the MIL interpreter, compared with rlx's CPU
// runtime: the digits CNN, a pre-norm transformer block and a ResNet-18 built
// with the graph builder (random weights), plus models exported from PyTorch
// by rlx_torch (skipped cleanly when torch / torchvision are missing).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "backends/coreml/mil.h"
#include "frontends/torch/import.h"
#include "interp_support.h"

namespace rlx {
namespace {

using coreml_test::cosine;
using coreml_test::max_abs_diff;

struct InterpNet {
  Graph g;
  TensorMap w, inputs;
  Builder b{g};
  uint64_t seed = 1;
  NodeId param(const std::string& name, Dims d, double lo, double hi) {
    w[name] = testing::random_tensor(d, DType::F32, seed++, lo, hi);
    return b.param(name, Shape(d, DType::F32));
  }
  NodeId input(const std::string& name, Dims d) {
    inputs[name] = testing::random_tensor(d, DType::F32, seed++, -1, 1);
    return b.input(name, Shape(d, DType::F32));
  }
  // conv (He-like scale) + inference batch norm with non-trivial statistics.
  NodeId conv_bn(const std::string& n, NodeId x, int64_t cin, int64_t cout, int64_t k,
                 int64_t stride) {
    const double s = std::sqrt(3.0 / double(cin * k * k));
    const int64_t pd = k / 2;
    NodeId c = b.op(Op::Conv, {x, param(n + ".w", {cout, cin, k, k}, -s, s)},
                    {{"stride", std::vector<int64_t>{stride, stride}},
                     {"pads", std::vector<int64_t>{pd, pd, pd, pd}}});
    return b.op(Op::BatchNorm,
                {c, param(n + ".mean", {cout}, -0.1, 0.1), param(n + ".var", {cout}, 0.5, 1.5),
                 param(n + ".gamma", {cout}, 0.5, 1.0), param(n + ".beta", {cout}, -0.1, 0.1)});
  }
  NodeId linear(const std::string& n, NodeId x, int64_t din, int64_t dout) {
    const double s = 1.0 / std::sqrt(double(din));
    return b.linear(x, param(n + ".w", {dout, din}, -s, s), param(n + ".b", {dout}, -s, s));
  }
};

struct InterpParity {
  double cos = 0, max_abs = 0, max_ref = 0;
};

// Exports, interprets and compares every output with the CPU runtime.
std::vector<InterpParity> check_interpreted(const std::string& name, InterpNet& n, bool fp16,
                                            double min_cos) {
  TensorMap want = testing::run_graph(n.g, n.inputs, n.w, 1);
  coreml::ExportOptions o;
  o.fp16 = fp16;
  TensorMap got = coreml_test::export_and_interpret(n.g, n.w, n.inputs, o);
  std::vector<InterpParity> r;
  for (const auto& [k, t] : want) {
    const std::string mk = coreml::sanitize_name(k);  // "out::0" -> "out__0"
    EXPECT_EQ(got.count(mk), 1u) << k;
    if (!got.count(mk)) continue;
    const Tensor& g = got.at(mk);
    EXPECT_EQ(g.dims(), t.dims()) << k;
    InterpParity p{cosine(g, t), max_abs_diff(g, t), max_abs_diff(t, Tensor(t.dims(), t.dtype()))};
    std::printf("[coreml-interp] %-12s %-5s %-8s cosine %.9f max|err| %.3e (max|ref| %.3e)\n",
                name.c_str(), fp16 ? "fp16" : "fp32", k.c_str(), p.cos, p.max_abs, p.max_ref);
    EXPECT_GE(p.cos, min_cos) << name << " " << k;
    EXPECT_GT(p.max_ref, 1e-3) << "degenerate reference";
    r.push_back(p);
  }
  return r;
}

// examples/digits' DigitsCNN: 2 conv+BN layers, 2 linear, on 8x8 digits.
void digits(InterpNet& n) {
  NodeId x = n.input("x", {4, 1, 8, 8});
  NodeId h = n.b.relu(n.conv_bn("c1", x, 1, 16, 3, 1));
  h = n.b.relu(n.conv_bn("c2", h, 16, 32, 3, 1));
  h = n.b.op(Op::MaxPool2d, {h}, {{"kernel", std::vector<int64_t>{2, 2}}});
  h = n.b.reshape(h, {4, 32 * 4 * 4});
  h = n.linear("fc2", n.b.relu(n.linear("fc1", h, 512, 64)), 64, 10);
  n.g.add_output("logits", h);
}

// Pre-norm transformer block: causal multi-head attention + GELU MLP.
void transformer(InterpNet& n) {
  const int64_t B = 2, S = 8, D = 32, H = 4, Dh = D / H;
  NodeId x = n.input("x", {B, S, D});
  auto ln = [&](const std::string& name, NodeId v) {
    return n.b.op(Op::LayerNorm,
                  {v, n.param(name + ".g", {D}, 0.8, 1.2), n.param(name + ".b", {D}, -0.1, 0.1)});
  };
  auto heads = [&](NodeId v) { return n.b.transpose(n.b.reshape(v, {B, S, H, Dh}), {0, 2, 1, 3}); };
  NodeId h = ln("ln1", x);
  NodeId q = heads(n.linear("q", h, D, D)), k = heads(n.linear("k", h, D, D)),
         v = heads(n.linear("v", h, D, D));
  NodeId a = n.b.op(Op::Attention, {q, k, v}, {{"mask", std::string("causal")}});
  a = n.b.reshape(n.b.transpose(a, {0, 2, 1, 3}), {B, S, D});
  NodeId x1 = n.b.add(x, n.linear("o", a, D, D));
  NodeId m = n.b.unary(Op::Gelu, n.linear("fc1", ln("ln2", x1), D, 4 * D));
  n.g.add_output("y", n.b.add(x1, n.linear("fc2", m, 4 * D, D)));
}

// torchvision's resnet18 topology (BasicBlock x [2,2,2,2]) at 10 classes.
void resnet18(InterpNet& n) {
  NodeId x = n.input("x", {1, 3, 64, 64});
  NodeId h = n.b.relu(n.conv_bn("stem", x, 3, 64, 7, 2));
  h = n.b.op(Op::MaxPool2d, {h},
             {{"kernel", std::vector<int64_t>{3, 3}},
              {"stride", std::vector<int64_t>{2, 2}},
              {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  int64_t cin = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t cout = 64 << stage;
    for (int blk = 0; blk < 2; ++blk) {
      const std::string nm = "l" + std::to_string(stage) + "." + std::to_string(blk);
      const int64_t stride = stage > 0 && blk == 0 ? 2 : 1;
      NodeId y = n.b.relu(n.conv_bn(nm + ".c1", h, cin, cout, 3, stride));
      y = n.conv_bn(nm + ".c2", y, cout, cout, 3, 1);
      NodeId sc = stride != 1 || cin != cout ? n.conv_bn(nm + ".down", h, cin, cout, 1, stride) : h;
      h = n.b.relu(n.b.add(y, sc));
      cin = cout;
    }
  }
  h = n.b.op(Op::AdaptiveAvgPool2d, {h}, {{"output", std::vector<int64_t>{1, 1}}});
  n.g.add_output("logits", n.linear("fc", n.b.reshape(h, {1, 512}), 512, 10));
}

TEST(MilInterpModels, DigitsCnn) {
  InterpNet n;
  digits(n);
  check_interpreted("digits", n, false, 0.9999);
  check_interpreted("digits", n, true, 0.999);
}

TEST(MilInterpModels, TransformerBlock) {
  InterpNet n;
  transformer(n);
  check_interpreted("transformer", n, false, 0.9999);
  check_interpreted("transformer", n, true, 0.999);
}

TEST(MilInterpModels, Resnet18Builder) {
  InterpNet n;
  resnet18(n);
  check_interpreted("resnet18", n, false, 0.9999);
  check_interpreted("resnet18", n, true, 0.999);
}

// Models exported from PyTorch with rlx_torch: importer -> CoreML -> interpreter.
TEST(MilInterpModels, TorchExports) {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "torch is not installed";
  std::vector<std::string> names{"mlp", "cnn_bn", "transformer_fast", "gpt"};
  if (std::system("/usr/bin/python3 -c 'import torchvision' > /dev/null 2>&1") == 0)
    names.push_back("resnet18");
  else
    std::printf("[ note ] torchvision missing: the torch resnet18 export is skipped\n");
  coreml_test::TmpDir dir("torch");
  std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/frontends/torch_models.py " + dir.p.string();
  for (const auto& nm : names) cmd += " " + nm;
  cmd += " > " + (dir.p / "log.txt").string() + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  for (const auto& nm : names) {
    SCOPED_TRACE(nm);
    Model m = import_torch_export((dir.p / nm).string());
    TensorMap ref = read_safetensors((dir.p / nm / "reference.safetensors").string());
    InterpNet n;
    n.g = m.graph;
    n.w = m.weights;
    for (NodeId id : n.g.inputs())
      n.inputs[n.g.node(id).name] = ref.at("in::" + n.g.node(id).name).clone();
    if (!coreml::unsupported_ops(n.g).empty()) {
      std::printf("[ note ] %s: not lowerable to CoreML (%zu op kinds), skipped\n", nm.c_str(),
                  coreml::unsupported_ops(n.g).size());
      continue;
    }
    check_interpreted(nm, n, false, 0.9999);
    check_interpreted(nm, n, true, 0.999);
  }
}

}  // namespace
}  // namespace rlx
