// CoreML export: package structure, determinism, the structural checker on good
// and corrupted packages, the unsupported-op report and a protoc decode.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "interp_support.h"
#include "model.pb.h"
#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace fs = std::filesystem;

namespace rlx {
namespace {

using coreml_test::TmpDir;
using testing::slurp;
using testing::spit;

Tensor filled(const Dims& d, float scale) {
  Tensor t(d, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = scale * float((i * 37) % 11 - 5);
  return t;
}

// The bundled MLP example's graph (examples/mlp), with deterministic weights.
void make_mlp(Graph& g, TensorMap& w) {
  Builder b(g);
  NodeId x = b.input("x", Shape({Dim::symbol("batch"), Dim(64)}, DType::F32));
  NodeId w1 = b.param("fc1.weight", Shape(Dims{256, 64}, DType::F32));
  NodeId b1 = b.param("fc1.bias", Shape(Dims{256}, DType::F32));
  NodeId w2 = b.param("fc2.weight", Shape(Dims{10, 256}, DType::F32));
  NodeId b2 = b.param("fc2.bias", Shape(Dims{10}, DType::F32));
  NodeId logits = b.linear(b.unary(Op::Gelu, b.linear(x, w1, b1)), w2, b2);
  g.add_output("logits", logits);
  g.add_output("probs", b.softmax(logits, -1));
  w = {{"fc1.weight", filled({256, 64}, 0.01f)},
       {"fc1.bias", filled({256}, 0.1f)},
       {"fc2.weight", filled({10, 256}, 0.01f)},
       {"fc2.bias", filled({10}, 0.1f)}};
}

// A CNN + transformer mix touching the composed lowerings.
void make_mixed(Graph& g, TensorMap& w) {
  Builder b(g);
  NodeId x = b.input("img", Shape(Dims{2, 4, 8, 8}, DType::F32));
  w["conv.w"] = filled({8, 4, 3, 3}, 0.05f);
  w["conv.b"] = filled({8}, 0.1f);
  w["bn.mean"] = filled({8}, 0.1f);
  w["bn.var"] = filled({8}, 0.0f);
  w["gn.g"] = filled({8}, 0.2f);
  w["ln.g"] = filled({16}, 0.2f);
  for (auto& [k, v] : w)
    if (k == "bn.var")
      for (int64_t i = 0; i < v.numel(); ++i) v.data<float>()[i] = 1.0f + float(i);
  NodeId c = b.op(Op::Conv,
                  {x, b.param("conv.w", Shape(Dims{8, 4, 3, 3}, DType::F32)),
                   b.param("conv.b", Shape(Dims{8}, DType::F32))},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  NodeId gm = b.param("gn.g", Shape(Dims{8}, DType::F32));
  NodeId bn = b.op(Op::BatchNorm, {c, b.param("bn.mean", Shape(Dims{8}, DType::F32)),
                                   b.param("bn.var", Shape(Dims{8}, DType::F32)), gm, gm});
  NodeId gn = b.op(Op::GroupNorm, {b.relu(bn), gm, gm}, {{"groups", int64_t(2)}});
  NodeId l2 = b.op(Op::LayerNorm2d, {gn, gm});
  NodeId p = b.op(Op::MaxPool2d, {l2}, {{"kernel", std::vector<int64_t>{2, 2}}});  // [2,8,4,4]
  NodeId seq = b.reshape(p, {2, 8, 16});
  NodeId ln = b.op(Op::LayerNorm, {seq, b.param("ln.g", Shape(Dims{16}, DType::F32))});
  NodeId rms = b.op(Op::RmsNorm, {ln});
  NodeId q = b.reshape(rms, {2, 2, 4, 16});
  NodeId att = b.op(Op::Attention, {q, q, q}, {{"mask", std::string("causal")}});
  NodeId pooled = b.op(Op::AdaptiveAvgPool2d, {p}, {{"output", std::vector<int64_t>{1, 1}}});
  g.add_output("att", att);
  g.add_output("pooled", pooled);
  g.add_output("sl", b.op(Op::Slice, {att},
                          {{"axis", int64_t(2)},
                           {"start", int64_t(3)},
                           {"end", int64_t(-10)},
                           {"step", int64_t(-1)}}));
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

}  // namespace

TEST(CoreMLExport, MlpPackageStructure) {
  Graph g;
  TensorMap w;
  make_mlp(g, w);
  TmpDir t("mlp");
  const fs::path pkg = t.p / "mlp.mlpackage";
  coreml::export_package(g, w, pkg.string());
  ASSERT_TRUE(fs::exists(pkg / "Manifest.json"));
  ASSERT_TRUE(fs::exists(pkg / "Data/com.apple.CoreML/model.mlmodel"));
  ASSERT_TRUE(fs::exists(pkg / "Data/com.apple.CoreML/weights/weight.bin"));
  auto man = nlohmann::json::parse(slurp(pkg / "Manifest.json"));
  EXPECT_EQ(man["fileFormatVersion"], "1.0.0");
  EXPECT_EQ(man["itemInfoEntries"].size(), 2u);
  EXPECT_EQ(man["itemInfoEntries"][man["rootModelIdentifier"].get<std::string>()]["path"],
            "com.apple.CoreML/model.mlmodel");
  // All four params have >= 10 elements, so all go to the blob.
  const std::string wb = slurp(pkg / "Data/com.apple.CoreML/weights/weight.bin");
  uint32_t count, version;
  std::memcpy(&count, wb.data(), 4);
  std::memcpy(&version, wb.data() + 4, 4);
  EXPECT_EQ(version, 2u);
  EXPECT_EQ(count, 4u);
  CoreML::Specification::Model m;
  ASSERT_TRUE(m.ParseFromString(slurp(pkg / "Data/com.apple.CoreML/model.mlmodel")));
  EXPECT_EQ(m.specificationversion(), 7);
  const auto& fn = m.mlprogram().functions().at("main");
  EXPECT_EQ(fn.opset(), "CoreML6");
  ASSERT_EQ(m.description().input_size(), 1);
  // The symbolic batch dim becomes a flexible range.
  const auto& in = m.description().input(0).type().multiarraytype();
  ASSERT_EQ(in.shaperange().sizeranges_size(), 2);
  EXPECT_EQ(in.shaperange().sizeranges(0).upperbound(), -1);
  EXPECT_EQ(in.shaperange().sizeranges(1).lowerbound(), 64u);
  EXPECT_EQ(m.description().output(1).name(), "probs");
  auto problems = coreml::check_package(pkg.string());
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// A package is written whole or not at all: weight.bin failing midway (a
// file-size limit, as a full disk) leaves neither a partial package nor a
// damaged previous one, and no temporary directory.
TEST(CoreMLExport, PackageWritesAreAtomic) {
  Graph g;
  TensorMap w;
  make_mlp(g, w);  // weight.bin ~ 75 KiB
  TmpDir t("atomic");
  const fs::path pkg = t.p / "mlp.mlpackage";
  auto limited_export = [&] {
    rlx::testing::FileSizeLimit limit(16 << 10);
    coreml::export_package(g, w, pkg.string());
  };
  std::string msg = rlx::testing::error_of(limited_export);
  EXPECT_NE(msg.find(pkg.string() + ": write failed"), std::string::npos) << msg;
  EXPECT_TRUE(rlx::testing::list_dir(t.p).empty());
  coreml::export_package(g, w, pkg.string());
  const std::string good = slurp(pkg / "Data/com.apple.CoreML/weights/weight.bin");
  EXPECT_THROW(limited_export(), Error);
  EXPECT_EQ(rlx::testing::list_dir(t.p), std::vector<std::string>{"mlp.mlpackage"});
  EXPECT_EQ(slurp(pkg / "Data/com.apple.CoreML/weights/weight.bin"), good);
  EXPECT_TRUE(coreml::check_package(pkg.string()).empty());
}

TEST(CoreMLExport, DeterministicBytes) {
  Graph g;
  TensorMap w;
  make_mixed(g, w);
  TmpDir t("det");
  for (bool fp16 : {false, true}) {
    coreml::ExportOptions o;
    o.fp16 = fp16;
    coreml::export_package(g, w, (t.p / "a.mlpackage").string(), o);
    coreml::export_package(g, w, (t.p / "b.mlpackage").string(), o);
    for (const char* f : {"Manifest.json", "Data/com.apple.CoreML/model.mlmodel",
                          "Data/com.apple.CoreML/weights/weight.bin"})
      EXPECT_EQ(slurp(t.p / "a.mlpackage" / f), slurp(t.p / "b.mlpackage" / f)) << f;
  }
}

TEST(CoreMLExport, CheckerPassesAllOpsets) {
  Graph g;
  TensorMap w;
  make_mixed(g, w);
  TmpDir t("opsets");
  for (int opset = 5; opset <= 8; ++opset)
    for (bool fp16 : {false, true}) {
      const fs::path pkg = t.p / ("m" + std::to_string(opset) + (fp16 ? "h" : "f") + ".mlpackage");
      coreml::export_package(g, w, pkg.string(), {opset, fp16});
      auto problems = coreml::check_package(pkg.string());
      EXPECT_TRUE(problems.empty())
          << "CoreML" << opset << (fp16 ? " fp16\n" : "\n") << joined(problems);
      CoreML::Specification::Model m;
      ASSERT_TRUE(m.ParseFromString(slurp(pkg / "Data/com.apple.CoreML/model.mlmodel")));
      bool sdpa = false;
      for (const auto& op : m.mlprogram()
                                .functions()
                                .at("main")
                                .block_specializations()
                                .at(coreml::opset_name(opset))
                                .operations())
        sdpa |= op.type() == "scaled_dot_product_attention";
      EXPECT_EQ(sdpa, opset == 8);
    }
}

TEST(CoreMLExport, CheckerReportsCorruption) {
  Graph g;
  TensorMap w;
  make_mlp(g, w);
  TmpDir t("bad");
  const fs::path pkg = t.p / "m.mlpackage";
  const fs::path model = pkg / "Data/com.apple.CoreML/model.mlmodel",
                 blob = pkg / "Data/com.apple.CoreML/weights/weight.bin";
  coreml::export_package(g, w, pkg.string());
  const std::string good_model = slurp(model), good_blob = slurp(blob);
  auto expect_problem = [&](const std::string& needle) {
    auto problems = coreml::check_package(pkg.string());
    EXPECT_NE(joined(problems).find(needle), std::string::npos)
        << "wanted '" << needle << "', got:\n"
        << joined(problems);
    spit(model, good_model);
    spit(blob, good_blob);
  };
  // Bad sentinel on the first record.
  std::string b = good_blob;
  b[64] ^= 0x5a;
  spit(blob, b);
  expect_problem("bad sentinel");
  // Blob offset past the end; then an undefined name.
  CoreML::Specification::Model m;
  ASSERT_TRUE(m.ParseFromString(good_model));
  auto& block = (*(*m.mutable_mlprogram()->mutable_functions())["main"]
                      .mutable_block_specializations())["CoreML6"];
  CoreML::Specification::Model m2 = m;
  for (auto& op : *block.mutable_operations())
    if (op.type() == "const" && op.attributes().at("val").has_blobfilevalue()) {
      (*op.mutable_attributes())["val"].mutable_blobfilevalue()->set_offset(1 << 30);
      break;
    }
  spit(model, m.SerializeAsString());
  expect_problem("outside weight.bin");
  auto& block2 = (*(*m2.mutable_mlprogram()->mutable_functions())["main"]
                       .mutable_block_specializations())["CoreML6"];
  for (auto& op : *block2.mutable_operations())
    if (op.type() == "matmul") {
      (*op.mutable_inputs())["x"].mutable_arguments(0)->set_name("nowhere");
      break;
    }
  spit(model, m2.SerializeAsString());
  expect_problem("'nowhere' before it is defined");
  // Manifest pointing at a missing file.
  fs::remove(blob);
  auto problems = coreml::check_package(pkg.string());
  EXPECT_FALSE(problems.empty());
}

// Every op in the table lowers but max_pool2d_indices and cumprod, which MIL has no pool and no
// scan for, moe_ffn, not lowered yet, the special functions and linalg, which MIL has no op for,
// and the ops with data-dependent output dims, which an ML Program's fixed shapes cannot hold
// (unsupported_ops lists them with the rest); attribute
// combinations without a MIL form fail at lowering, naming the node and what is missing, and
// nothing is written.
TEST(CoreMLExport, EveryOpLowersAndUnloweredModesFailClearly) {
  auto names = coreml::supported_op_names();
  for (int i = 0; i < num_ops(); ++i)
    EXPECT_EQ(std::find(names.begin(), names.end(), op_name(Op(i))) != names.end(),
              Op(i) != Op::MaxPool2dIndices && Op(i) != Op::CumProd && Op(i) != Op::MoeFfn &&
                  Op(i) != Op::SpecialUnary && Op(i) != Op::SpecialBinary && Op(i) != Op::Linalg &&
                  !has_data_dependent_dims(Op(i)))
        << op_name(Op(i));
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{1, 2, 4, 8}, DType::F32));
  NodeId grid = b.input("grid", Shape(Dims{1, 4, 8, 2}, DType::F32));
  NodeId r1 = b.op(Op::GridSample, {x, grid});
  NodeId r2 = b.op(Op::GridSample, {r1, grid}, {{"padding", std::string("reflection")}});
  g.add_output("y", b.op(Op::Resize, {r2}, {{"size", std::vector<int64_t>{8, 16}}}));
  EXPECT_TRUE(coreml::unsupported_ops(g).empty());
  TmpDir t("unsup");
  const fs::path pkg = t.p / "u.mlpackage";
  auto expect_error = [&](const Graph& gr, const std::string& what) {
    try {
      coreml::export_package(gr, {}, pkg.string());
      ADD_FAILURE() << "expected an error mentioning " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(pkg));  // nothing written
  };
  expect_error(g, "grid_sample padding 'reflection'");
  Graph g2;
  Builder b2(g2);
  NodeId x2 = b2.input("x", Shape(Dims{1, 2, 4, 8}, DType::F32));
  g2.add_output("y",
                b2.op(Op::Resize, {x2},
                      {{"size", std::vector<int64_t>{8, 16}}, {"mode", std::string("bicubic")}}));
  expect_error(g2, "resize mode 'bicubic'");
}

TEST(CoreMLExport, ProtocDecodesWithOurSchema) {
  if (std::system("protoc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "protoc not installed";
  Graph g;
  TensorMap w;
  make_mlp(g, w);
  TmpDir t("protoc");
  const fs::path pkg = t.p / "m.mlpackage";
  coreml::export_package(g, w, pkg.string());
  const std::string out = (t.p / "decoded.txt").string();
  std::string cmd =
      std::string("protoc -I") + RLX_SOURCE_DIR +
      "/src/backends/coreml/proto --decode=CoreML.Specification.Model model.proto < " +
      (pkg / "Data/com.apple.CoreML/model.mlmodel").string() + " > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string text = slurp(out);
  EXPECT_NE(text.find("specificationVersion: 7"), std::string::npos);
  EXPECT_NE(text.find("opset: \"CoreML6\""), std::string::npos);
  EXPECT_NE(text.find("type: \"gelu\""), std::string::npos);
  EXPECT_NE(text.find("fileName: \"@model_path/weights/weight.bin\""), std::string::npos);
}

TEST(CoreMLExport, CliCompileAndCheck) {
  Graph g;
  TensorMap w;
  make_mlp(g, w);
  TmpDir t("cli");
  save_model((t.p / "model").string(), g, w);
  const std::string pkg = (t.p / "m.mlpackage").string(), cli = RLX_CLI_PATH;
  auto run = [](const std::string& cmd) {
    int rc = std::system((cmd + " > /dev/null 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_EQ(run(cli + " compile " + (t.p / "model").string() + " --target coreml -o " + pkg +
                " --opset CoreML7 --fp16"),
            0);
  EXPECT_EQ(run(cli + " coreml-check " + pkg), 0);
  EXPECT_NE(run(cli + " compile " + (t.p / "model").string() + " --target coreml -o " + pkg +
                " --opset CoreML4"),
            0);
  std::string b = slurp(fs::path(pkg) / "Data/com.apple.CoreML/weights/weight.bin");
  b.resize(b.size() - 100);  // truncated: the last blob runs past the end
  spit(fs::path(pkg) / "Data/com.apple.CoreML/weights/weight.bin", b);
  EXPECT_EQ(run(cli + " coreml-check " + pkg), 1);
}

}  // namespace rlx
