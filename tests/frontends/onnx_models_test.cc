// Whole PyTorch models exported by torch.onnx.export (opset 17, random
// weights, BN stats re-estimated; tests/frontends/onnx_models.py) and run by
// rlx from the .onnx file, compared with eager PyTorch. The CLI test runs the
// same files through `rlx run / inspect / compile --target coreml`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

fs::path export_onnx(const std::vector<std::string>& names) {
  fs::path dir = fs::temp_directory_path() /
                 ("rlx_onnx_models_" + std::to_string(::getpid()) + "_" + names.front());
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string cmd =
      "/usr/bin/python3 " RLX_SOURCE_DIR "/tests/frontends/onnx_models.py " + dir.string();
  for (const auto& n : names) cmd += " " + n;
  cmd += " >" + (dir / "err.txt").string() + " 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream err(dir / "err.txt");
    std::string msg((std::istreambuf_iterator<char>(err)), {});
    ADD_FAILURE() << "export failed: " << cmd << "\n" << msg;
  }
  return dir;
}

// cosine >= 0.9999 and max|err| <= rel * max(1, max|ref|), as for the
// torch-ir.json imports (tests/frontends/torch_models_test.cc).
void check_onnx_models(const std::vector<std::string>& names, double rel = 1e-4) {
  fs::path dir = export_onnx(names);
  for (const auto& name : names) {
    SCOPED_TRACE(name);
    const fs::path d = dir / name;
    ASSERT_TRUE(fs::exists(d / "model.onnx")) << "not exported";
    try {
      Model m = load_model((d / "model.onnx").string());
      EXPECT_EQ(m.format, "onnx");
      TensorMap inputs = read_safetensors((d / "inputs.safetensors").string());
      TensorMap ref = read_safetensors((d / "reference.safetensors").string());
      auto exe = Executable::compile(m.graph, m.weights);
      Session session(exe);
      TensorMap out = session.run(inputs);
      ASSERT_EQ(out.size(), 1u);
      const Tensor& got = out.at("out");
      const Tensor& want = ref.at("out");
      ASSERT_EQ(got.dims(), want.dims());
      testing::Parity p = testing::parity(got, want);
      std::printf("[parity] onnx %-24s max|err| %.3e (max|ref| %.3e) cosine %.9f\n", name.c_str(),
                  p.max_abs, p.max_ref, p.cosine);
      EXPECT_GE(p.cosine, 0.9999);
      EXPECT_LE(p.max_abs, rel * std::max(1.0, p.max_ref));
      EXPECT_GT(p.max_ref, 1e-3);  // a degenerate reference would hide errors
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  fs::remove_all(dir);
}

TEST(OnnxModels, Torchvision) { check_onnx_models({"resnet18", "mobilenet_v2"}); }

// MaxPool / AveragePool over 3 spatial dims, run as two 2-d pools.
TEST(OnnxModels, Pools3d) { check_onnx_models({"pools3d"}, 1e-6); }

TEST(OnnxModels, TransformerEncoderAndGpt) {
  check_onnx_models({"encoder", "encoder_gelu_norm_first", "gpt"});
}

TEST(OnnxModels, CliRunInspectCompile) {
  fs::path dir = export_onnx({"encoder"});
  const std::string model = (dir / "encoder" / "model.onnx").string();
  const std::string out = (dir / "out.safetensors").string();
  auto r = testing::run_cli("run " + model + " --inputs " +
                            (dir / "encoder" / "inputs.safetensors").string() + " --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
  testing::Parity p = testing::parity(
      read_safetensors(out).at("out"),
      read_safetensors((dir / "encoder" / "reference.safetensors").string()).at("out"));
  EXPECT_GE(p.cosine, 0.9999);
  r = testing::run_cli("inspect " + model);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("layer_norm"), std::string::npos) << r.output;
  r = testing::run_cli("compile " + model + " --target coreml -o " +
                       (dir / "enc.mlpackage").string());
  ASSERT_EQ(r.status, 0) << r.output;
  r = testing::run_cli("coreml-check " + (dir / "enc.mlpackage").string());
  EXPECT_EQ(r.status, 0) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlx
