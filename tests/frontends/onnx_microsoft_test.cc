// The com.microsoft contrib ops ONNX Runtime's exports carry, each on a hand-written model
// against a reference: scalar formulas for the GELUs and SkipLayerNormalization (in double),
// and the same model spelled with standard ONNX ops for FusedConv.
#include <gtest/gtest.h>

#include <cmath>

#include "io/io_testing.h"
#include "io/onnx_writer.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {
using namespace testing::onnx_writer;
using testing::values;

Pb ms(Pb n) { return std::move(n.bytes(7, "com.microsoft")); }

class OnnxMicrosoft : public ::testing::Test {
 protected:
  TensorMap run(const Pb& g, const TensorMap& in) {
    const std::string p = dir_.path("m.onnx");
    testing::write_file_bytes(p, model(g));
    const Model m = load_model(p);
    return Session(Executable::compile(m.graph, m.weights)).run(in);
  }
  testing::ScratchDir dir_{"onnx_microsoft"};
};

TEST_F(OnnxMicrosoft, GelusMatchTheirFormulas) {
  const Tensor x = testing::random_tensor({2, 5}, DType::F32, 3);
  const Tensor bias = testing::random_tensor({5}, DType::F32, 4);
  Pb g;
  g.msg(1, ms(node("Gelu", {"x"}, {"gelu"})));
  g.msg(1, ms(node("BiasGelu", {"x", "b"}, {"bias_gelu"})));
  g.msg(1, ms(node("FastGelu", {"x", "b"}, {"fast_gelu"})));
  g.msg(1, ms(node("QuickGelu", {"x"}, {"quick_gelu"}, {float_attr("alpha", 1.5f)})));
  g.bytes(2, "g").msg(11, value_info("x", kF32, {"2", "5"})).msg(11, value_info("b", kF32, {"5"}));
  for (const char* o : {"gelu", "bias_gelu", "fast_gelu", "quick_gelu"})
    g.msg(12, value_info(o, kF32, {"2", "5"}));
  const TensorMap out = run(g, {{"x", x}, {"b", bias}});
  const std::vector<float> xv = values(x), bv = values(bias);
  for (size_t i = 0; i < xv.size(); ++i) {
    const double v = xv[i], vb = v + bv[i % 5];
    auto gelu = [](double u) { return 0.5 * u * (1 + std::erf(u / std::sqrt(2.0))); };
    const double tanh_gelu =
        0.5 * vb * (1 + std::tanh(std::sqrt(2 / M_PI) * (vb + 0.044715 * vb * vb * vb)));
    EXPECT_NEAR(values(out.at("gelu"))[i], gelu(v), 2e-6) << i;
    EXPECT_NEAR(values(out.at("bias_gelu"))[i], gelu(vb), 2e-6) << i;
    EXPECT_NEAR(values(out.at("fast_gelu"))[i], tanh_gelu, 2e-6) << i;
    EXPECT_NEAR(values(out.at("quick_gelu"))[i], v / (1 + std::exp(-1.5 * v)), 2e-6) << i;
  }
}

TEST_F(OnnxMicrosoft, SkipLayerNormalizationNormalizesTheSum) {
  const Dims d{2, 3, 8};
  const Tensor x = testing::random_tensor(d, DType::F32, 5),
               skip = testing::random_tensor(d, DType::F32, 6),
               gamma = testing::random_tensor({8}, DType::F32, 7),
               beta = testing::random_tensor({8}, DType::F32, 8),
               bias = testing::random_tensor({8}, DType::F32, 9);
  Pb g;
  g.msg(1, ms(node("SkipLayerNormalization", {"x", "skip", "gamma", "beta", "bias"},
                   {"y", "mean", "inv_std", "sum"}, {float_attr("epsilon", 1e-5f)})));
  g.bytes(2, "g");
  for (const char* i : {"x", "skip"}) g.msg(11, value_info(i, kF32, {"2", "3", "8"}));
  for (const char* i : {"gamma", "beta", "bias"}) g.msg(11, value_info(i, kF32, {"8"}));
  for (const char* o : {"y", "sum"}) g.msg(12, value_info(o, kF32, {"2", "3", "8"}));
  for (const char* o : {"mean", "inv_std"}) g.msg(12, value_info(o, kF32, {"2", "3", "1"}));
  const TensorMap out =
      run(g, {{"x", x}, {"skip", skip}, {"gamma", gamma}, {"beta", beta}, {"bias", bias}});
  const std::vector<float> xv = values(x), sv = values(skip), gv = values(gamma), bv = values(beta),
                           cv = values(bias);
  for (int64_t row = 0; row < 6; ++row) {
    double s[8], mean = 0, var = 0;
    for (int k = 0; k < 8; ++k)
      mean += s[k] = double(xv[size_t(row * 8 + k)]) + sv[size_t(row * 8 + k)] + cv[size_t(k)];
    mean /= 8;
    for (double v : s) var += (v - mean) * (v - mean) / 8;
    const double inv = 1 / std::sqrt(var + 1e-5);
    EXPECT_NEAR(values(out.at("mean"))[size_t(row)], mean, 1e-6);
    EXPECT_NEAR(values(out.at("inv_std"))[size_t(row)], inv, 1e-4 * inv);
    for (int k = 0; k < 8; ++k) {
      EXPECT_NEAR(values(out.at("sum"))[size_t(row * 8 + k)], s[k], 1e-6);
      EXPECT_NEAR(values(out.at("y"))[size_t(row * 8 + k)],
                  (s[k] - mean) * inv * gv[size_t(k)] + bv[size_t(k)], 1e-5);
    }
  }
}

