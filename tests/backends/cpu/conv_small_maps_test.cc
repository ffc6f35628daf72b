// Convs with small output maps (<= 64 positions) and a constant weight, which
// conv.cc runs as C^T = col^T W^T with the packed W^T (and a weight
// gradient's form, a kernel wider than its output, with any weight): against a float64
// direct reference, over strides, kernel sizes, paddings, batches (positions
// of several images in one product), O off the micro-tile and the fused bias +
// activation. The weight is a Param, as in a compiled model, so the CPU
// backend packs it; 1x1 and 3x3 stride-1 convs take other paths and are here
// as the boundary of this one.
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

struct SmallMapCase {
  int64_t N, C, O, H, W, k, stride;
  std::vector<int64_t> pads;  // top, left, bottom, right
  Epilogue act = Epilogue::none;
};

int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe) {
  return (in + pb + pe - k) / s + 1;
}

Tensor small_map_reference(const SmallMapCase& c, const Tensor& x, const Tensor& w,
                           const Tensor& b) {
  const int64_t OH = out_dim(c.H, c.k, c.stride, c.pads[0], c.pads[2]);
  const int64_t OW = out_dim(c.W, c.k, c.stride, c.pads[1], c.pads[3]);
  Tensor y(Dims{c.N, c.O, OH, OW}, DType::F32);
  const float *xp = x.data<float>(), *wp = w.data<float>(), *bp = b.data<float>();
  float* yp = y.data<float>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          double acc = bp[o];
          for (int64_t ci = 0; ci < c.C; ++ci)
            for (int64_t ky = 0; ky < c.k; ++ky)
              for (int64_t kx = 0; kx < c.k; ++kx) {
                const int64_t iy = oy * c.stride - c.pads[0] + ky;
                const int64_t ix = ox * c.stride - c.pads[1] + kx;
                if (iy < 0 || iy >= c.H || ix < 0 || ix >= c.W) continue;
                acc += double(xp[((n * c.C + ci) * c.H + iy) * c.W + ix]) *
                       wp[((o * c.C + ci) * c.k + ky) * c.k + kx];
              }
          if (c.act == Epilogue::relu) acc = std::max(acc, 0.0);
          if (c.act == Epilogue::relu6) acc = std::clamp(acc, 0.0, 6.0);
          yp[((n * c.O + o) * OH + oy) * OW + ox] = float(acc);
        }
  return y;
}

// weight_input: w and b are graph inputs (a training graph's), so nothing is packed ahead.
// bf16: compiled under MatmulPrecision::bf16, against x and w rounded to bf16.
void check_small_map(const SmallMapCase& c, uint64_t seed, bool weight_input = false,
                     bool bf16 = false) {
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{c.N, c.C, c.H, c.W}, DType::F32));
  const Shape ws(Dims{c.O, c.C, c.k, c.k}, DType::F32), bs(Dims{c.O}, DType::F32);
  NodeId w = weight_input ? b.input("w", ws) : b.param("w", ws);
  NodeId bias = weight_input ? b.input("b", bs) : b.param("b", bs);
  g.add_output("y", g.add(Op::Conv, {x, w, bias},
                          ConvAttrs{.stride = {c.stride, c.stride},
                                    .pads = c.pads,
                                    .dilation = {1, 1},
                                    .activation = c.act}));
  const Tensor xt = random_tensor({c.N, c.C, c.H, c.W}, DType::F32, seed);
  const Tensor wt = random_tensor({c.O, c.C, c.k, c.k}, DType::F32, seed + 1);
  const Tensor bt = random_tensor({c.O}, DType::F32, seed + 2);
  TensorMap weights{{"w", wt}, {"b", bt}}, inputs{{"x", xt}};
  if (weight_input) std::swap(weights, inputs), inputs["x"] = xt;
  CompileOptions o;
  if (bf16) o.backend = make_cpu_backend({.matmul_precision = MatmulPrecision::bf16});
  Session s(Executable::compile(g, weights, o));
  auto rounded = [&](const Tensor& t) { return bf16 ? testing::bf16_rounded(t) : t; };
  const Tensor want = small_map_reference(c, rounded(xt), rounded(wt), bt);
  for (int run = 0; run < 2; ++run) {  // the first run packs the weight, the second reuses it
    const Tensor got = s.run(inputs).at("y");
    ASSERT_EQ(got.dims(), want.dims());
    const double err = testing::parity(got, want).max_abs;  // a NaN counts as infinite
    // f32 sums of C * k * k unit-scale terms: ~1e-7 each; a wrong tap or row is O(0.1).
    EXPECT_LE(err, 1e-7 * double(c.C * c.k * c.k) + 5e-6)
        << "N" << c.N << " C" << c.C << " O" << c.O << " " << c.H << "x" << c.W << " k" << c.k
        << " s" << c.stride << " run " << run << " bf16 " << bf16;
  }
}

TEST(ConvSmallMaps, MatchesDirectReference) {
  const SmallMapCase cases[] = {
      {1, 64, 96, 14, 14, 3, 2, {1, 1, 1, 1}, Epilogue::relu},  // 7x7 out, as resnet's downsample
      {1, 40, 70, 8, 8, 3, 2, {1, 1, 1, 1}},                    // 4x4 out, O off the tile
      {3, 16, 48, 9, 9, 3, 2, {1, 1, 1, 1}, Epilogue::relu6},   // positions of 3 images
      {2, 8, 33, 11, 10, 5, 2, {2, 1, 2, 2}},                   // 5x5, asymmetric padding
      {1, 12, 40, 8, 8, 2, 1, {0, 0, 0, 0}},                    // 2x2 stride 1: 7x7 out
      {1, 24, 64, 7, 7, 3, 1, {1, 1, 1, 1}},                    // 3x3/1: Winograd's, not this
      {1, 32, 64, 7, 7, 1, 1, {0, 0, 0, 0}},                    // 1x1: the plain GEMM
  };
  uint64_t seed = 40;
  const bool bf16_kernel = cpu_isa() == Isa::avx512 && has_avx512_bf16();
  for (int threads : {1, 2}) {
    const int saved = num_threads();
    set_num_threads(threads);
    for (const SmallMapCase& c : cases) {
      check_small_map(c, seed += 3);
      // The bf16 kernel's products, but for 3x3/1: Winograd's own test covers it.
      if (bf16_kernel && !(c.k == 3 && c.stride == 1)) check_small_map(c, seed, false, true);
    }
    set_num_threads(saved);
  }
}

TEST(ConvSmallMaps, WeightGradientFormWithAWeightThatIsAnInput) {
  // A conv weight's gradient as autodiff spells it (the batch as channels, the
  // output gradient as the weight, 3x3 out of an 8x8 kernel), weights fed per
  // run as in training: the transposed product packs W^T itself.
  const SmallMapCase cases[] = {
      {16, 64, 32, 8, 8, 8, 1, {1, 1, 1, 1}},  // the digits CNN's second conv
      {3, 20, 40, 6, 7, 6, 1, {1, 1, 1, 1}},   // O off the panel, 3x4 out
      {5, 9, 17, 5, 5, 4, 1, {0, 0, 0, 0}},    // the narrowest O the path takes
  };
  uint64_t seed = 90;
  for (int threads : {1, 2}) {
    const int saved = num_threads();
    set_num_threads(threads);
    for (const SmallMapCase& c : cases) check_small_map(c, seed += 3, true);
    set_num_threads(saved);
  }
}

}  // namespace
}  // namespace rlx
