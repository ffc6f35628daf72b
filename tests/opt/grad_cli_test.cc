// rlx grad: gradients of a loss model, of a model with cotangents keyed by
// output name, and the errors for a model without one scalar output and for
// missing or unknown cotangents.
#include <gtest/gtest.h>

#include <filesystem>

#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;
using testing::has;
using testing::run_cli;

// y = x @ w^T + b; loss = sum(y * y). The gradients by hand: dy = 2y (or the
// cotangent), dw = dy^T x, db = sum over rows of dy, dx = dy w.
class GradCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::process_temp_dir("rlx_grad_cli_test");
    x_ = testing::random_tensor({2, 3}, DType::F32, 1);
    w_ = testing::random_tensor({4, 3}, DType::F32, 2);
    b_ = testing::random_tensor({4}, DType::F32, 3);
    const TensorMap weights{{"fc.weight", w_}, {"fc.bias", b_}};
    for (bool loss : {true, false}) {
      Graph g;
      Builder bld(g);
      const NodeId x = bld.input("x", Shape(Dims{2, 3}, DType::F32));
      const NodeId ids = bld.input("ids", Shape(Dims{2}, DType::I64));  // no gradient: integer
      const NodeId y = bld.linear(x, bld.param("fc.weight", Shape(Dims{4, 3}, DType::F32)),
                                  bld.param("fc.bias", Shape(Dims{4}, DType::F32)));
      if (loss) {
        g.add_output("loss", bld.reduce(Op::ReduceSum, bld.mul(y, y), {}));
      } else {
        g.add_output("y", y);
        g.add_output("y2", bld.mul(y, bld.scalar(3)));
        g.add_output("ids", ids);
      }
      save_model(path(loss ? "loss" : "multi"), g, weights);
    }
    write_safetensors(path("in.safetensors"),
                      {{"x", x_}, {"ids", Tensor::from_vector<int64_t>({2}, {0, 1}, DType::I64)}});
    ct_ = testing::random_tensor({2, 4}, DType::F32, 4);
    ct2_ = testing::random_tensor({2, 4}, DType::F32, 5);
    write_safetensors(path("ct.safetensors"), {{"y", ct_}, {"y2", ct2_}});
    write_safetensors(path("ct_missing.safetensors"), {{"y", ct_}});
    write_safetensors(path("ct_extra.safetensors"), {{"y", ct_}, {"y2", ct2_}, {"z", ct_}});
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string path(const std::string& name) { return (dir_ / name).string(); }

  // Checks the gradients in `file` for the output gradient dy [2, 4].
  static void check(const std::string& file, const std::vector<double>& dy) {
    const TensorMap g = read_safetensors(file);
    ASSERT_EQ(g.size(), 3u);  // fc.weight, fc.bias, x; the integer input gets none
    Tensor dw({4, 3}, DType::F64), db({4}, DType::F64), dx({2, 3}, DType::F64);
    for (int r = 0; r < 2; ++r)
      for (int o = 0; o < 4; ++o) {
        const double d = dy[size_t(r * 4 + o)];
        db.data<double>()[o] += d;
        for (int i = 0; i < 3; ++i) {
          dw.data<double>()[o * 3 + i] += d * x_.item_as_double(r * 3 + i);
          dx.data<double>()[r * 3 + i] += d * w_.item_as_double(o * 3 + i);
        }
      }
    EXPECT_TRUE(testing::all_close(g.at("grad::fc.weight"), dw.to(DType::F32), 1e-5, 1e-5));
    EXPECT_TRUE(testing::all_close(g.at("grad::fc.bias"), db.to(DType::F32), 1e-5, 1e-5));
    EXPECT_TRUE(testing::all_close(g.at("grad::x"), dx.to(DType::F32), 1e-5, 1e-5));
  }
  static std::vector<double> forward() {  // y = x w^T + b
    std::vector<double> y(8);
    for (int r = 0; r < 2; ++r)
      for (int o = 0; o < 4; ++o) {
        double v = b_.item_as_double(o);
        for (int i = 0; i < 3; ++i)
          v += x_.item_as_double(r * 3 + i) * w_.item_as_double(o * 3 + i);
        y[size_t(r * 4 + o)] = v;
      }
    return y;
  }
  static inline fs::path dir_;
  static inline Tensor x_, w_, b_, ct_, ct2_;
};

TEST_F(GradCli, LossModelWritesEveryGradient) {
  const auto r = run_cli("grad " + path("loss") + " --inputs " + path("in.safetensors") +
                         " --out " + path("g.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_TRUE(has(r.output, "wrote 3 gradient(s)")) << r.output;
  EXPECT_TRUE(has(r.output, "loss")) << r.output;
  std::vector<double> dy = forward();
  for (double& v : dy) v *= 2;
  check(path("g.safetensors"), dy);
}

TEST_F(GradCli, CotangentsAreKeyedByOutputName) {
  const auto r =
      run_cli("grad " + path("multi") + " --inputs " + path("in.safetensors") + " --cotangents " +
              path("ct.safetensors") + " --out " + path("g2.safetensors"));
  ASSERT_EQ(r.status, 0) << r.output;
  std::vector<double> dy(8);
  for (size_t i = 0; i < 8; ++i)
    dy[i] = ct_.item_as_double(int64_t(i)) + 3 * ct2_.item_as_double(int64_t(i));
  check(path("g2.safetensors"), dy);
}

TEST_F(GradCli, ClearErrors) {
  const std::string base = "grad " + path("multi") + " --inputs " + path("in.safetensors") +
                           " --out " + path("bad.safetensors");
  auto r = run_cli(base);
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.output, "exactly one scalar float output")) << r.output;
  EXPECT_TRUE(has(r.output, "y [2,4] f32, y2 [2,4] f32, ids [2] i64")) << r.output;
  EXPECT_TRUE(has(r.output, "--cotangents")) << r.output;
  r = run_cli(base + " --cotangents " + path("ct_missing.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.output, "no cotangent for output 'y2'")) << r.output;
  r = run_cli(base + " --cotangents " + path("ct_extra.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.output, "'z' is not a float output")) << r.output;
  r = run_cli("grad " + path("loss") + " --inputs " + path("ct.safetensors") + " --out " +
              path("bad.safetensors"));
  EXPECT_EQ(r.status, 1);
  EXPECT_TRUE(has(r.output, "input 'x' is missing")) << r.output;
  EXPECT_FALSE(fs::exists(path("bad.safetensors")));
}

TEST_F(GradCli, Help) {
  const auto r = run_cli("grad --help");
  EXPECT_EQ(r.status, 0) << r.output;
  for (const char* opt : {"--inputs", "--cotangents", "--out", "grad::"})
    EXPECT_TRUE(has(r.output, opt)) << opt << "\n" << r.output;
}

}  // namespace
}  // namespace rlx
