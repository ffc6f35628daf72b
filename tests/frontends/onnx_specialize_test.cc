// The ONNX importer's import-time specialization: If (a known condition
// lowers only its branch; an unknown one selects with where), inputs frozen
// to values and inputs given static dims (LoadOptions, `rlx run --freeze`),
// and the folding of any node chain whose inputs are all known (torch's
// pads arithmetic), on hand-written models.
#include <gtest/gtest.h>

#include <climits>

#include "io/io_testing.h"
#include "io/onnx_writer.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {
using namespace testing::onnx_writer;
using testing::i64;
using testing::values;

// y = If(sr == 16000, then: x + 1 (its own initializer), else: x * two (the
// outer graph's initializer)); x [2] f32, sr int64 scalar. `else_concat`
// makes the else branch give [4] (x concatenated with itself) instead;
// `no_condition` drops the If's input (a hostile file).
std::string if_model(bool else_concat = false, bool no_condition = false) {
  Pb then_g;
  then_g.msg(1, node("Add", {"x", "one"}, {"t"})).bytes(2, "then");
  then_g.msg(5, tensor("one", {}, kF32, floats({1.f}))).msg(12, value_info("t", kF32, {"2"}));
  Pb else_g;
  if (else_concat)
    else_g.msg(1, node("Concat", {"x", "x"}, {"e"}, {int_attr("axis", 0)}));
  else
    else_g.msg(1, node("Mul", {"x", "two"}, {"e"}));
  else_g.bytes(2, "else").msg(12, value_info("e", kF32, {else_concat ? "4" : "2"}));
  Pb g;
  g.msg(1, node("Equal", {"sr", "k16000"}, {"c"}));
  g.msg(1, node("If", no_condition ? std::vector<std::string>{} : std::vector<std::string>{"c"},
                {"y"}, {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)}));
  g.bytes(2, "g").msg(5, tensor("k16000", {}, kI64, int64s({16000})));
  g.msg(5, tensor("two", {}, kF32, floats({2.f})));
  g.msg(11, value_info("x", kF32, {"2"})).msg(11, value_info("sr", kI64, {}));
  g.msg(12, value_info("y", kF32, {"?"}));
  return model(g);
}

