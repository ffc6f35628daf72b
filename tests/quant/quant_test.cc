// Traits table, hand-built blocks against the format rules, and
// quantize -> dequantize error bounds for every type with a quantizer.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx::quant {
namespace {

using testing::randn;

TEST(QuantTraits, TableMatchesFormatFacts) {
  struct Want {
    GgmlType t;
    int64_t blk;
    size_t size;
  };
  const Want want[] = {
      {GgmlType::F32, 1, 4},        {GgmlType::F16, 1, 2},        {GgmlType::BF16, 1, 2},
      {GgmlType::Q4_0, 32, 18},     {GgmlType::Q4_1, 32, 20},     {GgmlType::Q5_0, 32, 22},
      {GgmlType::Q5_1, 32, 24},     {GgmlType::Q8_0, 32, 34},     {GgmlType::Q8_1, 32, 36},
      {GgmlType::Q2_K, 256, 84},    {GgmlType::Q3_K, 256, 110},   {GgmlType::Q4_K, 256, 144},
      {GgmlType::Q5_K, 256, 176},   {GgmlType::Q6_K, 256, 210},   {GgmlType::Q8_K, 256, 292},
      {GgmlType::IQ2_XXS, 256, 66}, {GgmlType::IQ2_XS, 256, 74},  {GgmlType::IQ3_XXS, 256, 98},
      {GgmlType::IQ1_S, 256, 50},   {GgmlType::IQ4_NL, 32, 18},   {GgmlType::IQ3_S, 256, 110},
      {GgmlType::IQ2_S, 256, 82},   {GgmlType::IQ4_XS, 256, 136}, {GgmlType::IQ1_M, 256, 56},
      {GgmlType::TQ1_0, 256, 54},   {GgmlType::TQ2_0, 256, 66},   {GgmlType::MXFP4, 32, 17},
      {GgmlType::NVFP4, 64, 36},    {GgmlType::Q1_0, 128, 18},    {GgmlType::Q2_0, 64, 18},
  };
  for (const Want& w : want) {
    const TypeTraits& t = traits(w.t);
    EXPECT_EQ(t.type, w.t);
    EXPECT_EQ(t.block_size, w.blk) << t.name;
    EXPECT_EQ(t.type_size, w.size) << t.name;
    EXPECT_NE(t.dequantize_row, nullptr) << t.name;
  }
  EXPECT_STREQ(traits(GgmlType::Q4_K).name, "q4_K");
  EXPECT_EQ(row_size(GgmlType::Q4_K, 512), 288u);
  EXPECT_THROW(row_size(GgmlType::Q4_K, 100), Error);
}

TEST(QuantTraits, RetiredAndUnknownTypesThrow) {
  for (uint32_t t : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u}) {
    EXPECT_EQ(find_traits(t), nullptr);
    try {
      traits(t);
      FAIL() << t;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("retired"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(traits(43u), Error);
  EXPECT_THROW(traits(1000000u), Error);
  float f[32];
  uint8_t b[64] = {};
  EXPECT_THROW(quantize(GgmlType::IQ2_XXS, f, b, 256), Error);  // no quantizer
}

// Hand-built blocks checked against the layout rules written independently here.
TEST(QuantDequant, Q4_0AndQ8_0Blocks) {
  uint8_t b[18];
  const uint16_t d = f32_to_f16(0.5f);
  std::memcpy(b, &d, 2);
  for (int j = 0; j < 16; ++j) b[2 + j] = uint8_t(j | (15 - j) << 4);
  float y[32];
  dequantize(GgmlType::Q4_0, b, y, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f);
  }
  uint8_t c[34];
  const uint16_t d2 = f32_to_f16(0.25f);
  std::memcpy(c, &d2, 2);
  for (int j = 0; j < 32; ++j) c[2 + j] = uint8_t(int8_t(j * 7 - 100));
  dequantize(GgmlType::Q8_0, c, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], float(j * 7 - 100) * 0.25f);
}

TEST(QuantDequant, Q6KBlockElementOrder) {
  std::vector<uint8_t> b(210, 0);
  const uint16_t d = f32_to_f16(1.0f);
  std::memcpy(&b[208], &d, 2);
  for (int s = 0; s < 16; ++s) b[192 + s] = 1;
  // Element 128 + 64 + 5 = hi nibble of ql[64 + 5], bits 4..5 of qh[32 + 5].
  b[64 + 5] = 0x70;
  b[128 + 32 + 5] = 2 << 4;
  std::vector<float> y(256);
  dequantize(GgmlType::Q6_K, b.data(), y.data(), 256);
  EXPECT_EQ(y[128 + 64 + 5], float((7 | 2 << 4) - 32));
  EXPECT_EQ(y[0], -32.0f);
}

TEST(QuantDequant, MxFp4AndTernary) {
  uint8_t b[17];
  b[0] = 128;  // scale 2
  for (int j = 0; j < 16; ++j) b[1 + j] = uint8_t(j | (j ^ 8) << 4);
  float y[32];
  dequantize(GgmlType::MXFP4, b, y, 32);
  const float fp4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (int j = 0; j < 16; ++j) {
    const float v = fp4[j & 7] * (j & 8 ? -2.f : 2.f);
    EXPECT_EQ(y[j], v);
    EXPECT_EQ(y[j + 16], -v);
  }
  std::vector<uint8_t> t(66, 0);
  for (int m = 0; m < 64; ++m) t[m] = 0b10010010 | 0;  // trits 2,0,1,2 -> +1,-1,0,+1
  const uint16_t d = f32_to_f16(3.0f);
  std::memcpy(&t[64], &d, 2);
  std::vector<float> z(256);
  dequantize(GgmlType::TQ2_0, t.data(), z.data(), 256);
  EXPECT_EQ(z[0], 3.0f);    // l = 0: bits 0..1 = 2
  EXPECT_EQ(z[32], -3.0f);  // l = 1: bits 2..3 = 0
  EXPECT_EQ(z[64], 0.0f);   // l = 2: bits 4..5 = 1
  EXPECT_EQ(z[96], 3.0f);   // l = 3: bits 6..7 = 2
}

// Every type dequantizes random bytes to finite values and never reads past n.
TEST(QuantDequant, AllTypesRandomBytesFinite) {
  std::mt19937 rng(5);
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* t = find_traits(id);
    if (!t || !t->is_quantized) continue;
    std::vector<uint8_t> b(t->type_size * 3);
    for (auto& x : b) x = uint8_t(rng());
    if (t->type != GgmlType::NVFP4 && t->type != GgmlType::MXFP4 && t->type != GgmlType::IQ1_M &&
        t->type != GgmlType::Q8_K) {
      // Keep fp16 scales finite: clear the exponent MSB of every plausible scale field.
      for (auto& x : b) x &= 0xBF;
    }
    std::vector<float> y(size_t(t->block_size) * 3);
    dequantize(t->type, b.data(), y.data(), int64_t(y.size()));
  }
  SUCCEED();
}

