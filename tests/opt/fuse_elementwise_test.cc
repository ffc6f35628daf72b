// The elementwise pass and fused_elementwise: the graph before and after,
// outputs bit-identical with and without the pass on both ISA paths (the
// fused kernel computes with the per-op kernels' span functions), the
// program text's grammar and its errors, autodiff and CoreML through the
// primitive spelling.
#include <gtest/gtest.h>

#include "backends/coreml/interp_support.h"
#include "ir/elementwise_program.h"
#include "opt/pass_test_util.h"
#include "opt/passes.h"
#include "rlx/autodiff.h"
#include "rlx/coreml.h"

namespace rlx {
namespace {
using testing::count_op;
using testing::random_tensor;
using testing::S;

const Node* only(const Graph& g, Op op) {
  const Node* found = nullptr;
  for (const Node& n : g.nodes())
    if (n.op == op) {
      if (found) return nullptr;
      found = &n;
    }
  return found;
}

// GPT-2's "gelu_new" written out: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), on
// [3, 700] (runs cut into 512-element chunks plus a tail).
struct GeluNew {
  Graph g;
  TensorMap inputs;
  GeluNew() {
    Builder b(g);
    // One node per statement: the order of a call's arguments is the compiler's choice, and
    // the program text below follows the graph's order.
    NodeId x = b.input("x", S({3, 700}));
    NodeId three = b.scalar(3);
    NodeId x3 = b.binary(Op::Pow, x, three);
    NodeId c = b.scalar(0.044715f);
    NodeId sum = b.add(x, b.mul(x3, c));
    NodeId k = b.scalar(0.7978845608f);
    NodeId t = b.unary(Op::Tanh, b.mul(sum, k));
    NodeId one = b.scalar(1);
    NodeId t1 = b.add(t, one);
    NodeId half = b.scalar(0.5f);
    NodeId xh = b.mul(x, half);
    g.add_output("y", b.mul(xh, t1));
    inputs = {{"x", random_tensor({3, 700}, DType::F32, 1, -4, 4)}};
  }
};

TEST(FuseElementwise, AWrittenOutActivationBecomesOneNode) {
  GeluNew m;
  const Graph g = testing::compiled_graph(m.g, {});
  ASSERT_EQ(count_op(g, Op::FusedElementwise), 1) << to_text(g);
  for (Op op : {Op::Pow, Op::Mul, Op::Add, Op::Tanh}) EXPECT_EQ(count_op(g, op), 0) << to_text(g);
  const Node& f = *only(g, Op::FusedElementwise);
  EXPECT_EQ(f.inputs.size(), 5u);  // x and four scalars (simplify made the cube x * x * x)
  EXPECT_EQ(f.attrs_as<FusedElementwiseAttrs>().program,
            "mul(x0, x0); mul(t0, x0); mul(t1, x1); add(x0, t2); mul(t3, x2); tanh(t4); "
            "add(t5, x3); mul(x0, x4); mul(t7, t6)");
  EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, {}, "elementwise"));
}

TEST(FuseElementwise, BitIdenticalOnEveryIsaPath) {
  GeluNew m;
  for (Isa isa : {Isa::portable, Isa::avx2, Isa::avx512}) {
    testing::IsaLimit limit(isa);
    EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, {}, "elementwise")) << isa_name(isa);
  }
}

// Broadcast operands of every kind: [2, 3, 50] with [3, 1], [50], a scalar and a bool mask
// [2, 1, 50]; a compare feeding where inside the region.
TEST(FuseElementwise, BroadcastingScalarsAndMasks) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3, 50}));
  NodeId col = b.input("col", S({3, 1}));
  NodeId row = b.input("row", S({50}));
  NodeId keep = b.input("keep", S({2, 1, 50}, DType::Bool));
  NodeId y = b.relu(b.add(b.mul(x, col), row));
  NodeId big = b.op(Op::Gt, {y, b.scalar(0.25f)});
  NodeId z = b.op(Op::Where, {big, b.unary(Op::Sigmoid, y), b.op(Op::Neg, {y})});
  g.add_output("out", b.op(Op::Where, {keep, z, b.scalar(-7)}));
  const Graph opt = testing::compiled_graph(g, {});
  ASSERT_EQ(count_op(opt, Op::FusedElementwise), 1) << to_text(opt);
  EXPECT_EQ(opt.size(), 7u) << to_text(opt);  // 4 inputs, 2 scalars, the region
  TensorMap in{{"x", random_tensor({2, 3, 50}, DType::F32, 1)},
               {"col", random_tensor({3, 1}, DType::F32, 2)},
               {"row", random_tensor({50}, DType::F32, 3)},
               {"keep", random_tensor({2, 1, 50}, DType::Bool, 4)}};
  for (Isa isa : {Isa::portable, Isa::avx2}) {
    testing::IsaLimit limit(isa);
    EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "elementwise")) << isa_name(isa);
  }
}

