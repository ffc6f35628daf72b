// The pass-pipeline flags of the command line: inspect --passes / --after /
// --optimized / --print-after-all, run --disable-pass / -O0 / --specialize.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using testing::has;
using testing::run_cli;
using testing::run_command;

class PassCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::process_temp_dir("rlx_pass_cli_test");
    // y = relu((x * 1) + (w1 + w2)): fold, simplify and dce all change it.
    Graph g;
    Builder b(g);
    NodeId x = b.input("x", Shape(Dims{2, 3}, DType::F32));
    NodeId w1 = b.param("w1", Shape(Dims{3}, DType::F32));
    NodeId w2 = b.param("w2", Shape(Dims{3}, DType::F32));
    NodeId one = b.constant(Tensor::from_vector<float>({3}, {1, 1, 1}, DType::F32));
    g.add_output("y", b.relu(b.add(b.mul(x, one), b.add(w1, w2))));
    TensorMap w{{"w1", testing::random_tensor({3}, DType::F32, 1)},
                {"w2", testing::random_tensor({3}, DType::F32, 2)}};
    save_model(path("m"), g, w);
    write_safetensors(path("in.safetensors"),
                      {{"x", testing::random_tensor({2, 3}, DType::F32, 3)}});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }
  static inline fs::path dir_;
};

TEST_F(PassCli, PassesListsThePipeline) {
  auto r = run_cli("inspect " + path("m") + " --passes --disable-pass cse");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* name : {"specialize", "simplify", "fold", "cse", "dce"})
    EXPECT_TRUE(has(r.output, name));
  EXPECT_TRUE(has(r.output, "disabled")) << r.output;
  EXPECT_TRUE(has(r.output, "needs: params-bound")) << r.output;
  r = run_cli("inspect " + path("m") + " --passes -O0");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "needs -O1")) << r.output;
}

TEST_F(PassCli, AfterPrintsTheGraphAfterOnePass) {
  auto r = run_cli("inspect " + path("m") + " --after simplify");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(has(r.output, "= mul")) << r.output;
  EXPECT_TRUE(has(r.output, "= add %1, %2")) << r.output;  // fold has not run yet
  EXPECT_FALSE(has(r.output, "= param")) << r.output;      // params are bound first
  r = run_cli("inspect " + path("m") + " --after fold");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_FALSE(has(r.output, "= add %1, %2")) << r.output;
  r = run_cli("inspect " + path("m") + " --optimized");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "output \"y\"")) << r.output;
  EXPECT_FALSE(has(r.output, "= mul")) << r.output;
  r = run_cli("inspect " + path("m") +
              " --optimized --disable-pass simplify --disable-pass elementwise");
  EXPECT_TRUE(has(r.output, "= mul")) << r.output;
}

TEST_F(PassCli, BadPassNamesAreClearErrors) {
  auto r = run_cli("inspect " + path("m") + " --after folding");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.output, "unknown pass 'folding'")) << r.output;
  EXPECT_TRUE(
      has(r.output,
          "specialize, qat, simplify, bn_train, fold, attention, conv_bn, epilogue, blocked_conv, "
          "cse, remat, elementwise, dce"))
      << r.output;
  r = run_cli("run " + path("m") + " -i " + path("in.safetensors") + " --disable-pass nope");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.output, "unknown pass 'nope'")) << r.output;
  r = run_cli("inspect " + path("m") + " --after cse --disable-pass cse");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.output, "disabled")) << r.output;
}

TEST_F(PassCli, PrintAfterAllShowsEveryPassWithDeltas) {
  auto r = run_cli("inspect " + path("m") + " --print-after-all");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "after simplify: 8 -> 7 nodes (-1)")) << r.output;
  EXPECT_TRUE(has(r.output, "after fold: 7 -> 7 nodes (0)")) << r.output;
  for (const char* p : {"after cse: ", "after dce: "}) EXPECT_TRUE(has(r.output, p)) << r.output;
  setenv("RLX_PRINT_AFTER_ALL", "1", 1);
  r = run_cli("run " + path("m") + " -i " + path("in.safetensors"));
  unsetenv("RLX_PRINT_AFTER_ALL");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "after dce: ")) << r.output;
  EXPECT_TRUE(has(r.output, "peak activation memory")) << r.output;
}

