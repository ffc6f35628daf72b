// The ONNX reader (io/onnx) and frontend on hand-encoded protobuf: field
// decoding, external data, symbolic dims, shape-code folding, the
// all-at-once unsupported-op message, and malformed files (truncated, lying
// sizes, hostile nesting, external data escaping the model directory), each
// of which must be an rlx::Error naming the file and the problem.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/onnx/model.h"
#include "io/onnx_writer.h"
#include "rlx/rlx.h"

namespace rlx {
namespace {
namespace fs = std::filesystem;
using namespace testing::onnx_writer;

class Onnx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("rlx_onnx_io_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string error_of(const std::string& path) {
    try {
      load_model(path);
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  }
  fs::path dir_;
};

// y = x @ w + b with x [batch, 3], w and b initializers.
Pb matmul_graph(Pb w) {
  Pb g;
  g.msg(1, node("MatMul", {"x", "w"}, {"xw"})).msg(1, node("Add", {"xw", "b"}, {"y"}));
  g.bytes(2, "g").msg(5, w).msg(5, tensor("b", {2}, 1, floats({0.5f, -0.5f})));
  g.msg(11, value_info("x", 1, {"batch", "3"})).msg(12, value_info("y", 1, {"batch", "2"}));
  return g;
}

TEST_F(Onnx, ReadsAndRunsWithSymbolicBatch) {
  const std::string p =
      write("m.onnx", model(matmul_graph(tensor("w", {3, 2}, 1, floats({1, 2, 3, 4, 5, 6})))));
  onnx::Model om = onnx::read_model(p);
  EXPECT_EQ(om.ir_version, 8);
  EXPECT_EQ(om.opset(), 17);
  ASSERT_EQ(om.graph.nodes.size(), 2u);
  EXPECT_EQ(om.graph.nodes[0].op_type, "MatMul");
  ASSERT_EQ(om.graph.inputs.size(), 1u);
  EXPECT_EQ(om.graph.inputs[0].dims[0].sym, "batch");

  Model m = load_model(p);
  EXPECT_EQ(m.format, "onnx");
  EXPECT_EQ(m.graph.node(m.graph.inputs()[0]).shape.str(), "[batch,3] f32");
  EXPECT_EQ(m.weights.count("w"), 1u);
  auto exe = Executable::compile(m.graph, m.weights);
  Session s(exe);
  Tensor x = Tensor::from_vector<float>({2, 3}, {1, 0, 0, 0, 1, 1}, DType::F32);
  Tensor y = s.run({{"x", x}}).at("y");
  ASSERT_EQ(y.dims(), (Dims{2, 2}));
  EXPECT_FLOAT_EQ(y.data<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(y.data<float>()[1], 1.5f);
  EXPECT_FLOAT_EQ(y.data<float>()[2], 8.5f);
  EXPECT_FLOAT_EQ(y.data<float>()[3], 9.5f);
}

TEST_F(Onnx, ExternalData) {
  Pb w;
  w.varint(1, 3).varint(1, 2).varint(2, 1).bytes(8, "w").varint(14, 1);
  auto entry = [](const std::string& k, const std::string& v) {
    Pb e;
    e.bytes(1, k).bytes(2, v);
    return e;
  };
  Pb good = w;
  good.msg(13, entry("location", "w.bin"))
      .msg(13, entry("offset", "8"))
      .msg(13, entry("length", "24"));
  write("w.bin", std::string(8, '\0') + floats({1, 2, 3, 4, 5, 6}));
  const std::string p = write("m.onnx", model(matmul_graph(good)));
  Model m = load_model(p);
  ASSERT_EQ(m.weights.at("w").dims(), (Dims{3, 2}));
  EXPECT_FLOAT_EQ(m.weights.at("w").data<float>()[5], 6.f);

  auto bad = [&](std::vector<std::pair<std::string, std::string>> kv) {
    Pb t = w;
    for (auto& [k, v] : kv) t.msg(13, entry(k, v));
    return error_of(write("bad.onnx", model(matmul_graph(t))));
  };
  EXPECT_NE(bad({{"location", "w.bin"}, {"offset", "16"}}).find("beyond the end"),
            std::string::npos);
  EXPECT_NE(bad({{"location", "w.bin"}, {"length", "4"}}).find("needs 24 bytes"),
            std::string::npos);
  EXPECT_NE(bad({{"location", "../w.bin"}}).find("leaves the model directory"), std::string::npos);
  EXPECT_NE(bad({{"location", "/etc/passwd"}}).find("not a relative path"), std::string::npos);
  EXPECT_NE(bad({{"location", "nope.bin"}}).find("nope.bin"), std::string::npos);
  EXPECT_NE(bad({{"location", "w.bin"}, {"offset", "-1"}}).find("not a byte count"),
            std::string::npos);
  const std::string e = bad({});
  EXPECT_NE(e.find("without a location"), std::string::npos) << e;
  EXPECT_NE(e.find("bad.onnx"), std::string::npos) << e;
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
}

TEST_F(Onnx, LyingSizesFailBeforeAllocating) {
  // 2^40 x 2^40 floats claimed, 4 bytes present.
  std::string e = error_of(
      write("a.onnx", model(matmul_graph(tensor("w", {1ll << 40, 1ll << 40}, 1, "abcd")))));
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  EXPECT_NE(e.find("a.onnx"), std::string::npos) << e;
  // A plausible shape whose raw_data is short.
  e = error_of(write("b.onnx", model(matmul_graph(tensor("w", {3, 2}, 1, floats({1, 2}))))));
  EXPECT_NE(e.find("raw_data holds 8 bytes"), std::string::npos) << e;
  // Typed data with too few elements.
  Pb t;
  t.varint(1, 3).varint(1, 2).varint(2, 1).bytes(8, "w").bytes(4, floats({1, 2, 3}));
  e = error_of(write("c.onnx", model(matmul_graph(t))));
  EXPECT_NE(e.find("needs 6 elements, the file holds 3"), std::string::npos) << e;
  // Negative dim (a varint of -1 is 2^64 - 1).
  e = error_of(write("d.onnx", model(matmul_graph(tensor("w", {-1, 2}, 1, floats({1, 2}))))));
  EXPECT_NE(e.find("tensor 'w'"), std::string::npos) << e;
  // A dtype rlx lacks.
  e = error_of(write("e.onnx", model(matmul_graph(tensor("w", {3, 2}, 8, "")))));
  EXPECT_NE(e.find("STRING"), std::string::npos) << e;
}

TEST_F(Onnx, TruncatedFilesFailCleanly) {
  const std::string full = model(matmul_graph(tensor("w", {3, 2}, 1, floats({1, 2, 3, 4, 5, 6}))));
  int errors = 0;
  for (size_t n = 0; n < full.size(); ++n) {
    try {
      load_model(write("t.onnx", full.substr(0, n)));
    } catch (const Error&) {
      ++errors;  // a prefix ending on a field boundary may parse; it must never crash
    }
  }
  EXPECT_GT(errors, int(full.size()) / 2);
  EXPECT_NE(error_of(write("t.onnx", full.substr(0, full.size() - 3))).find("not a valid"),
            std::string::npos);
}

TEST_F(Onnx, HostileNestingIsRefused) {
  // An attribute holding a graph holding a node holding an attribute ... 200 deep.
  Pb inner;
  for (int k = 0; k < 200; ++k) {
    Pb a;
    a.bytes(1, "body").varint(20, 5).msg(6, inner);
    Pb n = node("If", {"c"}, {"o"}, {a});
    Pb g;
    g.msg(1, n);
    inner = g;
  }
  const std::string e = error_of(write("deep.onnx", model(inner)));
  EXPECT_NE(e.find("nested deeper than"), std::string::npos) << e;
}

TEST_F(Onnx, UnsupportedOpsAreListedAtOnce) {
  Pb g;
  g.msg(1, node("FooOp", {"x"}, {"a"})).msg(1, node("FooOp", {"a"}, {"b"}));
  g.msg(1, node("BarOp", {"b"}, {"y"})).msg(1, node("Relu", {"y"}, {"z"}));
  g.msg(11, value_info("x", 1, {"2"})).msg(12, value_info("z", 1, {"2"}));
  const std::string e = error_of(write("u.onnx", model(g, 15)));
  EXPECT_NE(e.find("u.onnx: 2 unsupported op kind(s) at opset 15: BarOp (x1), FooOp (x2)"),
            std::string::npos)
      << e;
}

TEST_F(Onnx, ShapeCodeFoldsAtImport) {
  // y = Reshape(x, Concat(Slice(Shape(x), 0, 1), [-1])): [2,3,4] -> [2,12], no shape ops left.
  Pb g;
  g.msg(1, node("Shape", {"x"}, {"s"}));
  g.msg(1, node("Slice", {"s", "zero", "one"}, {"lead"}));
  g.msg(1, node("Concat", {"lead", "minus1"}, {"target"}, {int_attr("axis", 0)}));
  g.msg(1, node("Reshape", {"x", "target"}, {"y"}));
  g.msg(5, tensor("zero", {1}, 7, int64s({0}))).msg(5, tensor("one", {1}, 7, int64s({1})));
  g.msg(5, tensor("minus1", {1}, 7, int64s({-1})));
  g.msg(11, value_info("x", 1, {"2", "3", "4"})).msg(12, value_info("y", 1, {"2", "12"}));
  Model m = load_model(write("s.onnx", model(g)));
  const Graph& gr = m.graph;
  EXPECT_EQ(gr.node(gr.outputs()[0].node).shape.str(), "[2,12] f32");
  for (const auto& n : gr.nodes()) EXPECT_NE(n.op, Op::Concat) << to_text(gr);
  EXPECT_TRUE(m.weights.empty());  // the shape constants never became params
}

TEST_F(Onnx, BadNodesNameNodeAndOpset) {
  Pb g;
  g.msg(1, node("Reshape", {"x", "nowhere"}, {"y"}));
  g.msg(11, value_info("x", 1, {"2", "3"})).msg(12, value_info("y", 1, {"6"}));
  const std::string e = error_of(write("r.onnx", model(g)));
  EXPECT_NE(e.find("node 'Reshape_node' (Reshape) at opset 17"), std::string::npos) << e;
  EXPECT_NE(e.find("'nowhere'"), std::string::npos) << e;
}

// Inputs the ONNX fuzzer found reading past a vector: each must be an
// rlx::Error naming the node and the problem.
TEST_F(Onnx, RankAndAttributeMismatchesAreErrors) {
  Pb strides;
  strides.bytes(1, "strides").varint(20, 7).varint(8, 1);  // one value for 2 spatial dims
  const auto error_for = [&](const Pb& n, std::vector<std::string> x, const Pb& w) {
    Pb g;
    g.msg(1, n).msg(5, w);
    g.msg(11, value_info("x", 1, x)).msg(12, value_info("y", 1, {"1"}));
    return error_of(write("m.onnx", model(g)));
  };
  const Pb w4 = tensor("w", {1, 1, 1, 1}, 1, floats({1}));
  std::string e = error_for(node("ConvTranspose", {"x", "w"}, {"y"}), {"1", "1", "4"}, w4);
  EXPECT_NE(e.find("same rank, got [1,1,4] f32 and [1,1,1,1] f32"), std::string::npos) << e;
  e = error_for(node("ConvTranspose", {"x", "w"}, {"y"}, {strides}), {"1", "1", "4", "4"}, w4);
  EXPECT_NE(e.find("attribute 'strides' needs 2 values in [1, 2^31), got [1]"), std::string::npos)
      << e;
  e = error_for(node("Conv", {"x", "w"}, {"y"}), {"1", "1"}, w4);
  EXPECT_NE(e.find("Conv_node"), std::string::npos) << e;
  e = error_for(node("Split", {"x"}, {"y", "z"}), {}, tensor("w", {1}, 1, floats({1})));
  EXPECT_NE(e.find("Split: axis 0 out of range for rank 0"), std::string::npos) << e;
  // A 0-d ConvInteger weight has no output-channel dim for its zero point.
  e = error_for(node("ConvInteger", {"x", "w"}, {"y"}), {"1", "1", "4", "4"},
                tensor("w", {}, 2, std::string(1, '\1')));
  EXPECT_NE(e.find("ConvInteger_node"), std::string::npos) << e;
  EXPECT_NE(e.find("got rank 0"), std::string::npos) << e;
}

// The fuzzer's finding: a k, axis or depth given as a float initializer of
// inf, NaN or 1e30 was cast to int64 (undefined behaviour), not refused.
TEST_F(Onnx, NonIntegralScalarInputsAreErrors) {
  const auto error_for = [&](const char* op, float k) {
    Pb g;
    g.msg(1, node(op, {"x", "k"}, {"y"})).msg(5, tensor("k", {}, 1, floats({k})));
    g.msg(11, value_info("x", 1, {"4", "4"})).msg(12, value_info("y", 1, {"4", "4"}));
    return error_of(write("m.onnx", model(g)));
  };
  for (const float k : {INFINITY, NAN, 1e30f, -1e30f}) {
    EXPECT_NE(error_for("Trilu", k).find("Trilu k"), std::string::npos) << k;
    EXPECT_NE(error_for("CumSum", k).find("CumSum axis"), std::string::npos) << k;
    EXPECT_NE(error_for("TopK", k).find("TopK k"), std::string::npos) << k;
  }
}

TEST_F(Onnx, TensorProtoFiles) {
  const std::string p = write("t.pb", tensor("x", {2}, 7, int64s({7, -3})).s);
  std::string name;
  Tensor t = onnx::read_tensor(p, &name);
  EXPECT_EQ(name, "x");
  ASSERT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.data<int64_t>()[1], -3);
  EXPECT_THROW(onnx::read_tensor(write("bad.pb", "\x0a\xff\xff")), Error);
}

}  // namespace
}  // namespace rlx