// A value read outside the region (a graph output, or another reader) stays its own node;
// the region computes from it.
TEST(FuseElementwise, ValuesReadElsewhereStayOutside) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({64}));
  NodeId t = b.mul(x, x);
  g.add_output("t", t);
  NodeId u = b.add(b.unary(Op::Exp, t), t);
  NodeId v = b.unary(Op::Neg, u);
  g.add_output("v", b.mul(v, u));  // u is read twice, both inside the region
  const Graph opt = testing::compiled_graph(g, {});
  ASSERT_EQ(count_op(opt, Op::FusedElementwise), 1) << to_text(opt);
  EXPECT_EQ(count_op(opt, Op::Mul), 1) << to_text(opt);  // t
  EXPECT_EQ(only(opt, Op::FusedElementwise)->attrs_as<FusedElementwiseAttrs>().program,
            "exp(x0); add(t0, x0); neg(t1); mul(t2, t1)");
  TensorMap in{{"x", random_tensor({64}, DType::F32, 1)}};
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "elementwise"));
}

// Ten inputs summed: regions keep to kMaxRegionInputs; a single node is never a region.
TEST(FuseElementwise, RegionsKeepToTheInputCap) {
  Graph g;
  Builder b(g);
  TensorMap in;
  NodeId acc = -1;
  for (int i = 0; i < 10; ++i) {
    const std::string name = "x" + std::to_string(i);
    NodeId x = b.input(name, S({4, 33}));
    in[name] = random_tensor({4, 33}, DType::F32, uint64_t(i));
    acc = acc < 0 ? x : b.add(acc, x);
  }
  g.add_output("sum", acc);
  g.add_output("single", b.relu(b.input("y", S({5}))));
  in["y"] = random_tensor({5}, DType::F32, 11);
  const Graph opt = testing::compiled_graph(g, {});
  ASSERT_GE(count_op(opt, Op::FusedElementwise), 1) << to_text(opt);
  for (const Node& n : opt.nodes())
    if (n.op == Op::FusedElementwise) {
      EXPECT_LE(n.inputs.size(), size_t(kMaxRegionInputs));
    }
  EXPECT_EQ(count_op(opt, Op::Relu), 1);
  EXPECT_TRUE(testing::same_with_and_without(g, in, {}, "elementwise"));
}

// Integer and f64 chains, and f16 graphs, are left alone.
TEST(FuseElementwise, OnlyF32Regions) {
  Graph g;
  Builder b(g);
  NodeId i = b.input("i", S({8}, DType::I32));
  NodeId d = b.input("d", S({8}, DType::F64));
  g.add_output("i2", b.add(b.mul(i, i), i));
  g.add_output("d2", b.add(b.mul(d, d), d));
  EXPECT_EQ(count_op(testing::compiled_graph(g, {}), Op::FusedElementwise), 0);
}

Node fused_node(Graph& g, const std::vector<Shape>& in, const std::string& program) {
  std::vector<NodeId> ids;
  for (size_t k = 0; k < in.size(); ++k) ids.push_back(g.input("x" + std::to_string(k), in[k]));
  return g.node(g.add(Op::FusedElementwise, ids, {{"program", program}}));
}

TEST(FuseElementwise, ProgramTextRoundTrips) {
  const std::string text =
      "clamp(x0, max=6, min=0); leaky_relu(t0, slope=0.125); div(t1, x1, rounding=floor); "
      "gt(t2, x1); where(t3, t2, x0); softplus(t4, beta=2, threshold=10.5)";
  const EwProgram p = parse_program(text, {DType::F32, DType::F32});
  EXPECT_EQ(format_program(p), text);
  ASSERT_EQ(p.code.size(), 6u);
  EXPECT_EQ(std::get<ClampAttrs>(p.code[0].attrs).max, 6);
  EXPECT_EQ(std::get<LeakyReluAttrs>(p.code[1].attrs).slope, 0.125);
  EXPECT_TRUE(p.is_mask[2 + 3]);
  // Doubles keep every bit through the text.
  const EwProgram q = parse_program("elu(x0, alpha=0.1)", {DType::F32});
  EXPECT_EQ(parse_program(format_program(q), {DType::F32}).code[0].attrs, q.code[0].attrs);
}