class OnnxSpecialize : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = dir_.path(name);
    testing::write_file_bytes(p, bytes);
    return p;
  }
  static std::vector<float> run(const Model& m, TensorMap inputs) {
    Session s(Executable::compile(m.graph, m.weights));
    return values(s.run(inputs).begin()->second);
  }
  static size_t count(const Graph& g, Op op) {
    size_t n = 0;
    for (const auto& node : g.nodes()) n += node.op == op;
    return n;
  }
  static std::string error_of(const std::string& path, const LoadOptions& o) {
    try {
      load_model(path, o);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  testing::ScratchDir dir_{"onnx_specialize"};
  Tensor x_ = Tensor::from_vector<float>({2}, {1.f, 2.f}, DType::F32);
};

TEST_F(OnnxSpecialize, KnownConditionLowersOnlyItsBranch) {
  const std::string p = write("if.onnx", if_model());
  for (int64_t sr : {16000, 8000}) {
    SCOPED_TRACE(sr);
    Model m = load_model(p, {.frozen_inputs = {{"sr", i64(sr)}}});
    ASSERT_EQ(m.graph.inputs().size(), 1u);  // the frozen input is gone
    EXPECT_EQ(count(m.graph, Op::Where), 0u) << to_text(m.graph);
    EXPECT_EQ(count(m.graph, sr == 16000 ? Op::Mul : Op::Add), 0u) << to_text(m.graph);
    EXPECT_EQ(run(m, {{"x", x_}}),
              (sr == 16000 ? std::vector<float>{2.f, 3.f} : std::vector<float>{2.f, 4.f}));
  }
}

TEST_F(OnnxSpecialize, UnknownConditionRunsOneBranchAtRunTime) {
  Model m = load_model(write("if.onnx", if_model()));
  EXPECT_EQ(count(m.graph, Op::If), 1u) << to_text(m.graph);
  EXPECT_EQ(count(m.graph, Op::Where), 0u) << to_text(m.graph);
  Session s(Executable::compile(m.graph, m.weights));
  for (int rep = 0; rep < 2; ++rep) {  // the second pass reuses the bodies' sessions and plans
    EXPECT_EQ(values(s.run({{"x", x_}, {"sr", i64(16000)}}).at("y")),
              (std::vector<float>{2.f, 3.f}));
    EXPECT_EQ(values(s.run({{"x", x_}, {"sr", i64(8000)}}).at("y")),
              (std::vector<float>{2.f, 4.f}));
  }
  // The graph with its branches round-trips through rlx's graph JSON.
  const Graph back = from_json(to_json(m.graph));
  EXPECT_EQ(to_text(back), to_text(m.graph));
  EXPECT_NE(to_text(back).find("  then:\n"), std::string::npos) << to_text(back);
  Model reread;
  reread.graph = back;
  reread.weights = m.weights;
  EXPECT_EQ(run(reread, {{"x", x_}, {"sr", i64(8000)}}), (std::vector<float>{2.f, 4.f}));
}

TEST_F(OnnxSpecialize, BranchesOfDifferentShapesGiveTheTakenOnesDims) {
  const std::string p = write("if.onnx", if_model(/*else_concat=*/true));
  Model m = load_model(p);
  Session s(Executable::compile(m.graph, m.weights));
  TensorMap out = s.run({{"x", x_}, {"sr", i64(8000)}});
  EXPECT_EQ(values(out.at("y")), (std::vector<float>{1.f, 2.f, 1.f, 2.f}));
  out = s.run({{"x", x_}, {"sr", i64(16000)}});
  EXPECT_EQ(values(out.at("y")), (std::vector<float>{2.f, 3.f}));
  Model frozen = load_model(p, {.frozen_inputs = {{"sr", i64(8000)}}});
  EXPECT_EQ(count(frozen.graph, Op::If), 0u);
  EXPECT_EQ(run(frozen, {{"x", x_}}), (std::vector<float>{1.f, 2.f, 1.f, 2.f}));
}

// A branch that does not lower (here: its Reshape cannot fit x's 2 elements) is an error only
// for a run that takes it.
TEST_F(OnnxSpecialize, ABranchThatDoesNotLowerFailsOnlyTheRunsThatTakeIt) {
  Pb then_g;
  then_g.msg(1, node("Neg", {"x"}, {"t"})).bytes(2, "then").msg(12, value_info("t", kF32, {"2"}));
  Pb else_g;
  else_g.msg(1, node("Reshape", {"x", "three"}, {"e"})).bytes(2, "else");
  else_g.msg(5, tensor("three", {1}, kI64, int64s({3}))).msg(12, value_info("e", kF32, {"3"}));
  Pb g;
  g.msg(1, node("If", {"c"}, {"y"},
                {graph_attr("then_branch", then_g), graph_attr("else_branch", else_g)}));
  g.bytes(2, "g").msg(11, value_info("x", kF32, {"2"})).msg(11, value_info("c", 9, {}));
  g.msg(12, value_info("y", kF32, {"?"}));
  Model m = load_model(write("half.onnx", model(g)));
  Session s(Executable::compile(m.graph, m.weights));
  const Tensor yes = Tensor::from_vector<uint8_t>({}, {1}, DType::Bool);
  const Tensor no = Tensor::from_vector<uint8_t>({}, {0}, DType::Bool);
  EXPECT_EQ(values(s.run({{"x", x_}, {"c", yes}}).at("y")), (std::vector<float>{-1.f, -2.f}));
  try {
    s.run({{"x", x_}, {"c", no}});
    ADD_FAILURE() << "the else branch ran";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("the else branch did not lower at import"), std::string::npos) << w;
    EXPECT_NE(w.find("Reshape"), std::string::npos) << w;
  }
}

// Found by the fuzzer: an If without its condition input is an import error
// naming the node, not a read past an empty input list.
TEST_F(OnnxSpecialize, AnIfWithoutAConditionIsAnError) {
  const std::string e = error_of(write("if.onnx", if_model(false, /*no_condition=*/true)), {});
  EXPECT_NE(e.find("node 'If_node' (If)"), std::string::npos) << e;
  EXPECT_NE(e.find("no condition input"), std::string::npos) << e;
}

TEST_F(OnnxSpecialize, FrozenValuesMustBeExactAndNamed) {
  const std::string p = write("if.onnx", if_model());
  std::string e =
      error_of(p, {.frozen_inputs = {{"sr", Tensor::from_vector<float>({}, {0.5f}, DType::F32)}}});
  EXPECT_NE(e.find("graph input 'sr'"), std::string::npos) << e;
  EXPECT_NE(e.find("not exact as i64"), std::string::npos) << e;
  e = error_of(p, {.frozen_inputs = {{"rate", i64(1)}}});
  EXPECT_NE(e.find("cannot freeze 'rate': no such graph input (inputs: x, sr)"), std::string::npos)
      << e;
  // A float value that is an integer converts: the command line's "sr=16000".
  Model m = load_model(
      p, {.frozen_inputs = {{"sr", Tensor::from_vector<float>({}, {16000.f}, DType::F32)}}});
  EXPECT_EQ(run(m, {{"x", x_}}), (std::vector<float>{2.f, 3.f}));
}

TEST_F(OnnxSpecialize, InputShapesReplaceSymbolicDims) {
  // y = Reshape(x, Shape(x)[0] * 3): folds only when the batch is known.
  Pb g;
  g.msg(1, node("Shape", {"x"}, {"s"}));
  g.msg(1, node("Mul", {"s", "three"}, {"n"}));
  g.msg(1, node("Slice", {"n", "zero", "one"}, {"n0"}));
  g.msg(1, node("Reshape", {"x", "n0"}, {"y"}));
  g.bytes(2, "g").msg(5, tensor("three", {1}, kI64, int64s({3})));
  g.msg(5, tensor("zero", {1}, kI64, int64s({0}))).msg(5, tensor("one", {1}, kI64, int64s({1})));
  g.msg(11, value_info("x", kF32, {"batch", "3"})).msg(12, value_info("y", kF32, {"?"}));
  const std::string p = write("shape.onnx", model(g));
  Model m = load_model(p, {.input_shapes = {{"x", {4, 3}}}});
  EXPECT_EQ(m.graph.node(m.graph.inputs().at(0)).shape.str(), "[4,3] f32");
  EXPECT_EQ(m.graph.node(m.graph.outputs().at(0).node).shape.str(), "[12] f32");
  EXPECT_EQ(count(m.graph, Op::Mul), 0u) << to_text(m.graph);
  std::string e = error_of(p, {.input_shapes = {{"x", {4, 5}}}});
  EXPECT_NE(e.find("graph input 'x': the given dims [4,5] do not fit the declared [batch,3] f32"),
            std::string::npos)
      << e;
  e = error_of(p, {.input_shapes = {{"y", {4}}}});
  EXPECT_NE(e.find("input shape for 'y': no such graph input (inputs: x)"), std::string::npos) << e;
}

TEST_F(OnnxSpecialize, KnownNodeChainsFoldAtImport) {
  // torch.onnx's pads for F.pad(x, (2, 1)): its [left, right] pairs from the
  // last dim reversed into ONNX's [begins..., ends...] by Concat, Reshape,
  // a Slice with step -1, Transpose, Reshape and Cast; Pad needs the result
  // at import.
  Pb g;
  g.msg(1, node("Concat", {"torch_pads", "zeros"}, {"p1"}, {int_attr("axis", 0)}));
  g.msg(1, node("Reshape", {"p1", "pairs"}, {"p2"}));
  g.msg(1, node("Slice", {"p2", "minus1", "int_min", "zero", "minus1"}, {"p3"}));
  g.msg(1, node("Transpose", {"p3"}, {"p4"}, {ints_attr("perm", {1, 0})}));
  g.msg(1, node("Reshape", {"p4", "flat"}, {"p5"}));
  g.msg(1, node("Cast", {"p5"}, {"pads"}, {int_attr("to", kI64)}));
  g.msg(1, node("Pad", {"x", "pads"}, {"y"}));
  g.bytes(2, "g").msg(5, tensor("torch_pads", {2}, kI64, int64s({2, 1})));
  g.msg(5, tensor("zeros", {2}, kI64, int64s({0, 0})));
  g.msg(5, tensor("pairs", {2}, kI64, int64s({-1, 2})));
  g.msg(5, tensor("flat", {1}, kI64, int64s({-1})));
  g.msg(5, tensor("minus1", {1}, kI64, int64s({-1})));
  g.msg(5, tensor("int_min", {1}, kI64, int64s({INT64_MIN})));
  g.msg(5, tensor("zero", {1}, kI64, int64s({0})));
  g.msg(11, value_info("x", kF32, {"1", "2"})).msg(12, value_info("y", kF32, {"1", "5"}));
  Model m = load_model(write("pad.onnx", model(g)));
  for (Op op : {Op::Concat, Op::Slice, Op::Transpose, Op::Cast})
    EXPECT_EQ(count(m.graph, op), 0u) << to_text(m.graph);
  EXPECT_TRUE(m.weights.empty());
  EXPECT_EQ(run(m, {{"x", Tensor::from_vector<float>({1, 2}, {1.f, 2.f}, DType::F32)}}),
            (std::vector<float>{0.f, 0.f, 1.f, 2.f, 0.f}));
}

