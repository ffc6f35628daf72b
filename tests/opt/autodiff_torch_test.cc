// Whole-model gradients against torch.autograd: PyTorch models exported by
// rlx_torch (float32), differentiated by rlx (gradient_graph, the path of
// `rlx grad`) and by torch.autograd in float64 on the same weights, inputs
// and cotangents (tests/opt/autodiff_models.py, run at test time). Every
// parameter and float input must match: cosine >= 0.9999 and
// max|err| <= 1e-4 * max|ref|.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
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

fs::path export_autodiff_models(const std::vector<std::string>& names) {
  const fs::path dir =
      fs::temp_directory_path() / ("rlx_autodiff_models_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/opt/autodiff_models.py " + dir.string();
  for (const auto& n : names) cmd += " " + n;
  cmd += " 2>" + (dir / "err.txt").string();
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream err(dir / "err.txt");
    ADD_FAILURE() << cmd << "\n" << std::string(std::istreambuf_iterator<char>(err), {});
  }
  return dir;
}

void check_model(const fs::path& d, const std::string& name) {
  SCOPED_TRACE(name);
  Model m = load_model(d.string());
  const TensorMap ref = read_safetensors((d / "reference.safetensors").string());
  const TensorMap want = read_safetensors((d / "grads.safetensors").string());
  GradientGraphOptions go;
  go.non_trainable = m.non_trainable;
  go.cotangents = true;
  GradientGraph gg = gradient_graph(std::move(m.graph), go);
  TensorMap feed;
  for (NodeId id : gg.graph.inputs()) {
    const std::string& in = gg.graph.node(id).name;
    if (ref.count("in::" + in)) feed[in] = ref.at("in::" + in);
  }
  for (const auto& [out, in] : gg.cotangents) feed[in] = want.at("ct::" + out);
  Session session(Executable::compile(std::move(gg.graph), m.weights));
  const TensorMap got = session.run(feed);
  size_t checked = 0;
  double worst_cos = 1, worst_rel = 0;
  for (const auto& [key, w] : want) {
    if (key.rfind("grad::", 0) != 0) continue;
    auto it = got.find(key);
    if (it == got.end()) {
      ADD_FAILURE() << "rlx has no " << key;
      continue;
    }
    ASSERT_EQ(it->second.dims(), w.dims()) << key;
    const testing::Parity p = testing::parity(it->second, w);
    const double rel = p.max_abs / std::max(p.max_ref, 1e-30);
    EXPECT_GE(p.cosine, 0.9999) << key;
    EXPECT_LE(rel, 1e-4) << key << " max|err| " << p.max_abs << " max|ref| " << p.max_ref;
    worst_cos = std::min(worst_cos, p.cosine);
    worst_rel = std::max(worst_rel, rel);
    ++checked;
  }
  // Every rlx gradient is one torch computed: nothing extra (buffers are not trained).
  for (const std::string& g : gg.grads)
    EXPECT_TRUE(want.count(g)) << g << " has no torch reference";
  std::printf("[grad-parity] %-14s %3zu gradients  min cosine %.9f  max rel err %.2e\n",
              name.c_str(), checked, worst_cos, worst_rel);
  EXPECT_GT(checked, 0u);
}

TEST(AutodiffTorch, ModelGradientsMatchAutograd) {
  const std::vector<std::string> names{"mlp",  "cnn",       "transformer", "gpt", "cnn_groupnorm",
                                       "lstm", "lstm_proj", "gru",         "rnn"};
  const fs::path dir = export_autodiff_models(names);
  for (const auto& name : names) {
    try {
      check_model(dir / name, name);
    } catch (const std::exception& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlx
