// Accuracy of the AVX2 exp/tanh/erf/sigmoid against the C library, over a
// sweep of every 509th float bit pattern (both signs, subnormals to the
// largest finite values) plus inf and NaN. The measured maxima are printed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <vector>

#include "backends/cpu/vmath.h"

namespace rlx::cpu {
namespace {

// Position of f on the number line of floats: ulp distance is a difference.
int64_t ordinal(float f) {
  int32_t i;
  std::memcpy(&i, &f, 4);
  return i < 0 ? -int64_t(i & 0x7fffffff) : int64_t(i);
}

struct Sweep {
  int64_t max_ulp = 0;
  float worst_x = 0;
  int64_t nan_mismatch = 0;
};

Sweep sweep(void (*fn)(const float*, float*, int64_t), const std::function<double(double)>& ref) {
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t(1) << 32); b += 509) {
    uint32_t u = uint32_t(b);
    float f;
    std::memcpy(&f, &u, 4);
    x.push_back(f);
  }
  const float inf = std::numeric_limits<float>::infinity();
  x.insert(x.end(),
           {inf, -inf, NAN, -NAN, 0.0f, -0.0f, 88.72f, -87.5f, -103.9f, 0.625f, 0.921875f});
  std::vector<float> y(x.size());
  fn(x.data(), y.data(), int64_t(x.size()));
  Sweep s;
  for (size_t i = 0; i < x.size(); ++i) {
    float want = float(ref(double(x[i])));
    if (std::isnan(want) || std::isnan(y[i])) {
      s.nan_mismatch += std::isnan(want) != std::isnan(y[i]);
      continue;
    }
    int64_t d = std::llabs(ordinal(want) - ordinal(y[i]));
    if (d > s.max_ulp) {
      s.max_ulp = d;
      s.worst_x = x[i];
    }
  }
  return s;
}

void report(const char* name, const Sweep& s) {
  std::cout << "[ vmath    ] " << name << (has_avx2_fma() ? " (avx2)" : " (scalar fallback)")
            << ": max error " << s.max_ulp << " ulp at x = " << s.worst_x << "\n";
}

TEST(VMath, ExpWithinOneUlp) {
  Sweep s = sweep(vexp, [](double x) { return std::exp(x); });
  report("exp", s);
  EXPECT_LE(s.max_ulp, 1);
  EXPECT_EQ(s.nan_mismatch, 0);
}

TEST(VMath, TanhWithinOneUlp) {
  Sweep s = sweep(vtanh, [](double x) { return std::tanh(x); });
  report("tanh", s);
  EXPECT_LE(s.max_ulp, 1);
  EXPECT_EQ(s.nan_mismatch, 0);
}

TEST(VMath, ErfWithinOneUlp) {
  Sweep s = sweep(verf, [](double x) { return std::erf(x); });
  report("erf", s);
  EXPECT_LE(s.max_ulp, 1);
  EXPECT_EQ(s.nan_mismatch, 0);
}

TEST(VMath, SigmoidWithinTwoUlp) {
  Sweep s = sweep(vsigmoid, [](double x) { return 1 / (1 + std::exp(-x)); });
  report("sigmoid", s);
  EXPECT_LE(s.max_ulp, 2);
  EXPECT_EQ(s.nan_mismatch, 0);
}

TEST(VMath, SaturatesAndUnderflowsCorrectly) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {inf, -inf, 89.0f, 1e30f, -1e30f, -104.0f, -87.0f};
  std::vector<float> y(x.size());
  vexp(x.data(), y.data(), int64_t(x.size()));
  EXPECT_EQ(y[0], inf);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], inf);
  EXPECT_EQ(y[3], inf);
  EXPECT_EQ(y[4], 0.0f);
  EXPECT_EQ(y[5], 0.0f);
  EXPECT_GT(y[6], 0.0f);  // subnormal-adjacent result is not flushed
  vtanh(x.data(), y.data(), int64_t(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[4], -1.0f);
  verf(x.data(), y.data(), int64_t(x.size()));
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[1], -1.0f);
  EXPECT_EQ(y[3], 1.0f);
}

}  // namespace
}  // namespace rlx::cpu