// y = Loop(n, "", y0) with body (i, cond, y) -> (cond, y * 2, y): 2^n * y0,
// and the scan output stacks every iteration's y.
std::string loop_model() {
  Pb body;
  body.msg(1, node("Mul", {"y_in", "two"}, {"y_out"}));
  body.msg(1, node("Identity", {"y_in"}, {"scan"}));
  body.msg(1, node("Identity", {"cond_in"}, {"cond_out"}));
  body.bytes(2, "body").msg(5, tensor("two", {}, kF32, floats({2.f})));
  body.msg(11, value_info("i", kI64, {})).msg(11, value_info("cond_in", 9, {}));
  body.msg(11, value_info("y_in", kF32, {"2"}));
  body.msg(12, value_info("cond_out", 9, {})).msg(12, value_info("y_out", kF32, {"2"}));
  body.msg(12, value_info("scan", kF32, {"2"}));
  Pb g;
  g.msg(1, node("Loop", {"n", "", "y0"}, {"y", "ys"}, {graph_attr("body", body)}));
  g.bytes(2, "g").msg(11, value_info("n", kI64, {})).msg(11, value_info("y0", kF32, {"2"}));
  g.msg(12, value_info("y", kF32, {"2"})).msg(12, value_info("ys", kF32, {"?", "2"}));
  return model(g);
}

TEST_F(OnnxSpecialize, LoopsUnrollWhenTheirTripCountIsKnown) {
  const std::string p = write("loop.onnx", loop_model());
  Model m = load_model(p, {.frozen_inputs = {{"n", i64(3)}}});
  EXPECT_EQ(count(m.graph, Op::Loop), 0u) << to_text(m.graph);
  Session s(Executable::compile(m.graph, m.weights));
  TensorMap out = s.run({{"y0", x_}});
  EXPECT_EQ(values(out.at("y")), (std::vector<float>{8.f, 16.f}));
  EXPECT_EQ(out.at("ys").dims(), (Dims{3, 2}));
  EXPECT_EQ(values(out.at("ys")), (std::vector<float>{1.f, 2.f, 2.f, 4.f, 4.f, 8.f}));
  // Too many iterations to unroll: a loop node, as for a trip count only the run knows.
  m = load_model(p, {.frozen_inputs = {{"n", i64(int64_t(1) << 40)}}});
  EXPECT_EQ(count(m.graph, Op::Loop), 1u) << to_text(m.graph);
}

TEST_F(OnnxSpecialize, LoopsRunTheirBodyWhenOnlyTheRunKnowsTheTripCount) {
  Model m = load_model(write("loop.onnx", loop_model()));
  EXPECT_EQ(count(m.graph, Op::Loop), 1u) << to_text(m.graph);
  Session s(Executable::compile(m.graph, m.weights));
  for (int64_t n : {3, 0, 5, 1}) {
    SCOPED_TRACE(n);
    TensorMap out = s.run({{"y0", x_}, {"n", i64(n)}});
    const float k = float(int64_t(1) << n);
    EXPECT_EQ(values(out.at("y")), (std::vector<float>{k, 2 * k}));
    ASSERT_EQ(out.at("ys").dims(), (Dims{n, 2}));
    std::vector<float> want;
    for (int64_t i = 0; i < n; ++i) want.insert(want.end(), {float(1 << i), float(2 << i)});
    EXPECT_EQ(values(out.at("ys")), want);
  }
}

