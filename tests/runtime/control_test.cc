// Control nodes (if, loop) built by hand: the session runs the taken branch or the body's
// iterations, binds the dims only the run tells and plans the rest of the graph for them;
// graphs with bodies round-trip through JSON, fold when their inputs are constants, and bad
// bodies are errors naming what is wrong.
#include <gtest/gtest.h>

#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::error_of;
using testing::i64;
using testing::values;

const Shape kVec({Dim::symbol("n")}, DType::F32);

std::shared_ptr<const Graph> body_of(const std::function<void(Graph&, Builder&)>& build) {
  auto g = std::make_shared<Graph>();
  Builder b(*g);
  build(*g, b);
  return g;
}

Tensor vec(std::vector<float> v) {
  const int64_t n = int64_t(v.size());
  return Tensor::from_vector<float>({n}, std::move(v), DType::F32);
}
Tensor flag(bool v) { return Tensor::from_vector<uint8_t>({}, {uint8_t(v)}, DType::Bool); }

// y = relu(if c: x + 1 else: concat(x, x)) * 2, and its sum: the branches give different dims.
Graph if_graph(bool with_else = true) {
  Graph g;
  Builder b(g);
  const NodeId c = b.input("c", Shape(Dims{}, DType::Bool));
  const NodeId x = b.input("x", kVec);
  auto then = body_of(
      [](Graph& g, Builder& b) { g.add_output("out", b.add(b.input("x", kVec), b.scalar(1))); });
  auto other = body_of([](Graph& g, Builder& b) {
    const NodeId x = b.input("x", kVec);
    g.add_output("out", b.concat({x, x}, 0));
  });
  IfAttrs a{.count = "branch"};
  if (!with_else) a.else_error = "the else branch needs a 16 kHz window";
  const NodeId node =
      g.add_with_bodies(Op::If, {c, x}, a, {then, with_else ? other : nullptr}, "pick");
  const NodeId y = b.mul(b.relu(g.result(node, 0)), b.scalar(2));
  g.add_output("y", y);
  g.add_output("sum", b.reduce(Op::ReduceSum, y, {0}));
  return g;
}

TEST(ControlIf, RunsTheTakenBranchAndPlansTheRestForItsDims) {
  const Graph g = if_graph();
  EXPECT_EQ(g.node(g.result(2 + 0, 0)).shape.str(), "[branch.0.0] f32") << to_text(g);
  Session s(Executable::compile(g, {}));
  for (int rep = 0; rep < 2; ++rep)
    for (bool c : {true, false, true}) {
      SCOPED_TRACE(c);
      const TensorMap out = s.run({{"c", flag(c)}, {"x", vec({-3.f, 1.f, 2.f})}});
      const std::vector<float> want =
          c ? std::vector<float>{0.f, 4.f, 6.f} : std::vector<float>{0.f, 2.f, 4.f, 0.f, 2.f, 4.f};
      EXPECT_EQ(values(out.at("y")), want);
      EXPECT_EQ(values(out.at("sum")), (std::vector<float>{c ? 10.f : 12.f}));
    }
}

