// MIL semantics the lowering does not emit today (concat interleave, conv
// pad_type same/same_lower/valid, slice masks, gelu's sigmoid mode, ...),
// checked on hand-built programs against values worked out in the test, and
// a tampered package whose numbers must no longer match the CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "backends/coreml/interp/value.h"
#include "backends/coreml/mil.h"
#include "interp_support.h"
#include "model.pb.h"

namespace rlx {
namespace {

using coreml::Arg;
using coreml::Type;
using coreml::Val;
namespace pb = coreml::pb;
namespace spec = ::CoreML::Specification;
using coreml_test::TmpDir;
using testing::f32;

// Writes a package whose main takes fp32 `x` of `dims` and returns `build`'s value as "y".
TensorMap run_mil(const Dims& dims, const Tensor& x,
                  const std::function<Val(coreml::Builder&, const Val&)>& build) {
  TmpDir t("sem");
  // Start from a real package (manifest, layout) and replace its program.
  Graph g;
  Builder gb(g);
  g.add_output("y", gb.relu(gb.input("x", Shape(dims, DType::F32))));
  const auto pkg = t.p / "m.mlpackage";
  coreml::export_package(g, {}, pkg.string());
  spec::Model m;
  {
    std::ifstream f(pkg / "Data/com.apple.CoreML/model.mlmodel", std::ios::binary);
    EXPECT_TRUE(m.ParseFromIstream(&f));
  }
  auto& fn = (*m.mutable_mlprogram()->mutable_functions())["main"];
  pb::Block& blk = (*fn.mutable_block_specializations())["CoreML6"];
  blk.Clear();
  coreml::BlobWriter blobs;
  coreml::Builder b(&blk, &blobs, 6);
  b.reserve("x");
  Val y = build(b, Val{"x", Type{pb::FLOAT32, dims}});
  blk.add_outputs(y.name);
  {
    std::ofstream f(pkg / "Data/com.apple.CoreML/model.mlmodel", std::ios::binary);
    f << m.SerializeAsString();
    std::ofstream w(pkg / "Data/com.apple.CoreML/weights/weight.bin", std::ios::binary);
    w << blobs.bytes();
  }
  TensorMap out = coreml::run_package(pkg.string(), {{"x", x}});
  return {{"y", out.at(y.name)}};
}

Tensor iota(const Dims& d) {
  Tensor t(d, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i);
  return t;
}

TEST(MilInterpSemantics, ConcatInterleave) {
  auto y = run_mil({2, 2}, iota({2, 2}), [](coreml::Builder& b, const Val& x) {
    return b.op("concat",
                {{"values", std::vector<Val>{x, x}},
                 {"axis", b.int_scalar(1, "ax")},
                 {"interleave", b.boolean(true, "il")}},
                Type{pb::FLOAT32, {2, 4}}, "y");
  });
  EXPECT_TRUE(testing::all_equal(y.at("y"), f32({2, 4}, {0, 0, 1, 1, 2, 2, 3, 3})));
}

// Found by fuzz_mlpackage: reduce_max over an empty int axis is -inf, which was cast to int32
// (undefined); it saturates now, as float -> int casts do.
TEST(MilInterpSemantics, EmptyIntReductionSaturates) {
  EXPECT_EQ(coreml::interp::saturate_int32(-INFINITY), INT32_MIN);
  EXPECT_EQ(coreml::interp::saturate_int32(1e300), INT32_MAX);
  EXPECT_EQ(coreml::interp::saturate_int32(NAN), 0);
  EXPECT_EQ(coreml::interp::saturate_int32(-7.9), -7);
}

// Found by fuzz_mlpackage: a bf16 value is stored as floats, but element reads took it for an
// integer value and indexed its empty int storage.
TEST(MilInterpSemantics, Bf16ValuesReadAsFloats) {
  coreml::interp::Value v = coreml::interp::Value::floats({2}, pb::BFLOAT16);
  v.f = {1.5f, -2.0f};
  EXPECT_TRUE(v.is_float());
  EXPECT_EQ(v.fget(1), -2.0f);
  EXPECT_EQ(v.iget(0), 1);
  const coreml::interp::Value i = coreml::interp::cast_value(v, pb::INT32);
  EXPECT_EQ(i.i, (std::vector<int32_t>{1, -2}));
}

TEST(MilInterpSemantics, ConvPadTypes) {
  // 1x1x4x4 input, 2x2 all-ones kernel, stride 2 or 1: window sums.
  auto conv = [](const std::string& pad_type, int64_t stride, int64_t out) {
    return run_mil({1, 1, 4, 4}, iota({1, 1, 4, 4}),
                   [=](coreml::Builder& b, const Val& x) {
                     Tensor w(Dims{1, 1, 2, 2}, DType::F32);
                     for (int i = 0; i < 4; ++i) w.data<float>()[i] = 1;
                     return b.op("conv",
                                 {{"x", x},
                                  {"weight", b.constant(w, pb::FLOAT32, "w")},
                                  {"strides", b.ints({stride, stride}, "s")},
                                  {"pad_type", b.string(pad_type, "pt")},
                                  {"dilations", b.ints({1, 1}, "d")},
                                  {"groups", b.int_scalar(1, "g")}},
                                 Type{pb::FLOAT32, {1, 1, out, out}}, "y");
                   })
        .at("y");
  };
  EXPECT_TRUE(testing::all_equal(conv("valid", 2, 2), f32({1, 1, 2, 2}, {10, 18, 42, 50})));
  // same, stride 1: total pad 1 per dim goes at the end ("same") or the start ("same_lower").
  Tensor same = conv("same", 1, 4), lower = conv("same_lower", 1, 4);
  EXPECT_EQ(same.data<float>()[0], 0 + 1 + 4 + 5);
  EXPECT_EQ(same.data<float>()[15], 15);
  EXPECT_EQ(lower.data<float>()[0], 0);
  EXPECT_EQ(lower.data<float>()[15], 10 + 11 + 14 + 15);
}

TEST(MilInterpSemantics, SliceMasks) {
  // x[1, ::-1] on a [3,4]: squeeze axis 0, full reversed axis 1 via masks.
  auto y = run_mil({3, 4}, iota({3, 4}), [](coreml::Builder& b, const Val& x) {
    auto bools = [&](std::vector<float> v, const char* h) {
      return b.constant(Tensor::from_vector(Dims{2}, v, DType::Bool), pb::BOOL, h);
    };
    return b.op("slice_by_index",
                {{"x", x},
                 {"begin", b.ints({1, 0}, "b")},
                 {"end", b.ints({2, 0}, "e")},
                 {"stride", b.ints({1, -1}, "s")},
                 {"begin_mask", bools({0, 1}, "bm")},
                 {"end_mask", bools({0, 1}, "em")},
                 {"squeeze_mask", bools({1, 0}, "sm")}},
                Type{pb::FLOAT32, {4}}, "y");
  });
  EXPECT_TRUE(testing::all_equal(y.at("y"), f32({4}, {7, 6, 5, 4})));
}

TEST(MilInterpSemantics, GeluSigmoidAndPadReflect) {
  auto g = run_mil({3}, f32({3}, {-1, 0, 2}), [](coreml::Builder& b, const Val& x) {
    return b.op("gelu", {{"x", x}, {"mode", b.string("SIGMOID_APPROXIMATION", "m")}},
                Type{pb::FLOAT32, {3}}, "y");
  });
  for (int i = 0; i < 3; ++i) {
    const float v = std::vector<float>{-1, 0, 2}[size_t(i)];
    EXPECT_NEAR(g.at("y").data<float>()[i], v / (1 + std::exp(-1.702f * v)), 1e-6);
  }
  auto p = run_mil({4}, iota({4}), [](coreml::Builder& b, const Val& x) {
    return b.op("pad",
                {{"x", x},
                 {"pad", b.ints({2, 1}, "p")},
                 {"mode", b.string("reflect", "m")},
                 {"constant_val", b.scalar(0, pb::FLOAT32, "c")}},
                Type{pb::FLOAT32, {7}}, "y");
  });
  EXPECT_TRUE(testing::all_equal(p.at("y"), f32({7}, {2, 1, 0, 1, 2, 3, 2})));
}

TEST(MilInterpSemantics, GatherBatchDimsAndNegativeIndex) {
  // x [2,3], indices [[2],[-3]] with batch_dims 1 -> [[x00+2], [x1,0]].
  auto y = run_mil({2, 3}, iota({2, 3}), [](coreml::Builder& b, const Val& x) {
    return b.op("gather",
                {{"x", x},
                 {"indices", b.constant(Tensor::from_vector<int32_t>({2, 1}, {2, -3}, DType::I32),
                                        pb::INT32, "i")},
                 {"axis", b.int_scalar(1, "a")},
                 {"batch_dims", b.int_scalar(1, "bd")}},
                Type{pb::FLOAT32, {2, 1}}, "y");
  });
  EXPECT_TRUE(testing::all_equal(y.at("y"), f32({2, 1}, {2, 3})));
}

// The comparison with the CPU backend can fail: a package whose gelu mode is
// tampered with computes different numbers.
TEST(MilInterpSemantics, TamperedPackageDiffers) {
  Graph g;
  Builder gb(g);
  g.add_output("y", gb.unary(Op::Gelu, gb.input("x", Shape(Dims{64}, DType::F32))));
  TensorMap in{{"x", testing::random_tensor({64}, DType::F32, 5, -3, 3)}};
  TensorMap want = testing::run_graph(g, in, {}, 0);
  TmpDir t("tamper");
  const auto pkg = t.p / "m.mlpackage", model = pkg / "Data/com.apple.CoreML/model.mlmodel";
  coreml::export_package(g, {}, pkg.string());
  EXPECT_TRUE(testing::all_close(coreml::run_package(pkg.string(), in).at("y"), want.at("y")));
  spec::Model m;
  {
    std::ifstream f(model, std::ios::binary);
    ASSERT_TRUE(m.ParseFromIstream(&f));
  }
  for (auto& op : *(*(*m.mutable_mlprogram()->mutable_functions())["main"]
                         .mutable_block_specializations())["CoreML6"]
                       .mutable_operations())
    if (op.type() == "const" && op.attributes().at("val").immediatevalue().tensor().has_strings() &&
        op.attributes().at("val").immediatevalue().tensor().strings().values(0) == "EXACT")
      (*op.mutable_attributes())["val"]
          .mutable_immediatevalue()
          ->mutable_tensor()
          ->mutable_strings()
          ->set_values(0, "TANH_APPROXIMATION");
  {
    std::ofstream f(model, std::ios::binary);
    f << m.SerializeAsString();
  }
  EXPECT_FALSE(
      testing::all_close(coreml::run_package(pkg.string(), in).at("y"), want.at("y"), 1e-6, 1e-6));
}

}  // namespace
}  // namespace rlx