TEST(FuseElementwise, BadProgramsAreClearErrors) {
  const std::vector<DType> f{DType::F32, DType::F32};
  auto error_of = [&](const std::string& text, std::vector<DType> types) {
    try {
      parse_program(text, types);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("frobnicate(x0)", f).find("frobnicate"), std::string::npos);
  EXPECT_NE(error_of("matmul(x0, x1)", f).find("cannot be part of an element-wise region"),
            std::string::npos);
  EXPECT_NE(error_of("add(x0, t0)", f).find("earlier instruction"), std::string::npos);
  EXPECT_NE(error_of("add(x0, x2)", f).find("names input 2"), std::string::npos);
  EXPECT_NE(error_of("add(x0)", f).find("takes 2 operands"), std::string::npos);
  EXPECT_NE(error_of("add(x0, y1)", f).find("neither"), std::string::npos);
  EXPECT_NE(error_of("lt(x0, x1)", f).find("gives a mask"), std::string::npos);
  EXPECT_NE(error_of("where(x0, x0, x1)", f).find("must be a mask"), std::string::npos);
  EXPECT_NE(error_of("add(x0, x1", f).find("expected op(operands"), std::string::npos);
  EXPECT_NE(error_of("", f).find("expected op(operands"), std::string::npos);
  EXPECT_NE(error_of("relu(x0, slope=2)", f).find("slope"), std::string::npos);
  EXPECT_NE(error_of("softplus(x0, beta=0)", f).find("non-zero"), std::string::npos);
  EXPECT_NE(error_of("relu(x0)", {DType::I32}).find("i32"), std::string::npos);
  std::string long_program = "relu(x0)";
  for (int i = 0; i < kMaxRegionCode; ++i) long_program += "; relu(t" + std::to_string(i) + ")";
  EXPECT_NE(error_of(long_program, f).find("at most"), std::string::npos);
  EXPECT_NE(error_of("relu(x0)", std::vector<DType>(9, DType::F32)).find("1 to 8"),
            std::string::npos);
  // Through the graph: the node is named.
  Graph g;
  try {
    fused_node(g, {S({4})}, "relu(x1)");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fused_elementwise"), std::string::npos) << e.what();
  }
}

// A value no advancing operand feeds is computed once; an output that reads only a scalar
// is filled.
TEST(FuseElementwise, ScalarValuesAndAScalarResult) {
  Graph g;
  const Node n = fused_node(g, {S({1000}), S({})}, "exp(x1); mul(x0, t0)");
  g.add_output("y", n.id);
  Graph h;
  const Node m = fused_node(h, {S({}), S({3, 5})}, "exp(x0); neg(t0)");
  h.add_output("y", m.id);
  EXPECT_EQ(h.node(m.id).shape.dims, (std::vector<Dim>{Dim(3), Dim(5)}));
  const Tensor x = random_tensor({1000}, DType::F32, 1), s = random_tensor({}, DType::F32, 2);
  const Tensor y = testing::run_graph(g, {{"x0", x}, {"x1", s}}).at("y");
  const Tensor z =
      testing::run_graph(h, {{"x0", s}, {"x1", random_tensor({3, 5}, DType::F32, 3)}}).at("y");
  const float e = std::exp(s.data<float>()[0]);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_NEAR(y.data<float>()[i], x.data<float>()[i] * e, 1e-6);
  for (int64_t i = 0; i < 15; ++i) ASSERT_NEAR(z.data<float>()[i], -e, 1e-6);
}

// vjp of a fused node = vjp of the ops it was fused from.
TEST(FuseElementwise, GradientThroughThePrimitives) {
  GeluNew m;
  const Graph fused = opt::fuse_elementwise(m.g);
  ASSERT_EQ(count_op(fused, Op::FusedElementwise), 1);
  auto grad_of = [&](Graph g) {
    const NodeId x = g.inputs()[0], y = g.outputs()[0].node;
    const NodeId dy = g.input("dy", g.node(y).shape);
    g.add_output("dx", vjp(g, {y}, {dy}, {x})[0]);
    TensorMap in = m.inputs;
    in["dy"] = random_tensor({3, 700}, DType::F32, 9);
    return testing::run_graph(g, in, {}, 0).at("dx");
  };
  EXPECT_TRUE(testing::all_equal(grad_of(fused), grad_of(m.g)));
}

// A region that reads both x and tanh(x) (computed outside it): the rule's expansion treats its
// inputs as independent, so the path through tanh is counted once, by tanh's own rule.
TEST(FuseElementwise, GradientWhenOneInputDependsOnAnother) {
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", S({4, 5}));
  const NodeId t = b.unary(Op::Tanh, x);
  g.add_output("y", b.op(Op::FusedElementwise, {x, t}, {{"program", std::string("mul(x0, x1)")}}));
  Graph ref;
  Builder r(ref);
  const NodeId rx = r.input("x", S({4, 5}));
  ref.add_output("y", r.mul(rx, r.unary(Op::Tanh, rx)));
  auto grad_of = [](Graph h) {
    const NodeId dy = h.input("dy", S({4, 5}));
    h.add_output("dx", vjp(h, {h.outputs()[0].node}, {dy}, {h.inputs()[0]})[0]);
    const TensorMap in{{"x", random_tensor({4, 5}, DType::F32, 3)},
                       {"dy", random_tensor({4, 5}, DType::F32, 4)}};
    return testing::run_graph(h, in, {}, 0).at("dx");
  };
  EXPECT_TRUE(testing::all_close(grad_of(g), grad_of(ref), 1e-6, 1e-6));
}

TEST(FuseElementwise, CoremlLowersThePrimitives) {
  GeluNew m;
  const Graph fused = opt::fuse_elementwise(m.g);
  const Tensor want = testing::run_graph(m.g, m.inputs, {}, 0).at("y");
  const TensorMap got = coreml_test::export_and_interpret(fused, {}, m.inputs, {});
  EXPECT_TRUE(testing::all_close(got.at("y"), want, 1e-6, 1e-5));
}

}  // namespace
}  // namespace rlx
