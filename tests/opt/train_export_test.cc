// rlx_torch.export(..., train=True) end to end: small PyTorch models (a CNN with BatchNorm2d,
// dropout and cross-entropy, with p = 0 and p > 0; embeddings + an MLP with dropout) exported in
// training form (tests/opt/train_export_models.py, run at test time) must
//  - declare inputs target and rlx::step, outputs loss, logits and update::<buffer>, and keep
//    buffers out of training;
//  - reproduce PyTorch's train-mode forward: loss, logits and the updated running statistics
//    (rlx_torch's seeded dropout draws rlx's masks, so p > 0 compares too);
//  - give parameter and input gradients (gradient_graph, the path of `rlx grad`, and the CLI
//    itself) matching torch.autograd in float64: cosine >= 0.9999, max|err| <= 1e-4 max|ref|.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rlx/autodiff.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

void expect_parity(const Tensor& got, const Tensor& want, const std::string& what, double rel) {
  ASSERT_EQ(got.dims(), want.dims()) << what;
  const testing::Parity p = testing::parity(got, want);
  EXPECT_GE(p.cosine, 0.9999) << what;
  EXPECT_LE(p.max_abs, rel * std::max(p.max_ref, 1e-30))
      << what << " max|err| " << p.max_abs << " max|ref| " << p.max_ref;
}

void check_exported_forward(const Model& m, const fs::path& d, bool has_bn) {
  const TensorMap ref = read_safetensors((d / "reference.safetensors").string());
  TensorMap feed;
  std::set<std::string> inputs;
  for (NodeId id : m.graph.inputs()) {
    const std::string& in = m.graph.node(id).name;
    inputs.insert(in);
    feed[in] = ref.at("in::" + in);
  }
  EXPECT_TRUE(inputs.count("target") && inputs.count("rlx::step"));
  std::set<std::string> outs;
  for (const auto& o : m.graph.outputs()) outs.insert(o.name);
  EXPECT_EQ(m.graph.outputs()[0].name, "loss");
  EXPECT_TRUE(outs.count("logits"));
  if (has_bn) {
    for (const char* b : {"bn.running_mean", "bn.running_var", "bn.num_batches_tracked"}) {
      EXPECT_TRUE(outs.count(std::string("update::") + b)) << b;
      EXPECT_TRUE(m.non_trainable.count(b)) << b;
    }
  }
  Session session(Executable::compile(m.graph, m.weights));
  const TensorMap got = session.run(feed);
  for (const auto& [name, t] : got) {
    const Tensor& want = ref.at("out::" + name);
    if (is_float(want.dtype()))
      expect_parity(t, want, name, 1e-5);
    else
      EXPECT_TRUE(testing::all_equal(t, want)) << name;  // num_batches_tracked
  }
}

void check_gradients(Model m, const fs::path& d) {
  const TensorMap ref = read_safetensors((d / "reference.safetensors").string());
  const TensorMap want = read_safetensors((d / "grads.safetensors").string());
  GradientGraphOptions go;
  go.non_trainable = m.non_trainable;  // the loss is the output named "loss"
  GradientGraph gg = gradient_graph(std::move(m.graph), go);
  TensorMap feed;
  for (NodeId id : gg.graph.inputs())
    feed[gg.graph.node(id).name] = ref.at("in::" + gg.graph.node(id).name);
  Session session(Executable::compile(std::move(gg.graph), m.weights));
  const TensorMap got = session.run(feed);
  size_t checked = 0;
  for (const auto& [key, w] : want) {
    ASSERT_TRUE(got.count(key)) << "rlx has no " << key;
    expect_parity(got.at(key), w, key, 1e-4);
    ++checked;
  }
  for (const std::string& g : gg.grads)
    EXPECT_TRUE(want.count(g)) << g << " is not trained by torch";
  EXPECT_GT(checked, 0u);
}

TEST(TrainExport, ForwardAndGradientsMatchTorch) {
  const fs::path dir = testing::process_temp_dir("rlx_train_export");
  const std::vector<std::string> names{"cnn", "cnn_dropout", "embed_mlp"};
  std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/opt/train_export_models.py " + dir.string();
  for (const auto& n : names) cmd += " " + n;
  cmd += " 2>" + (dir / "err.txt").string();
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream err(dir / "err.txt");
    FAIL() << cmd << "\n" << std::string(std::istreambuf_iterator<char>(err), {});
  }
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    try {
      Model m = load_model((dir / name).string());
      check_exported_forward(m, dir / name, name != "embed_mlp");
      check_gradients(std::move(m), dir / name);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  // `rlx grad` on a train export: no --cotangents, the loss output is differentiated.
  const fs::path d = dir / "cnn_dropout";
  const auto r =
      testing::run_cli("grad " + d.string() + " --inputs " + (d / "inputs.safetensors").string() +
                       " --out " + (dir / "g.safetensors").string() + " -t 2");
  ASSERT_EQ(r.status, 0) << r.output;
  const TensorMap cli = read_safetensors((dir / "g.safetensors").string());
  const TensorMap want = read_safetensors((d / "grads.safetensors").string());
  for (const auto& [key, w] : want) {
    ASSERT_TRUE(cli.count(key)) << key << "\n" << r.output;
    expect_parity(cli.at(key), w, "cli " + key, 1e-4);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlx
