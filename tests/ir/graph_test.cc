// The IR: builder, shape inference per op family (incl. symbolic dims),
// verifier errors, the text and dot printers, and JSON (de)serialization.
#include <gtest/gtest.h>

#include "support/testing.h"

namespace rlx {
namespace {
using testing::error_of;

using testing::all_equal;
using testing::S;
using testing::sym;

// Shape of one `op` node over inputs of the given shapes.
Shape infer(Op op, const std::vector<Shape>& ins, Attrs a = {}) {
  Graph g;
  std::vector<NodeId> ids;
  for (size_t i = 0; i < ins.size(); ++i) ids.push_back(g.input("x" + std::to_string(i), ins[i]));
  return g.node(g.add(op, ids, std::move(a))).shape;
}
// The shapes of a multi-output node's outputs.
std::vector<Shape> infer_all(Op op, const std::vector<Shape>& ins, Attrs a = {}) {
  Graph g;
  std::vector<NodeId> ids;
  for (size_t i = 0; i < ins.size(); ++i) ids.push_back(g.input("x" + std::to_string(i), ins[i]));
  return g.node(g.add(op, ids, std::move(a))).results;
}

TEST(Graph, BuilderRecordsNodesNamesAndOrigins) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("batch"), 4}));
  NodeId w = b.param("fc.weight", S({8, 4}));
  b.set_origin("model.fc");
  NodeId y = b.linear(x, w);
  NodeId r = b.relu(y);
  g.add_output("out", r);
  EXPECT_EQ(g.size(), 4u);  // x, w, matmul (reading w transposed in place), relu
  EXPECT_TRUE(g.node(y).attrs_as<MatMulAttrs>().transpose_b);
  EXPECT_EQ(g.node(r).shape, S({sym("batch"), 8}));
  EXPECT_EQ(g.node(y).op, Op::MatMul);
  EXPECT_EQ(g.node(y).origin, "model.fc");
  EXPECT_EQ(g.node(x).origin, "");
  EXPECT_EQ(g.inputs(), std::vector<NodeId>{x});
  EXPECT_EQ(g.params(), std::vector<NodeId>{w});
  EXPECT_EQ(g.outputs().size(), 1u);
  EXPECT_NO_THROW(g.verify());
  EXPECT_NE(error_of([&] { g.input("x", S({1})); }).find("duplicate graph input 'x'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add_output("out", x); }).find("duplicate graph output"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add_output("o2", 99); }), "");
  NodeId s = b.scalar(2.0f, DType::F16);
  EXPECT_EQ(g.node(s).shape, S({}, DType::F16));
  EXPECT_EQ(g.node(b.full({2, 3}, 1.5, DType::I32)).shape, S({2, 3}, DType::I32));
  EXPECT_EQ(g.node(b.arange(5)).shape, S({5}, DType::I64));
}

TEST(ShapeInfer, ElementwiseBroadcastAndSymbols) {
  EXPECT_EQ(infer(Op::Relu, {S({sym("b"), 3})}), S({sym("b"), 3}));
  EXPECT_EQ(infer(Op::Add, {S({sym("b"), 1, 4}), S({3, 1})}), S({sym("b"), 3, 4}));
  EXPECT_EQ(infer(Op::Mul, {S({sym("b")}), S({sym("b")})}), S({sym("b")}));
  // Two different symbols: the result is unknown until specialization.
  EXPECT_EQ(infer(Op::Sub, {S({sym("a")}), S({sym("b")})}), S({sym("?")}));
  EXPECT_EQ(infer(Op::Add, {S({sym("a")}), S({5})}), S({5}));
  EXPECT_EQ(infer(Op::Add, {S({}), S({2, 3})}), S({2, 3}));
  EXPECT_EQ(infer(Op::Lt, {S({2, 3}), S({3})}), S({2, 3}, DType::Bool));
  EXPECT_EQ(infer(Op::LogicalAnd, {S({2, 1}, DType::Bool), S({4}, DType::Bool)}),
            S({2, 4}, DType::Bool));
  EXPECT_EQ(infer(Op::LogicalNot, {S({3}, DType::I32)}), S({3}, DType::Bool));
  EXPECT_EQ(infer(Op::Where, {S({2, 1}, DType::Bool), S({3}), S({1})}), S({2, 3}));
  EXPECT_EQ(infer(Op::Cast, {S({2})}, {{"dtype", std::string("bf16")}}), S({2}, DType::BF16));
  EXPECT_NE(error_of([] {
              infer(Op::Add, {S({2, 3}), S({4})});
            }).find("cannot broadcast dims 3 and 4"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              infer(Op::Add, {S({2}), S({2}, DType::F16)});
            }).find("dtype mismatch"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              infer(Op::Where, {S({2}), S({2}), S({2})});
            }).find("must be bool"),
            std::string::npos);
  EXPECT_NE(error_of([] { infer(Op::Cast, {S({2})}, {{"dtype", std::string("q4")}}); }), "");
  EXPECT_NE(error_of([] { infer(Op::Cast, {S({2})}); }).find("missing attribute 'dtype'"),
            std::string::npos);
}

