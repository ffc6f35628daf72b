// Multi-output nodes: a topk / split / norm-grad node holds a shape per output
// and is followed by its `result` nodes. Graph building and verification, the
// printer and serializer (with the version-2 migration), the passes, the
// planner's per-output lifetimes and the interpreter.
#include <gtest/gtest.h>

#include <cmath>

#include "opt/pass_test_util.h"
#include "opt/passes.h"
#include "runtime/plan.h"

namespace rlx {
namespace {
using testing::error_of;

using Ints = std::vector<int64_t>;
using testing::count_op;
using testing::S;

TEST(MultiOutput, AddAppendsOneResultPerOutput) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 5}));
  NodeId t = b.op(Op::TopK, {x}, {{"k", int64_t(2)}});
  ASSERT_EQ(g.node(t).results.size(), 2u);
  EXPECT_EQ(g.node(t).results[1], S({2, 2}, DType::I64));
  EXPECT_EQ(g.result(t, 0), t + 1);
  EXPECT_EQ(g.result(t, 1), t + 2);
  EXPECT_EQ(g.node(t + 1).op, Op::Result);
  EXPECT_EQ(g.node(t + 2).shape, S({2, 2}, DType::I64));
  EXPECT_EQ(g.size(), 4u);
  EXPECT_THROW(g.result(t, 2), Error);
  EXPECT_THROW(g.result(x, 0), Error);  // not a multi-output node
  // Split's output count comes from its attributes.
  auto pieces = b.results(Op::Split, {x}, {{"axis", int64_t(1)}, {"sizes", Ints{1, 3, 1}}});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(g.node(pieces[1]).shape, S({2, 3}));
  EXPECT_NO_THROW(g.verify());
}

TEST(MultiOutput, OnlyItsResultsReadIt) {
  Graph g;
  NodeId x = g.input("x", S({2, 5}));
  NodeId t = g.add(Op::TopK, {x}, {{"k", int64_t(2)}});
  EXPECT_NE(error_of([&] { g.add(Op::Relu, {t}); }).find("result nodes"), std::string::npos);
  EXPECT_NE(error_of([&] { g.add_output("y", t); }).find("result nodes"), std::string::npos);
  // A result out of place (not right after its node, in order) is rejected.
  EXPECT_NE(error_of([&] {
              g.add(Op::Result, {t}, {{"index", int64_t(0)}});
            }).find("must be node"),
            std::string::npos);
  EXPECT_THROW(g.add(Op::Result, {x}, {{"index", int64_t(0)}}), Error);
  // A node whose results were never appended fails verification.
  Graph h;
  NodeId y = h.input("y", S({3}));
  Node raw;
  raw.op = Op::TopK;
  raw.inputs = {y};
  raw.attrs = TopKAttrs{.k = 1};
  raw.results = {S({1}), S({1}, DType::I64)};
  h.append_raw(raw);
  EXPECT_NE(error_of([&] { h.verify(); }).find("no result node"), std::string::npos);
  raw.results.pop_back();  // topk makes two outputs
  EXPECT_NE(error_of([&] { h.append_raw(raw); }).find("makes 2"), std::string::npos);
}

Graph topk_graph() {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3, 6}));
  NodeId v = b.results(Op::TopK, {x}, {{"k", int64_t(2)}})[0];
  NodeId i = b.results(Op::TopK, {x}, {{"k", int64_t(2)}})[1];  // an identical second topk
  g.add_output("values", b.relu(v));
  g.add_output("indices", i);
  return g;
}

TEST(MultiOutput, PrintsAndRoundTripsThroughJson) {
  const Graph g = topk_graph();
  const std::string text = to_text(g);
  EXPECT_NE(text.find("= topk %0 {k=2} : ([3,2] f32, [3,2] i64)"), std::string::npos) << text;
  EXPECT_NE(text.find("= result %1 {index=1} : [3,2] i64"), std::string::npos) << text;
  const std::string json = to_json(g);
  EXPECT_NE(json.find("\"results\""), std::string::npos);
  const Graph back = from_json(json, "g.json");
  EXPECT_EQ(to_json(back), json);
  EXPECT_EQ(back.node(1).results, g.node(1).results);
}

TEST(MultiOutput, Version2FilesMigrate) {
  // Version 2 picked one output per node with an `output` attribute.
  const std::string v2 = R"({"format": "rlx-graph", "version": 2,
    "nodes": [
      {"op": "input", "name": "x", "inputs": [], "shape": [2, 4], "dtype": "f32"},
      {"op": "topk", "inputs": [0], "attrs": {"k": 3, "output": 1}, "shape": [2, 3], "dtype": "i64"},
      {"op": "layer_norm_grad", "inputs": [0, 0], "attrs": {"output": 2}, "shape": [4], "dtype": "f32"},
      {"op": "cast", "inputs": [1], "attrs": {"dtype": "f32"}, "shape": [2, 3], "dtype": "f32"}
    ],
    "outputs": [{"name": "i", "node": 3}, {"name": "db", "node": 2}]})";
  const Graph g = from_json(v2, "v2.json");
  ASSERT_EQ(g.outputs().size(), 2u);
  const Node& cast = g.node(g.outputs()[0].node);
  EXPECT_EQ(cast.op, Op::Cast);
  const Node& idx = g.node(cast.inputs[0]);
  EXPECT_EQ(idx.op, Op::Result);
  EXPECT_EQ(idx.attrs_as<ResultAttrs>().index, 1);
  EXPECT_EQ(idx.shape, S({2, 3}, DType::I64));
  const Node& db = g.node(g.outputs()[1].node);
  EXPECT_EQ(db.attrs_as<ResultAttrs>().index, 2);
  EXPECT_EQ(g.node(db.inputs[0]).op, Op::LayerNormGrad);
  // Version 3 has no `output` attribute any more.
  std::string v3 = v2;
  v3.replace(v3.find("\"version\": 2"), 12, "\"version\": 3");
  EXPECT_NE(error_of([&] { from_json(v3, "v3.json"); }).find("output"), std::string::npos);
}

