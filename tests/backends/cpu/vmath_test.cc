// Accuracy of the vectorized exp/tanh/erf/sigmoid (16 lanes on AVX-512, 8 on
// AVX2; RLX_ISA picks) against the C library, over a sweep of every 509th
// float bit pattern (both signs, subnormals to the largest finite values)
// plus inf and NaN. The measured maxima are printed. Then the 16-lane forms of
// every activation against the 8-lane ones, bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <vector>

#include "backends/cpu/vmath.h"
#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"

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

// Every 509th float bit pattern, then the special values and the branch points.
std::vector<float> sweep_inputs() {
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
  return x;
}

Sweep sweep(void (*fn)(const float*, float*, int64_t), const std::function<double(double)>& ref) {
  const std::vector<float> x = sweep_inputs();
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
  const char* path = cpu_isa() >= Isa::avx512 ? " (avx512)"
                     : has_avx2_fma()         ? " (avx2)"
                                              : " (scalar fallback)";
  std::cout << "[ vmath    ] " << name << path << ": max error " << s.max_ulp
            << " ulp at x = " << s.worst_x << "\n";
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

// name8 / name16: the array form of vm::name / vm16::name.
#define RLX_LANES(name)                                                                  \
  void name##8(const float* x, float* y, int64_t n) { vm::map_avx2<vm::name>(x, y, n); } \
  void name##16(const float* x, float* y, int64_t n) { vm16::map<vm16::name>(x, y, n); }
RLX_LANES(exp)
RLX_LANES(sigmoid)
RLX_LANES(tanh)
RLX_LANES(erf)
RLX_LANES(silu)
RLX_LANES(gelu)
RLX_LANES(gelu_tanh)
#undef RLX_LANES

TEST(VMath, SixteenLanesGiveTheEightLaneBits) {
  if (detected_isa() < Isa::avx512) GTEST_SKIP() << "this CPU has no AVX-512";
  using Fn = void (*)(const float*, float*, int64_t);
  const struct {
    const char* name;
    Fn eight, sixteen;
  } fns[] = {{"exp", exp8, exp16},
             {"sigmoid", sigmoid8, sigmoid16},
             {"tanh", tanh8, tanh16},
             {"erf", erf8, erf16},
             {"silu", silu8, silu16},
             {"gelu", gelu8, gelu16},
             {"gelu_tanh", gelu_tanh8, gelu_tanh16}};
  std::vector<float> x = sweep_inputs();
  x.resize(x.size() - 3);  // a length that leaves both widths a tail
  std::vector<float> a(x.size()), b(x.size());
  for (const auto& f : fns) {
    f.eight(x.data(), a.data(), int64_t(x.size()));
    f.sixteen(x.data(), b.data(), int64_t(x.size()));
    int64_t differ = 0;
    for (size_t i = 0; i < x.size(); ++i)
      differ += std::isnan(a[i]) ? !std::isnan(b[i]) : std::memcmp(&a[i], &b[i], 4) != 0;
    EXPECT_EQ(differ, 0) << f.name << ": " << differ << " of " << x.size() << " inputs differ";
  }
}

}  // namespace
}  // namespace rlx::cpu