TEST(ShapeInfer, Reductions) {
  Shape x = S({2, sym("s"), 4});
  EXPECT_EQ(infer(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{-1}}}), S({2, sym("s")}));
  EXPECT_EQ(
      infer(Op::ReduceMax, {x}, {{"axes", std::vector<int64_t>{0, 2}}, {"keepdims", int64_t(1)}}),
      S({1, sym("s"), 1}));
  EXPECT_EQ(infer(Op::ReduceMean, {x}), S({}));  // no axes: all
  EXPECT_EQ(infer(Op::ArgMax, {x}, {{"axis", int64_t(1)}}), S({2, 4}, DType::I64));
  EXPECT_EQ(infer(Op::Softmax, {x}, {{"axis", int64_t(-1)}}), x);
  EXPECT_NE(error_of([&] {
              infer(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{1, -2}}});
            }).find("listed twice"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer(Op::ReduceSum, {x}, {{"axes", std::vector<int64_t>{3}}});
            }).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              infer(Op::ArgMin, {x}, {{"axis", 1.5}});
            }).find("expected int"),
            std::string::npos);
}

TEST(ShapeInfer, Movement) {
  EXPECT_EQ(infer(Op::Reshape, {S({2, 3, 4})}, {{"shape", std::vector<int64_t>{-1, 4}}}),
            S({6, 4}));
  EXPECT_EQ(infer(Op::Reshape, {S({sym("b"), 4})}, {{"shape", std::vector<int64_t>{-1, 2}}}),
            S({sym("?"), 2}));
  // The -1 holding exactly the one symbolic dim keeps its name (a flatten);
  // with two symbolic dims it cannot.
  EXPECT_EQ(
      infer(Op::Reshape, {S({sym("b"), 512, 1, 1})}, {{"shape", std::vector<int64_t>{-1, 512}}}),
      S({sym("b"), 512}));
  EXPECT_EQ(infer(Op::Reshape, {S({2, sym("s"), 3})}, {{"shape", std::vector<int64_t>{6, -1}}}),
            S({6, sym("s")}));
  EXPECT_EQ(
      infer(Op::Reshape, {S({sym("b"), sym("s"), 4})}, {{"shape", std::vector<int64_t>{-1, 4}}}),
      S({sym("?"), 4}));
  EXPECT_NE(error_of([] {
              infer(Op::Reshape, {S({2, 3})}, {{"shape", std::vector<int64_t>{4, -1}}});
            }).find("cannot reshape"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              infer(Op::Reshape, {S({6})}, {{"shape", std::vector<int64_t>{-1, -1}}});
            }).find("more than one -1"),
            std::string::npos);
  EXPECT_EQ(infer(Op::Transpose, {S({2, sym("s"), 4})}, {{"perm", std::vector<int64_t>{2, 0, -2}}}),
            S({4, 2, sym("s")}));
  EXPECT_NE(error_of([] {
              infer(Op::Transpose, {S({2, 3})}, {{"perm", std::vector<int64_t>{0, 0}}});
            }).find("repeated"),
            std::string::npos);
  // Python slicing semantics.
  auto slice = [](int64_t len, Attrs a) {
    return infer(Op::Slice, {S({len})}, std::move(a)).dims[0];
  };
  EXPECT_EQ(slice(10, {{"axis", int64_t(0)}, {"start", int64_t(-3)}, {"end", int64_t(100)}}),
            Dim(3));
  EXPECT_EQ(slice(10, {{"axis", int64_t(0)}, {"start", int64_t(1)}, {"step", int64_t(3)}}), Dim(3));
  EXPECT_EQ(slice(10, {{"axis", int64_t(0)}, {"step", int64_t(-1)}}), Dim(10));
  EXPECT_EQ(slice(10, {{"axis", int64_t(0)},
                       {"start", int64_t(8)},
                       {"end", int64_t(1)},
                       {"step", int64_t(-2)}}),
            Dim(4));
  EXPECT_EQ(slice(10, {{"axis", int64_t(0)}, {"start", int64_t(5)}, {"end", int64_t(2)}}), Dim(0));
  EXPECT_EQ(infer(Op::Slice, {S({sym("s"), 4})}, {{"axis", int64_t(0)}, {"end", int64_t(2)}}),
            S({sym("?"), 4}));
  EXPECT_EQ(infer(Op::Concat, {S({2, 3}), S({2, 5}), S({2, 1})}, {{"axis", int64_t(-1)}}),
            S({2, 9}));
  EXPECT_EQ(infer(Op::Concat, {S({sym("a"), 3}), S({2, 3})}, {{"axis", int64_t(0)}}),
            S({sym("?"), 3}));
  EXPECT_NE(error_of([] {
              infer(Op::Concat, {S({2, 3}), S({3, 3})}, {{"axis", int64_t(1)}});
            }).find("dim 0 differs"),
            std::string::npos);
  EXPECT_EQ(infer(Op::Expand, {S({3, 1})}, {{"shape", std::vector<int64_t>{2, -1, 4}}}),
            S({2, 3, 4}));
  EXPECT_NE(error_of([] {
              infer(Op::Expand, {S({3, 2})}, {{"shape", std::vector<int64_t>{3, 4}}});
            }),
            "");
  EXPECT_EQ(infer(Op::Pad, {S({2, 3})}, {{"pads", std::vector<int64_t>{1, 0, 2, 3}}}), S({5, 6}));
  EXPECT_NE(error_of([] {
              infer(Op::Pad, {S({2, 3})},
                    {{"pads", std::vector<int64_t>{2, 0, 0, 0}}, {"mode", std::string("reflect")}});
            }).find("reflect"),
            std::string::npos);
  EXPECT_EQ(infer(Op::Tile, {S({2, 3})}, {{"repeats", std::vector<int64_t>{3, 1}}}), S({6, 3}));
  EXPECT_EQ(infer(Op::Flip, {S({2, 3})}, {{"axes", std::vector<int64_t>{0}}}), S({2, 3}));
}

