#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/testing.h"

namespace rlx {
namespace {

TEST(DType, HalfRoundTripsExactlyRepresentableValues) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  // Round to nearest even: 1 + 2^-11 lies halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(f16_to_f32(f32_to_f16(1.0f + 0.00048828125f)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(3.0f)), 3.0f);
}

TEST(DType, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("float32"), DType::F32);
  EXPECT_EQ(parse_dtype("BF16"), DType::BF16);
  EXPECT_THROW(parse_dtype("q4"), Error);
}

TEST(Tensor, IsAlignedAndViewsShareMemory) {
  Tensor t({3, 4}, DType::F32);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = float(i);
  Tensor tr = t.permute({1, 0});
  EXPECT_FALSE(tr.is_contiguous());
  EXPECT_EQ(tr.item_as_double(1), 4.0);  // [0][1] of the transpose is t[1][0]
  Tensor c = tr.contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[1], 4.0f);
  EXPECT_EQ(c.data<float>()[3], 1.0f);
}

TEST(Tensor, CastTruncatesTowardZeroLikePyTorch) {
  Tensor f = Tensor::from_vector<float>({4}, {-1.7f, 1.7f, 0.2f, 300.0f}, DType::F32);
  Tensor i = f.to(DType::I32);
  EXPECT_EQ(i.data<int32_t>()[0], -1);
  EXPECT_EQ(i.data<int32_t>()[1], 1);
  Tensor b = f.to(DType::Bool);
  EXPECT_TRUE(b.data<bool>()[2]);
  // Past int64 (the fuzzer's Constant of inf cast to int8): INT64_MIN, as
  // PyTorch gives on x86, wrapped to the narrower type; never undefined.
  Tensor big = Tensor::from_vector<double>({3}, {INFINITY, -1e300, 1e19}, DType::F64);
  for (int k = 0; k < 3; ++k)
    EXPECT_EQ(big.to(DType::I64).data<int64_t>()[k], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(big.to(DType::I8).data<int8_t>()[0], 0);
}

TEST(ThreadPool, CoversRangeOnceAndPropagatesErrors) {
  std::vector<int> hits(10007, 0);
  parallel_for(10007, 10, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  for (int h : hits) ASSERT_EQ(h, 1);
  EXPECT_THROW(parallel_for(100, 1,
                            [](int64_t b, int64_t) {
                              if (b > 50) throw Error("boom");
                            }),
               Error);
}

}  // namespace
}  // namespace rlx

namespace rlx {
namespace {

// A message over Error::kMaxBytes keeps its start and its end and says how
// much was cut; shorter ones are untouched.
TEST(Error, LongMessagesAreBoundedKeepingBothEnds) {
  const std::string start = "while loading x.gguf: ", end = " :the innermost cause";
  const std::string huge = start + std::string(1 << 20, 'a') + end;
  const Error e(huge);
  const std::string got = e.what();
  EXPECT_LE(got.size(), Error::kMaxBytes + 64);
  EXPECT_EQ(got.rfind(start, 0), 0u);
  EXPECT_EQ(got.substr(got.size() - end.size()), end);
  EXPECT_NE(got.find("bytes of this message cut"), std::string::npos);
  EXPECT_STREQ(Error("short").what(), "short");
  EXPECT_LE(std::string(e.with_context("more context").what()).size(), Error::kMaxBytes + 64);
}

}  // namespace
}  // namespace rlx
