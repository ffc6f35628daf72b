// Runtime: memory planning, specialization to input shapes, the plan cache,
// parameter binding, and session input checks. The `Runtime*` suites need no
// kernels; the `RuntimeExec*` suites execute add/relu/matmul/reshape.
#include <gtest/gtest.h>

#include "runtime/plan.h"
#include "support/testing.h"

namespace rlx {
namespace {
using testing::error_of;

using testing::all_close;
using testing::all_equal;
using testing::compile0;
using testing::S;
using testing::sym;

Plan plan(const Graph& g, const std::map<std::string, Dims>& dims) {
  return runtime::plan_memory(g, runtime::specialize(g, dims));
}

TEST(RuntimeProfile, TimesEveryComputedNodeOfEachRun) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({64}));
  NodeId r = b.relu(x);
  NodeId e = b.unary(Op::Exp, r);
  g.add_output("y", b.add(e, x));
  CompileOptions o;
  o.opt_level = 0;
  Session s(Executable::compile(g, {}, o));
  const TensorMap in{{"x", testing::random_tensor({64}, DType::F32, 1)}};
  s.run(in);
  EXPECT_TRUE(s.profile().empty());  // off by default
  s.set_profiling(true);
  s.run(in);
  s.run(in);
  const auto& p = s.profile();
  ASSERT_EQ(p.size(), g.size());
  EXPECT_EQ(p[size_t(x)].runs, 0);  // inputs are bound, not run
  for (NodeId id : {r, e}) {
    EXPECT_EQ(p[size_t(id)].runs, 2);
    EXPECT_GE(p[size_t(id)].total_ms, p[size_t(id)].last_ms);
  }
  EXPECT_LE(p[size_t(r)].last_start_ms, p[size_t(e)].last_start_ms);
}

// SessionOptions::interrupt: a run that sees it set stops before its next
// node with an error saying so; cleared, the same session runs again.
TEST(RuntimeInterrupt, StopsBeforeTheNextNode) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({8}));
  g.add_output("y", b.unary(Op::Exp, b.relu(x)));
  CompileOptions o;
  o.opt_level = 0;
  std::atomic<bool> stop{true};
  Session s(Executable::compile(g, {}, o), SessionOptions{.interrupt = &stop});
  const TensorMap in{{"x", testing::random_tensor({8}, DType::F32, 1)}};
  const std::string msg = error_of([&] { s.run(in); });
  EXPECT_NE(msg.find("run interrupted before"), std::string::npos) << msg;
  stop = false;
  EXPECT_EQ(s.run(in).at("y").dims(), Dims{8});
}

TEST(RuntimePlan, ChainNeedsTwoSlotsAndReusesThem) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({256}));  // 1 KiB per activation
  NodeId r1 = b.relu(x), r2 = b.relu(r1), r3 = b.relu(r2), r4 = b.relu(r3);
  NodeId out = b.relu(r4);
  g.add_output("y", out);
  Plan p = plan(g, {{"x", {256}}});
  EXPECT_EQ(p.arena_bytes, 2048u);
  EXPECT_EQ(p.offset[size_t(x)], -1);    // inputs are not in the arena
  EXPECT_EQ(p.offset[size_t(out)], -1);  // nor are outputs (callers own them)
  EXPECT_EQ(p.offset[size_t(r1)], 0);
  EXPECT_EQ(p.offset[size_t(r2)], 1024);
  EXPECT_EQ(p.offset[size_t(r3)], p.offset[size_t(r1)]);  // r1's slot is free after r2 ran
  EXPECT_EQ(p.offset[size_t(r4)], p.offset[size_t(r2)]);
  EXPECT_EQ(p.dims[size_t(r4)], (Dims{256}));
}

