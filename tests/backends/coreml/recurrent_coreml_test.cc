// lstm / gru / rnn through the CoreML lowering (unrolled over the sequence) and the MIL
// interpreter, against the CPU kernels (themselves checked against a float64 reference in
// tests/backends/cpu/recurrent_test.cc); and the error for a dynamic sequence length.
#include <gtest/gtest.h>

#include "backends/coreml/interp_support.h"

namespace rlx {
namespace {

struct RecurrentCase {
  const char* label;
  Op op;
  std::vector<std::pair<Dims, DType>> in;
  Attrs attrs;
};

TEST(CoreMLRecurrent, UnrolledMatchesTheCpuKernels) {
  const DType F = DType::F32, I = DType::I64;
  const std::vector<RecurrentCase> cases = {
      {"lstm bi 2 layers seq-first carry lengths",
       Op::Lstm,
       {{{3, 2, 4}, F},
        {{240}, F},
        {{4, 12, 3}, F},
        {{4, 24}, F},
        {{4, 2, 3}, F},
        {{4, 2, 3}, F},
        {{2}, I}},
       {{"hidden", 3},
        {"num_layers", 2},
        {"direction", std::string("bidirectional")},
        {"batch_first", false},
        {"carry", true},
        {"lengths", true}}},
      {"lstm bi proj_size carry lengths",
       Op::Lstm,
       {{{2, 3, 4}, F},
        {{2, 12, 4}, F},
        {{2, 12, 2}, F},
        {{2, 24}, F},
        {{2, 2, 2}, F},
        {{2, 2, 3}, F},
        {{2}, I},
        {{2, 2, 3}, F}},
       {{"hidden", 3},
        {"proj_size", 2},
        {"direction", std::string("bidirectional")},
        {"carry", true},
        {"lengths", true}}},
      {"lstm onnx peephole clip",
       Op::Lstm,
       {{{2, 3, 4}, F}, {{1, 12, 4}, F}, {{1, 12, 3}, F}, {{1, 12}, F}, {{1, 9}, F}},
       {{"hidden", 3}, {"gates", std::string("onnx")}, {"peephole", true}, {"clip", 0.5}}},
      {"gru onnx no linear_before_reset reverse lengths",
       Op::Gru,
       {{{2, 3, 4}, F}, {{9, 4}, F}, {{9, 3}, F}, {{1, 18}, F}, {{2}, I}},
       {{"hidden", 3},
        {"gates", std::string("onnx")},
        {"linear_before_reset", false},
        {"direction", std::string("reverse")},
        {"lengths", true}}},
      {"gru bi carry",
       Op::Gru,
       {{{2, 3, 4}, F}, {{2, 9, 4}, F}, {{2, 9, 3}, F}, {{2, 18}, F}, {{2, 2, 3}, F}},
       {{"hidden", 3}, {"direction", std::string("bidirectional")}, {"carry", true}}},
      {"rnn relu clip",
       Op::Rnn,
       {{{2, 3, 4}, F}, {{3, 4}, F}, {{3, 3}, F}, {{3}, F}},
       {{"hidden", 3}, {"act_f", std::string("relu")}, {"clip", 0.8}}},
  };
  uint64_t seed = 100;
  for (const RecurrentCase& c : cases) {
    SCOPED_TRACE(c.label);
    Graph g;
    std::vector<NodeId> ins;
    TensorMap feed;
    for (size_t i = 0; i < c.in.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      ins.push_back(g.input(name, Shape(c.in[i].first, c.in[i].second)));
      feed[name] = c.in[i].second == DType::I64
                       ? Tensor::from_vector<int64_t>(c.in[i].first, {3, 1}, DType::I64)
                       : testing::random_tensor(c.in[i].first, DType::F32, seed++);
    }
    const NodeId y = g.add(c.op, ins, c.attrs);
    for (size_t i = 0; i < g.node(y).results.size(); ++i)
      g.add_output("y" + std::to_string(i), g.result(y, int(i)));
    const TensorMap want = testing::run_graph(g, feed, {}, 0);
    const TensorMap got = coreml_test::export_and_interpret(g, {}, feed, {6, false});
    for (const auto& [name, w] : want) {
      ASSERT_TRUE(got.count(name)) << name;
      EXPECT_TRUE(testing::all_close(got.at(name), w, 1e-5, 1e-5)) << name;
    }
  }
}

TEST(CoreMLRecurrent, DynamicSequenceIsAnErrorNamingTheNode) {
  Graph g;
  NodeId x = g.input("x", Shape({Dim(2), Dim::symbol("seq"), Dim(4)}, DType::F32));
  NodeId wi = g.input("wi", Shape(Dims{3, 4}, DType::F32));
  NodeId wh = g.input("wh", Shape(Dims{3, 3}, DType::F32));
  NodeId b = g.input("b", Shape(Dims{3}, DType::F32));
  NodeId r = g.add(Op::Rnn, {x, wi, wh, b}, {{"hidden", 3}}, "encoder");
  g.add_output("y", g.result(r, 0));
  coreml_test::TmpDir t("rnn_dyn");
  const std::string msg =
      testing::error_of([&] { coreml::export_package(g, {}, (t.p / "m.mlpackage").string(), {}); });
  EXPECT_NE(msg.find("encoder"), std::string::npos) << msg;
  EXPECT_NE(msg.find("static sequence"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