TEST_F(PassCli, RunTakesDisablePassAndOptLevel) {
  auto base = run_cli("run " + path("m") + " -i " + path("in.safetensors"));
  ASSERT_EQ(base.status, 0) << base.output;
  EXPECT_FALSE(has(base.output, "after fold")) << base.output;
  auto first_line = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  for (const char* flags : {" --disable-pass simplify --disable-pass fold", " -O0"}) {
    auto r = run_cli("run " + path("m") + " -i " + path("in.safetensors") + flags);
    ASSERT_EQ(r.status, 0) << flags << "\n" << r.output;
    EXPECT_EQ(first_line(r.output), first_line(base.output)) << flags;
  }
  auto spec = run_cli("run " + path("m") + " -i " + path("in.safetensors") +
                      " --specialize --print-after-all");
  ASSERT_EQ(spec.status, 0) << spec.output;
  EXPECT_TRUE(has(spec.output, "after specialize: ")) << spec.output;
  auto help = run_cli("run --help");
  EXPECT_TRUE(has(help.output, "--disable-pass")) << help.output;
  EXPECT_TRUE(has(help.output, "--specialize")) << help.output;
  help = run_cli("compile --help");
  EXPECT_TRUE(has(help.output, "--disable-pass")) << help.output;
  help = run_cli("inspect --help");
  for (const char* f : {"--passes", "--after", "--optimized", "--print-after-all"})
    EXPECT_TRUE(has(help.output, f)) << help.output;
}

TEST_F(PassCli, ProfilePrintsOpKindsAndWritesATrace) {
  const std::string trace = path("trace.json");
  auto r = run_cli("run " + path("m") + " -i " + path("in.safetensors") +
                   " --profile --bench 3 --trace " + trace);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "profile over 10 run(s)")) << r.output;
  EXPECT_TRUE(has(r.output, "op kind")) << r.output;
  EXPECT_TRUE(has(r.output, "slowest")) << r.output;
  ASSERT_TRUE(fs::exists(trace));
  auto all = run_cli("run " + path("m") + " -i " + path("in.safetensors") +
                     " --profile --profile-nodes 0");
  ASSERT_EQ(all.status, 0) << all.output;
  EXPECT_TRUE(has(all.output, "nodes in run order")) << all.output;
  EXPECT_FALSE(has(all.output, "slowest")) << all.output;
  std::ifstream f(trace);
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(has(text, "\"traceEvents\"")) << text;
  EXPECT_TRUE(has(text, "\"ph\":\"X\"")) << text;
}

// --matmul-precision: bf16 runs (as f32, with a note, on a path without
// AVX-512 BF16); another name, or one in RLX_MATMUL_PRECISION, is an error.
TEST_F(PassCli, MatmulPrecisionFlagAndEnvironment) {
  const std::string run = "run " + path("m") + " -i " + path("in.safetensors");
  auto r = run_cli(run + " --matmul-precision bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "y  [2,3] f32")) << r.output;
  r = run_command("RLX_ISA=avx2 " + std::string(RLX_CLI_PATH) + " " + run +
                  " --matmul-precision bf16");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "bf16 matmuls run in f32")) << r.output;
  r = run_cli(run + " --matmul-precision fp8");
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(has(r.output, "fp8 not in {f32,bf16}")) << r.output;
  r = run_command("RLX_MATMUL_PRECISION=tf32 " + std::string(RLX_CLI_PATH) + " " + run);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(
      has(r.output, "RLX_MATMUL_PRECISION: matmul precision 'tf32' is not one of f32, bf16"))
      << r.output;
}

}  // namespace
}  // namespace rlx
