// dropout(x, step) {p, seed}: the counter-based mask against a scalar re-implementation of the
// documented hash, its statistics (keep rate ~ 1 - p, kept values scaled by 1 / (1 - p)), its
// determinism (same seed and step: same mask; another step or seed: another mask), p = 0 as the
// identity, and the vjp redrawing the forward's mask.
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/autodiff.h"
#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::run_op;

Tensor step_t(int64_t s) {
  return Tensor::from_vector({}, std::vector<double>{double(s)}, DType::I64);
}
Tensor ones(int64_t n, DType t = DType::F32) {
  return Tensor::from_vector({n}, std::vector<double>(size_t(n), 1.0), t);
}
Attrs attrs(double p, int64_t seed) { return {{"p", p}, {"seed", seed}}; }

// The reference: splitmix64's finalizer, written out once more.
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
bool ref_keep(int64_t seed, int64_t step, int64_t i, double p) {
  const uint64_t key = mix(mix(uint64_t(seed)) ^ uint64_t(step));
  return (mix(key + uint64_t(i)) >> 40) >= uint64_t(p * 16777216.0);
}

TEST(Dropout, MatchesTheDocumentedHash) {
  const int64_t n = 4099;
  for (double p : {0.1, 0.5, 0.75})
    for (int64_t step : {0, 1, 12345}) {
      const Tensor x = testing::random_tensor({n}, DType::F32, 5, 0.5, 1.5);
      const Tensor y = run_op(Op::Dropout, {x, step_t(step)}, attrs(p, 42));
      const float scale = float(1.0 / (1.0 - p));
      for (int64_t i = 0; i < n; ++i) {
        const float want = ref_keep(42, step, i, p) ? x.data<float>()[i] * scale : 0.0f;
        ASSERT_EQ(y.data<float>()[i], want) << "p " << p << " step " << step << " i " << i;
      }
    }
}

TEST(Dropout, KeepRateAndScale) {
  const int64_t n = 200000;
  for (double p : {0.1, 0.5, 0.9}) {
    const Tensor y = run_op(Op::Dropout, {ones(n), step_t(3)}, attrs(p, 1));
    int64_t kept = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = y.data<float>()[i];
      if (v != 0) {
        ++kept;
        ASSERT_EQ(v, float(1.0 / (1.0 - p)));
      }
    }
    const double rate = double(kept) / double(n), sigma = std::sqrt(p * (1 - p) / double(n));
    EXPECT_NEAR(rate, 1 - p, 5 * sigma) << "p " << p;
  }
}

TEST(Dropout, SameStepSameMaskOtherStepOrSeedAnother) {
  const int64_t n = 10000;
  auto mask = [&](int64_t seed, int64_t step) {
    return run_op(Op::Dropout, {ones(n), step_t(step)}, attrs(0.5, seed));
  };
  auto agree = [&](const Tensor& a, const Tensor& b) {
    int64_t s = 0;
    for (int64_t i = 0; i < n; ++i) s += (a.data<float>()[i] != 0) == (b.data<float>()[i] != 0);
    return double(s) / double(n);
  };
  const Tensor a = mask(7, 1);
  EXPECT_EQ(agree(a, mask(7, 1)), 1.0);
  EXPECT_NEAR(agree(a, mask(7, 2)), 0.5, 0.03);  // independent masks agree half the time
  EXPECT_NEAR(agree(a, mask(8, 1)), 0.5, 0.03);
}

TEST(Dropout, ZeroPIsTheIdentityAndF64AndI32StepRun) {
  const Tensor x = testing::random_tensor({3, 5}, DType::F32, 9);
  const Tensor y = run_op(Op::Dropout, {x, step_t(4)}, attrs(0, 3));
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.data<float>()[i], x.data<float>()[i]);
  const Tensor y64 = run_op(Op::Dropout, {ones(64, DType::F64), step_t(4)}, attrs(0.5, 3));
  const Tensor y32 = run_op(Op::Dropout, {ones(64), step_t(4)}, attrs(0.5, 3));
  const Tensor s32 = Tensor::from_vector({}, std::vector<double>{4}, DType::I32);
  const Tensor z32 = run_op(Op::Dropout, {ones(64), s32}, attrs(0.5, 3));
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(y64.data<double>()[i], double(y32.data<float>()[i]));
    EXPECT_EQ(z32.data<float>()[i], y32.data<float>()[i]);
  }
}

TEST(Dropout, ShapeRuleRejectsBadOperands) {
  Graph g;
  const NodeId x = g.input("x", Shape(Dims{4}, DType::F32));
  const NodeId s = g.input("s", Shape(Dims{}, DType::I64));
  const NodeId v = g.input("v", Shape(Dims{2}, DType::I64));
  const NodeId i = g.input("i", Shape(Dims{4}, DType::I64));
  EXPECT_THROW(g.add(Op::Dropout, {x, s}, attrs(1.0, 0)), Error);
  EXPECT_THROW(g.add(Op::Dropout, {x, s}, attrs(-0.1, 0)), Error);
  EXPECT_THROW(g.add(Op::Dropout, {x, v}, attrs(0.5, 0)), Error);
  EXPECT_THROW(g.add(Op::Dropout, {i, s}, attrs(0.5, 0)), Error);
  EXPECT_NO_THROW(g.add(Op::Dropout, {x, s}, attrs(0.5, 0)));
}

// d sum(dropout(x)) / dx is the mask times 1 / (1 - p): exactly dropout(ones) of the same node.
TEST(Dropout, VjpRedrawsTheForwardMask) {
  Graph g;
  const NodeId x = g.input("x", Shape(Dims{257}, DType::F32));
  const NodeId s = g.input("step", Shape(Dims{}, DType::I64));
  const NodeId y = g.add(Op::Dropout, {x, s}, attrs(0.3, 5));
  const NodeId loss = g.add(Op::ReduceSum, {y}, {});
  const NodeId dx = grad(g, loss, {x})[0];
  g.add_output("y", y);
  g.add_output("dx", dx);
  const TensorMap out = testing::run_graph(g, {{"x", ones(257)}, {"step", step_t(17)}});
  for (int64_t i = 0; i < 257; ++i)
    EXPECT_EQ(out.at("dx").data<float>()[i], out.at("y").data<float>()[i]) << i;
}

// CoreML: MIL has no counter-based RNG, so p > 0 fails at export naming the node, writing nothing.
TEST(Dropout, CoreMLExportOfPAboveZeroFailsClearly) {
  Graph g;
  const NodeId x = g.input("x", Shape(Dims{4}, DType::F32));
  const NodeId s = g.input("step", Shape(Dims{}, DType::I64));
  g.add_output("y", g.add(Op::Dropout, {x, s}, attrs(0.5, 1)));
  const auto dir = testing::process_temp_dir("rlx_dropout_coreml");
  const auto pkg = dir / "d.mlpackage";
  try {
    coreml::export_package(g, {}, pkg.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dropout with p > 0 has no MIL form"), std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(pkg));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rlx
