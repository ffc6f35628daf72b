// The interpreter on hostile packages (every failure is an rlx::Error with a
// useful message, never a crash), the coreml-run CLI, and a protoc decode of
// an interpreted package through our schema.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>

#include "interp_support.h"
#include "model.pb.h"

namespace rlx {
namespace {

using coreml_test::TmpDir;
using testing::slurp;
using testing::spit;
namespace fs = std::filesystem;
namespace spec = ::CoreML::Specification;

// conv (blob weights) -> relu -> gather (runtime indices) -> output.
struct Small {
  Graph g;
  TensorMap w, in;
  Small() {
    Builder b(g);
    NodeId x = b.input("x", Shape(Dims{1, 2, 5, 5}, DType::F32));
    NodeId idx = b.input("idx", Shape(Dims{3}, DType::I64));
    w["cw"] = testing::random_tensor({3, 2, 3, 3}, DType::F32, 1);
    NodeId c = b.op(Op::Conv, {x, b.param("cw", Shape(Dims{3, 2, 3, 3}, DType::F32))});
    NodeId r = b.reshape(b.relu(c), {3, 9});
    g.add_output("y", b.op(Op::Gather, {r, idx}, {{"axis", int64_t(1)}}));
    in["x"] = testing::random_tensor({1, 2, 5, 5}, DType::F32, 2);
    in["idx"] = Tensor::from_vector<int64_t>({3}, {0, 8, -1}, DType::I64);
  }
};

struct Pkg {
  TmpDir t{"hostile"};
  fs::path dir = t.p / "m.mlpackage";
  fs::path model = dir / "Data/com.apple.CoreML/model.mlmodel";
  fs::path blob = dir / "Data/com.apple.CoreML/weights/weight.bin";
  Small s;
  std::string good_model, good_blob;
  Pkg() {
    coreml::export_package(s.g, s.w, dir.string());
    good_model = slurp(model);
    good_blob = slurp(blob);
  }
  spec::Model parsed() const {
    spec::Model m;
    EXPECT_TRUE(m.ParseFromString(good_model));
    return m;
  }
  static google::protobuf::RepeatedPtrField<spec::MILSpec::Operation>& ops(spec::Model& m) {
    return *(*(*m.mutable_mlprogram()->mutable_functions())["main"]
                  .mutable_block_specializations())["CoreML6"]
                .mutable_operations();
  }
  // Runs the interpreter and returns the error message ("" when it succeeded).
  std::string error(const TensorMap& in) const {
    try {
      coreml::run_package(dir.string(), in);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::string error() const { return error(s.in); }
  void restore() {
    spit(model, good_model);
    spit(blob, good_blob);
  }
};

#define EXPECT_ERROR_HAS(msg, needle) \
  EXPECT_NE((msg).find(needle), std::string::npos) << "message: '" << (msg) << "'"

TEST(MilInterpHostile, GoodPackageRuns) {
  Pkg p;
  EXPECT_EQ(p.error(), "");
  TensorMap want = testing::run_graph(p.s.g, p.s.in, p.s.w, 0);
  TensorMap got = coreml::run_package(p.dir.string(), p.s.in);
  EXPECT_TRUE(testing::all_close(got.at("y"), want.at("y"), 1e-5, 1e-5));
}

TEST(MilInterpHostile, BlobProblems) {
  Pkg p;
  // The conv weight record is the first one: header 64, record at 64, data at 128.
  auto with_blob = [&](auto edit) {
    std::string b = p.good_blob;
    edit(b);
    spit(p.blob, b);
    std::string e = p.error();
    p.restore();
    return e;
  };
  auto put64 = [](std::string& b, size_t at, uint64_t v) { std::memcpy(b.data() + at, &v, 8); };
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b.resize(b.size() - 20); }), "runs past the end");
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b.resize(100); }), "outside weight.bin");
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b.resize(10); }), "64-byte header");
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b[64] ^= 0x5a; }), "bad sentinel");
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b[68] = 1; }), "blob dtype");
  EXPECT_ERROR_HAS(with_blob([&](std::string& b) { put64(b, 72, ~uint64_t(0)); }), "needs");
  EXPECT_ERROR_HAS(with_blob([&](std::string& b) { put64(b, 80, ~uint64_t(0) - 8); }),
                   "runs past the end");
  EXPECT_ERROR_HAS(with_blob([](std::string& b) { b[4] = 3; }), "version");
  fs::remove(p.blob);
  EXPECT_ERROR_HAS(p.error(), "weight.bin is missing");
  p.restore();
  // Record offsets: past the end, misaligned, huge (overflow-prone).
  for (uint64_t off : {uint64_t(1) << 30, uint64_t(72), ~uint64_t(0) - 63, uint64_t(0)}) {
    spec::Model m = p.parsed();
    for (auto& op : Pkg::ops(m))
      if (op.type() == "const" && op.attributes().at("val").has_blobfilevalue())
        (*op.mutable_attributes())["val"].mutable_blobfilevalue()->set_offset(off);
    spit(p.model, m.SerializeAsString());
    EXPECT_ERROR_HAS(p.error(), "misaligned or outside") << off;
  }
  p.restore();
}

