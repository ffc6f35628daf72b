// gated_delta_net / selective_scan through the CoreML lowering (unrolled over the sequence) and
// the MIL interpreter, against the CPU kernels (themselves checked against float64 references in
// tests/backends/cpu/state_space_test.cc); and the error for a dynamic sequence length.
#include <gtest/gtest.h>

#include "backends/coreml/interp_support.h"

namespace rlx {
namespace {

struct StateSpaceInput {
  Dims dims;
  double lo = -1, hi = 1;
};

struct StateSpaceCase {
  const char* label;
  Op op;
  std::vector<StateSpaceInput> in;
  Attrs attrs;
};

TEST(CoreMLStateSpace, UnrolledMatchesTheCpuKernels) {
  const std::vector<StateSpaceCase> cases = {
      {"gated_delta_net zero state",
       Op::GatedDeltaNet,
       {{{2, 4, 3, 5}},
        {{2, 4, 3, 5}, -0.4, 0.4},
        {{2, 4, 3, 5}},
        {{2, 4, 3}, -1, 0},
        {{2, 4, 3}, 0, 1}},
       {{"state_size", 5}}},
      {"gated_delta_net carried state, one step",
       Op::GatedDeltaNet,
       {{{1, 1, 2, 4}},
        {{1, 1, 2, 4}, -0.5, 0.5},
        {{1, 1, 2, 4}},
        {{1, 1, 2}, -1, 0},
        {{1, 1, 2}, 0, 1},
        {{1, 2, 4, 4}}},
       {{"state_size", 4}}},
      {"selective_scan",
       Op::SelectiveScan,
       {{{2, 5, 6}}, {{2, 5, 6}, 0.05, 1}, {{6, 3}, -1.5, -0.1}, {{2, 5, 3}}, {{2, 5, 3}}},
       {}},
      {"selective_scan d_skip carry",
       Op::SelectiveScan,
       {{{2, 3, 4}},
        {{2, 3, 4}, 0.05, 1},
        {{4, 5}, -1.5, -0.1},
        {{2, 3, 5}},
        {{2, 3, 5}},
        {{4}},
        {{2, 4, 5}}},
       {{"d_skip", true}, {"carry", true}}},
  };
  uint64_t seed = 200;
  for (const StateSpaceCase& c : cases) {
    SCOPED_TRACE(c.label);
    Graph g;
    std::vector<NodeId> ins;
    TensorMap feed;
    for (size_t i = 0; i < c.in.size(); ++i) {
      const std::string name = "x" + std::to_string(i);
      ins.push_back(g.input(name, Shape(c.in[i].dims, DType::F32)));
      feed[name] = testing::random_tensor(c.in[i].dims, DType::F32, seed++, c.in[i].lo, c.in[i].hi);
    }
    const NodeId y = g.add(c.op, ins, c.attrs);
    for (size_t i = 0; i < g.node(y).results.size(); ++i)
      g.add_output("y" + std::to_string(i), g.result(y, int(i)));
    const TensorMap want = testing::run_graph(g, feed, {}, 0);
    for (const bool fp16 : {false, true}) {
      SCOPED_TRACE(fp16 ? "fp16" : "fp32");
      const double tol = fp16 ? 3e-2 : 1e-5;
      const TensorMap got = coreml_test::export_and_interpret(g, {}, feed, {6, fp16});
      for (const auto& [name, w] : want) {
        ASSERT_TRUE(got.count(name)) << name;
        EXPECT_TRUE(testing::all_close(got.at(name).to(DType::F32), w, tol, tol)) << name;
      }
    }
  }
}

TEST(CoreMLStateSpace, DynamicSequenceIsAnErrorNamingTheNode) {
  Graph g;
  const Dim seq = Dim::symbol("seq");
  NodeId x = g.input("x", Shape({Dim(1), seq, Dim(4)}, DType::F32));
  NodeId A = g.input("A", Shape(Dims{4, 2}, DType::F32));
  NodeId B = g.input("B", Shape({Dim(1), seq, Dim(2)}, DType::F32));
  NodeId s = g.add(Op::SelectiveScan, {x, x, A, B, B}, {}, "mamba");
  g.add_output("y", g.result(s, 0));
  coreml_test::TmpDir t("ssm_dyn");
  const std::string msg =
      testing::error_of([&] { coreml::export_package(g, {}, (t.p / "m.mlpackage").string(), {}); });
  EXPECT_NE(msg.find("mamba"), std::string::npos) << msg;
  EXPECT_NE(msg.find("static sequence"), std::string::npos) << msg;
}

}  // namespace
}  // namespace rlx