// A while loop (no trip count): y = Loop("", c0, y0) with body (i, cond, y) -> (sum(y * 2) < 100,
// y * 2, y), so it doubles y until its sum reaches 100.
TEST_F(OnnxSpecialize, WhileLoopsRunUntilTheirBodySaysStop) {
  Pb body;
  body.msg(1, node("Mul", {"y_in", "two"}, {"y_out"}));
  body.msg(1, node("ReduceSum", {"y_out"}, {"sum"}, {int_attr("keepdims", 0)}));
  body.msg(1, node("Less", {"sum", "hundred"}, {"cond_out"}));
  body.msg(1, node("Identity", {"y_in"}, {"scan"}));
  body.bytes(2, "body").msg(5, tensor("two", {}, kF32, floats({2.f})));
  body.msg(5, tensor("hundred", {}, kF32, floats({100.f})));
  body.msg(11, value_info("i", kI64, {})).msg(11, value_info("cond_in", 9, {}));
  body.msg(11, value_info("y_in", kF32, {"2"}));
  body.msg(12, value_info("cond_out", 9, {})).msg(12, value_info("y_out", kF32, {"2"}));
  body.msg(12, value_info("scan", kF32, {"2"}));
  Pb g;
  g.msg(1, node("Loop", {"", "c0", "y0"}, {"y", "ys"}, {graph_attr("body", body)}));
  g.bytes(2, "g").msg(11, value_info("c0", 9, {})).msg(11, value_info("y0", kF32, {"2"}));
  g.msg(12, value_info("y", kF32, {"2"})).msg(12, value_info("ys", kF32, {"?", "2"}));
  Model m = load_model(write("while.onnx", model(g)));
  Session s(Executable::compile(m.graph, m.weights));
  const Tensor yes = Tensor::from_vector<uint8_t>({}, {1}, DType::Bool);
  TensorMap out = s.run({{"c0", yes}, {"y0", x_}});  // 3, 6, 12, 24, 48, 96: six doublings
  EXPECT_EQ(values(out.at("y")), (std::vector<float>{64.f, 128.f}));
  EXPECT_EQ(out.at("ys").dims(), (Dims{6, 2}));
  out = s.run({{"c0", Tensor::from_vector<uint8_t>({}, {0}, DType::Bool)}, {"y0", x_}});
  EXPECT_EQ(values(out.at("y")), values(x_));
  EXPECT_EQ(out.at("ys").dims(), (Dims{0, 2}));
}

// Scan(s0, x) with body (s, xi) -> (s + xi, (s + xi) * 2): a running sum of x's slices along
// `axis` (backwards when `reverse`), its outputs stacked along `out_axis` (reversed when
// `out_reverse`); x is [T, 2] or [2, T] with T symbolic.
std::string scan_model(int64_t axis, bool reverse, int64_t out_axis, bool out_reverse) {
  Pb body;
  body.msg(1, node("Add", {"s_in", "x_in"}, {"s_out"}));
  body.msg(1, node("Mul", {"s_out", "two"}, {"y"}));
  body.bytes(2, "body").msg(5, tensor("two", {}, kF32, floats({2.f})));
  body.msg(11, value_info("s_in", kF32, {"2"})).msg(11, value_info("x_in", kF32, {"2"}));
  body.msg(12, value_info("s_out", kF32, {"2"})).msg(12, value_info("y", kF32, {"2"}));
  Pb g;
  g.msg(1,
        node("Scan", {"s0", "x"}, {"s", "ys"},
             {graph_attr("body", body), int_attr("num_scan_inputs", 1),
              ints_attr("scan_input_axes", {axis}), ints_attr("scan_input_directions", {reverse}),
              ints_attr("scan_output_axes", {out_axis}),
              ints_attr("scan_output_directions", {out_reverse})}));
  g.bytes(2, "g").msg(11, value_info("s0", kF32, {"2"}));
  g.msg(11, value_info("x", kF32,
                       axis == 0 ? std::vector<std::string>{"T", "2"}
                                 : std::vector<std::string>{"2", "T"}));
  g.msg(12, value_info("s", kF32, {"2"})).msg(12, value_info("ys", kF32, {}));
  return model(g);
}

