// Winograd 3x3 convs (conv_winograd.cc) against a float64 direct reference:
// both variants (F(4,3) on maps of 12+ rows and columns, F(2,3) below), tiles
// cut by the map's edge, asymmetric and zero padding, O not a multiple of the
// sgemm micro-tile, batches, several tile-row blocks, and the fused bias +
// activation. The weight is a Param, as in a compiled model, so the CPU
// backend packs it and takes the Winograd path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rlx/backend.h"
#include "rlx/builder.h"
#include "rlx/cpu_isa.h"
#include "rlx/runtime.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::random_tensor;

struct WinogradCase {
  int64_t N, C, O, H, W;
  std::vector<int64_t> pads;  // top, left, bottom, right
  Epilogue act = Epilogue::none;
};

Tensor winograd_reference(const WinogradCase& c, const Tensor& x, const Tensor& w, const Tensor& b,
                          int64_t OH, int64_t OW) {
  Tensor y(Dims{c.N, c.O, OH, OW}, DType::F32);
  const float *xp = x.data<float>(), *wp = w.data<float>(), *bp = b.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = bp[o];
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 3; ++kx) {
                const int64_t iy = oy - c.pads[0] + ky, ix = ox - c.pads[1] + kx;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                acc += double(xp[((n * c.C + ci) * c.H + iy) * c.W + ix]) *
                       wp[((o * c.C + ci) * 3 + ky) * 3 + kx];
              }
          if (c.act == Epilogue::relu) acc = std::max(acc, 0.0);
          if (c.act == Epilogue::relu6) acc = std::clamp(acc, 0.0, 6.0);
          yp[((n * c.O + o) * OH + oy) * OW + ox] = float(acc);
        }
  return y;
}

// The conv with weight wt and bias bt (params, packed on the first run),
// compiled for `precision`.
std::shared_ptr<Executable> compile_conv(const WinogradCase& c, const Tensor& wt, const Tensor& bt,
                                         MatmulPrecision precision = MatmulPrecision::f32) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{c.N, c.C, c.H, c.W}, DType::F32));
  NodeId w = b.param("w", wt.shape());
  NodeId bias = b.param("b", bt.shape());
  g.add_output(
      "y",
      g.add(Op::Conv, {x, w, bias},
            ConvAttrs{.stride = {1, 1}, .pads = c.pads, .dilation = {1, 1}, .activation = c.act}));
  CompileOptions o;
  o.backend = make_cpu_backend({.matmul_precision = precision});
  return Executable::compile(g, {{"w", wt}, {"b", bt}}, o);
}

void check_winograd(const WinogradCase& c, uint64_t seed) {
  const int64_t OH = c.H + c.pads[0] + c.pads[2] - 2, OW = c.W + c.pads[1] + c.pads[3] - 2;
  const Tensor xt = random_tensor({c.N, c.C, c.H, c.W}, DType::F32, seed);
  const Tensor wt = random_tensor({c.O, c.C, 3, 3}, DType::F32, seed + 1);
  const Tensor bt = random_tensor({c.O}, DType::F32, seed + 2);
  Session s(compile_conv(c, wt, bt));
  const Tensor want = winograd_reference(c, xt, wt, bt, OH, OW);
  for (int run = 0; run < 2; ++run) {  // the first run packs the weights, the second reuses them
    const Tensor got = s.run({{"x", xt}}).at("y");
    ASSERT_EQ(got.dims(), want.dims());
    // Per unit of the 9C-term sum: F(4,3)'s transforms scale terms by up to
    // ~100, so its f32 error is ~4e-7 (seen up to 5.5e-5 at C = 16), F(2,3)'s
    // ~2e-8 (as im2col's); a wrong tap or tile is O(0.1).
    const bool f43 = std::min(OH, OW) >= 12;
    const double tol = f43 ? 1e-6 * double(9 * c.C) + 1e-5 : 1e-7 * double(9 * c.C) + 5e-6;
    EXPECT_LE(testing::parity(got, want).max_abs, tol)  // a NaN counts as infinite
        << "N" << c.N << " C" << c.C << " O" << c.O << " " << c.H << "x" << c.W << " run " << run;
  }
}

