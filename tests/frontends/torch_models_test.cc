// Whole PyTorch models, exported by rlx_torch with random weights (BN stats
// re-estimated) and run through the importer + runtime, compared with eager
// PyTorch's reference outputs. Each TEST exports only its own models in one
// python process (ctest runs every TEST in a process of its own).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "frontends/torch/import.h"
#include "frontends/torch/torch_ir.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

using testing::Parity;

// Exports `names` into a fresh temp dir (one python process); returns the dir.
fs::path export_torch_models(const std::vector<std::string>& names) {
  fs::path dir = fs::temp_directory_path() /
                 ("rlx_torch_models_" + std::to_string(::getpid()) + "_" + names.front());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/frontends/torch_models.py " + dir.string();
  for (const auto& n : names) cmd += " " + n;
  cmd += " 2>" + (dir / "err.txt").string();
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream err(dir / "err.txt");
    std::string msg((std::istreambuf_iterator<char>(err)), {});
    ADD_FAILURE() << "export failed: " << cmd << "\n" << msg;
  }
  return dir;
}

// Runs every export through rlx and checks each output: cosine >= 0.9999 and
// max|err| <= rel * max(1, max|ref|). Float32 with different summation orders
// (blocked GEMM, Winograd-free direct conv, fused attention) differs from
// eager by ~1e-6 relative per op; 1e-4 leaves room for ~20 layers.
void check_exported(const fs::path& dir, const std::vector<std::string>& names, double rel);

void check_torch_models(const std::vector<std::string>& names, double rel = 1e-4) {
  fs::path dir = export_torch_models(names);
  check_exported(dir, names, rel);
  fs::remove_all(dir);
}

void check_exported(const fs::path& dir, const std::vector<std::string>& names, double rel) {
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    fs::path d = dir / name;
    if (!fs::exists(d / "torch-ir.json")) {
      ADD_FAILURE() << "not exported";
      continue;
    }
    try {
      Model m = import_torch_export(d.string());
      TensorMap ref = read_safetensors((d / "reference.safetensors").string());
      TensorMap inputs;
      for (NodeId id : m.graph.inputs())
        inputs[m.graph.node(id).name] = ref.at("in::" + m.graph.node(id).name).clone();
      auto exe = Executable::compile(m.graph, m.weights);
      Session session(exe);
      TensorMap out = session.run(inputs);
      ASSERT_FALSE(out.empty());
      for (const auto& [oname, got] : out) {
        std::string index = oname.substr(oname.find("::") + 2);
        const Tensor& want = ref.at("out::" + index);
        ASSERT_EQ(got.dims(), want.dims()) << oname;
        Parity p = testing::parity(got, want);
        std::printf("[parity] %-28s %-6s max|err| %.3e (max|ref| %.3e) cosine %.9f\n", name.c_str(),
                    oname.c_str(), p.max_abs, p.max_ref, p.cosine);
        EXPECT_GE(p.cosine, 0.9999) << oname;
        EXPECT_LE(p.max_abs, rel * std::max(1.0, p.max_ref)) << oname;
        // A degenerate reference (all ~0) would make every error look small.
        EXPECT_GT(p.max_ref, 1e-3) << oname;
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

TEST(TorchModels, MlpCnnTransformersGpt) {
  check_torch_models({"mlp", "cnn_bn", "transformer_fast", "transformer_fast_norm_first",
                      "transformer_slow", "gpt"});
}

TEST(TorchModels, Torchvision) {
  check_torch_models({"resnet18", "mobilenet_v2", "squeezenet1_1", "shufflenet_v2_x1_0"});
}

// nn.LSTM / nn.GRU / nn.RNN (uni/bi, 1-2 layers, batch_first, with and without initial states and
// biases, an LSTM with proj_size), each imported as one lstm / gru / rnn node, at 1e-5 of PyTorch.
TEST(TorchModels, Recurrent) {
  const std::vector<std::string> names = {
      "lstm_uni",      "lstm_bi2_bf_init", "lstm_bi_nobias",       "lstm_proj_bi2_init",
      "gru_2_bf_init", "gru_bi",           "rnn_tanh_bi2_bf_init", "rnn_relu"};
  fs::path dir = export_torch_models(names);
  check_exported(dir, names, 1e-5);
  // One node each, not an unrolled decomposition.
  for (const char* name : {"lstm_bi2_bf_init", "lstm_proj_bi2_init", "gru_bi", "rnn_relu"}) {
    Model m = import_torch_export((dir / name).string());
    int recurrent = 0;
    for (NodeId id = 0; id < NodeId(m.graph.size()); ++id)
      recurrent += op_family(m.graph.node(id).op) == OpFamily::Recurrent;
    EXPECT_EQ(recurrent, 1) << name;
  }
  fs::remove_all(dir);
}

// Regressions found by the models above: rlx_torch's +-inf floats (1e999,
// in GPT's masked_fill) and kwargs (clone's memory_format, in the slow
// transformer and shufflenet) must parse.
TEST(TorchIrParse, InfinitiesAndKwargs) {
  std::string doc = R"({"format": "rlx-torch-ir", "version": 1,
    "inputs": [{"id": "x", "shape": [2], "dtype": "f32"}],
    "nodes": [{"id": "y", "op": "aten.fill.Scalar", "args": [{"ref": "x"}, {"float": -1e999}],
               "kwargs": {"memory_format": {"str": "torch.contiguous_format"},
                          "v": {"list": [{"float": 1e999}, {"str": "a\"1e999"}]}},
               "out": {"shape": [2], "dtype": "f32"}}],
    "outputs": [{"ref": "y"}]})";
  torch_ir::Document d = torch_ir::parse(doc, "test");
  ASSERT_EQ(d.nodes.size(), 1u);
  EXPECT_EQ(d.nodes[0].args[1].f, -INFINITY);
  ASSERT_EQ(d.nodes[0].kwargs.size(), 2u);
  EXPECT_EQ(d.nodes[0].kwargs.at("memory_format").text, "torch.contiguous_format");
  EXPECT_EQ(d.nodes[0].kwargs.at("v").list[0].f, INFINITY);
  EXPECT_EQ(d.nodes[0].kwargs.at("v").list[1].text, "a\"1e999");
}

}  // namespace
}  // namespace rlx