TEST(ControlIf, ABranchWithoutABodyFailsOnlyTheRunsThatTakeIt) {
  Session s(Executable::compile(if_graph(/*with_else=*/false), {}));
  EXPECT_EQ(values(s.run({{"c", flag(true)}, {"x", vec({1.f})}}).at("y")),
            (std::vector<float>{4.f}));
  const std::string e = error_of([&] { s.run({{"c", flag(false)}, {"x", vec({1.f})}}); });
  EXPECT_NE(e.find("the else branch did not lower at import: the else branch needs a 16 kHz"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("'pick'"), std::string::npos) << e;
}

TEST(ControlIf, BranchesMustAgreeInRankAndDtype) {
  Graph g;
  Builder b(g);
  const NodeId c = b.input("c", Shape(Dims{}, DType::Bool));
  const NodeId x = b.input("x", kVec);
  auto same = body_of([](Graph& g, Builder& b) { g.add_output("o", b.input("x", kVec)); });
  auto wider = body_of([](Graph& g, Builder& b) {
    g.add_output("o", b.reshape(b.input("x", kVec), {1, -1}));
  });
  std::string e = error_of([&] {
    g.add_with_bodies(Op::If, {c, x}, IfAttrs{.count = "k"}, {same, wider});
  });
  EXPECT_NE(e.find("must agree in rank and dtype"), std::string::npos) << e;
  e = error_of([&] { g.add_with_bodies(Op::If, {c, x}, IfAttrs{.count = "k"}, {same}); });
  EXPECT_NE(e.find("needs two bodies"), std::string::npos) << e;
  e = error_of([&] { g.add_with_bodies(Op::If, {c}, IfAttrs{.count = "k"}, {same, same}); });
  EXPECT_NE(e.find("takes 1 inputs, the node gives it 0"), std::string::npos) << e;
  e = error_of([&] { g.add_with_bodies(Op::Relu, {x}, {}, {same}); });
  EXPECT_NE(e.find("only control nodes have bodies"), std::string::npos) << e;
}

// acc, i = 0; while i < trips and sum(acc) < limit: acc += x * i; scan acc.
Graph loop_graph() {
  Graph g;
  Builder b(g);
  const NodeId trips = b.input("trips", Shape(Dims{}, DType::I64));
  const NodeId limit = b.input("limit", Shape(Dims{}, DType::F32));
  const NodeId x = b.input("x", Shape(Dims{2}, DType::F32));
  const NodeId acc0 = b.mul(x, b.scalar(0));
  auto body = body_of([](Graph& g, Builder& b) {
    const NodeId i = b.input("i", Shape(Dims{}, DType::I64));
    b.input("cond", Shape(Dims{}, DType::Bool));
    const NodeId acc = b.input("acc", Shape(Dims{2}, DType::F32));
    const NodeId limit = b.input("limit", Shape(Dims{}, DType::F32));
    const NodeId x = b.input("x", Shape(Dims{2}, DType::F32));
    const NodeId next = b.add(acc, b.mul(x, b.cast(i, DType::F32)));
    const NodeId sum = b.reduce(Op::ReduceSum, next, {0});
    g.add_output("cond", b.binary(Op::Lt, sum, limit));
    g.add_output("acc", next);
    g.add_output("scan", next);
  });
  const NodeId yes = g.constant(flag(true));
  const NodeId node = g.add_with_bodies(Op::Loop, {trips, yes, acc0, limit, x},
                                        LoopAttrs{.carried = 1, .count = "steps"}, {body}, "walk");
  g.add_output("acc", g.result(node, 0));
  g.add_output("scans", g.result(node, 1));
  g.add_output("last", b.mul(g.result(node, 1), b.scalar(1)));
  return g;
}

void check_loop(Session& s, int64_t trips, float limit) {
  SCOPED_TRACE(::testing::Message() << "trips " << trips << ", limit " << limit);
  const std::vector<float> x{1.f, 2.f};
  const TensorMap out = s.run({{"trips", i64(trips)},
                               {"limit", Tensor::from_vector<float>({}, {limit}, DType::F32)},
                               {"x", vec(x)}});
  std::vector<float> acc{0.f, 0.f}, scans;
  int64_t steps = 0;
  for (int64_t i = 0; i < trips; ++i) {
    for (int k = 0; k < 2; ++k) acc[size_t(k)] += x[size_t(k)] * float(i);
    scans.insert(scans.end(), acc.begin(), acc.end());
    ++steps;
    if (!(acc[0] + acc[1] < limit)) break;
  }
  EXPECT_EQ(values(out.at("acc")), acc);
  EXPECT_EQ(out.at("scans").dims(), (Dims{steps, 2}));
  EXPECT_EQ(values(out.at("scans")), scans);
  EXPECT_EQ(values(out.at("last")), scans);
}

TEST(ControlLoop, CarriesValuesStacksScansAndStopsOnItsCondition) {
  const Graph g = loop_graph();
  EXPECT_EQ(g.node(g.outputs()[1].node).shape.str(), "[steps,2] f32");
  Session s(Executable::compile(g, {}));
  for (auto [trips, limit] : std::vector<std::pair<int64_t, float>>{
           {4, 1e9f}, {0, 1e9f}, {10, 20.f}, {4, 1e9f}, {1, 0.f}})
    check_loop(s, trips, limit);
}

TEST(ControlLoop, RoundTripsThroughJsonAndPrintsItsBody) {
  const Graph g = from_json(to_json(loop_graph()));
  EXPECT_EQ(to_json(g), to_json(loop_graph()));
  const std::string text = to_text(g);
  EXPECT_NE(text.find("loop %"), std::string::npos) << text;
  EXPECT_NE(text.find("  body:\n    %0 = input \"i\""), std::string::npos) << text;
  Session s(Executable::compile(g, {}));
  check_loop(s, 6, 30.f);
}

// A loop walking x [T, 2] slice by slice (a scanned input): running sums, T from x alone.
TEST(ControlLoop, WalksScannedInputsSliceBySlice) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape({Dim::symbol("T"), Dim(2)}, DType::F32));
  const NodeId acc0 = b.input("acc0", Shape(Dims{2}, DType::F32));
  auto body = body_of([](Graph& g, Builder& b) {
    b.input("i", Shape(Dims{}, DType::I64));
    const NodeId cond = b.input("cond", Shape(Dims{}, DType::Bool));
    const NodeId acc = b.input("acc", Shape(Dims{2}, DType::F32));
    const NodeId next = b.add(acc, b.input("slice", Shape(Dims{2}, DType::F32)));
    g.add_output("cond", cond);
    g.add_output("acc", next);
    g.add_output("scan", next);
  });
  const NodeId node =
      g.add_with_bodies(Op::Loop, {g.constant(i64(100)), g.constant(flag(true)), acc0, x},
                        LoopAttrs{.carried = 1, .scanned = 1, .count = "steps"}, {body});
  g.add_output("acc", g.result(node, 0));
  g.add_output("sums", g.result(node, 1));
  Session s(Executable::compile(g, {}));
  for (int64_t t : {4, 0, 1, 3}) {
    SCOPED_TRACE(t);
    std::vector<float> xv, sums;
    float a0 = 1.f, a1 = -1.f;
    for (int64_t i = 0; i < t; ++i) {
      xv.insert(xv.end(), {float(i), float(2 * i + 1)});
      a0 += float(i);
      a1 += float(2 * i + 1);
      sums.insert(sums.end(), {a0, a1});
    }
    const TensorMap out = s.run(
        {{"x", Tensor::from_vector<float>({t, 2}, xv, DType::F32)}, {"acc0", vec({1.f, -1.f})}});
    EXPECT_EQ(values(out.at("acc")), (std::vector<float>{a0, a1}));
    EXPECT_EQ(out.at("sums").dims(), (Dims{t, 2}));
    EXPECT_EQ(values(out.at("sums")), sums);
  }
}

