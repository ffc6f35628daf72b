// CoreML lowering of the backward ops (lower_grad.cc): every grad op, every output and every
// activation kind is lowered, the package passes the structural checker in every opset and
// precision, and the composed programs use the MIL ops we expect.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <set>

#include "model.pb.h"
#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace fs = std::filesystem;

namespace rlx {
namespace {

using testing::slurp;

Tensor ramp(const Dims& d, float lo, float step) {
  Tensor t(d, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = lo + step * float(i % 13);
  return t;
}

// Every backward op and output in one graph.
void make_grad_graph(Graph& g, TensorMap& w) {
  Builder b(g);
  const Shape s3(Dims{2, 6, 4}, DType::F32);
  NodeId x = b.input("x", s3), dy = b.input("dy", s3);
  NodeId lg = b.input("logits", Shape(Dims{5, 7}, DType::F32));
  NodeId lab = b.input("labels", Shape(Dims{5}, DType::I64));
  NodeId dl = b.input("dloss", Shape(Dims{5}, DType::F32));
  NodeId dls = b.input("dloss_s", Shape(Dims{}, DType::F32));
  w["g4"] = ramp({4}, 0.5f, 0.1f);
  w["g6"] = ramp({6}, 0.5f, 0.1f);
  w["g64"] = ramp({6, 4}, 0.5f, 0.05f);
  NodeId g4 = b.param("g4", Shape(Dims{4}, DType::F32));
  NodeId g6 = b.param("g6", Shape(Dims{6}, DType::F32));
  NodeId g64 = b.param("g64", Shape(Dims{6, 4}, DType::F32));
  auto out = [&](const std::string& name, Op op, std::vector<NodeId> in, Attrs a) {
    g.add_output(name, b.op(op, std::move(in), std::move(a)));
  };
  // Every output of a multi-output node, named prefix0, prefix1, ...
  auto outs = [&](const std::string& prefix, Op op, std::vector<NodeId> in, Attrs a) {
    const auto r = b.results(op, std::move(in), std::move(a));
    for (size_t i = 0; i < r.size(); ++i) g.add_output(prefix + std::to_string(i), r[i]);
  };
  outs("ln", Op::LayerNormGrad, {x, dy, g4}, {});
  outs("ln2_", Op::LayerNormGrad, {x, dy, g64}, {{"naxes", int64_t(2)}});
  outs("gn", Op::GroupNormGrad, {x, dy, g6}, {{"groups", int64_t(3)}});
  outs("rms", Op::RmsNormGrad, {x, dy, g4}, {{"eps", 1e-6}});
  g.add_output("ln_nogamma", b.results(Op::LayerNormGrad, {x, dy})[0]);
  g.add_output("gn_nogamma", b.results(Op::GroupNormGrad, {x, dy}, {{"groups", int64_t(2)}})[0]);
  g.add_output("rms_all", b.results(Op::RmsNormGrad, {x, dy}, {{"naxes", int64_t(3)}})[1]);
  for (size_t i = size_t(Op::Relu); i <= size_t(Op::Clamp); ++i) {
    Attrs a{{"kind", std::string(op_name(Op(i)))}};
    if (Op(i) == Op::Clamp) a.set("min", -0.5).set("max", 0.5);
    if (Op(i) == Op::Softplus) a.set("beta", 2.0).set("threshold", 3.0);
    out(std::string("act_") + op_name(Op(i)), Op::ActivationGrad, {x, dy}, a);
  }
  out("act_clamp_hi", Op::ActivationGrad, {x, dy}, {{"kind", std::string("clamp")}, {"max", 0.5}});
  for (const char* r : {"mean", "sum", "none"}) {
    Attrs a{{"reduction", std::string(r)}, {"ignore_index", int64_t(3)}};
    out(std::string("ce_") + r, Op::SoftmaxCrossEntropy, {lg, lab}, a);
    out(std::string("ce_grad_") + r, Op::SoftmaxCrossEntropyGrad,
        {lg, lab, std::string(r) == "none" ? dl : dls}, a);
  }
}

TEST(CoreMLGrad, AllGradOpsLowerAndPassTheChecker) {
  Graph g;
  TensorMap w;
  make_grad_graph(g, w);
  EXPECT_TRUE(coreml::unsupported_ops(g).empty());
  auto names = coreml::supported_op_names();
  for (const char* op : {"rms_norm_grad", "layer_norm_grad", "group_norm_grad", "activation_grad",
                         "softmax_cross_entropy", "softmax_cross_entropy_grad"})
    EXPECT_NE(std::find(names.begin(), names.end(), op), names.end()) << op;
  const fs::path dir =
      fs::temp_directory_path() / ("rlx_coreml_grad_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (int opset = 5; opset <= 8; ++opset)
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE("CoreML" + std::to_string(opset) + (fp16 ? " fp16" : " fp32"));
      const fs::path pkg = dir / ("g" + std::to_string(opset) + (fp16 ? "h" : "f") + ".mlpackage");
      coreml::export_package(g, w, pkg.string(), {opset, fp16});
      auto problems = coreml::check_package(pkg.string());
      std::string all;
      for (const auto& p : problems) all += p + "\n";
      EXPECT_TRUE(problems.empty()) << all;
      CoreML::Specification::Model m;
      ASSERT_TRUE(m.ParseFromString(slurp(pkg / "Data/com.apple.CoreML/model.mlmodel")));
      const auto& block = m.mlprogram().functions().at("main").block_specializations().at(
          coreml::opset_name(opset));
      std::set<std::string> types;
      for (const auto& op : block.operations()) types.insert(op.type());
      for (const char* t : {"reduce_log_sum_exp", "gather_along_axis", "softmax", "select", "erf",
                            "rsqrt", "reduce_sum", "not_equal", "logical_and"})
        EXPECT_TRUE(types.count(t)) << t;
      EXPECT_EQ(block.outputs_size(), int(g.outputs().size()));
    }
  fs::remove_all(dir);
}

// A symbolic batch (one -1 per reshape) lowers and checks too.
TEST(CoreMLGrad, SymbolicBatch) {
  Graph g;
  Builder b(g);
  const Shape s({Dim::symbol("n"), Dim(6), Dim(4)}, DType::F32);
  NodeId x = b.input("x", s), dy = b.input("dy", s);
  NodeId lg = b.input("logits", Shape({Dim::symbol("n"), Dim(7)}, DType::F32));
  NodeId lab = b.input("labels", Shape({Dim::symbol("n")}, DType::I64));
  NodeId dl = b.input("dloss", Shape(Dims{}, DType::F32));
  const auto ln = b.results(Op::LayerNormGrad, {x, dy});
  const auto gn = b.results(Op::GroupNormGrad, {x, dy}, {{"groups", int64_t(3)}});
  for (size_t o = 0; o <= 2; ++o) {
    g.add_output("ln" + std::to_string(o), ln[o]);
    g.add_output("gn" + std::to_string(o), gn[o]);
  }
  g.add_output("rms", b.results(Op::RmsNormGrad, {x, dy})[1]);
  g.add_output("ce", b.op(Op::SoftmaxCrossEntropy, {lg, lab}));
  g.add_output("ce_grad", b.op(Op::SoftmaxCrossEntropyGrad, {lg, lab, dl}));
  const fs::path pkg =
      fs::temp_directory_path() / ("rlx_coreml_gsym_" + std::to_string(::getpid()) + ".mlpackage");
  coreml::export_package(g, {}, pkg.string());
  auto problems = coreml::check_package(pkg.string());
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << all;
  fs::remove_all(pkg);
}

TEST(CoreMLGrad, GroupNormGradNeedsStaticChannels) {
  Graph g;
  Builder b(g);
  const Shape s({Dim::symbol("n"), Dim::symbol("c"), Dim(4)}, DType::F32);
  NodeId x = b.input("x", s), dy = b.input("dy", s);
  g.add_output("dx", b.results(Op::GroupNormGrad, {x, dy}, {{"groups", int64_t(2)}})[0]);
  const fs::path pkg =
      fs::temp_directory_path() / ("rlx_coreml_gng_" + std::to_string(::getpid()) + ".mlpackage");
  EXPECT_THROW(coreml::export_package(g, {}, pkg.string()), Error);
  fs::remove_all(pkg);
}

}  // namespace
}  // namespace rlx