TEST(ShapeInfer, IndexingAndLinearAlgebra) {
  Shape idx = S({sym("n"), 2}, DType::I64);
  EXPECT_EQ(infer(Op::Gather, {S({5, 6, 7}), idx}, {{"axis", int64_t(1)}}), S({5, sym("n"), 2, 7}));
  EXPECT_NE(error_of([] {
              infer(Op::Gather, {S({5}), S({2})});
            }).find("i32 or i64"),
            std::string::npos);
  EXPECT_EQ(infer(Op::GatherElements, {S({3, 4}), S({3, 2}, DType::I32)}, {{"axis", int64_t(1)}}),
            S({3, 2}));
  EXPECT_EQ(infer(Op::GatherND, {S({4, 5, 6}), S({3, 2}, DType::I64)}), S({3, 6}));
  EXPECT_EQ(infer_all(Op::TopK, {S({4, 10})}, {{"k", int64_t(3)}}),
            (std::vector<Shape>{S({4, 3}), S({4, 3}, DType::I64)}));
  EXPECT_EQ(infer_all(Op::Split, {S({sym("b"), 10})},
                      {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{3, 7}}}),
            (std::vector<Shape>{S({sym("b"), 3}), S({sym("b"), 7})}));
  EXPECT_NE(error_of([] {
              infer_all(Op::Split, {S({4, 10})},
                        {{"axis", int64_t(1)}, {"sizes", std::vector<int64_t>{3, 6}}});
            }).find("sum to 9"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              infer(Op::TopK, {S({4, 10})}, {{"k", int64_t(11)}});
            }).find("k=11"),
            std::string::npos);
  // A 0-d x: an error, not a read past its (empty) dims.
  EXPECT_NE(error_of([] {
              infer(Op::TopK, {S({})}, {{"k", int64_t(1)}});
            }).find("rank >= 1"),
            std::string::npos);
  EXPECT_EQ(infer(Op::OneHot, {S({3}, DType::I64)},
                  {{"depth", int64_t(5)}, {"dtype", std::string("f32")}}),
            S({3, 5}));
  EXPECT_EQ(infer(Op::Embedding, {S({100, 16}), S({sym("b"), sym("s")}, DType::I32)}),
            S({sym("b"), sym("s"), 16}));
  // matmul: batch broadcast, 1-d operands like NumPy, symbolic dims.
  EXPECT_EQ(infer(Op::MatMul, {S({2, 1, 3, 4}), S({5, 4, 6})}), S({2, 5, 3, 6}));
  EXPECT_EQ(infer(Op::MatMul, {S({4}), S({4, 6})}), S({6}));
  EXPECT_EQ(infer(Op::MatMul, {S({3, 4}), S({4})}), S({3}));
  EXPECT_EQ(infer(Op::MatMul, {S({4}), S({4})}), S({}));
  EXPECT_EQ(infer(Op::MatMul, {S({sym("b"), sym("s"), 4}), S({4, 8})}), S({sym("b"), sym("s"), 8}));
  EXPECT_NE(error_of([] {
              infer(Op::MatMul, {S({2, 3}), S({4, 5})});
            }).find("inner dims differ"),
            std::string::npos);
}