TEST(RuntimePlan, LiveValuesNeverShareASlot) {
  // a feeds both b and the final add, so it stays live across b and c.
  Graph g;
  Builder bd(g);
  NodeId x = bd.input("x", S({sym("n")}));
  NodeId a = bd.relu(x);
  NodeId b = bd.relu(a);
  NodeId c = bd.relu(b);
  NodeId d = bd.add(a, c);
  NodeId dead = bd.relu(d);  // never read: freed right after it runs
  NodeId e = bd.relu(d);
  g.add_output("y", bd.add(e, x));
  g.add_output("d_too", d);          // an output that is also consumed
  Plan p = plan(g, {{"x", {100}}});  // 400 bytes -> 448-byte slots
  std::vector<NodeId> in_arena = {a, b, c, dead, e};
  EXPECT_EQ(p.offset[size_t(d)], -1);
  for (NodeId n : in_arena) {
    ASSERT_GE(p.offset[size_t(n)], 0) << n;
    EXPECT_EQ(p.offset[size_t(n)] % 64, 0) << n;
  }
  auto overlap = [&](NodeId u, NodeId v) {
    return p.offset[size_t(u)] < p.offset[size_t(v)] + 448 &&
           p.offset[size_t(v)] < p.offset[size_t(u)] + 448;
  };
  EXPECT_FALSE(overlap(a, b));
  EXPECT_FALSE(overlap(a, c));
  EXPECT_FALSE(overlap(b, c));
  EXPECT_TRUE(overlap(b, dead) || overlap(a, dead) || overlap(c, dead));  // reuses something
  EXPECT_EQ(p.arena_bytes, 3u * 448);
  // Tiny tensors still get 64-byte aligned slots.
  Plan small = plan(g, {{"x", {1}}});
  EXPECT_EQ(small.arena_bytes, 3u * 64);
}

TEST(RuntimeSpecialize, BindsSymbolsFromInputs) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("batch"), sym("seq"), 8}));
  NodeId m = b.input("mask", S({sym("batch"), sym("seq")}, DType::Bool));
  NodeId w = b.param("w", S({8, 4}));
  NodeId h = b.matmul(x, w);
  NodeId r = b.reshape(h, {-1, 4});
  NodeId s = b.reduce(Op::ReduceSum, h, {-1});
  g.add_output("r", r);
  g.add_output("s", b.op(Op::Where, {m, s, s}));
  auto dims = runtime::specialize(g, {{"x", {3, 5, 8}}, {"mask", {3, 5}}});
  EXPECT_EQ(dims[size_t(h)], (Dims{3, 5, 4}));
  EXPECT_EQ(dims[size_t(r)], (Dims{15, 4}));
  EXPECT_EQ(dims[size_t(s)], (Dims{3, 5}));
  (void)w;
  std::string msg = error_of([&] { runtime::specialize(g, {{"x", {3, 5, 8}}, {"mask", {2, 5}}}); });
  EXPECT_NE(msg.find("dim 'batch' is 2 here but 3 in another input"), std::string::npos) << msg;
  msg = error_of([&] { runtime::specialize(g, {{"x", {3, 5, 8}}}); });
  EXPECT_NE(msg.find("missing input 'mask'"), std::string::npos) << msg;
  msg = error_of([&] { runtime::specialize(g, {{"x", {3, 5, 9}}, {"mask", {3, 5}}}); });
  EXPECT_NE(msg.find("input 'x' has shape [3,5,9], expected [batch,seq,8] f32"), std::string::npos)
      << msg;
  msg = error_of([&] { runtime::specialize(g, {{"x", {3, 5}}, {"mask", {3, 5}}}); });
  EXPECT_NE(msg.find("input 'x' has shape [3,5]"), std::string::npos) << msg;
  EXPECT_EQ(runtime::shape_signature({{"x", {3, 5}}, {"a", {}}}), "a[];x[3,5];");
}

