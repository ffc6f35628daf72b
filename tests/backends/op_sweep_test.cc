// One harness over every op of ops.def (in the spirit of ggml's
// test-backend-ops): each op has a sample node here, and the sweep checks that
// its shape rule accepts it, that it round-trips through the graph JSON with
// its typed attributes, that the CPU backend runs it, and that CoreML lowers
// it or lists it as unsupported. A new op without a sample fails the sweep,
// so adding an op means adding its line below. Numerics are checked per op
// family in tests/backends/cpu and tests/backends/coreml.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx::op_sweep_test {
namespace {

// An input: dims, dtype and the range random values are drawn from
// (integers: [lo, hi] inclusive, so indices stay in bounds).
struct In {
  Dims dims;
  DType dtype = DType::F32;
  double lo = -1, hi = 1;
};

struct Sample {
  Op op;
  std::vector<In> in;
  Attrs attrs;
};

In f32(Dims d, double lo = -1, double hi = 1) { return {std::move(d), DType::F32, lo, hi}; }
In idx(Dims d, int64_t hi) { return {std::move(d), DType::I64, 0, double(hi)}; }
In boolean(Dims d) { return {std::move(d), DType::Bool, 0, 1}; }
In bytes(Dims d) { return {std::move(d), DType::U8, 0, 255}; }
using Ints = std::vector<int64_t>;

std::vector<Sample> samples() {
  const In x = f32({2, 3}), pos = f32({2, 3}, 0.1, 2);
  std::vector<Sample> s = {
      {Op::Full, {}, {{"shape", Ints{2, 2}}, {"value", 1.5}}},
      {Op::Arange, {}, {{"count", 4}, {"start", 1.0}, {"step", 0.5}}},
      {Op::LogicalNot, {boolean({2, 3})}, {}},
      {Op::BitwiseNot, {{{2, 3}, DType::I32, -9, 9}}, {}},
      {Op::LogicalAnd, {boolean({2, 3}), boolean({2, 3})}, {}},
      {Op::LogicalOr, {boolean({2, 3}), boolean({1, 3})}, {}},
      {Op::Div, {x, pos}, {{"rounding", std::string("floor")}}},
      {Op::SpecialUnary, {pos}, {{"fn", std::string("digamma")}}},
      {Op::SpecialBinary, {pos, f32({1, 3}, 0, 4)}, {{"fn", std::string("legendre_p")}}},
      {Op::Linalg, {f32({2, 3, 3})}, {{"fn", std::string("lu")}}},
      {Op::Linalg, {f32({2, 3, 3}), f32({2, 3, 2})}, {{"fn", std::string("solve")}}},
      {Op::Linalg, {f32({4, 3})}, {{"fn", std::string("svd")}, {"full_matrices", true}}},
      {Op::Where, {boolean({2, 3}), x, f32({1, 3})}, {}},
      {Op::Cast, {x}, {{"dtype", std::string("f16")}}},
      {Op::FusedElementwise,
       {x, f32({1, 3}), boolean({2, 1})},
       {{"program", std::string("mul(x0, x1); gt(t0, x0); clamp(t0, min=-0.5); where(x2, t2, "
                                "x1); where(t1, t3, t0)")}}},
      {Op::ArgMax, {x}, {{"axis", 1}}},
      {Op::ArgMin, {x}, {{"axis", 0}, {"keepdims", true}}},
      {Op::Softmax, {x}, {}},
      {Op::LogSoftmax, {x}, {{"axis", 0}}},
      {Op::CumSum, {x}, {{"axis", 1}, {"reverse", true}}},
      {Op::CumProd, {x}, {{"axis", 0}, {"exclusive", true}}},
      {Op::Reshape, {x}, {{"shape", Ints{3, -1}}}},
      {Op::ReshapeLike, {x, idx({3, 5}, 4)}, {{"shape", Ints{-2, -1}}}},  // like: dims only
      {Op::Transpose, {x}, {{"perm", Ints{1, 0}}}},
      {Op::Slice, {x}, {{"axis", 1}, {"start", 1}, {"step", 2}}},
      {Op::Concat, {x, f32({1, 3})}, {{"axis", 0}}},
      {Op::Expand, {f32({1, 3})}, {{"shape", Ints{2, 3}}}},
      {Op::Pad, {x}, {{"pads", Ints{0, 1, 0, 1}}, {"mode", std::string("reflect")}}},
      {Op::Tile, {x}, {{"repeats", Ints{2, 1}}}},
      {Op::Flip, {x}, {{"axes", Ints{0}}}},
      {Op::Split, {x}, {{"axis", 1}, {"sizes", Ints{1, 0, 2}}}},
      {Op::Gather, {f32({3, 4}), idx({2}, 2)}, {{"axis", 0}}},
      {Op::GatherElements, {f32({3, 4}), idx({3, 4}, 2)}, {{"axis", 0}}},
      {Op::GatherND, {f32({3, 4}), idx({2, 1}, 2)}, {}},
      {Op::ScatterElements,
       {f32({3, 4}), idx({2, 4}, 2), f32({2, 4})},
       {{"axis", 0}, {"reduction", std::string("add")}}},
      {Op::ScatterND,
       {f32({3, 4}), idx({2, 1}, 2), f32({2, 4})},
       {{"reduction", std::string("add")}}},
      {Op::TopK, {f32({2, 5})}, {{"k", 2}}},
      {Op::OneHot, {idx({3}, 3)}, {{"depth", 4}}},
      {Op::Embedding, {f32({5, 3}), idx({2}, 4)}, {}},
      {Op::DequantEmbedding,
       {bytes({5, 34}), idx({2}, 4)},
       {{"scheme", std::string("q8_0")}, {"k", 32}}},
      {Op::MatMul, {x, f32({4, 3})}, {{"transpose_b", true}}},
      {Op::MatMul, {x, f32({3, 4}), f32({4})}, {{"activation", std::string("tanh")}}},
      {Op::DequantMatmul,
       {f32({2, 32}), bytes({3, 34})},
       {{"scheme", std::string("q8_0")}, {"k", 32}}},
      {Op::MoeFfn,  // 2 tokens, 1 of 2 experts of 32 x 32, q8_0 rows
       {f32({2, 32}), idx({2, 1}, 1), f32({2, 1}), bytes({64, 34}), bytes({64, 34}),
        bytes({64, 34})},
       {{"experts", 2},
        {"gate_scheme", std::string("q8_0")},
        {"up_scheme", std::string("q8_0")},
        {"down_scheme", std::string("q8_0")}}},
      {Op::Conv, {f32({1, 2, 5, 5}), f32({3, 2, 3, 3}), f32({3})}, {{"pads", Ints{1, 1, 1, 1}}}},
      {Op::Conv, {f32({1, 2, 5, 5}), f32({3, 2, 1, 1})}, {{"activation", std::string("relu6")}}},
      {Op::ConvBlocked,
       {f32({1, 1, 5, 5, 16}), f32({2, 1, 1, 1, 16, 16}), f32({32}), f32({1, 2, 5, 5, 16})},
       {{"stride", Ints{1, 1}},
        {"pads", Ints{0, 0, 0, 0}},
        {"channels", 10},
        {"out_channels", 20},
        {"activation", std::string("relu")},
        {"residual", true}}},
      {Op::ConvBlocked,
       {f32({1, 2, 6, 6, 16}), f32({2, 3, 3, 16}), f32({32})},
       {{"stride", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 1}},
        {"channels", 20},
        {"out_channels", 20},
        {"depthwise", true}}},
      {Op::ConvBlocked,
       {f32({1, 3, 7, 6}), f32({1, 3, 3, 3, 1, 16}), f32({16})},
       {{"stride", Ints{2, 2}},
        {"pads", Ints{1, 1, 1, 1}},
        {"channels", 3},
        {"out_channels", 8},
        {"in_blocked", false}}},
      {Op::ConvBlockedChain,  // 10 -> 20 -> 10 channels on 6 x 6, the skip added
       {f32({1, 1, 6, 6, 16}), f32({2, 1, 1, 1, 16, 16}), f32({32}), f32({2, 3, 3, 16}), f32({32}),
        f32({1, 2, 1, 1, 16, 16}), f32({16}), f32({1, 1, 6, 6, 16})},
       {{"stride", Ints{1, 1}},
        {"pads", Ints{1, 1, 1, 1}},
        {"channels", 10},
        {"hidden", 20},
        {"out_channels", 10},
        {"expand_activation", std::string("relu6")},
        {"depthwise_activation", std::string("relu")},
        {"residual", true}}},
      {Op::ConvTranspose, {f32({1, 2, 3, 3}), f32({2, 3, 3, 3})}, {{"stride", Ints{2, 2}}}},
      {Op::MaxPool2d, {f32({1, 1, 4, 4})}, {{"kernel", Ints{2, 2}}}},
      {Op::MaxPool2dIndices,
       {f32({1, 2, 5, 4})},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {Op::BatchNormTrain, {f32({3, 2, 2, 2})}, {}},
      {Op::BatchNormTrainGrad, {f32({3, 2, 4}), f32({3, 2, 4})}, {{"eps", 1e-3}}},
      {Op::BatchNormTrain, {f32({3, 2, 2, 2}), f32({2}), f32({2})}, {}},
      {Op::BatchNormTrainGrad, {f32({3, 2, 4}), f32({3, 2, 4}), f32({2, 1})}, {{"eps", 1e-3}}},
      {Op::MaxPool2dGrad,
       {f32({1, 2, 5, 4}), f32({1, 2, 3, 2})},
       {{"kernel", Ints{3, 3}}, {"stride", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}},
      {Op::AvgPool2d,
       {f32({1, 1, 4, 4})},
       {{"kernel", Ints{3, 3}},
        {"stride", Ints{1, 1}},
        {"pads", Ints{1, 1, 1, 1}},
        {"count_include_pad", false}}},
      {Op::AdaptiveAvgPool2d, {f32({1, 1, 4, 4})}, {{"output", Ints{2, 2}}}},
      {Op::LayerNorm, {f32({2, 4}), f32({4}), f32({4})}, {}},
      {Op::RmsNorm, {f32({2, 4}), f32({4})}, {{"eps", 1e-6}}},
      {Op::GroupNorm, {f32({1, 4, 2}), f32({4}), f32({4})}, {{"groups", 2}}},
      {Op::BatchNorm, {f32({1, 2, 3}), f32({2}), f32({2}, 0.5, 1), f32({2}), f32({2})}, {}},
      {Op::LayerNorm2d, {f32({1, 2, 2, 2}), f32({2}), f32({2})}, {}},
      {Op::Attention,
       {f32({1, 2, 3, 4}), f32({1, 1, 3, 4}), f32({1, 1, 3, 4})},
       {{"mask", std::string("causal")}}},
      {Op::Rope, {f32({1, 2, 3, 4}), idx({3}, 7)}, {{"style", std::string("interleaved")}}},
      {Op::Resize,
       {f32({1, 1, 2, 2})},
       {{"size", Ints{4, 4}}, {"mode", std::string("bilinear")}, {"align_corners", true}}},
      {Op::GridSample, {f32({1, 1, 3, 3}), f32({1, 2, 2, 2})}, {}},
      {Op::AttentionGrad,
       {f32({1, 2, 3, 4}), f32({1, 1, 3, 4}), f32({1, 1, 3, 2}), f32({1, 2, 3, 2})},
       {{"mask", std::string("causal")}}},
      {Op::RmsNormGrad, {f32({2, 4}), f32({2, 4}), f32({4})}, {}},
      {Op::LayerNormGrad, {f32({2, 4}), f32({2, 4}), f32({4})}, {}},
      {Op::GroupNormGrad, {f32({1, 4, 2}), f32({1, 4, 2}), f32({4})}, {{"groups", 2}}},
      {Op::ActivationGrad, {x, x}, {{"kind", std::string("elu")}, {"alpha", 0.5}}},
      {Op::SoftmaxCrossEntropy, {f32({3, 4}), idx({3}, 3)}, {}},
      {Op::SoftmaxCrossEntropyGrad, {f32({3, 4}), idx({3}, 3), f32({})}, {}},
      {Op::Dropout, {f32({3, 4}), idx({}, 9)}, {{"p", 0.25}, {"seed", 7}}},
      {Op::FakeQuantize, {f32({3, 4})}, {{"bits", 4}, {"axis", 0}}},
      {Op::FakeQuantize,
       {f32({3, 4}), f32({4}, 0.05, 0.2), idx({4}, 3)},
       {{"axis", 1}, {"scale", std::string("input")}, {"quant_min", 0}, {"quant_max", 255}}},
      {Op::FakeQuantizeGrad,
       {f32({3, 4}), f32({3, 4}), f32({1}, 0.05, 0.2)},
       {{"scale", std::string("input")}, {"ste", std::string("lsq")}}},
      {Op::Lstm, {f32({2, 3, 4}), f32({20, 4}), f32({20, 5}), f32({1, 40})}, {{"hidden", 5}}},
      // 2 layers, both directions, seq first, initial states, lengths: w_ih flat (layer 1 reads 6)
      {Op::Lstm,
       {f32({3, 2, 4}), f32({240}), f32({4, 12, 3}), f32({4, 12}), f32({4, 2, 3}), f32({4, 2, 3}),
        idx({2}, 3)},
       {{"hidden", 3},
        {"num_layers", 2},
        {"direction", std::string("bidirectional")},
        {"batch_first", false},
        {"carry", true},
        {"lengths", true}}},
      {Op::Lstm,
       {f32({2, 3, 4}), f32({1, 12, 4}), f32({1, 12, 3}), f32({1, 24}), f32({1, 9})},
       {{"hidden", 3}, {"gates", std::string("onnx")}, {"peephole", true}, {"clip", 2.0}}},
      {Op::Gru,
       {f32({2, 3, 4}), f32({9, 4}), f32({9, 3}), f32({1, 18})},
       {{"hidden", 3},
        {"gates", std::string("onnx")},
        {"linear_before_reset", false},
        {"direction", std::string("reverse")}}},
      {Op::Gru,
       {f32({2, 3, 4}), f32({2, 9, 4}), f32({2, 9, 3}), f32({2, 18}), f32({2, 2, 3})},
       {{"hidden", 3}, {"direction", std::string("bidirectional")}, {"carry", true}}},
      {Op::Rnn,
       {f32({2, 3, 4}), f32({3, 4}), f32({3, 3}), f32({3})},
       {{"hidden", 3}, {"act_f", std::string("relu")}}},
      {Op::GatedDeltaNet,
       {f32({2, 3, 2, 4}), f32({2, 3, 2, 4}, -0.5, 0.5), f32({2, 3, 2, 4}), f32({2, 3, 2}, -1, 0),
        f32({2, 3, 2}, 0, 1)},
       {{"state_size", 4}}},
      {Op::GatedDeltaNet,
       {f32({1, 2, 3, 3}), f32({1, 2, 3, 3}, -0.5, 0.5), f32({1, 2, 3, 3}), f32({1, 2, 3}, -1, 0),
        f32({1, 2, 3}, 0, 1), f32({1, 3, 3, 3})},
       {{"state_size", 3}}},
      {Op::SelectiveScan,
       {f32({2, 3, 4}), f32({2, 3, 4}, 0.1, 1), f32({4, 2}, -1, -0.1), f32({2, 3, 2}),
        f32({2, 3, 2})},
       {}},
      {Op::SelectiveScan,
       {f32({2, 3, 4}), f32({2, 3, 4}, 0.1, 1), f32({4, 2}, -1, -0.1), f32({2, 3, 2}),
        f32({2, 3, 2}), f32({4}), f32({2, 4, 2})},
       {{"d_skip", true}, {"carry", true}}},
      {Op::NonZero, {boolean({2, 3})}, {{"count", std::string("n")}}},
      {Op::Unique, {idx({9}, 3)}, {{"count", std::string("u")}}},
      {Op::Unique, {idx({4, 3}, 1)}, {{"count", std::string("u")}, {"axis", 0}, {"sorted", false}}},
      {Op::NonMaxSuppression,
       {f32({1, 5, 4}), f32({1, 2, 5}, 0, 1)},
       {{"count", std::string("k")}, {"max_per_class", 3}, {"iou_threshold", 0.5}}},
  };
  // Whole families with no attributes (or only defaults) take one input
  // shape each; positive values keep log/sqrt/pow/mod well defined.
  for (int i = 0; i < num_ops(); ++i) {
    const Op op = Op(i);
    switch (op_family(op)) {
      case OpFamily::Unary:
        s.push_back({op, {pos}, {}});
        break;
      case OpFamily::Binary:
        if (op != Op::Div) s.push_back({op, {pos, f32({1, 3}, 0.5, 2)}, {}});
        break;
      case OpFamily::Compare:
        s.push_back({op, {x, f32({1, 3})}, {}});
        break;
      case OpFamily::Reduce:
        s.push_back({op, {x}, {{"axes", Ints{1}}}});
        break;
      default:
        break;
    }
  }
  return s;
}

// Leaves the runtime binds rather than runs, and the result nodes every
// multi-output sample makes; covered by every other sample. Control nodes (if,
// loop) hold bodies, which a sample's attributes cannot give: the session runs
// them, tested in tests/runtime/control_test.cc.
bool bound_leaf(Op op) {
  return op == Op::Input || op == Op::Param || op == Op::Constant || op == Op::Result ||
         is_control(op);
}

// Ops CoreML declares it cannot lower (the answer of coreml::supports); empty
// today: every op lowers.
// MIL has no pool that returns its argmax; the exporter lists the op as unsupported.
// MIL has no cumulative product either, and moe_ffn (GGUF MoE models) has no
// lowering yet; MIL has no special functions (lgamma, bessel, polygamma, ...) and no
// factorizations (linalg); an ML Program's shapes are known before it runs, so no op whose
// output extent the values decide (nonzero, unique, non_max_suppression).
const std::set<Op> kCoreMLUnsupported = {
    Op::MaxPool2dIndices, Op::CumProd, Op::MoeFfn, Op::SpecialUnary,     Op::SpecialBinary,
    Op::Linalg,           Op::NonZero, Op::Unique, Op::NonMaxSuppression};

std::string label(const Sample& s) {
  return std::string(op_name(s.op)) + " {" + s.attrs.str() + "}";
}

TEST(OpSweep, EveryOpHasASample) {
  std::set<Op> covered;
  for (const Sample& s : samples()) covered.insert(s.op);
  for (int i = 0; i < num_ops(); ++i) {
    if (bound_leaf(Op(i))) continue;
    EXPECT_TRUE(covered.count(Op(i))) << op_name(Op(i)) << " has no sample in op_sweep_test.cc";
  }
}

TEST(OpSweep, EveryOpInfersRoundTripsRunsOnCpuAndLowersToCoreML) {
  const auto cpu = make_backend("cpu");
  uint64_t seed = 1;
  for (const Sample& s : samples()) {
    SCOPED_TRACE(label(s));
    Graph g;
    std::vector<NodeId> ins;
    TensorMap feed;
    for (size_t i = 0; i < s.in.size(); ++i) {
      const In& in = s.in[i];
      const std::string name = "x" + std::to_string(i);
      ins.push_back(g.input(name, Shape(in.dims, in.dtype)));
      feed[name] = testing::random_tensor(in.dims, in.dtype, seed++, in.lo, in.hi);
    }
    NodeId y = -1;
    ASSERT_NO_THROW(y = g.add(s.op, ins, s.attrs));  // attributes parse, shape rule holds
    // Every value the node makes: itself, or each of its results.
    std::vector<NodeId> outs{y};
    if (has_results(s.op)) {
      outs.clear();
      for (size_t i = 0; i < g.node(y).results.size(); ++i) outs.push_back(g.result(y, int(i)));
    }
    for (size_t i = 0; i < outs.size(); ++i) g.add_output("y" + std::to_string(i), outs[i]);

    // Serializer: typed attributes and shapes survive the JSON round trip.
    const Graph back = from_json(to_json(g), "sweep.json");
    EXPECT_TRUE(back.node(y).attrs == g.node(y).attrs);
    EXPECT_EQ(back.node(y).shape, g.node(y).shape);
    EXPECT_EQ(back.node(y).results, g.node(y).results);
    EXPECT_EQ(to_json(back), to_json(g));

    // CPU: supported, and it runs to the inferred shapes.
    EXPECT_TRUE(cpu->supports(g.node(y)).ok) << cpu->supports(g.node(y)).reason;
    TensorMap out;
    ASSERT_NO_THROW(out = testing::run_graph(g, feed, {}, 0));
    for (size_t i = 0; i < outs.size(); ++i) {  // a data-dependent dim takes any extent
      const Shape& want = g.node(outs[i]).shape;
      const Tensor& got = out.at("y" + std::to_string(i));
      EXPECT_EQ(got.dtype(), want.dtype);
      ASSERT_EQ(got.rank(), want.rank());
      for (int d = 0; d < want.rank(); ++d)
        if (want.dims[size_t(d)].is_static()) {
          EXPECT_EQ(got.dims()[size_t(d)], want.dims[size_t(d)].value) << want.str();
        }
    }

    // CoreML: lowers, or is declared unsupported here.
    const bool lowers = coreml::supports(g.node(y)).ok;
    EXPECT_EQ(lowers, !kCoreMLUnsupported.count(s.op)) << coreml::supports(g.node(y)).reason;
  }
}

}  // namespace
}  // namespace rlx::op_sweep_test
