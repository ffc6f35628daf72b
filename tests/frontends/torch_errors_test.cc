// Malformed torch-ir exports must fail with one clear rlx::Error (never a
// crash), and the parser must accept the exporter's +-inf (1e999) and NaN.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/torch/import.h"
#include "frontends/torch/lowering.h"
#include "frontends/torch/torch_ir.h"
#include "rlx/model.h"
#include "rlx/runtime.h"
#include "support/testing.h"

namespace rlx {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

// x[2,3] -> linear(x, w[4,3], b[4]) -> relu: a minimal export with weights.
json linear_doc() {
  return json::parse(R"({
    "format": "rlx-torch-ir", "version": 1, "model_name": "t", "decomposition": "aten",
    "inputs": [{"id": "x", "shape": [2, 3], "dtype": "f32"}],
    "weights": [{"id": "w", "key": "fc.weight", "shape": [4, 3], "dtype": "f32", "kind": "param"},
                {"id": "b", "key": "fc.bias", "shape": [4], "dtype": "f32", "kind": "param"}],
    "nodes": [
      {"id": "lin", "op": "aten.linear.default", "args": [{"ref": "x"}, {"ref": "w"}, {"ref": "b"}],
       "out": {"shape": [2, 4], "dtype": "f32"}},
      {"id": "r", "op": "aten.relu.default", "args": [{"ref": "lin"}], "out": {"shape": [2, 4], "dtype": "f32"}}],
    "outputs": [{"ref": "r", "shape": [2, 4], "dtype": "f32"}]})");
}

class TorchErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rlx_torch_err_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_json(const std::string& text) { std::ofstream(dir_ / "torch-ir.json") << text; }
  void write_weights(const TensorMap& w) {
    write_safetensors((dir_ / "weights.safetensors").string(), w);
  }
  TensorMap good_weights() {
    return {{"fc.weight", testing::random_tensor({4, 3}, DType::F32, 1)},
            {"fc.bias", testing::random_tensor({4}, DType::F32, 2)}};
  }
  // The error message of load_model, or "" when it loads.
  std::string load_error() {
    try {
      load_model(dir_.string());
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  fs::path dir_;
};

TEST_F(TorchErrors, ValidExportLoadsAndRuns) {
  write_json(linear_doc().dump());
  TensorMap w = good_weights();
  write_weights(w);
  Model m = load_model(dir_.string());
  Tensor x = testing::random_tensor({2, 3}, DType::F32, 3);
  Session s(Executable::compile(m.graph, m.weights));
  Tensor y = s.run({{"x", x}}).at("out::0");
  ASSERT_EQ(y.dims(), (Dims{2, 4}));
  const float *xp = x.data<float>(), *wp = w["fc.weight"].data<float>(),
              *bp = w["fc.bias"].data<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j) {
      double acc = bp[j];
      for (int k = 0; k < 3; ++k) acc += double(xp[i * 3 + k]) * wp[j * 3 + k];
      EXPECT_NEAR(y.data<float>()[i * 4 + j], std::max(acc, 0.0), 1e-6);
    }
}

TEST_F(TorchErrors, MissingWeightIsNamed) {
  write_json(linear_doc().dump());
  TensorMap w = good_weights();
  w.erase("fc.bias");
  write_weights(w);
  std::string e = load_error();
  EXPECT_NE(e.find("'fc.bias' is missing"), std::string::npos) << e;
}