TEST(RuntimeSpecialize, HugeStaticShapesAreErrorsNotOverflows) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({1, 1}));
  b.set_origin("blowup");
  // Past 2^60 elements: shape inference (checked arithmetic) refuses the node.
  std::string msg = error_of([&] {
    b.op(Op::Expand, {x}, {{"shape", std::vector<int64_t>{int64_t(1) << 40, int64_t(1) << 40}}});
  });
  EXPECT_NE(msg.find("node %1 (expand)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("shape [1099511627776,1099511627776] has more than 2^60 elements"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("blowup"), std::string::npos) << msg;
  // Below that but too large for an arena: specialization refuses it.
  NodeId e =
      b.op(Op::Expand, {x}, {{"shape", std::vector<int64_t>{int64_t(1) << 29, int64_t(1) << 29}}});
  g.add_output("y", b.relu(e));
  msg = error_of([&] { runtime::specialize(g, {{"x", {1, 1}}}); });
  EXPECT_NE(msg.find("node %1 (expand): shape [536870912,536870912] f32 is too large"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("blowup"), std::string::npos) << msg;
}

TEST(RuntimeSpecialize, InferenceErrorsNameTheNode) {
  // Static inference cannot see that the symbols disagree; specialization can.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("a")}));
  NodeId y = b.input("y", S({sym("b")}));
  b.set_origin("residual");
  g.add_output("z", b.add(x, y));
  std::string msg = error_of([&] { runtime::specialize(g, {{"x", {3}}, {"y", {4}}}); });
  EXPECT_NE(msg.find("node %2 (add) with inputs [3] f32, [4] f32 from residual"), std::string::npos)
      << msg;
  EXPECT_EQ(runtime::specialize(g, {{"x", {3}}, {"y", {1}}})[2], (Dims{3}));
}

TEST(RuntimeCompile, PlanIsCachedPerShape) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("n"), 4}));
  g.add_output("y", b.relu(b.relu(x)));
  auto exe = compile0(g);
  auto p1 = exe->plan_for({{"x", {2, 4}}});
  auto p2 = exe->plan_for({{"x", {2, 4}}});
  auto p3 = exe->plan_for({{"x", {7, 4}}});
  EXPECT_EQ(p1.get(), p2.get());
  EXPECT_NE(p1.get(), p3.get());
  EXPECT_EQ(p1->arena_bytes, 64u);
  EXPECT_EQ(p3->arena_bytes, 128u);
  EXPECT_EQ(exe->plan_for({{"x", {7, 4}}}).get(), p3.get());
  EXPECT_NE(error_of([&] { exe->static_plan(); }).find("symbolic"), std::string::npos);
}

TEST(RuntimeCompile, BindsParamsWithCastAndZeroCopy) {
  Graph g;
  Builder b(g);
  NodeId w = b.param("w", S({2, 3}));
  NodeId h = b.param("h", S({4}, DType::F16));
  g.add_output("w", w);
  g.add_output("h", h);
  Tensor wt = testing::random_tensor({2, 3}, DType::F32, 1);
  Tensor ht = Tensor::from_vector<double>({4}, {0.5, -1, 2, 65504}, DType::F64);
  auto exe = compile0(g, {{"w", wt}, {"h", ht}, {"unused", Tensor({1}, DType::F32)}});
  TensorMap out = Session(exe).run({});
  // Same dtype: bound without a copy; outputs of leaves are copies the caller owns.
  EXPECT_EQ(exe->bound()[size_t(w)].raw(), wt.raw());
  EXPECT_NE(out.at("w").raw(), wt.raw());
  EXPECT_TRUE(all_equal(out.at("w"), wt));
  EXPECT_TRUE(all_equal(out.at("h"), ht.to(DType::F16)));
  EXPECT_EQ(out.at("h").dtype(), DType::F16);
}

TEST(RuntimeCompile, MissingAndMismatchedWeightsAreErrors) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({3}));
  NodeId p1 = b.param("enc.w", S({3}));
  NodeId p2 = b.param("enc.b", S({3}));
  NodeId p3 = b.param("dec.w", S({3, 3}, DType::BF16));
  g.add_output("y", b.add(b.add(x, p1), p2));
  g.add_output("z", p3);
  std::string msg = error_of([&] { compile0(g, {{"enc.b", Tensor({3}, DType::F32)}}); });
  EXPECT_NE(msg.find("missing weights: enc.w [3] f32, dec.w [3,3] bf16"), std::string::npos) << msg;
  msg = error_of([&] {
    compile0(g, {{"enc.w", Tensor({4}, DType::F32)},
                 {"enc.b", Tensor({3}, DType::F32)},
                 {"dec.w", Tensor({3, 3}, DType::F32)}});
  });
  EXPECT_NE(msg.find("weight 'enc.w' has shape [4] f32 but the graph declares [3] f32"),
            std::string::npos)
      << msg;
  Graph empty;
  empty.input("x", S({1}));
  EXPECT_NE(error_of([&] { compile0(empty); }).find("no outputs"), std::string::npos);
}