TEST(ShapeInfer, NeuralNetwork) {
  Shape x = S({sym("n"), 3, 32, 32});
  EXPECT_EQ(
      infer(Op::Conv, {x, S({8, 3, 3, 3}), S({8})},
            {{"stride", std::vector<int64_t>{2, 2}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}}),
      S({sym("n"), 8, 16, 16}));
  EXPECT_EQ(infer(Op::Conv, {S({1, 4, 10}), S({6, 2, 3})}, {{"groups", int64_t(2)}}), S({1, 6, 8}));
  EXPECT_NE(error_of([&] {
              infer(Op::Conv, {x, S({8, 4, 3, 3})});
            }).find("channels"),
            std::string::npos);
  EXPECT_EQ(infer(Op::ConvTranspose, {S({1, 4, 5, 5}), S({4, 2, 3, 3})},
                  {{"stride", std::vector<int64_t>{2, 2}}}),
            S({1, 2, 11, 11}));
  EXPECT_EQ(infer(Op::MaxPool2d, {x}, {{"kernel", std::vector<int64_t>{2, 2}}}),
            S({sym("n"), 3, 16, 16}));
  EXPECT_EQ(infer(Op::AvgPool2d, {S({1, 1, 5, 5})},
                  {{"kernel", std::vector<int64_t>{2, 2}}, {"ceil_mode", int64_t(1)}}),
            S({1, 1, 3, 3}));
  EXPECT_EQ(infer(Op::AdaptiveAvgPool2d, {x}, {{"output", std::vector<int64_t>{1, 1}}}),
            S({sym("n"), 3, 1, 1}));
  EXPECT_EQ(infer(Op::LayerNorm, {S({2, 8}), S({8}), S({8})}, {{"eps", 1e-5}}), S({2, 8}));
  Shape q = S({2, 8, sym("s"), 64}), kv = S({2, 2, sym("t"), 64});
  EXPECT_EQ(infer(Op::Attention, {q, kv, kv}, {{"mask", std::string("causal")}}), q);
  EXPECT_NE(error_of([&] {
              infer(Op::Attention, {q, S({2, 3, 5, 64}), S({2, 3, 5, 64})});
            }).find("not a multiple"),
            std::string::npos);
  EXPECT_EQ(infer(Op::Rope, {q, S({sym("s")}, DType::I64)}), q);
  EXPECT_EQ(infer(Op::Resize, {x}, {{"size", std::vector<int64_t>{64, 48}}}),
            S({sym("n"), 3, 64, 48}));
  EXPECT_EQ(infer(Op::GridSample, {x, S({sym("n"), 7, 9, 2})}), S({sym("n"), 3, 7, 9}));
}

