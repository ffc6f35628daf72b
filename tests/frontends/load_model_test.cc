// load_model is the one entry point for every format: a tiny GGUF llama loads
// into a graph that matches the scalar reference, `rlx compile tiny.gguf
// --target coreml` and `rlx inspect --backend` go through it, and ONNX and
// unknown files are refused with clear messages.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "rlx/rlx.h"
#include "support/testing.h"
#include "support/tiny_llm.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

class LoadModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::process_temp_dir("rlx_load_model_test");
    std::ofstream(path("tiny.gguf"), std::ios::binary) << testing::TinyLlm{}.gguf_bytes();
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static std::string error_of(const std::string& p) {
    try {
      load_model(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  static inline fs::path dir_;
};

TEST_F(LoadModel, GgufLoadsAndRuns) {
  const testing::TinyLlm tiny;
  Model m = load_model(path("tiny.gguf"));
  EXPECT_EQ(m.format, "gguf-llama");
  EXPECT_NE(m.summary.find("llama: 2 layers"), std::string::npos) << m.summary;
  ASSERT_EQ(m.graph.outputs().size(), 1u);  // no KV cache by default
  const std::vector<int32_t> tokens{1, 5, 7};
  Session s(Executable::compile(std::move(m.graph), m.weights));
  Tensor logits = s.run(llm::token_inputs(tokens, 0, tiny.n_vocab)).at("logits");
  ASSERT_EQ(logits.dims(), (Dims{3, tiny.n_vocab}));
  auto want = tiny.reference_logits(tokens);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int64_t v = 0; v < tiny.n_vocab; ++v)
      EXPECT_NEAR(logits.data<float>()[int64_t(t) * tiny.n_vocab + v], want[t][size_t(v)], 2e-4);

  Model kv = load_model(path("tiny.gguf"), {.kv_cache = true, .all_logits = false});
  EXPECT_EQ(kv.graph.outputs().size(), size_t(1 + 2 * tiny.n_layer));
  Model fixed = load_model(path("tiny.gguf"), {.n_tokens = 4});
  EXPECT_EQ(fixed.graph.node(fixed.graph.inputs()[0]).shape.str(), "[4] i64");
}

TEST_F(LoadModel, BrokenOnnxAndUnknownFilesAreRefusedClearly) {
  // ir_version 7, then a producer_name cut short: picked as ONNX, refused as truncated.
  std::ofstream(path("m.onnx"), std::ios::binary) << std::string("\x08\x07\x12\x03", 4);
  const std::string e = error_of(path("m.onnx"));
  EXPECT_NE(e.find("m.onnx"), std::string::npos) << e;
  EXPECT_NE(e.find("not a valid"), std::string::npos) << e;
  std::ofstream(path("junk.bin"), std::ios::binary) << "junk";
  EXPECT_NE(error_of(path("junk.bin")).find("unrecognized model format"), std::string::npos);
  EXPECT_NE(error_of(path("missing")).find("no such file"), std::string::npos);
}

TEST_F(LoadModel, CliCompilesGgufForCoreml) {
  auto r =
      run_cli("compile " + path("tiny.gguf") + " --target coreml -o " + path("tiny.mlpackage"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "tiny.mlpackage" / "Manifest.json")) << r.output;
  r = run_cli("coreml-check " + path("tiny.mlpackage"));
  EXPECT_EQ(r.status, 0) << r.output;
  r = run_cli("compile " + path("tiny.gguf") + " --target coreml --seq-len 3 -o " +
              path("tiny3.mlpackage"));
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST_F(LoadModel, CliInspectListsBackendSupport) {
  auto r = run_cli("inspect " + path("tiny.gguf") + " --backend coreml");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("backend coreml: supports all"), std::string::npos) << r.output;
  r = run_cli("inspect " + path("tiny.gguf") + " --backend cpu");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("backend cpu: supports all"), std::string::npos) << r.output;
  r = run_cli("inspect " + path("tiny.gguf") + " --backend tpu");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.output.find("unknown backend 'tpu'"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace rlx