TEST(RuntimeSession, InputChecks) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("n"), 2}));
  NodeId y = b.input("y", S({sym("n"), 2}, DType::I32));
  g.add_output("x", x);
  g.add_output("y", y);
  Session s(compile0(g));
  Tensor xt = testing::random_tensor({3, 2}, DType::F32, 2);
  Tensor yt = Tensor::from_vector<double>({3, 2}, {1.9, -1.9, 0, 5, 6, 7}, DType::F64);
  // Another dtype than the declared one is an error naming the input and
  // both dtypes; conversion happens only when asked for.
  std::string msg = error_of([&] { s.run({{"x", xt}, {"y", yt}}); });
  EXPECT_NE(msg.find("input 'y' is f64 but the graph declares [n,2] i32"), std::string::npos)
      << msg;
  msg = error_of([&] { s.run({{"x", yt}, {"y", yt.to(DType::I32)}}); });
  EXPECT_NE(msg.find("input 'x' is f64 but the graph declares [n,2] f32"), std::string::npos)
      << msg;
  Session cast(compile0(g), {.cast_inputs = true});
  TensorMap out = cast.run({{"x", xt}, {"y", yt}});
  EXPECT_TRUE(all_equal(out.at("x"), xt));
  EXPECT_TRUE(all_equal(out.at("y"), yt.to(DType::I32)));  // cast to the declared dtype
  yt = yt.to(DType::I32);
  out = s.run({{"x", xt}, {"y", yt}});
  EXPECT_TRUE(all_equal(out.at("y"), yt));
  msg = error_of([&] { s.run({{"x", xt}, {"y", yt}, {"z", xt}}); });
  EXPECT_NE(msg.find("unknown input 'z'; the graph takes: x, y"), std::string::npos) << msg;
  msg = error_of([&] { s.run({{"x", xt}}); });
  EXPECT_NE(msg.find("missing input 'y'"), std::string::npos) << msg;
  msg = error_of([&] { s.run({{"x", xt}, {"y", Tensor({4, 2}, DType::I32)}}); });
  EXPECT_NE(msg.find("dim 'n'"), std::string::npos) << msg;
  // A non-contiguous input is accepted (packed by the session).
  Tensor xt_t = testing::random_tensor({2, 3}, DType::F32, 3).permute({1, 0});
  EXPECT_TRUE(all_equal(s.run({{"x", xt_t}, {"y", yt}}).at("x"), xt_t.contiguous()));
}

TEST(RuntimeSession, ShapeErrorsAtRunTimeNameTheNode) {
  // Inference cannot check the reshape while dims are symbolic; the run can,
  // before any kernel runs.
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("a"), 3}));
  NodeId y = b.input("y", S({3, sym("b")}));
  b.set_origin("proj");
  g.add_output("z", b.reshape(b.matmul(x, y), {4, -1}));
  Session s(compile0(g));
  std::string msg = error_of([&] {
    s.run({{"x", Tensor({3, 3}, DType::F32)}, {"y", Tensor({3, 3}, DType::F32)}});
  });
  EXPECT_NE(msg.find("node %3 (reshape) with inputs [3,3] f32 from proj"), std::string::npos)
      << msg;
  EXPECT_NE(msg.find("cannot reshape"), std::string::npos) << msg;
}

// ---- execution (needs the add/relu/matmul/reshape kernels)

Tensor ref_matmul_f32(const Tensor& a, const Tensor& b) {  // [m,k] @ [k,n], f32
  const int64_t m = a.dim(0), k = a.dim(1), n = b.dim(1);
  Tensor c({m, n}, DType::F32);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p)
        acc += a.item_as_double(i * k + p) * b.item_as_double(p * n + j);
      c.data<float>()[i * n + j] = float(acc);
    }
  return c;
}

Graph mlp_graph() {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("batch"), 6}));
  NodeId w1 = b.param("w1", S({6, 8}));
  NodeId b1 = b.param("b1", S({8}));
  NodeId w2 = b.param("w2", S({8, 3}));
  NodeId h = b.relu(b.add(b.matmul(x, w1), b1));
  NodeId o = b.matmul(h, w2);
  g.add_output("flat", b.reshape(o, {-1}));
  g.add_output("h", h);
  return g;
}