TEST(Graph, ErrorsNameNodeOpShapesAndOrigin) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, 3}));
  NodeId y = b.input("y", S({4, 5}));
  b.set_origin("encoder.layer0");
  std::string msg = error_of([&] { b.matmul(x, y); });
  EXPECT_NE(msg.find("node %2 (matmul)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[2,3] f32, [4,5] f32"), std::string::npos) << msg;
  EXPECT_NE(msg.find("encoder.layer0"), std::string::npos) << msg;
  EXPECT_EQ(g.size(), 2u);  // the failed node is not kept
  // Arity and input ids.
  EXPECT_NE(error_of([&] {
              g.add(Op::Relu, {x, y});
            }).find("takes 1 inputs, got 2"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              g.add(Op::Concat, {}, {{"axis", int64_t(0)}});
            }).find("1 or more"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(Op::Relu, {7}); }).find("input %7 is not an earlier node"),
            std::string::npos);
  // verify() re-checks recorded shapes and constants.
  NodeId r = b.relu(x);
  g.add_output("r", r);
  g.node(r).shape = S({3, 2});
  msg = error_of([&] { g.verify(); });
  EXPECT_NE(msg.find("verify: node %2 (relu)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("recorded shape [3,2] f32 disagrees with inferred [2,3] f32"),
            std::string::npos)
      << msg;
  g.node(r).shape = S({2, 3});
  EXPECT_NO_THROW(g.verify());
  NodeId c = g.constant(Tensor({2}, DType::F32));
  g.node(c).value = Tensor({3}, DType::F32);
  EXPECT_NE(error_of([&] { g.verify(); }).find("constant data does not match"), std::string::npos);
}

