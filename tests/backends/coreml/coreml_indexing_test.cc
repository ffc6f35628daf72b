// CoreML lowerings of one_hot, gather_nd, scatter_elements, scatter_nd, conv_transpose and rope:
// emitted, structurally valid in every opset and precision, with the MIL ops expected.
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

Tensor ramp_weights(const Dims& d) {
  Tensor t(d, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.1f * float(i % 7) - 0.3f;
  return t;
}

void make_graph(Graph& g, TensorMap& w, bool batch_dims) {
  Builder b(g);
  NodeId ids = b.input("ids", Shape(Dims{3, 4}, DType::I64));
  NodeId data = b.input("data", Shape(Dims{4, 5, 6}, DType::F32));
  NodeId nd_idx = b.input("nd_idx", Shape(Dims{3, 2}, DType::I64));
  NodeId m = b.input("m", Shape(Dims{4, 5}, DType::F32));
  NodeId se_idx = b.input("se_idx", Shape(Dims{4, 2}, DType::I64));
  NodeId se_upd = b.input("se_upd", Shape(Dims{4, 2}, DType::F32));
  NodeId sn_idx = b.input("sn_idx", Shape(Dims{3, 1}, DType::I64));
  NodeId sn_upd = b.input("sn_upd", Shape(Dims{3, 5}, DType::F32));
  NodeId img = b.input("img", Shape(Dims{1, 4, 5, 5}, DType::F32));
  NodeId q = b.input("q", Shape({Dim::symbol("b"), Dim(2), Dim::symbol("s"), Dim(8)}, DType::F32));
  NodeId pos = b.input("pos", Shape({Dim::symbol("s")}, DType::I64));
  w["ct.w"] = ramp_weights({4, 3, 3, 3});
  w["ct.b"] = ramp_weights({3});
  w["ff"] = ramp_weights({2});
  for (int64_t i = 0; i < 2; ++i) w["ff"].data<float>()[i] = 1.0f + float(i);
  g.add_output("hot", b.op(Op::OneHot, {ids}, {{"depth", int64_t(5)}}));
  g.add_output("hot_f",
               b.op(Op::OneHot, {ids}, {{"depth", int64_t(5)}, {"dtype", std::string("f32")}}));
  g.add_output("gnd", b.op(Op::GatherND, {data, nd_idx}));
  for (int64_t sorted = 0; sorted < 2; ++sorted) {
    const auto topk = b.results(
        Op::TopK, {data},
        {{"k", int64_t(3)}, {"axis", int64_t(1)}, {"sorted", sorted}, {"largest", sorted}});
    for (int o = 0; o < 2; ++o)
      g.add_output("topk" + std::to_string(o) + std::to_string(sorted), topk[size_t(o)]);
  }
  if (batch_dims) {
    NodeId bidx = b.input("bidx", Shape(Dims{4, 2, 1}, DType::I64));
    g.add_output("gnd_b", b.op(Op::GatherND, {data, bidx}, {{"batch_dims", int64_t(1)}}));
  }
  for (const char* r : {"none", "add", "mul", "max", "min"}) {
    g.add_output(std::string("se_") + r,
                 b.op(Op::ScatterElements, {m, se_idx, se_upd},
                      {{"axis", int64_t(1)}, {"reduction", std::string(r)}}));
    g.add_output(std::string("sn_") + r,
                 b.op(Op::ScatterND, {m, sn_idx, sn_upd}, {{"reduction", std::string(r)}}));
  }
  NodeId cw = b.param("ct.w", Shape(Dims{4, 3, 3, 3}, DType::F32));
  NodeId cb = b.param("ct.b", Shape(Dims{3}, DType::F32));
  g.add_output("ct", b.op(Op::ConvTranspose, {img, cw, cb},
                          {{"stride", std::vector<int64_t>{2, 2}},
                           {"pads", std::vector<int64_t>{1, 1, 1, 1}},
                           {"output_padding", std::vector<int64_t>{1, 1}}}));
  g.add_output("ct_g", b.op(Op::ConvTranspose, {img, cw}, {{"groups", int64_t(2)}}));
  g.add_output("rope_neox", b.op(Op::Rope, {q, pos}));
  g.add_output(
      "rope_il",
      b.op(Op::Rope, {q, pos, b.param("ff", Shape(Dims{2}, DType::F32))},
           {{"style", std::string("interleaved")}, {"rotary_dims", int64_t(4)}, {"theta", 500.0}}));
}

TEST(CoreMLIndexing, LoweredAndChecked) {
  const fs::path dir = fs::temp_directory_path() / ("rlx_coreml_idx_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (int opset = 5; opset <= 8; ++opset)
    for (bool fp16 : {false, true}) {
      SCOPED_TRACE("CoreML" + std::to_string(opset) + (fp16 ? " fp16" : " fp32"));
      Graph g;
      TensorMap w;
      make_graph(g, w, opset >= 6);
      ASSERT_TRUE(coreml::unsupported_ops(g).empty());
      const fs::path pkg = dir / ("i" + std::to_string(opset) + (fp16 ? "h" : "f") + ".mlpackage");
      coreml::export_package(g, w, pkg.string(), {opset, fp16});
      auto problems = coreml::check_package(pkg.string());
      std::string all;
      for (const auto& p : problems) all += p + "\n";
      EXPECT_TRUE(problems.empty()) << all;
      CoreML::Specification::Model model;
      ASSERT_TRUE(model.ParseFromString(slurp(pkg / "Data/com.apple.CoreML/model.mlmodel")));
      std::set<std::string> types;
      for (const auto& op : model.mlprogram()
                                .functions()
                                .at("main")
                                .block_specializations()
                                .at(coreml::opset_name(opset))
                                .operations())
        types.insert(op.type());
      for (const char* t : {"gather_nd", "scatter_along_axis", "scatter_nd", "conv_transpose",
                            "equal", "slice_by_index", "argsort", "cos", "sin", "concat"})
        EXPECT_TRUE(types.count(t)) << t;
    }
  fs::remove_all(dir);
}

TEST(CoreMLIndexing, BatchDimsNeedCoreML6) {
  Graph g;
  Builder b(g);
  NodeId data = b.input("data", Shape(Dims{4, 5, 6}, DType::F32));
  NodeId idx = b.input("idx", Shape(Dims{4, 2, 1}, DType::I64));
  g.add_output("y", b.op(Op::GatherND, {data, idx}, {{"batch_dims", int64_t(1)}}));
  const fs::path pkg =
      fs::temp_directory_path() / ("rlx_coreml_bd_" + std::to_string(::getpid()) + ".mlpackage");
  EXPECT_THROW(coreml::export_package(g, {}, pkg.string(), {5, false}), Error);
  fs::remove_all(pkg);
}

}  // namespace
}  // namespace rlx
