// Dense convs over phase planes (conv_phase_gemm.cc) against a float64
// direct reference: strides 1 to 3 and unequal ones, kernels wider than the
// stride and narrower (1x1/2 keeps one phase of four), even and odd maps,
// asymmetric and zero padding, batches, bands of rows cut short by the map's
// end, O not a multiple of the micro-tile, the fused bias, activations and
// residual. The weight is a Param, as in a compiled model, so the CPU backend
// packs it and takes this path where an own sgemm kernel runs (on the
// portable path the same convs take im2col + OpenBLAS); every case has the 64
// or more products per output the path asks for.
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

struct PhaseCase {
  int64_t N, C, O, H, W, KH, KW, SH, SW;
  std::vector<int64_t> pads;  // top, left, bottom, right
  Epilogue act = Epilogue::none;
  bool residual = false;
};

Tensor direct_reference(const PhaseCase& c, const Tensor& x, const Tensor& w, const Tensor& b,
                        const Tensor* res, int64_t OH, int64_t OW) {
  Tensor y(Dims{c.N, c.O, OH, OW}, DType::F32);
  const float *xp = x.data<float>(), *wp = w.data<float>(), *bp = b.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          const int64_t at = ((n * c.O + o) * OH + oy) * OW + ox;
          double acc = bp[o];
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t ky = 0; ky < c.KH; ++ky)
              for (int64_t kx = 0; kx < c.KW; ++kx) {
                const int64_t iy = oy * c.SH - c.pads[0] + ky, ix = ox * c.SW - c.pads[1] + kx;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                acc += double(xp[((n * c.C + ci) * c.H + iy) * c.W + ix]) *
                       wp[((o * c.C + ci) * c.KH + ky) * c.KW + kx];
              }
          if (res) acc += res->data<float>()[at];
          if (c.act == Epilogue::relu) acc = std::max(acc, 0.0);
          if (c.act == Epilogue::relu6) acc = std::clamp(acc, 0.0, 6.0);
          yp[at] = float(acc);
        }
  return y;
}

// bf16: compiled under MatmulPrecision::bf16, against x and w rounded to bf16.
void check_phase_conv(const PhaseCase& c, uint64_t seed, bool bf16 = false) {
  const int64_t OH = (c.H + c.pads[0] + c.pads[2] - c.KH) / c.SH + 1;
  const int64_t OW = (c.W + c.pads[1] + c.pads[3] - c.KW) / c.SW + 1;
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{c.N, c.C, c.H, c.W}, DType::F32));
  NodeId w = b.param("w", Shape(Dims{c.O, c.C, c.KH, c.KW}, DType::F32));
  NodeId bias = b.param("b", Shape(Dims{c.O}, DType::F32));
  std::vector<NodeId> ins{x, w, bias};
  if (c.residual) ins.push_back(b.input("r", Shape(Dims{c.N, c.O, OH, OW}, DType::F32)));
  g.add_output("y", g.add(Op::Conv, ins,
                          ConvAttrs{.stride = {c.SH, c.SW},
                                    .pads = c.pads,
                                    .dilation = {1, 1},
                                    .activation = c.act,
                                    .residual = c.residual}));
  const Tensor xt = random_tensor({c.N, c.C, c.H, c.W}, DType::F32, seed);
  const Tensor wt = random_tensor({c.O, c.C, c.KH, c.KW}, DType::F32, seed + 1);
  const Tensor bt = random_tensor({c.O}, DType::F32, seed + 2);
  const Tensor rt = random_tensor({c.N, c.O, OH, OW}, DType::F32, seed + 3);
  CompileOptions o;
  if (bf16) o.backend = make_cpu_backend({.matmul_precision = MatmulPrecision::bf16});
  Session s(Executable::compile(g, {{"w", wt}, {"b", bt}}, o));
  auto rounded = [&](const Tensor& t) { return bf16 ? testing::bf16_rounded(t) : t; };
  const Tensor want =
      direct_reference(c, rounded(xt), rounded(wt), bt, c.residual ? &rt : nullptr, OH, OW);
  std::map<std::string, Tensor> feeds{{"x", xt}};
  if (c.residual) feeds.emplace("r", rt);
  for (int run = 0; run < 2; ++run) {  // the first run packs the weight, the second reuses it
    const Tensor got = s.run(feeds).at("y");
    ASSERT_EQ(got.dims(), want.dims());
    const double err = testing::parity(got, want).max_abs;  // a NaN counts as infinite
    // f32 sums of C * KH * KW terms of |x w| < 1 (the ordering of a GEMM);
    // a wrong tap, phase or band is O(0.1).
    EXPECT_LE(err, 2e-7 * double(c.C * c.KH * c.KW) + 2e-6)
        << "N" << c.N << " C" << c.C << " O" << c.O << " " << c.H << "x" << c.W << " k" << c.KH
        << "x" << c.KW << " s" << c.SH << "x" << c.SW << " run " << run << " bf16 " << bf16;
  }
}

TEST(ConvPhaseGemm, MatchesDirectReference) {
  const PhaseCase cases[] = {
      {1, 16, 32, 56, 56, 3, 3, 2, 2, {1, 1, 1, 1}},                        // resnet's 3x3/2
      {1, 3, 20, 45, 47, 7, 7, 2, 2, {3, 3, 3, 3}, Epilogue::relu},         // a stem, odd map
      {2, 9, 17, 20, 21, 3, 3, 2, 2, {1, 0, 0, 1}},                         // asymmetric, batch
      {1, 72, 40, 30, 30, 1, 1, 2, 2, {0, 0, 0, 0}},                        // 1x1/2: one phase
      {1, 8, 30, 25, 33, 5, 5, 1, 1, {2, 2, 2, 2}, Epilogue::relu6},        // 5x5/1
      {1, 8, 16, 31, 29, 3, 3, 3, 3, {1, 2, 0, 1}},                         // stride 3
      {1, 10, 18, 26, 40, 3, 5, 2, 1, {1, 2, 1, 2}},                        // unequal strides
      {1, 12, 28, 24, 24, 3, 3, 2, 2, {1, 1, 1, 1}, Epilogue::relu, true},  // + residual
      {1, 9, 15, 18, 19, 2, 4, 2, 3, {0, 1, 1, 0}},                         // even kernels
  };
  uint64_t seed = 40;
  const bool bf16_kernel = cpu_isa() == Isa::avx512 && has_avx512_bf16();
  for (int threads : {1, 2, 3}) {
    const int saved = num_threads();
    set_num_threads(threads);
    for (const PhaseCase& c : cases) {
      check_phase_conv(c, seed += 4);
      // The same convs on the bf16 kernel (odd K = C * KH * KW among them).
      if (bf16_kernel) check_phase_conv(c, seed, true);
    }
    set_num_threads(saved);
  }
}

}  // namespace
}  // namespace rlx