TEST_F(OnnxMicrosoft, FusedConvEqualsConvAddAndItsActivation) {
  const Tensor x = testing::random_tensor({1, 2, 5, 5}, DType::F32, 10);
  const Tensor w = testing::random_tensor({3, 2, 3, 3}, DType::F32, 11);
  const Tensor b = testing::random_tensor({3}, DType::F32, 12);
  const Tensor z = testing::random_tensor({1, 3, 5, 5}, DType::F32, 13);
  const std::vector<Pb> conv = {ints_attr("pads", {1, 1, 1, 1}), ints_attr("kernel_shape", {3, 3})};
  auto graph = [&](bool fused, const std::string& act, const std::vector<float>& params) {
    Pb g;
    if (fused) {
      std::vector<Pb> attrs = conv;
      attrs.push_back(str_attr("activation", act));
      if (!params.empty()) attrs.push_back(floats_attr("activation_params", params));
      g.msg(1, ms(node("FusedConv", {"x", "w", "b", "z"}, {"y"}, attrs)));
    } else {
      g.msg(1, node("Conv", {"x", "w", "b"}, {"c"}, conv));
      g.msg(1, node("Add", {"c", "z"}, {"s"}));
      std::vector<Pb> attrs;
      if (act == "LeakyRelu") attrs.push_back(float_attr("alpha", params[0]));
      if (act == "HardSigmoid") {
        attrs.push_back(float_attr("alpha", params[0]));
        attrs.push_back(float_attr("beta", params[1]));
      }
      if (act == "Clip") {
        g.msg(5, tensor("lo", {}, kF32, floats({params[0]})));
        g.msg(5, tensor("hi", {}, kF32, floats({params[1]})));
        g.msg(1, node("Clip", {"s", "lo", "hi"}, {"y"}));
      } else {
        g.msg(1, node(act, {"s"}, {"y"}, attrs));
      }
    }
    g.bytes(2, "g").msg(11, value_info("x", kF32, {"1", "2", "5", "5"}));
    g.msg(11, value_info("w", kF32, {"3", "2", "3", "3"})).msg(11, value_info("b", kF32, {"3"}));
    g.msg(11, value_info("z", kF32, {"1", "3", "5", "5"}));
    g.msg(12, value_info("y", kF32, {"1", "3", "5", "5"}));
    return g;
  };
  const TensorMap in{{"x", x}, {"w", w}, {"b", b}, {"z", z}};
  for (const auto& [act, params] :
       std::vector<std::pair<std::string, std::vector<float>>>{{"Relu", {}},
                                                               {"LeakyRelu", {0.2f}},
                                                               {"Sigmoid", {}},
                                                               {"HardSigmoid", {0.3f, 0.4f}},
                                                               {"Clip", {-0.5f, 0.5f}},
                                                               {"Tanh", {}}}) {
    SCOPED_TRACE(act);
    EXPECT_TRUE(testing::all_close(run(graph(true, act, params), in).at("y"),
                                   run(graph(false, act, params), in).at("y"), 1e-6, 1e-6));
  }
}

}  // namespace
}  // namespace rlx
