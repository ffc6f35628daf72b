// The specialize pass: symbolic dims become the given input dims before the
// other passes run; the executable then takes only those dims.
#include <gtest/gtest.h>

#include "opt/pass_test_util.h"
#include "opt/passes.h"

namespace rlx {
namespace {
using testing::error_of;

Graph symbolic_graph() {
  // Symbolic batch `b` shared by two inputs, through a split and a matmul.
  Graph g;
  Builder bd(g);
  NodeId x = bd.input("x", Shape(std::vector<Dim>{Dim::symbol("b"), Dim(6)}, DType::F32));
  NodeId y = bd.input("y", Shape(std::vector<Dim>{Dim::symbol("b"), Dim(1)}, DType::F32));
  NodeId w = bd.param("w", Shape(Dims{6, 4}, DType::F32));
  auto halves =
      bd.results(Op::Split, {x}, {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{2, 4}}});
  NodeId h = bd.matmul(bd.relu(x), w);
  g.add_output("z", bd.add(bd.add(h, y), bd.reduce(Op::ReduceSum, halves[1], {1}, true)));
  return g;
}

TEST(Specialize, SymbolicDimsBecomeStatic) {
  const Graph g = symbolic_graph();
  const Graph s = opt::specialize_shapes(g, {{"x", {3, 6}}, {"y", {3, 1}}});
  EXPECT_NO_THROW(s.verify());
  for (const Node& n : s.nodes())
    for (const Shape& sh : n.output_shapes())
      EXPECT_TRUE(sh.is_static()) << n.label() << " " << sh.str();
  EXPECT_EQ(s.node(s.outputs()[0].node).shape, Shape(Dims{3, 4}, DType::F32));
  EXPECT_EQ(to_text(s).find("b"), std::string::npos) << to_text(s);
}

TEST(Specialize, RunsLikeTheSymbolicGraphAndOnlyTakesItsDims) {
  const Graph g = symbolic_graph();
  const TensorMap w{{"w", testing::random_tensor({6, 4}, DType::F32, 1)}};
  const TensorMap in{{"x", testing::random_tensor({3, 6}, DType::F32, 2)},
                     {"y", testing::random_tensor({3, 1}, DType::F32, 3)}};
  CompileOptions o;
  o.verify_each = true;
  o.input_shapes = {{"x", {3, 6}}, {"y", {3, 1}}};
  auto exe = Executable::compile(g, w, o);
  EXPECT_TRUE(exe->graph().node(exe->graph().inputs()[0]).shape.is_static());
  const TensorMap got = Session(exe).run(in);
  const TensorMap want = testing::run_graph(g, in, w, 1);
  EXPECT_TRUE(testing::all_equal(got.at("z"), want.at("z")));
  const TensorMap other{{"x", testing::random_tensor({2, 6}, DType::F32, 4)},
                        {"y", testing::random_tensor({2, 1}, DType::F32, 5)}};
  EXPECT_NE(error_of([&] { Session(exe).run(other); }).find("expected [3,6]"), std::string::npos);
}

TEST(Specialize, BadDimsAreClearErrors) {
  const Graph g = symbolic_graph();
  EXPECT_NE(error_of([&] {
              opt::specialize_shapes(g, {{"x", {3, 6}}});
            }).find("input 'y'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              opt::specialize_shapes(g, {{"x", {3, 6}}, {"y", {4, 1}}});
            }).find("dim 'b'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              opt::specialize_shapes(g, {{"x", {3, 5}}, {"y", {3, 1}}});
            }).find("given [3,5]"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              opt::specialize_shapes(g, {{"x", {3, 6}}, {"y", {3, 1}}, {"z", {1}}});
            }).find("no input 'z'"),
            std::string::npos);
}

}  // namespace
}  // namespace rlx