TEST(RuntimeExec, MlpMatchesReferenceAcrossBatchSizesAndOptLevels) {
  TensorMap w = {{"w1", testing::random_tensor({6, 8}, DType::F32, 10)},
                 {"b1", testing::random_tensor({8}, DType::F32, 11)},
                 {"w2", testing::random_tensor({8, 3}, DType::F32, 12)}};
  for (int opt : {0, 1}) {
    CompileOptions o;
    o.opt_level = opt;
    Session s(Executable::compile(mlp_graph(), w, o));
    for (int64_t batch : {1, 5, 2, 5}) {
      Tensor x = testing::random_tensor({batch, 6}, DType::F32, uint64_t(batch));
      TensorMap out = s.run({{"x", x}});
      Tensor h = ref_matmul_f32(x, w.at("w1"));
      for (int64_t i = 0; i < h.numel(); ++i)
        h.data<float>()[i] = std::max(0.0f, h.data<float>()[i] + w.at("b1").data<float>()[i % 8]);
      // 8-term f32 dot products against a double-accumulated reference.
      EXPECT_TRUE(all_close(out.at("h"), h, 1e-5, 1e-5)) << "batch " << batch;
      EXPECT_TRUE(all_close(out.at("flat"), ref_matmul_f32(h, w.at("w2")).reshape({batch * 3}),
                            1e-5, 1e-5));
      // Arena at -O0: matmul(x, w1) and the bias add are live together (two
      // [batch,8] slots); relu is an output; the second matmul, read only by
      // the output reshape `flat`, has an output buffer that `flat` views. At
      // -O1 the bias and relu fuse into the matmul, which is the output h, so
      // nothing is left in the arena.
      const size_t slot = size_t(batch * 8 * 4 + 63) / 64 * 64;
      EXPECT_EQ(s.last_arena_bytes(), opt == 0 ? 2 * slot : 0) << "batch " << batch;
    }
  }
}

TEST(RuntimeExec, FoldsWeightOnlySubgraphsToTheSameResult) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 4}));
  NodeId w = b.param("w", S({4, 4}));
  NodeId w2 = b.relu(b.add(w, w));  // weight-only: folded at opt_level 1
  g.add_output("y", b.matmul(x, w2));
  TensorMap weights = {{"w", testing::random_tensor({4, 4}, DType::F32, 5)}};
  Tensor x_t = testing::random_tensor({2, 4}, DType::F32, 6);
  auto exe1 = Executable::compile(g, weights);
  int ops = 0;
  for (const Node& n : exe1->graph().nodes()) ops += !is_leaf(n.op);
  EXPECT_EQ(ops, 1);  // only the matmul remains
  TensorMap y0 = testing::run_graph(g, {{"x", x_t}}, weights, 0);
  TensorMap y1 = Session(exe1).run({{"x", x_t}});
  EXPECT_TRUE(all_equal(y1.at("y"), y0.at("y")));
}

TEST(RuntimeExec, F16GraphRunsThroughTheUpcastPath) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({4}, DType::F16));
  g.add_output("y", b.relu(b.add(x, x)));
  Tensor xt = Tensor::from_vector<float>({4}, {-1.5f, 0.25f, 3, -0.0f}, DType::F16);
  Tensor y = testing::run_graph(g, {{"x", xt}}).at("y");
  EXPECT_EQ(y.dtype(), DType::F16);
  EXPECT_TRUE(all_equal(y, Tensor::from_vector<float>({4}, {0, 0.5f, 6, 0}, DType::F16)));
}

// An output that reshapes a value nothing else reads views that value's own
// output buffer (no arena slot copied out): the plan aliases it, and each
// run's result keeps its value while the caller holds it.
TEST(RuntimeExec, OutputReshapeViewsItsValueAndEveryResultKeepsIt) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3}));
  NodeId y = b.reshape(b.add(x, x), {3, 2});
  g.add_output("y", y);
  g.add_output("z", b.reshape(x, {6}));  // a reshape of an input: copied, callers own outputs
  auto exe = Executable::compile(g, {}, {});
  const Plan plan =
      runtime::plan_memory(exe->graph(), runtime::specialize(exe->graph(), {{"x", {2, 3}}}));
  const NodeId out = exe->graph().outputs()[0].node;
  EXPECT_GE(plan.alias[size_t(out)], 0);
  EXPECT_LT(plan.offset[size_t(plan.alias[size_t(out)])], 0);  // an output buffer, not the arena
  EXPECT_LT(plan.alias[size_t(exe->graph().outputs()[1].node)], 0);
  Session s(exe);
  Tensor a = Tensor::from_vector<float>({2, 3}, {1, 2, 3, 4, 5, 6}, DType::F32);
  TensorMap first = s.run({{"x", a}});
  TensorMap second =
      s.run({{"x", Tensor::from_vector<float>({2, 3}, {0, 0, 0, 0, 0, 7}, DType::F32)}});
  EXPECT_TRUE(all_equal(first.at("y"),
                        Tensor::from_vector<float>({3, 2}, {2, 4, 6, 8, 10, 12}, DType::F32)));
  EXPECT_TRUE(all_equal(second.at("y"),
                        Tensor::from_vector<float>({3, 2}, {0, 0, 0, 0, 0, 14}, DType::F32)));
  EXPECT_TRUE(
      all_equal(first.at("z"), Tensor::from_vector<float>({6}, {1, 2, 3, 4, 5, 6}, DType::F32)));
}