// Imported once with a symbolic length, a Scan is a loop node walking its input; each result
// equals the one of the import unrolled for that length.
TEST_F(OnnxSpecialize, ScansOfALengthOnlyTheRunKnowsRunAsLoops) {
  for (int64_t axis : {0, 1})
    for (bool reverse : {false, true})
      for (int64_t out_axis : {0, -1}) {
        const bool out_reverse = reverse != (out_axis == 0);
        SCOPED_TRACE(::testing::Message()
                     << "axis " << axis << (reverse ? " reversed" : "") << ", out axis " << out_axis
                     << (out_reverse ? " reversed" : ""));
        const std::string p = write("scan.onnx", scan_model(axis, reverse, out_axis, out_reverse));
        const Model m = load_model(p);
        EXPECT_EQ(count(m.graph, Op::Loop), 1u) << to_text(m.graph);
        Session dyn(Executable::compile(m.graph, m.weights));
        for (int64_t t : {3, 1, 5}) {
          const Dims d = axis == 0 ? Dims{t, 2} : Dims{2, t};
          const TensorMap in{{"s0", x_}, {"x", testing::random_tensor(d, DType::F32, uint64_t(t))}};
          const Model st = load_model(p, {.input_shapes = {{"x", d}}});
          EXPECT_EQ(count(st.graph, Op::Loop), 0u);
          const TensorMap got = dyn.run(in);
          const TensorMap want = Session(Executable::compile(st.graph, st.weights)).run(in);
          for (const char* o : {"s", "ys"})
            EXPECT_TRUE(testing::all_equal(got.at(o), want.at(o))) << o;
        }
        // No slice at all: the states pass through, the outputs are empty.
        const TensorMap none =
            dyn.run({{"s0", x_}, {"x", Tensor(axis == 0 ? Dims{0, 2} : Dims{2, 0}, DType::F32)}});
        EXPECT_EQ(values(none.at("s")), values(x_));
        EXPECT_EQ(none.at("ys").numel(), 0);
      }
}