TEST(MilInterpHostile, ProgramProblems) {
  Pkg p;
  auto with_model = [&](auto edit) {
    spec::Model m = p.parsed();
    edit(m);
    spit(p.model, m.SerializeAsString());
    std::string e = p.error();
    p.restore();
    return e;
  };
  // Unknown op: the message names the op type and its output.
  std::string out_name;
  std::string e = with_model([&](spec::Model& m) {
    for (auto& op : Pkg::ops(m))
      if (op.type() == "relu") {
        op.set_type("frobnicate");
        out_name = op.outputs(0).name();
      }
  });
  EXPECT_ERROR_HAS(e, "unknown op type 'frobnicate'");
  EXPECT_ERROR_HAS(e, "'" + out_name + "'");
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     for (auto& op : Pkg::ops(m))
                       if (op.type() == "relu")
                         (*op.mutable_inputs())["x"].mutable_arguments(0)->set_name("nowhere");
                   }),
                   "'nowhere', not defined before");
  // A declared output type that disagrees with the computation.
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     for (auto& op : Pkg::ops(m))
                       if (op.type() == "relu")
                         op.mutable_outputs(0)
                             ->mutable_type()
                             ->mutable_tensortype()
                             ->mutable_dimensions(2)
                             ->mutable_constant()
                             ->set_size(7);
                   }),
                   "but the op declares");
  // Immediate value with the wrong element count.
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     for (auto& op : Pkg::ops(m))
                       if (op.type() == "const" && op.attributes().at("val").has_immediatevalue() &&
                           op.attributes().at("val").immediatevalue().tensor().has_ints())
                         (*op.mutable_attributes())["val"]
                             .mutable_immediatevalue()
                             ->mutable_tensor()
                             ->mutable_ints()
                             ->add_values(5);
                   }),
                   "immediate values");
  // Found by fuzz_mlpackage: a const typed string with numeric immediates wrote into the
  // int storage it never allocated; a float immediate of an int const must fit an int32.
  auto retype_int_const = [&](auto edit) {
    return with_model([&](spec::Model& m) {
      for (auto& op : Pkg::ops(m))
        if (op.type() == "const" && op.attributes().at("val").has_immediatevalue() &&
            op.attributes().at("val").immediatevalue().tensor().has_ints()) {
          edit(op);
          break;
        }
    });
  };
  EXPECT_ERROR_HAS(
      retype_int_const([](auto& op) {
        op.mutable_outputs(0)->mutable_type()->mutable_tensortype()->set_datatype(
            spec::MILSpec::STRING);
        (*op.mutable_attributes())["val"].mutable_type()->mutable_tensortype()->set_datatype(
            spec::MILSpec::STRING);
      }),
      "numbers for");
  EXPECT_ERROR_HAS(
      retype_int_const([](auto& op) {
        auto* t = (*op.mutable_attributes())["val"].mutable_immediatevalue()->mutable_tensor();
        const int n = t->ints().values_size();
        t->clear_ints();
        for (int k = 0; k < n; ++k) t->mutable_floats()->add_values(1e10f);
      }),
      "does not fit");
  // A const declaring an enormous shape fails before allocating anything.
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     for (auto& op : Pkg::ops(m))
                       if (op.type() == "const") {
                         auto* tt = op.mutable_outputs(0)->mutable_type()->mutable_tensortype();
                         tt->clear_dimensions();
                         for (int k = 0; k < 3; ++k)
                           tt->add_dimensions()->mutable_constant()->set_size(uint64_t(1) << 40);
                         tt->set_rank(3);
                         break;
                       }
                   }),
                   "larger than");
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     auto& fns = *m.mutable_mlprogram()->mutable_functions();
                     fns["other"] = fns["main"];
                     fns.erase("main");
                   }),
                   "no function 'main'");
  EXPECT_ERROR_HAS(with_model([](spec::Model& m) {
                     (*m.mutable_mlprogram()->mutable_functions())["main"].set_opset("CoreML9");
                   }),
                   "no block");
  spit(p.model, "not a protobuf \xff\xff\xff");
  EXPECT_ERROR_HAS(p.error(), "not a CoreML model");
  p.restore();
  spit(p.dir / "Manifest.json", "{");
  EXPECT_ERROR_HAS(p.error(), "Manifest.json");
  EXPECT_ERROR_HAS(std::string([] {
                     try {
                       coreml::run_package("/nonexistent/x.mlpackage", {});
                     } catch (const Error& e) {
                       return std::string(e.what());
                     }
                     return std::string();
                   }()),
                   "not a directory");
}