// A cache fed back as the next run's input grows into its buffer's headroom
// (Session::run's append in place), yet every tensor a run returned keeps its
// value: growing an old cache a second time, or a prefix view of one, copies.
TEST(RuntimeExec, ConcatFedBackGrowsInPlaceAndEveryResultKeepsItsValue) {
  Graph g;
  Builder b(g);
  NodeId past = b.input("cache", S({1, sym("past"), 3}));
  NodeId fresh = b.input("fresh", S({1, sym("t"), 3}));
  g.add_output("cache", b.concat({past, fresh}, 1));
  Session s(Executable::compile(g, {}));
  auto row = [](int64_t i) {
    return Tensor::from_vector<float>({1, 1, 3}, {float(i), float(i) + 0.5f, -float(i)},
                                      DType::F32);
  };
  auto expect_rows = [&](const Tensor& t, const std::vector<int64_t>& rows) {
    ASSERT_EQ(t.dims(), (Dims{1, int64_t(rows.size()), 3}));
    for (size_t r = 0; r < rows.size(); ++r)
      for (int64_t c = 0; c < 3; ++c)
        EXPECT_EQ(t.data<float>()[r * 3 + size_t(c)], row(rows[r]).data<float>()[c])
            << "row " << r << " column " << c;
  };
  std::vector<Tensor> kept{Tensor({1, 0, 3}, DType::F32)};
  std::vector<std::vector<int64_t>> want{{}};
  int in_place = 0;
  for (int64_t i = 0; i < 12; ++i) {
    Tensor grown = s.run({{"cache", kept.back()}, {"fresh", row(i)}}).at("cache");
    in_place += grown.raw() == kept.back().raw();
    want.push_back(want.back());
    want.back().push_back(i);
    kept.push_back(grown);
  }
  EXPECT_GE(in_place, 6);  // the headroom is half the size at each copy
  // Branches: the cache of 5 rows grown again, and a 2-row prefix view of the last one.
  Tensor branch = s.run({{"cache", kept[5]}, {"fresh", row(100)}}).at("cache");
  const Tensor& last = kept.back();
  Tensor prefix(last.buffer(), last.offset(), {1, 2, 3}, DType::F32);
  Tensor from_prefix = s.run({{"cache", prefix}, {"fresh", row(200)}}).at("cache");
  EXPECT_NE(branch.raw(), kept[5].raw());
  EXPECT_NE(from_prefix.raw(), prefix.raw());
  for (size_t i = 0; i < kept.size(); ++i) expect_rows(kept[i], want[i]);
  expect_rows(branch, {0, 1, 2, 3, 4, 100});
  expect_rows(from_prefix, {0, 1, 200});
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

TEST(RuntimeCompile, SymbolicParamStillChecksRankAndStaticDims) {
  Graph g;
  NodeId p = g.param("w", Shape({Dim::symbol("n"), Dim(3)}, DType::F32));
  g.add_output("w", p);
  EXPECT_THROW(Executable::compile(g, {{"w", Tensor({6}, DType::F32)}}), Error);
  EXPECT_THROW(Executable::compile(g, {{"w", Tensor({2, 4}, DType::F32)}}), Error);
  EXPECT_NO_THROW(Executable::compile(g, {{"w", Tensor({2, 3}, DType::F32)}}));
}

}  // namespace
}  // namespace rlx