// Round trip error bound: max |x - deq(q(x))| relative to the block's max |x|.
// Bounds are a little above each format's step: half a quantization step
// of (max|x|) / levels, plus fp16 scale rounding; Q4_0/Q5_0 clip the side
// opposite the max at 7 (15) steps, so their bound is a full step.
TEST(QuantRoundTrip, ErrorBoundsPerType) {
  struct Case {
    GgmlType t;
    float rel;
  };
  const Case cases[] = {
      {GgmlType::F16, 1e-3f},   {GgmlType::BF16, 8e-3f},  {GgmlType::Q8_0, 0.006f},
      {GgmlType::Q8_1, 0.006f}, {GgmlType::Q8_K, 0.006f}, {GgmlType::Q5_0, 0.065f},
      {GgmlType::Q5_1, 0.05f},  {GgmlType::Q4_0, 0.13f},  {GgmlType::Q4_1, 0.1f},
      {GgmlType::Q6_K, 0.03f},  {GgmlType::Q5_K, 0.06f},  {GgmlType::Q4_K, 0.12f},
      {GgmlType::Q3_K, 0.3f},   {GgmlType::Q2_K, 0.5f},
  };
  const int64_t n = 1024;
  const std::vector<float> x = randn(n, 42);
  for (const Case& c : cases) {
    const TypeTraits& t = traits(c.t);
    std::vector<uint8_t> q(row_size(c.t, n));
    std::vector<float> y(n);
    quantize(c.t, x.data(), q.data(), n);
    dequantize(c.t, q.data(), y.data(), n);
    const int64_t blk = std::max<int64_t>(t.block_size, 32);
    double worst = 0, sq = 0, sx = 0;
    for (int64_t b = 0; b < n; b += blk) {
      float amax = 0;
      for (int64_t j = b; j < b + blk; ++j) amax = std::max(amax, std::fabs(x[j]));
      for (int64_t j = b; j < b + blk; ++j) {
        worst = std::max(worst, double(std::fabs(x[j] - y[j]) / amax));
        sq += double(x[j] - y[j]) * (x[j] - y[j]);
        sx += double(x[j]) * x[j];
      }
    }
    EXPECT_LE(worst, c.rel) << t.name;
    EXPECT_GT(worst, 0.0) << t.name;  // the test can fail: lossy formats lose something
    EXPECT_LE(std::sqrt(sq / sx), 2 * c.rel) << t.name;  // rms vs signal rms
  }
}

TEST(QuantRoundTrip, ZeroRowsStayZero) {
  for (GgmlType tt : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                      GgmlType::Q8_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K,
                      GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K}) {
    std::vector<float> x(256, 0.0f), y(256, 1.0f);
    std::vector<uint8_t> q(row_size(tt, 256));
    quantize(tt, x.data(), q.data(), 256);
    dequantize(tt, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.0f) << traits(tt).name;
  }
}

}  // namespace
}  // namespace rlx::quant