TEST(MultiOutput, PassesKeepResultsWithTheirNode) {
  const Graph g = topk_graph();  // two identical topk nodes
  const Graph cse = opt::eliminate_common_subexpressions(g);
  EXPECT_EQ(count_op(g, Op::TopK), 2);
  EXPECT_EQ(count_op(cse, Op::TopK), 1);
  const Graph dce = opt::eliminate_dead_code(cse);
  EXPECT_EQ(count_op(dce, Op::Result), 2);  // both results of the live node stay
  EXPECT_NO_THROW(dce.verify());
  // Folding a constant input folds every output.
  Graph c;
  Builder b(c);
  NodeId k = b.constant(testing::random_tensor({2, 6}, DType::F32, 3));
  auto r = b.results(Op::TopK, {k}, {{"k", int64_t(3)}});
  c.add_output("v", b.relu(r[0]));
  c.add_output("i", r[1]);
  auto eval = [](const Node& n, std::span<const Tensor> in) {
    std::vector<Tensor> out;
    for (const Shape& s : n.output_shapes()) out.emplace_back(s.concrete(), s.dtype);
    make_cpu_backend()->run_node(n, in, out);
    return out;
  };
  const Graph folded = opt::fold_constants(c, eval, size_t(1) << 20);
  EXPECT_EQ(count_op(folded, Op::Result), 0);
  const TensorMap want = testing::run_graph(c, {}, {}, 0);
  const TensorMap got = testing::run_graph(folded, {}, {}, 0);
  EXPECT_TRUE(testing::all_equal(got.at("v"), want.at("v")));
  EXPECT_TRUE(testing::all_equal(got.at("i"), want.at("i")));
}

TEST(MultiOutput, EachOutputHasItsOwnLifetime) {
  // split -> p0..p3 (256 bytes each); p2 and p3 are never read, p1 dies after u, p0 lives to w.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4, 64}));
  auto p = b.results(Op::Split, {x}, {{"axis", int64_t(0)}, {"sizes", Ints{1, 1, 1, 1}}});
  NodeId u = b.unary(Op::Exp, p[1]);
  NodeId v = b.unary(Op::Exp, u);
  NodeId w = b.add(v, p[0]);
  g.add_output("w", w);
  const Plan plan = runtime::plan_memory(g, runtime::specialize(g, {{"x", {4, 64}}}));
  EXPECT_EQ(plan.offset[size_t(p[0])], 0);
  EXPECT_EQ(plan.offset[size_t(p[1])], 256);
  EXPECT_EQ(plan.offset[size_t(p[2])], 512);
  EXPECT_EQ(plan.offset[size_t(u)], 512);  // p2 and p3 were freed right after the split
  EXPECT_EQ(plan.offset[size_t(v)], 256);  // p1 died after u; p0 is still live
  EXPECT_EQ(plan.arena_bytes, 1024u);
  const Tensor xv = testing::random_tensor({4, 64}, DType::F32, 5);
  const TensorMap out = testing::run_graph(g, {{"x", xv}}, {}, 1);
  Tensor want({1, 64}, DType::F32);
  for (int i = 0; i < 64; ++i)
    want.data<float>()[i] = std::exp(std::exp(xv.data<float>()[64 + i])) + xv.data<float>()[i];
  EXPECT_TRUE(testing::all_close(out.at("w"), want, 1e-6, 1e-6));
}

TEST(MultiOutput, SplitKernelMatchesSlices) {
  for (int64_t axis : {0, 1, 2}) {
    const Tensor x = testing::random_tensor({3, 4, 5}, DType::F32, uint64_t(10 + axis));
    const int64_t len = x.dims()[size_t(axis)];
    const Ints sizes{1, 0, len - 1};
    const auto got = testing::run_op_outputs(Op::Split, {x}, {{"axis", axis}, {"sizes", sizes}});
    ASSERT_EQ(got.size(), 3u);
    int64_t at = 0;
    for (size_t i = 0; i < 3; ++i) {
      const Tensor want =
          testing::run_op(Op::Slice, {x}, {{"axis", axis}, {"start", at}, {"end", at + sizes[i]}});
      EXPECT_TRUE(testing::all_equal(got[i], want)) << "axis " << axis << " piece " << i;
      at += sizes[i];
    }
  }
  const Tensor x = testing::random_tensor({2, 3}, DType::I64, 7, -5, 5);
  const auto got =
      testing::run_op_outputs(Op::Split, {x}, {{"axis", int64_t(-1)}, {"sizes", Ints{2, 1}}});
  EXPECT_EQ(got[1].item_as_double(1), x.item_as_double(5));
  EXPECT_THROW(
      testing::run_op_outputs(Op::Split, {x}, {{"axis", int64_t(1)}, {"sizes", Ints{2, 2}}}),
      Error);
}

}  // namespace
}  // namespace rlx