TEST(Graph, PrinterAndDot) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({2, sym("k")}));
  NodeId w = b.param("w", S({sym("k"), 64}));
  b.set_origin("fc1");
  NodeId m = b.matmul(x, w);
  b.set_origin("");
  NodeId s = b.softmax(m, -1);
  g.add_output("probs", s);
  std::string text = to_text(g);
  EXPECT_EQ(text,
            "%0 = input \"x\" : [2,k] f32\n"
            "%1 = param \"w\" : [k,64] f32\n"
            "%2 = matmul %0, %1 : [2,64] f32   # fc1\n"
            "%3 = softmax %2 : [2,64] f32\n"
            "output \"probs\" = %3\n");
  std::string dot = to_dot(g);
  EXPECT_EQ(dot.rfind("digraph rlx {", 0), 0u);
  EXPECT_NE(dot.find("n0 -> n2;"), std::string::npos);
  EXPECT_NE(dot.find("n1 -> n2;"), std::string::npos);
  EXPECT_NE(dot.find("n2 -> n3;"), std::string::npos);
  EXPECT_NE(dot.find("label=\"%2 matmul\\n[2,64] f32\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("n3 -> out_3;"), std::string::npos);
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
}

Graph every_kind_graph() {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", S({sym("batch"), 4}));
  b.param("p", S({4}, DType::BF16));
  b.set_origin("blk.0");
  // int list, enum, float
  NodeId y = b.op(Op::Pad, {x},
                  {{"pads", std::vector<int64_t>{0, 1, 0, 1}},
                   {"mode", std::string("constant")},
                   {"value", 0.5}},
                  "padded");
  g.add_output("y", y);
  // float list with an extreme value, bools, a float given as an int
  NodeId img = b.input("img", S({1, 2, 4, 4}));
  g.add_output("r", b.op(Op::Resize, {img},
                         {{"size", std::vector<int64_t>{6, 6}},
                          {"mode", std::string("bilinear")},
                          {"align_corners", true},
                          {"scales", std::vector<double>{1.5, 1e-300}}}));
  // non-finite floats, optional ints, dtype, op name, string
  g.add_output("c", b.op(Op::Clamp, {x}, {{"min", -INFINITY}, {"max", 1}}));
  g.add_output("s", b.op(Op::Slice, {x}, {{"axis", 1}, {"end", -1}}));
  g.add_output("k", b.op(Op::Cast, {x}, {{"dtype", std::string("f16")}}));
  g.add_output("ag",
               b.op(Op::ActivationGrad, {x, x}, {{"kind", std::string("elu")}, {"alpha", 0.5}}));
  for (int i = 0; i < kNumDTypes; ++i) {
    DType t = DType(i);
    NodeId c = g.constant(testing::random_tensor({2, 3}, t, uint64_t(i), -50, 50),
                          "c_" + std::string(dtype_name(t)));
    g.add_output("c" + std::to_string(i), c);
  }
  g.add_output("scalar", g.constant(Tensor::scalar_f32(-0.0f)));
  g.add_output("empty", g.constant(Tensor({0, 5}, DType::I64)));
  return g;
}

TEST(GraphJson, RoundTripsEveryAttrKindConstantDtypeAndSymbol) {
  Graph g = every_kind_graph();
  std::string js = to_json(g);
  Graph back = from_json(js, "rt.json");
  EXPECT_EQ(to_json(back), js);
  EXPECT_EQ(to_text(back), to_text(g));
  ASSERT_EQ(back.size(), g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const Node &a = g.node(NodeId(i)), &c = back.node(NodeId(i));
    EXPECT_EQ(a.op, c.op);
    EXPECT_EQ(a.inputs, c.inputs);
    EXPECT_EQ(a.shape, c.shape) << a.label();
    EXPECT_EQ(a.name, c.name);
    EXPECT_EQ(a.origin, c.origin);
    EXPECT_TRUE(a.attrs == c.attrs)
        << attrs_to_map(a.attrs).str() << " vs " << attrs_to_map(c.attrs).str();
    if (a.op == Op::Constant) {
      EXPECT_TRUE(all_equal(c.value, a.value)) << a.label();
    }
  }
  const auto& pad = back.node(2).attrs_as<PadAttrs>();
  EXPECT_EQ(pad.mode, PadMode::constant);
  EXPECT_EQ(pad.value, 0.5);
  const auto& rs = back.node(4).attrs_as<ResizeAttrs>();
  EXPECT_TRUE(rs.align_corners);
  EXPECT_EQ(rs.mode, ResizeMode::bilinear);
  EXPECT_EQ(rs.scales[1], 1e-300);
  EXPECT_EQ(back.node(5).attrs_as<ClampAttrs>().min, -INFINITY);  // JSON has no inf: a string
  EXPECT_EQ(back.node(5).attrs_as<ClampAttrs>().max, 1.0);
  EXPECT_EQ(back.node(6).attrs_as<SliceAttrs>().end, -1);
  EXPECT_FALSE(back.node(6).attrs_as<SliceAttrs>().start.has_value());
  EXPECT_EQ(back.node(7).attrs_as<CastAttrs>().dtype, DType::F16);
  EXPECT_EQ(back.node(8).attrs_as<ActivationGradAttrs>().kind, Op::Elu);
  EXPECT_EQ(back.node(8).attrs_as<ActivationGradAttrs>().alpha, 0.5);
  EXPECT_EQ(
      std::get<EluAttrs>(activation_attrs(back.node(8).attrs_as<ActivationGradAttrs>())).alpha,
      0.5);
  EXPECT_EQ(back.node(0).shape.dims[0].sym, "batch");
  Graph nan_graph;
  NodeId xn = nan_graph.input("x", S({2}));
  nan_graph.add_output("y", nan_graph.add(Op::Clamp, {xn}, {{"min", NAN}, {"max", INFINITY}}));
  Graph nan_back = from_json(to_json(nan_graph));
  EXPECT_TRUE(std::isnan(nan_back.node(1).attrs_as<ClampAttrs>().min));
  EXPECT_EQ(nan_back.node(1).attrs_as<ClampAttrs>().max, INFINITY);
  ASSERT_EQ(back.outputs().size(), g.outputs().size());
  EXPECT_EQ(back.outputs()[0].name, "y");
}

// Graphs written by version 1 (tagged attribute values, flags as ints, true
// division spelt rounding "") still load.
TEST(GraphJson, LoadsVersionOne) {
  const std::string v1 = R"({"format": "rlx-graph", "version": 1, "nodes": [
    {"op": "input", "name": "x", "shape": [2, 3], "dtype": "f32"},
    {"op": "reduce_sum", "inputs": [0], "shape": [2, 1], "dtype": "f32",
     "attrs": {"axes": {"ints": [1]}, "keepdims": {"i": 1}}},
    {"op": "div", "inputs": [1, 1], "shape": [2, 1], "dtype": "f32",
     "attrs": {"rounding": {"s": ""}}},
    {"op": "clamp", "inputs": [2], "shape": [2, 1], "dtype": "f32",
     "attrs": {"min": {"f": "-inf"}, "max": {"i": 6}}}],
    "outputs": [{"name": "y", "node": 3}]})";
  Graph g = from_json(v1, "old.json");
  EXPECT_TRUE(g.node(1).attrs_as<ReduceAttrs>().keepdims);
  EXPECT_EQ(g.node(1).attrs_as<ReduceAttrs>().axes, std::vector<int64_t>{1});
  EXPECT_EQ(g.node(2).attrs_as<DivAttrs>().rounding, DivRounding::none);
  EXPECT_EQ(g.node(3).attrs_as<ClampAttrs>().min, -INFINITY);
  EXPECT_EQ(g.node(3).attrs_as<ClampAttrs>().max, 6.0);
  // Written back as the current version with plain values.
  const std::string v2 = to_json(g);
  EXPECT_NE(v2.find("\"version\": 3"), std::string::npos) << v2;
  EXPECT_NE(v2.find("\"keepdims\": true"), std::string::npos) << v2;
  EXPECT_EQ(to_json(from_json(v2)), v2);
}

