// The Backend interface: supports() answers from the CPU backend and the
// CoreML exporter, every unsupported node listed in one error, the runtime
// compiling for whichever backend it is handed, and kernel lookup done once
// per executable rather than per run.
#include <gtest/gtest.h>

#include <atomic>

#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;

Graph small_graph() {
  Graph g;
  NodeId x = g.input("x", Shape(Dims{2, 3}, DType::F32));
  NodeId e = g.add(Op::Exp, {x});
  NodeId m = g.add(Op::Mul, {e, x});
  NodeId m2 = g.add(Op::Mul, {m, m});
  g.add_output("y", g.add(Op::Add, {m2, x}));
  return g;
}

// Runs on the CPU but refuses some ops, and counts what the runtime asks.
class TestBackend final : public Backend {
 public:
  explicit TestBackend(std::vector<Op> refused = {}) : refused_(std::move(refused)) {}
  std::string name() const override { return "test"; }
  Support supports(const Node& n) const override {
    for (Op op : refused_)
      if (n.op == op) return Support::no("refused by the test");
    return cpu_->supports(n);
  }
  std::unique_ptr<CompiledGraph> compile(const Graph& g) const override {
    ++compiles;
    return cpu_->compile(g);
  }
  void run_node(const Node& n, std::span<const Tensor> in, std::span<Tensor> out) const override {
    cpu_->run_node(n, in, out);
  }
  mutable std::atomic<int> compiles{0};

 private:
  std::vector<Op> refused_;
  std::shared_ptr<const Backend> cpu_ = make_cpu_backend();
};

TEST(Backend, CpuSupportsEveryNodeOfTheGraph) {
  auto cpu = make_cpu_backend();
  EXPECT_EQ(cpu->name(), "cpu");
  Graph g = small_graph();
  for (const Node& n : g.nodes()) EXPECT_TRUE(cpu->supports(n)) << n.label();
  EXPECT_TRUE(unsupported_nodes(*cpu, g).empty());
  EXPECT_EQ(unsupported_report(*cpu, g), "");
  EXPECT_EQ(make_backend("cpu")->name(), "cpu");
}

TEST(Backend, CoremlAnswersTheSameQueryAsItsExporter) {
  auto coreml = make_backend("coreml");
  EXPECT_EQ(coreml->name(), "coreml");
  Graph g = small_graph();
  for (const Node& n : g.nodes()) {
    EXPECT_TRUE(coreml->supports(n)) << n.label();
    EXPECT_EQ(bool(coreml->supports(n)), bool(coreml::supports(n)));
  }
  EXPECT_TRUE(coreml::unsupported_ops(g).empty());
  EXPECT_TRUE(unsupported_nodes(*coreml, g).empty());
  // It exports; it does not run.
  CompileOptions o;
  o.backend = coreml;
  try {
    Executable::compile(g, {}, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exports .mlpackage"), std::string::npos) << e.what();
  }
}

TEST(Backend, UnknownBackendNamesTheKnownOnes) {
  try {
    make_backend("tpu");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown backend 'tpu' (known: cpu, coreml)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Backend, EveryUnsupportedNodeInOneError) {
  auto b = std::make_shared<TestBackend>(std::vector<Op>{Op::Mul, Op::Exp});
  Graph g = small_graph();
  auto gaps = unsupported_nodes(*b, g);
  ASSERT_EQ(gaps.size(), 3u);
  EXPECT_EQ(gaps[0].op, "exp");
  EXPECT_EQ(gaps[1].reason, "refused by the test");
  CompileOptions o;
  o.backend = b;
  try {
    Executable::compile(g, {}, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("the test backend cannot run 3 node(s) of 2 op kind(s)"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find("exp (x1): refused by the test"), std::string::npos) << msg;
    EXPECT_NE(msg.find("mul (x2): refused by the test"), std::string::npos) << msg;
  }
  EXPECT_EQ(b->compiles, 0);
}

TEST(Backend, RuntimeCompilesOnceForTheBackendItIsHanded) {
  auto b = std::make_shared<TestBackend>();
  Graph g = small_graph();
  CompileOptions o;
  o.backend = b;
  auto exe = Executable::compile(g, {}, o);
  EXPECT_EQ(&exe->backend(), b.get());
  EXPECT_EQ(b->compiles, 1);
  Session s(exe);
  Tensor x = random_tensor({2, 3}, DType::F32, 3);
  Tensor y1 = s.run({{"x", x}}).at("y");
  Tensor y2 = s.run({{"x", x}}).at("y");
  EXPECT_EQ(b->compiles, 1);  // runs reuse the per-node kernel table
  EXPECT_TRUE(all_close(y1, y2));
  EXPECT_TRUE(all_close(y1, testing::run_graph(g, {{"x", x}}).at("y")));
  // The default executable runs on the default (CPU) backend.
  EXPECT_EQ(Executable::compile(g, {})->backend().name(), "cpu");
}

}  // namespace
}  // namespace rlx