// What folding and the importers' evaluator call: one node on tensors, outside a session.
TEST(ControlLoop, EvaluatesOnTensorsOutsideASession) {
  const Graph g = loop_graph();
  NodeId loop = -1;
  for (const Node& n : g.nodes())
    if (n.op == Op::Loop) loop = n.id;
  const std::vector<Tensor> in{i64(3), flag(true), vec({0.f, 0.f}),
                               Tensor::from_vector<float>({}, {1e9f}, DType::F32), vec({1.f, 2.f})};
  const std::vector<Tensor> out = evaluate(*make_backend("cpu"), g.node(loop), in);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(values(out[0]), (std::vector<float>{3.f, 6.f}));
  EXPECT_EQ(values(out[1]), (std::vector<float>{0.f, 0.f, 1.f, 2.f, 3.f, 6.f}));
}

// An if of static dims whose inputs are constants folds away at compile time.
TEST(ControlIf, FoldsWhenEveryInputIsAConstant) {
  Graph g;
  Builder b(g);
  const Shape two(Dims{2}, DType::F32);
  auto then =
      body_of([&](Graph& g, Builder& b) { g.add_output("o", b.op(Op::Neg, {b.input("x", two)})); });
  auto other = body_of([&](Graph& g, Builder& b) { g.add_output("o", b.input("x", two)); });
  const NodeId node =
      g.add_with_bodies(Op::If, {g.constant(flag(true)), g.constant(vec({1.f, 2.f}))},
                        IfAttrs{.count = "k"}, {then, other});
  g.add_output("y", b.add(g.result(node, 0), b.input("z", two)));
  auto exe = Executable::compile(g, {});
  for (const Node& n : exe->graph().nodes()) EXPECT_NE(n.op, Op::If) << to_text(exe->graph());
  EXPECT_EQ(values(Session(exe).run({{"z", vec({10.f, 20.f})}}).at("y")),
            (std::vector<float>{9.f, 18.f}));
}

TEST(ControlLoop, ABodyErrorNamesTheIteration) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
  auto body = body_of([](Graph& g, Builder& b) {
    const NodeId i = b.input("i", Shape(Dims{}, DType::I64));
    const NodeId cond = b.input("cond", Shape(Dims{}, DType::Bool));
    const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
    g.add_output("cond", cond);
    g.add_output("pick", b.op(Op::Gather, {x, b.reshape(i, {1})}, {{"axis", int64_t(0)}}));
  });
  const NodeId node = g.add_with_bodies(Op::Loop, {g.constant(i64(5)), g.constant(flag(true)), x},
                                        LoopAttrs{.carried = 0, .count = "t"}, {body});
  g.add_output("picks", g.result(node, 0));
  Session s(Executable::compile(g, {}));
  const std::string e = error_of([&] { s.run({{"x", vec({1.f, 2.f, 3.f})}}); });
  EXPECT_NE(e.find("in iteration 3"), std::string::npos) << e;
}

TEST(ControlLoop, CarriedValuesKeepTheirDtypeAndRank) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
  auto body = body_of([](Graph& g, Builder& b) {
    b.input("i", Shape(Dims{}, DType::I64));
    const NodeId cond = b.input("cond", Shape(Dims{}, DType::Bool));
    const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
    g.add_output("cond", cond);
    g.add_output("x", b.cast(x, DType::I64));
  });
  const std::string e = error_of([&] {
    g.add_with_bodies(Op::Loop, {g.constant(i64(5)), g.constant(flag(true)), x},
                      LoopAttrs{.carried = 1, .count = "t"}, {body});
  });
  EXPECT_NE(e.find("carried value 0 enters as [3] f32 and the body gives it back as [3] i64"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace rlx