TEST_F(OnnxSpecialize, CliFreezesFromTheCommandLineOrTheInputs) {
  const std::string p = write("if.onnx", if_model());
  const std::string in = dir_.path("in.safetensors"), out = dir_.path("out.safetensors");
  write_safetensors(in, {{"x", x_}, {"sr", i64(8000)}});
  auto r = testing::run_cli("run " + p + " --inputs " + in + " --out " + out + " --freeze sr");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(values(read_safetensors(out).at("y")), (std::vector<float>{2.f, 4.f}));
  r = testing::run_cli("inspect " + p + " --freeze sr=16000");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(r.output.find("where"), std::string::npos) << r.output;
  r = testing::run_cli("inspect " + p + " --freeze rate=1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.output.find("cannot freeze 'rate'"), std::string::npos) << r.output;
}

// x [N, 2, H, W] (all three symbolic) -> a stride-2 conv y [N, 4, ?, ?], whose H and W only run
// time knows; then shape code on y: r = Reshape(y, [n, 2, 2, h, w]) with n, h, w gathered from
// Shape(y), u = Unsqueeze(y, 1), z = Resize(y, scales [1, 1, 2, 2], nearest) and
// zs = Resize(y, sizes Concat(Shape(y)[0:2], [6, 8])).
std::string dynamic_dims_model() {
  std::vector<float> w(4 * 2 * 3 * 3);
  for (size_t i = 0; i < w.size(); ++i) w[i] = float(int(i % 7) - 3) / 4;
  Pb g;
  g.msg(1, node("Conv", {"x", "w"}, {"y"},
                {ints_attr("strides", {2, 2}), ints_attr("pads", {1, 1, 1, 1}),
                 ints_attr("kernel_shape", {3, 3})}));
  g.msg(1, node("Shape", {"y"}, {"s"}));
  for (const char* d : {"n", "h", "w_"})
    g.msg(1, node("Gather", {"s", std::string("at_") + d}, {d}, {int_attr("axis", 0)}));
  g.msg(1, node("Concat", {"n", "two", "two", "h", "w_"}, {"target"}, {int_attr("axis", 0)}));
  g.msg(1, node("Reshape", {"y", "target"}, {"r"}));
  g.msg(1, node("Unsqueeze", {"y", "one"}, {"u"}));
  const std::vector<Pb> nearest = {str_attr("mode", "nearest"),
                                   str_attr("coordinate_transformation_mode", "asymmetric"),
                                   str_attr("nearest_mode", "floor")};
  g.msg(1, node("Resize", {"y", "", "scales"}, {"z"}, nearest));
  g.msg(1, node("Gather", {"s", "at_nc"}, {"nc"}, {int_attr("axis", 0)}));
  g.msg(1, node("Concat", {"nc", "hw"}, {"sizes"}, {int_attr("axis", 0)}));
  g.msg(1, node("Resize", {"y", "", "", "sizes"}, {"zs"}, nearest));
  g.bytes(2, "g").msg(5, tensor("w", {4, 2, 3, 3}, kF32, floats(w)));
  g.msg(5, tensor("at_n", {1}, kI64, int64s({0}))).msg(5, tensor("at_h", {1}, kI64, int64s({2})));
  g.msg(5, tensor("at_w_", {1}, kI64, int64s({3}))).msg(5, tensor("two", {1}, kI64, int64s({2})));
  g.msg(5, tensor("one", {1}, kI64, int64s({1})));
  g.msg(5, tensor("at_nc", {2}, kI64, int64s({0, 1})))
      .msg(5, tensor("hw", {2}, kI64, int64s({6, 8})));
  g.msg(5, tensor("scales", {4}, kF32, floats({1.f, 1.f, 2.f, 2.f})));
  g.msg(11, value_info("x", kF32, {"N", "2", "H", "W"}));
  for (const char* o : {"r", "u", "z", "zs"}) g.msg(12, value_info(o, kF32, {}));
  return model(g);
}

// Imported once with symbolic dims, the model runs at any size: dims only run time knows are
// read from the tensors they belong to (reshape_like, resize by scale), and every output equals
// the one of an import specialized to that size.
TEST_F(OnnxSpecialize, DimsComputedAtRunTimeNeedNoReimport) {
  const std::string p = write("dyn.onnx", dynamic_dims_model());
  const Model m = load_model(p);
  EXPECT_EQ(count(m.graph, Op::ReshapeLike), 2u) << to_text(m.graph);
  Session dyn(Executable::compile(m.graph, m.weights));
  for (const Dims& d : {Dims{1, 2, 8, 8}, Dims{2, 2, 7, 10}, Dims{3, 2, 5, 4}}) {
    SCOPED_TRACE(dims_str(d));
    const Model st = load_model(p, {.input_shapes = {{"x", d}}});
    EXPECT_EQ(count(st.graph, Op::ReshapeLike), 0u);
    Session fixed(Executable::compile(st.graph, st.weights));
    const TensorMap in{{"x", testing::random_tensor(d, DType::F32, uint64_t(d[2] * d[3]))}};
    const TensorMap got = dyn.run(in), want = fixed.run(in);
    const int64_t h = (d[2] + 1) / 2, w = (d[3] + 1) / 2;
    EXPECT_EQ(got.at("r").dims(), (Dims{d[0], 2, 2, h, w}));
    EXPECT_EQ(got.at("u").dims(), (Dims{d[0], 1, 4, h, w}));
    EXPECT_EQ(got.at("z").dims(), (Dims{d[0], 4, 2 * h, 2 * w}));
    EXPECT_EQ(got.at("zs").dims(), (Dims{d[0], 4, 6, 8}));
    for (const char* o : {"r", "u", "z", "zs"})
      EXPECT_TRUE(testing::all_equal(got.at(o), want.at(o))) << o;
  }
}

}  // namespace
}  // namespace rlx