TEST(ConvWinograd, MatchesDirectReference) {
  // On the portable path (no own sgemm) the same convs take im2col + OpenBLAS.
  const WinogradCase cases[] = {
      {1, 16, 16, 20, 20, {1, 1, 1, 1}},                 // F(4,3), whole tiles
      {2, 9, 40, 13, 17, {1, 1, 1, 1}, Epilogue::relu},  // F(4,3), cut tiles, O % 6 != 0
      {1, 12, 20, 30, 14, {2, 0, 1, 2}},                 // asymmetric padding
      {1, 8, 16, 60, 60, {1, 1, 1, 1}},                  // two blocks of tile rows
      {1, 8, 16, 15, 40, {0, 2, 1, 0}},                  // left padding 2, 10 tiles a row
      {1, 32, 24, 7, 7, {1, 1, 1, 1}, Epilogue::relu6},  // F(2,3)
      {3, 8, 17, 9, 11, {0, 0, 0, 0}},                   // F(2,3), no padding, cut tiles
  };
  uint64_t seed = 10;
  for (int threads : {1, 2}) {
    const int saved = num_threads();
    set_num_threads(threads);
    for (const WinogradCase& c : cases) check_winograd(c, seed += 3);
    set_num_threads(saved);
  }
}

// MatmulPrecision::bf16: F(2,3)'s GEMMs round their transformed operands to
// bf16 (within bf16's error of the direct conv, and apart from the f32
// result); F(4,3)'s stay f32, bit for bit.
TEST(ConvWinograd, Bf16RoundsOnlyF23) {
  if (cpu_isa() < Isa::avx512 || !has_avx512_bf16())
    GTEST_SKIP() << "CPU has no AVX-512 BF16";  // covered on Zen 4/5 hosts
  const WinogradCase cases[] = {
      {1, 32, 24, 7, 7, {1, 1, 1, 1}, Epilogue::relu6},  // F(2,3)
      {3, 8, 17, 9, 11, {0, 0, 0, 0}},                   // F(2,3), no padding, cut tiles
      {1, 9, 16, 8, 8, {1, 1, 1, 1}},                    // F(2,3), odd C: a half pair
      {1, 520, 16, 6, 6, {1, 1, 1, 1}},                  // F(2,3), C past a 512-deep block
      {1, 16, 16, 20, 20, {1, 1, 1, 1}},                 // F(4,3)
  };
  uint64_t seed = 60;
  for (const WinogradCase& c : cases) {
    const int64_t OH = c.H + c.pads[0] + c.pads[2] - 2, OW = c.W + c.pads[1] + c.pads[3] - 2;
    const Tensor xt = random_tensor({c.N, c.C, c.H, c.W}, DType::F32, seed += 3);
    const Tensor wt = random_tensor({c.O, c.C, 3, 3}, DType::F32, seed + 1);
    const Tensor bt = random_tensor({c.O}, DType::F32, seed + 2);
    const Tensor want = winograd_reference(c, xt, wt, bt, OH, OW);
    auto run = [&](MatmulPrecision p) {
      return Session(compile_conv(c, wt, bt, p)).run({{"x", xt}}).at("y");
    };
    const Tensor f32 = run(MatmulPrecision::f32), bf16 = run(MatmulPrecision::bf16);
    const double err = testing::parity(bf16, want).max_abs,
                 apart = testing::parity(bf16, f32).max_abs;
    SCOPED_TRACE("C" + std::to_string(c.C) + " " + std::to_string(c.H) + "x" + std::to_string(c.W));
    if (std::min(OH, OW) >= 12) {
      EXPECT_EQ(apart, 0.0);  // F(4,3): the f32 kernel
      continue;
    }
    // bf16's 2^-9 on U and V, summed over C and the 16 tile points with the
    // transforms' +-1 mixing: seen 0.043-0.11 max over the map for C = 8..64,
    // about 0.005 * sqrt(9C); a half pair or block misread is O(1).
    EXPECT_LE(err, 0.012 * std::sqrt(9.0 * double(c.C)) + 1e-3);
    EXPECT_GT(apart, 1e-3);  // the bf16 kernel ran
  }
}

}  // namespace
}  // namespace rlx
