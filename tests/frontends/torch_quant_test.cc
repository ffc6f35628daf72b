// PyTorch fake quantization imported onto fake_quantize: a QAT-style MLP exported by rlx_torch
// (tests/frontends/torch_quant_models.py, at test time) with fixed int8 per-tensor qparams, a
// per-channel int4 weight with zero points, learnable (LSQ) activation and weight scales and a
// tensor-qparams output quantizer. The forward must match PyTorch's output and every gradient
// (inputs, weights, biases, the learnable scales) torch.autograd's, both in float32.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

fs::path export_quant_models() {
  const fs::path dir = testing::process_temp_dir("rlx_torch_quant");
  const std::string cmd = "/usr/bin/python3 " RLX_SOURCE_DIR
                          "/tests/frontends/torch_quant_models.py " +
                          dir.string() + " 2>" + (dir / "err.txt").string();
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream err(dir / "err.txt");
    ADD_FAILURE() << cmd << "\n" << std::string(std::istreambuf_iterator<char>(err), {});
  }
  return dir;
}

TEST(TorchQuant, FakeQuantizeImportsMatchPyTorchForwardAndBackward) {
  const fs::path dir = export_quant_models() / "qat_mlp";
  Model m = load_model(dir.string());
  size_t fq = 0;
  for (const Node& n : m.graph.nodes()) fq += n.op == Op::FakeQuantize;
  EXPECT_EQ(fq, 5u);  // every PyTorch fake quantize became one fake_quantize node
  const TensorMap ref = read_safetensors((dir / "reference.safetensors").string());
  const TensorMap want = read_safetensors((dir / "grads.safetensors").string());

  // Forward: same formula as PyTorch's kernels, so equal up to the matmuls' summation order.
  TensorMap feed{{"x", ref.at("in::x")}};
  const TensorMap fwd = Session(Executable::compile(m.graph, m.weights)).run(feed);
  const testing::Parity pf = testing::parity(fwd.at("out::0"), want.at("want::out::0"));
  EXPECT_LE(pf.max_abs, 1e-6) << "forward max|err|";

  GradientGraphOptions go;
  go.non_trainable = m.non_trainable;
  go.cotangents = true;
  GradientGraph gg = gradient_graph(std::move(m.graph), go);
  for (const auto& [out, in] : gg.cotangents) feed[in] = want.at("ct::" + out);
  const TensorMap got = Session(Executable::compile(std::move(gg.graph), m.weights)).run(feed);
  size_t checked = 0;
  for (const auto& [key, w] : want) {
    if (key.rfind("grad::", 0) != 0) continue;
    SCOPED_TRACE(key);
    auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "rlx has no " << key;
    ASSERT_EQ(it->second.dims(), w.dims());
    const testing::Parity p = testing::parity(it->second, w);
    EXPECT_GE(p.cosine, 0.999999);
    EXPECT_LE(p.max_abs, 1e-5 * std::max(1.0, p.max_ref))
        << "max|err| " << p.max_abs << " max|ref| " << p.max_ref;
    std::printf("[qat-torch] %-20s max|err| %.2e  max|ref| %.2e  cosine %.9f\n", key.c_str(),
                p.max_abs, p.max_ref, p.cosine);
    ++checked;
  }
  EXPECT_EQ(checked, 7u);  // x, fc1/fc2 weight and bias, act_scale, w2_scale
  fs::remove_all(dir.parent_path());
}

}  // namespace
}  // namespace rlx