TEST_F(TorchErrors, MissingWeightsFile) {
  write_json(linear_doc().dump());
  std::string e = load_error();
  EXPECT_NE(e.find("weights.safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find("missing"), std::string::npos) << e;
}

TEST_F(TorchErrors, WrongWeightDtypeAndShapeAreListedTogether) {
  write_json(linear_doc().dump());
  TensorMap w = good_weights();
  w["fc.weight"] = testing::random_tensor({3, 4}, DType::F32, 1);  // transposed
  w["fc.bias"] = testing::random_tensor({4}, DType::F64, 2);
  write_weights(w);
  std::string e = load_error();
  EXPECT_NE(e.find("'fc.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("'fc.bias'"), std::string::npos) << e;
  EXPECT_NE(e.find("f64"), std::string::npos) << e;
}

TEST_F(TorchErrors, BadJson) {
  std::string text = linear_doc().dump();
  write_json(text.substr(0, text.size() / 2));
  write_weights(good_weights());
  std::string e = load_error();
  EXPECT_NE(e.find("invalid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find("torch-ir.json"), std::string::npos) << e;
}

TEST_F(TorchErrors, StructuralErrors) {
  write_weights(good_weights());
  json d = linear_doc();
  d["format"] = "onnx";
  write_json(d.dump());
  EXPECT_NE(load_error().find("not a torch-ir document"), std::string::npos);
  d = linear_doc();
  d["version"] = 7;
  write_json(d.dump());
  EXPECT_NE(load_error().find("version 7"), std::string::npos);
  d = linear_doc();
  d["nodes"][1]["args"][0] = {{"ref", "nope"}};
  write_json(d.dump());
  std::string e = load_error();
  EXPECT_NE(e.find("unknown id 'nope'"), std::string::npos) << e;
  d = linear_doc();
  d["nodes"][0]["args"][0] = {{"tensor", 1}};
  write_json(d.dump());
  e = load_error();
  EXPECT_NE(e.find("unknown Arg kind 'tensor'"), std::string::npos) << e;
  EXPECT_NE(e.find("node lin"), std::string::npos) << e;
  d = linear_doc();
  d["nodes"][0].erase("op");
  write_json(d.dump());
  EXPECT_NE(load_error().find("malformed torch-ir"), std::string::npos);
  d = linear_doc();
  d["inputs"][0]["shape"] = {2, -3};
  write_json(d.dump());
  EXPECT_NE(load_error().find("negative dim"), std::string::npos);
}

TEST_F(TorchErrors, LoweringShapeMismatchNamesTheNode) {
  json d = linear_doc();
  d["nodes"][1]["out"]["shape"] = {4, 2};  // PyTorch "recorded" a different shape
  write_json(d.dump());
  write_weights(good_weights());
  std::string e = load_error();
  EXPECT_NE(e.find("while lowering node 'r'"), std::string::npos) << e;
  EXPECT_NE(e.find("PyTorch recorded"), std::string::npos) << e;
}

TEST_F(TorchErrors, UnknownOpsAreAllListedWithCounts) {
  json d = linear_doc();
  json n = d["nodes"][1];
  d["nodes"][1]["op"] = "aten.frobnicate.default";
  for (int i = 0; i < 2; ++i) {
    n["id"] = "q" + std::to_string(i);
    n["op"] = "aten.quux.Tensor";
    d["nodes"].push_back(n);
  }
  write_json(d.dump());
  write_weights(good_weights());
  std::string e = load_error();
  EXPECT_NE(e.find("2 unsupported op kind(s)"), std::string::npos) << e;
  EXPECT_NE(e.find("aten.frobnicate.default (x1)"), std::string::npos) << e;
  EXPECT_NE(e.find("aten.quux.Tensor (x2)"), std::string::npos) << e;
}

// The exporter writes +-inf as the JSON numbers 1e999 / -1e999 and NaN as
// {"float": "nan"}; all three must reach the lowering as IEEE values.
TEST(TorchIrParse, InfinityAndNanFloats) {
  std::string text = R"({"format": "rlx-torch-ir", "version": 1,
    "inputs": [{"id": "x", "shape": [3], "dtype": "f32"}],
    "nodes": [
      {"id": "a", "op": "aten.clamp.default", "args": [{"ref": "x"}, {"float": -1e999}, {"float": 1e999}],
       "out": {"shape": [3], "dtype": "f32"}},
      {"id": "n", "op": "aten.add.Scalar", "args": [{"ref": "a"}, {"float": "nan"}],
       "out": {"shape": [3], "dtype": "f32"}},
      {"id": "s", "op": "aten.masked_fill.Scalar", "args": [{"ref": "x"}, {"ref": "x"}, {"float": -1E+999}],
       "out": {"shape": [3], "dtype": "f32"}}],
    "outputs": [{"ref": "a"}, {"ref": "n"}, {"ref": "s"}],
    "extra": {"note": "a string with 1e999 and \" quotes stays a string", "big": 1.5e300}})";
  torch_ir::Document d = torch_ir::parse(text, "mem");
  ASSERT_EQ(d.nodes.size(), 3u);
  EXPECT_TRUE(std::isinf(d.nodes[0].args[1].f) && d.nodes[0].args[1].f < 0);
  EXPECT_TRUE(std::isinf(d.nodes[0].args[2].f) && d.nodes[0].args[2].f > 0);
  EXPECT_TRUE(std::isnan(d.nodes[1].args[1].f));
  EXPECT_TRUE(std::isinf(d.nodes[2].args[2].f) && d.nodes[2].args[2].f < 0);
  EXPECT_THROW(torch_ir::parse(R"({"format": "rlx-torch-ir", "version": 1, "inputs": [],
    "nodes": [{"id": "a", "op": "aten.add.Scalar", "args": [{"float": "bogus"}]}], "outputs": []})",
                               "mem"),
               Error);
}

// Every registered lowering, given the fuzzer's seed arguments (x; x and a
// weight; x and an int), must give a model or an rlx::Error: a library
// exception inside a rule (ImportInternalError) is an rlx bug.
TEST(TorchIrLowering, EveryRuleRejectsWrongArgumentsCleanly) {
  const std::vector<json> arg_sets = {json::parse(R"([{"ref": "x"}])"),
                                      json::parse(R"([{"ref": "x"}, {"ref": "w"}])"),
                                      json::parse(R"([{"ref": "x"}, {"int": 1}])")};
  std::vector<std::string> internal;
  for (const std::string& name : torch_ir::registry().names()) {
    const std::string op =
        std::count(name.begin(), name.end(), '.') == 2 ? name : name + ".default";
    for (const json& args : arg_sets) {
      json doc = json::parse(R"({"format": "rlx-torch-ir", "version": 1, "model_name": "seed",
        "decomposition": "high", "inputs": [{"id": "x", "shape": [2, 3], "dtype": "f32"}],
        "weights": [{"id": "w", "key": "w", "shape": [2, 3], "dtype": "f32", "kind": "param"}],
        "outputs": [{"ref": "n", "shape": [2, 3], "dtype": "f32"}]})");
      doc["nodes"] = json::array({{{"id", "n"},
                                   {"op", op},
                                   {"args", args},
                                   {"out", {{"shape", {2, 3}}, {"dtype", "f32"}}}}});
      TensorMap weights{{"w", Tensor({2, 3}, DType::F32)}};
      try {
        import_torch_ir(doc.dump(), "seed.json", std::move(weights));
      } catch (const ImportInternalError& e) {
        internal.push_back(e.what());
      } catch (const Error&) {
      }
    }
  }
  EXPECT_TRUE(internal.empty()) << internal.size() << " internal errors, first: "
                                << (internal.empty() ? "" : internal.front());
}

}  // namespace
}  // namespace rlx