TEST(MilInterpHostile, InputProblems) {
  Pkg p;
  TensorMap in = p.s.in;
  in.erase("idx");
  EXPECT_ERROR_HAS(p.error(in), "missing input 'idx'");
  in = p.s.in;
  in["x"] = testing::random_tensor({1, 2, 5, 6}, DType::F32, 3);
  EXPECT_ERROR_HAS(p.error(in), "input 'x' has dims");
  in = p.s.in;
  in["idx"] = Tensor::from_vector<int64_t>({3}, {0, 9, 1}, DType::I64);
  EXPECT_ERROR_HAS(p.error(in), "index 9 out of range");
  in["idx"] = Tensor::from_vector<int64_t>({3}, {0, -10, 1}, DType::I64);
  EXPECT_ERROR_HAS(p.error(in), "index -10 out of range");
}

TEST(MilInterpPackage, ProtocDecodesInterpretedPackage) {
  if (std::system("protoc --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "protoc not installed";
  Pkg p;
  coreml::export_package(p.s.g, p.s.w, p.dir.string(), {7, true});
  ASSERT_EQ(p.error(), "");
  const fs::path txt = p.t.p / "decoded.txt";
  const std::string cmd = std::string("protoc -I") + RLX_SOURCE_DIR +
                          "/src/backends/coreml/proto --decode=CoreML.Specification.Model "
                          "model.proto < " +
                          p.model.string() + " > " + txt.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const std::string text = slurp(txt);
  // Every op the interpreter executed is visible in the decoded text.
  spec::Model m;
  ASSERT_TRUE(m.ParseFromString(slurp(p.model)));
  for (const auto& op :
       m.mlprogram().functions().at("main").block_specializations().at("CoreML7").operations())
    EXPECT_NE(text.find("type: \"" + op.type() + "\""), std::string::npos) << op.type();
  EXPECT_NE(text.find("opset: \"CoreML7\""), std::string::npos);
  EXPECT_NE(text.find("dataType: FLOAT16"), std::string::npos);
  EXPECT_NE(text.find("blobFileValue"), std::string::npos);
}

TEST(MilInterpPackage, CliCoremlRun) {
  Pkg p;
  const std::string cli = RLX_CLI_PATH;
  const fs::path in = p.t.p / "in.safetensors", out = p.t.p / "out.safetensors",
                 log = p.t.p / "log.txt";
  write_safetensors(in.string(), p.s.in);
  auto run = [&](const std::string& args) {
    int rc = std::system((cli + " " + args + " > " + log.string() + " 2>&1").c_str());
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  };
  ASSERT_EQ(
      run("coreml-run " + p.dir.string() + " --inputs " + in.string() + " --out " + out.string()),
      0)
      << slurp(log);
  EXPECT_NE(slurp(log).find("y  [3,3]"), std::string::npos) << slurp(log);
  TensorMap got = read_safetensors(out.string());
  TensorMap want = coreml::run_package(p.dir.string(), p.s.in);
  EXPECT_TRUE(testing::all_equal(got.at("y"), want.at("y")));
  EXPECT_EQ(run("coreml-run --help"), 0);
  EXPECT_NE(slurp(log).find("--inputs"), std::string::npos);
  // Missing input and a truncated blob: one-line errors, exit 1.
  EXPECT_EQ(run("coreml-run " + p.dir.string()), 1);
  EXPECT_NE(slurp(log).find("missing input"), std::string::npos) << slurp(log);
  spit(p.blob, p.good_blob.substr(0, p.good_blob.size() - 16));
  EXPECT_EQ(run("coreml-run " + p.dir.string() + " --inputs " + in.string()), 1);
  EXPECT_NE(slurp(log).find("runs past the end"), std::string::npos) << slurp(log);
}

}  // namespace
}  // namespace rlx