TEST(GraphJson, MalformedDocumentsAreErrors) {
  const std::string good = to_json(every_kind_graph());
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return s;
  };
  auto small = [](const std::string& nodes, const std::string& outputs = "[]") {
    return "{\"format\":\"rlx-graph\",\"version\":2,\"nodes\":" + nodes +
           ",\"outputs\":" + outputs + "}";
  };
  const std::string in0 = "{\"op\":\"input\",\"name\":\"x\",\"shape\":[2],\"dtype\":\"f32\"}";
  struct Case {
    const char* what;
    std::string text;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"not JSON", "{\"nodes\": [", "invalid JSON"},
      {"not a graph", "[1, 2]", "not an rlx graph"},
      {"wrong version", edit("\"version\": 3", "\"version\": 7"), "unsupported graph version 7"},
      {"unknown op", edit("\"op\": \"pad\"", "\"op\": \"frobnicate\""), "unknown op 'frobnicate'"},
      {"forward input",
       small("[" + in0 + ",{\"op\":\"relu\",\"inputs\":[2],\"shape\":[2],\"dtype\":\"f32\"}]"),
       "not an earlier node"},
      {"negative input",
       small("[" + in0 + ",{\"op\":\"relu\",\"inputs\":[-1],\"shape\":[2],\"dtype\":\"f32\"}]"),
       "not an earlier node"},
      {"input id beyond int32",
       small("[" + in0 +
             ",{\"op\":\"relu\",\"inputs\":[4294967296],\"shape\":[2],\"dtype\":\"f32\"}]"),
       "node 1"},
      {"input id not a number",
       small("[" + in0 + ",{\"op\":\"relu\",\"inputs\":[\"a\"],\"shape\":[2],\"dtype\":\"f32\"}]"),
       "node 1"},
      {"wrong arity",
       small("[" + in0 + ",{\"op\":\"add\",\"inputs\":[0],\"shape\":[2],\"dtype\":\"f32\"}]"),
       "takes 2 inputs"},
      {"shape disagrees",
       small("[" + in0 + ",{\"op\":\"relu\",\"inputs\":[0],\"shape\":[3],\"dtype\":\"f32\"}]"),
       "disagrees"},
      {"constant byte count",
       small("[{\"op\":\"constant\",\"shape\":[2],\"dtype\":\"f32\",\"data\":\"AAAA\"}]"),
       "constant data has 3 bytes, shape [2] f32 needs 8"},
      {"constant huge shape (no allocation)",
       small("[{\"op\":\"constant\",\"shape\":[1099511627776,1024],\"dtype\":\"f32\",\"data\":\"\"}"
             "]"),
       "needs 4503599627370496"},
      {"constant shape overflowing numel",
       small("[{\"op\":\"constant\",\"shape\":[4611686018427387906,4],\"dtype\":\"u8\",\"data\":"
             "\"AAAAAAAAAAA=\"}]"),
       "too large"},
      {"empty constant with huge dims",
       small("[{\"op\":\"constant\",\"shape\":[4611686018427387904,4611686018427387904,0],"
             "\"dtype\":\"u8\",\"data\":\"\"}]"),
       "too large"},
      {"constant without data", small("[{\"op\":\"constant\",\"shape\":[2],\"dtype\":\"f32\"}]"),
       "node 0"},
      {"constant bad base64",
       small("[{\"op\":\"constant\",\"shape\":[1],\"dtype\":\"f32\",\"data\":\"AA*A\"}]"),
       "base64"},
      {"constant misplaced padding",
       small("[{\"op\":\"constant\",\"shape\":[2],\"dtype\":\"u8\",\"data\":\"A=AA\"}]"), "base64"},
      {"constant symbolic",
       small("[{\"op\":\"constant\",\"shape\":[\"n\"],\"dtype\":\"f32\",\"data\":\"\"}]"),
       "symbolic"},
      {"bad dtype", small("[{\"op\":\"input\",\"name\":\"x\",\"shape\":[2],\"dtype\":\"f33\"}]"),
       "unknown dtype 'f33'"},
      {"negative dim",
       small("[{\"op\":\"input\",\"name\":\"x\",\"shape\":[-2],\"dtype\":\"f32\"}]"),
       "negative dim"},
      {"misspelt attr", edit("\"value\": 0.5", "\"valeu\": 0.5"),
       "pad: unknown attribute 'valeu' (pad takes pads: int list (required), mode: "
       "constant|reflect|replicate = \"constant\", value: float = 0)"},
      {"attr of the wrong kind", edit("\"value\": 0.5", "\"value\": [1]"),
       "pad: attribute 'value' is [1], expected float"},
      {"bad enum value", edit("\"mode\": \"constant\"", "\"mode\": \"wrap\""),
       "unknown PadMode 'wrap' (valid: constant, reflect, replicate)"},
      {"missing required attr", edit("\"pads\"", "\"pods\""), "pad: missing attribute 'pads'"},
      {"attr object", edit("\"value\": 0.5", "\"value\": {\"f\": 0.5}"), "attribute must be"},
      {"output to missing node", small("[" + in0 + "]", "[{\"name\":\"y\",\"node\":5}]"),
       "refers to node %5"},
      {"duplicate input names", small("[" + in0 + "," + in0 + "]"), "duplicate graph input 'x'"},
      {"unnamed input", small("[{\"op\":\"input\",\"shape\":[2],\"dtype\":\"f32\"}]"),
       "need a name"},
  };
  for (const Case& c : cases) {
    std::string msg = error_of([&] { from_json(c.text, "model.json"); });
    EXPECT_EQ(msg.rfind("model.json", 0), 0u) << c.what << ": '" << msg << "'";
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": '" << msg << "'";
  }
}

}  // namespace
}  // namespace rlx
