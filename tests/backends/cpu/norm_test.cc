// layer_norm, rms_norm, group_norm, batch_norm, layer_norm_2d: scalar double references written
// here, PyTorch goldens (computed in float64), precision, threading, f64/f16 paths, errors.
//
// Tolerances: statistics are accumulated in double and the element-wise pass is a handful of
// float ops, so f32 outputs (|y| ~ 1..3) agree with float64 truth to a few ulps: atol = rtol =
// 1e-5.
#include <gtest/gtest.h>

#include <cmath>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

std::vector<double> vals(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.item_as_double(i);
  return v;
}

Tensor f64(const Dims& d, const std::vector<double>& v) {
  return Tensor::from_vector<double>(d, v, DType::F64);
}

// Rows of `inner` elements; gamma/beta (empty = absent) indexed by position within the row.
Tensor ref_rows(const Tensor& xt, int64_t inner, const Tensor* g, const Tensor* b, double eps,
                bool rms) {
  auto x = vals(xt);
  std::vector<double> gv = g ? vals(*g) : std::vector<double>{}, bv = b ? vals(*b) : gv;
  std::vector<double> y(x.size());
  for (size_t r = 0; inner && r < x.size() / size_t(inner); ++r) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; ++i) mean += x[r * inner + i];
    mean = rms ? 0 : mean / double(inner);
    for (int64_t i = 0; i < inner; ++i)
      var += (x[r * inner + i] - mean) * (x[r * inner + i] - mean);
    double rstd = 1 / std::sqrt(var / double(inner) + eps);
    for (int64_t i = 0; i < inner; ++i) {
      double v = (x[r * inner + i] - mean) * rstd;
      if (g) v *= gv[size_t(i)];
      if (b) v += bv[size_t(i)];
      y[r * inner + i] = v;
    }
  }
  return f64(xt.dims(), y);
}

// Group norm reference on [N, C, S...]; batch_norm and layer_norm_2d are built from it too.
Tensor ref_group(const Tensor& xt, int64_t groups, const Tensor* g, const Tensor* b, double eps) {
  auto x = vals(xt);
  const int64_t N = xt.dim(0), C = xt.dim(1), S = xt.numel() / std::max<int64_t>(1, N * C);
  std::vector<double> gv = g ? vals(*g) : std::vector<double>{}, bv = b ? vals(*b) : gv;
  std::vector<double> y(x.size());
  const int64_t cpg = C / groups;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t gi = 0; gi < groups; ++gi) {
      const size_t base = size_t((n * C + gi * cpg) * S);
      const size_t len = size_t(cpg * S);
      double mean = 0, var = 0;
      for (size_t i = 0; i < len; ++i) mean += x[base + i];
      mean /= double(len);
      for (size_t i = 0; i < len; ++i) var += (x[base + i] - mean) * (x[base + i] - mean);
      double rstd = 1 / std::sqrt(var / double(len) + eps);
      for (size_t i = 0; i < len; ++i) {
        int64_t ch = gi * cpg + int64_t(i) / S;
        y[base + i] =
            (x[base + i] - mean) * rstd * (g ? gv[size_t(ch)] : 1.0) + (b ? bv[size_t(ch)] : 0.0);
      }
    }
  return f64(xt.dims(), y);
}

Tensor ref_batch(const Tensor& xt, const Tensor& m, const Tensor& var, const Tensor& g,
                 const Tensor& b, double eps) {
  auto x = vals(xt), mv = vals(m), vv = vals(var), gv = vals(g), bv = vals(b);
  const int64_t C = xt.dim(1), S = xt.numel() / std::max<int64_t>(1, xt.dim(0) * C);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    size_t ch = size_t((int64_t(i) / S) % C);
    y[i] = (x[i] - mv[ch]) / std::sqrt(vv[ch] + eps) * gv[ch] + bv[ch];
  }
  return f64(xt.dims(), y);
}

Tensor ref_ln2d(const Tensor& xt, const Tensor* g, const Tensor* b, double eps) {
  auto x = vals(xt);
  const int64_t N = xt.dim(0), C = xt.dim(1), HW = xt.dim(2) * xt.dim(3);
  std::vector<double> gv = g ? vals(*g) : std::vector<double>{}, bv = b ? vals(*b) : gv;
  std::vector<double> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t p = 0; p < HW; ++p) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < C; ++c) mean += x[size_t((n * C + c) * HW + p)];
      mean /= double(C);
      for (int64_t c = 0; c < C; ++c) {
        double d = x[size_t((n * C + c) * HW + p)] - mean;
        var += d * d;
      }
      double rstd = 1 / std::sqrt(var / double(C) + eps);
      for (int64_t c = 0; c < C; ++c) {
        size_t i = size_t((n * C + c) * HW + p);
        y[i] = (x[i] - mean) * rstd * (g ? gv[size_t(c)] : 1.0) + (b ? bv[size_t(c)] : 0.0);
      }
    }
  return f64(xt.dims(), y);
}

Tensor rnd(const Dims& d, uint64_t seed, double lo = -2, double hi = 2) {
  return random_tensor(d, DType::F32, seed, lo, hi);
}

// ---------------------------------------------------------------- layer_norm / rms_norm

TEST(NormLayerNorm, MatchesReferenceOverShapesAndOptionalParams) {
  struct Case {
    Dims x;
    int64_t naxes;
    int nparams;
  };
  for (const Case& c : std::vector<Case>{{{4, 7, 33}, 1, 3},
                                         {{4, 7, 33}, 2, 3},
                                         {{3, 5, 6}, 3, 3},
                                         {{6, 17}, 1, 1},
                                         {{6, 17}, 1, 2},
                                         {{1, 1, 1}, 1, 3},
                                         {{2, 1}, 1, 3},
                                         {{1, 9}, 1, 3},
                                         {{128, 1024}, 1, 3}}) {
    SCOPED_TRACE(dims_str(c.x) + " naxes=" + std::to_string(c.naxes));
    Tensor x = rnd(c.x, 1);
    Dims nd(c.x.end() - c.naxes, c.x.end());
    Tensor g = rnd(nd, 2, 0.5, 1.5), b = rnd(nd, 3);
    std::vector<Tensor> in{x};
    if (c.nparams > 1) in.push_back(g);
    if (c.nparams > 2) in.push_back(b);
    Tensor y = run_op(Op::LayerNorm, in, {{"naxes", c.naxes}, {"eps", 1e-5}});
    EXPECT_TRUE(all_close(y,
                          ref_rows(x, numel(nd), c.nparams > 1 ? &g : nullptr,
                                   c.nparams > 2 ? &b : nullptr, 1e-5, false),
                          1e-5, 1e-5));
  }
}

TEST(NormLayerNorm, ConstantRowGivesBetaAndDefaultEps) {
  // Variance 0: y = beta exactly (x - mean = 0); default eps is 1e-5.
  Tensor x = Tensor::from_vector<float>({2, 4}, {3, 3, 3, 3, 1, 2, 3, 4}, DType::F32);
  Tensor g = Tensor::from_vector<float>({4}, {1, 2, 3, 4}, DType::F32);
  Tensor b = Tensor::from_vector<float>({4}, {0.5f, -1, 0, 2}, DType::F32);
  Tensor y = run_op(Op::LayerNorm, {x, g, b});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y.item_as_double(i), b.item_as_double(i));
  EXPECT_TRUE(all_close(y, ref_rows(x, 4, &g, &b, 1e-5, false), 1e-6, 1e-6));
  // A larger eps visibly shrinks the output, so the attribute is read.
  Tensor y2 = run_op(Op::LayerNorm, {x, g, b}, {{"eps", 1.0}});
  EXPECT_TRUE(all_close(y2, ref_rows(x, 4, &g, &b, 1.0, false), 1e-6, 1e-6));
  EXPECT_FALSE(all_close(y2, y, 1e-3, 1e-3));
}

TEST(NormLayerNorm, LargeMeanSmallSpreadKeepsPrecision) {
  // |mean| / std = 1e5: a one-pass float E[x^2] - E[x]^2, or centering with a float-rounded
  // mean, is off by ~1e-2 here; two-pass double statistics with a split mean are not.
  Tensor x = random_tensor({8, 256}, DType::F32, 7, 999.99, 1000.01);
  Tensor y = run_op(Op::LayerNorm, {x}, {{"eps", 0.0}});
  EXPECT_TRUE(all_close(y, ref_rows(x, 256, nullptr, nullptr, 0.0, false), 2e-5, 2e-5));
  Tensor xr = random_tensor({4, 4, 4, 20}, DType::F32, 8, 999.99, 1000.01);
  EXPECT_TRUE(all_close(run_op(Op::GroupNorm, {xr}, {{"groups", int64_t(2)}, {"eps", 0.0}}),
                        ref_group(xr, 2, nullptr, nullptr, 0.0), 2e-5, 2e-5));
  EXPECT_TRUE(all_close(run_op(Op::LayerNorm2d, {xr}, {{"eps", 0.0}}),
                        ref_ln2d(xr, nullptr, nullptr, 0.0), 2e-5, 2e-5));
}

TEST(NormLayerNorm, F64AndF16Paths) {
  Tensor x = random_tensor({5, 40}, DType::F64, 4, -3, 3);
  Tensor g = random_tensor({40}, DType::F64, 5), b = random_tensor({40}, DType::F64, 6);
  Tensor y = run_op(Op::LayerNorm, {x, g, b});
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_TRUE(all_close(y, ref_rows(x, 40, &g, &b, 1e-5, false), 1e-12, 1e-12));
  // f16 runs through the f32 upcast; the result is rounded to f16 (~1e-3 relative).
  Tensor xh = x.to(DType::F16), gh = g.to(DType::F16), bh = b.to(DType::F16);
  Tensor yh = run_op(Op::LayerNorm, {xh, gh, bh});
  EXPECT_EQ(yh.dtype(), DType::F16);
  EXPECT_TRUE(all_close(yh, ref_rows(xh, 40, &gh, &bh, 1e-5, false), 5e-3, 5e-3));
}

TEST(NormLayerNorm, EmptyTensors) {
  EXPECT_EQ(run_op(Op::LayerNorm, {rnd({0, 8}, 1)}).numel(), 0);
  EXPECT_EQ(run_op(Op::LayerNorm, {rnd({3, 0}, 1)}).dims(), (Dims{3, 0}));
  EXPECT_EQ(run_op(Op::RmsNorm, {rnd({0, 4}, 1), rnd({4}, 2)}).numel(), 0);
  EXPECT_EQ(run_op(Op::GroupNorm, {rnd({0, 4, 3}, 1)}, {{"groups", int64_t(2)}}).numel(), 0);
  EXPECT_EQ(run_op(Op::BatchNorm,
                   {rnd({0, 3}, 1), rnd({3}, 2), rnd({3}, 3, 0.1, 1), rnd({3}, 4), rnd({3}, 5)})
                .numel(),
            0);
  EXPECT_EQ(run_op(Op::LayerNorm2d, {rnd({1, 3, 0, 4}, 1)}).numel(), 0);
}

TEST(NormRmsNorm, MatchesReference) {
  for (const Dims& d : std::vector<Dims>{{3, 64}, {2, 3, 5}, {1, 1}, {70, 513}}) {
    Tensor x = rnd(d, 11), g = rnd({d.back()}, 12, 0.5, 1.5);
    EXPECT_TRUE(all_close(run_op(Op::RmsNorm, {x, g}, {{"eps", 1e-6}}),
                          ref_rows(x, d.back(), &g, nullptr, 1e-6, true), 1e-5, 1e-5));
    EXPECT_TRUE(all_close(run_op(Op::RmsNorm, {x}),
                          ref_rows(x, d.back(), nullptr, nullptr, 1e-5, true), 1e-5, 1e-5));
  }
  Tensor x = rnd({2, 3, 4}, 13), g = rnd({3, 4}, 14);
  EXPECT_TRUE(all_close(run_op(Op::RmsNorm, {x, g}, {{"naxes", int64_t(2)}}),
                        ref_rows(x, 12, &g, nullptr, 1e-5, true), 1e-5, 1e-5));
}

// ---------------------------------------------------------------- group / batch / 2d

TEST(NormGroupNorm, MatchesReference) {
  struct Case {
    Dims x;
    int64_t groups;
  };
  for (const Case& c : std::vector<Case>{{{2, 6, 5, 7}, 3},
                                         {{2, 6, 5, 7}, 1},
                                         {{2, 6, 5, 7}, 6},
                                         {{3, 4, 9}, 2},
                                         {{3, 4}, 2},
                                         {{1, 1, 1, 1}, 1},
                                         {{4, 32, 24, 24}, 8}}) {
    SCOPED_TRACE(dims_str(c.x) + " groups=" + std::to_string(c.groups));
    Tensor x = rnd(c.x, 21), g = rnd({c.x[1]}, 22, 0.5, 1.5), b = rnd({c.x[1]}, 23);
    Attrs a{{"groups", c.groups}, {"eps", 1e-5}};
    EXPECT_TRUE(all_close(run_op(Op::GroupNorm, {x, g, b}, a), ref_group(x, c.groups, &g, &b, 1e-5),
                          1e-5, 1e-5));
    EXPECT_TRUE(all_close(run_op(Op::GroupNorm, {x}, a),
                          ref_group(x, c.groups, nullptr, nullptr, 1e-5), 1e-5, 1e-5));
  }
}

TEST(NormBatchNorm, MatchesReference) {
  for (const Dims& d :
       std::vector<Dims>{{2, 3, 4, 5}, {4, 3}, {2, 5, 7}, {1, 1, 1, 1}, {2, 16, 40, 40}}) {
    SCOPED_TRACE(dims_str(d));
    const int64_t C = d[1];
    Tensor x = rnd(d, 31), m = rnd({C}, 32), v = rnd({C}, 33, 0.1, 2), g = rnd({C}, 34),
           b = rnd({C}, 35);
    EXPECT_TRUE(all_close(run_op(Op::BatchNorm, {x, m, v, g, b}, {{"eps", 1e-3}}),
                          ref_batch(x, m, v, g, b, 1e-3), 1e-5, 1e-5));
  }
}

TEST(NormLayerNorm2d, MatchesReferenceAcrossPositionBlocks) {
  // 20 x 20 = 400 positions crosses the kernel's 256-position block.
  for (const Dims& d :
       std::vector<Dims>{{2, 8, 3, 5}, {1, 64, 20, 20}, {2, 1, 4, 4}, {1, 3, 1, 1}}) {
    SCOPED_TRACE(dims_str(d));
    Tensor x = rnd(d, 41), g = rnd({d[1]}, 42, 0.5, 1.5), b = rnd({d[1]}, 43);
    EXPECT_TRUE(all_close(run_op(Op::LayerNorm2d, {x, g, b}, {{"eps", 1e-6}}),
                          ref_ln2d(x, &g, &b, 1e-6), 1e-5, 1e-5));
    EXPECT_TRUE(
        all_close(run_op(Op::LayerNorm2d, {x, g}), ref_ln2d(x, &g, nullptr, 1e-5), 1e-5, 1e-5));
  }
}

// ---------------------------------------------------------------- PyTorch goldens

const std::map<std::string, std::vector<Tensor>>& norm_goldens() {
  static const auto g = [] {
    using testing::GoldenCase;
    std::vector<GoldenCase> cases;
    auto in = [](std::initializer_list<std::pair<const std::string, Tensor>> l) {
      return TensorMap(l);
    };
    cases.push_back(
        {"ln",
         "y = F.layer_norm(x['x'].double(), (7, 33), x['g'].double(), "
         "x['b'].double(), 1e-5)",
         in({{"x", rnd({4, 7, 33}, 51)}, {"g", rnd({7, 33}, 52)}, {"b", rnd({7, 33}, 53)}})});
    cases.push_back({"rms",
                     "xx = x['x'].double()\n"
                     "y = xx * torch.rsqrt(xx.pow(2).mean(-1, keepdim=True) + 1e-6) * "
                     "x['g'].double()",
                     in({{"x", rnd({5, 96}, 54)}, {"g", rnd({96}, 55)}})});
    cases.push_back(
        {"gn",
         "y = F.group_norm(x['x'].double(), 4, x['g'].double(), x['b'].double(), "
         "1e-5)",
         in({{"x", rnd({2, 12, 5, 6}, 56)}, {"g", rnd({12}, 57)}, {"b", rnd({12}, 58)}})});
    cases.push_back({"bn",
                     "y = F.batch_norm(x['x'].double(), x['m'].double(), x['v'].double(), "
                     "x['g'].double(), x['b'].double(), False, 0.1, 1e-5)",
                     in({{"x", rnd({3, 4, 5, 2}, 59)},
                         {"m", rnd({4}, 60)},
                         {"v", rnd({4}, 61, 0.2, 2)},
                         {"g", rnd({4}, 62)},
                         {"b", rnd({4}, 63)}})});
    // SAM / ConvNeXt LayerNorm2d.
    cases.push_back(
        {"ln2d",
         "xx = x['x'].double()\n"
         "u = xx.mean(1, keepdim=True)\n"
         "s = (xx - u).pow(2).mean(1, keepdim=True)\n"
         "y = (xx - u) / torch.sqrt(s + 1e-6) * x['g'].double()[:, None, None] "
         "+ x['b'].double()[:, None, None]",
         in({{"x", rnd({2, 16, 6, 7}, 64)}, {"g", rnd({16}, 65)}, {"b", rnd({16}, 66)}})});
    return testing::torch_goldens(cases);
  }();
  return g;
}

TEST(NormTorch, MatchesPyTorch) {
  const auto& g = norm_goldens();
  auto x = [](uint64_t s, const Dims& d, double lo = -2, double hi = 2) {
    return rnd(d, s, lo, hi);
  };
  EXPECT_TRUE(all_close(run_op(Op::LayerNorm, {x(51, {4, 7, 33}), x(52, {7, 33}), x(53, {7, 33})},
                               {{"naxes", int64_t(2)}}),
                        g.at("ln")[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_op(Op::RmsNorm, {x(54, {5, 96}), x(55, {96})}, {{"eps", 1e-6}}),
                        g.at("rms")[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_op(Op::GroupNorm, {x(56, {2, 12, 5, 6}), x(57, {12}), x(58, {12})},
                               {{"groups", int64_t(4)}}),
                        g.at("gn")[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(run_op(Op::BatchNorm, {x(59, {3, 4, 5, 2}), x(60, {4}), x(61, {4}, 0.2, 2),
                                               x(62, {4}), x(63, {4})}),
                        g.at("bn")[0], 1e-5, 1e-5));
  EXPECT_TRUE(all_close(
      run_op(Op::LayerNorm2d, {x(64, {2, 16, 6, 7}), x(65, {16}), x(66, {16})}, {{"eps", 1e-6}}),
      g.at("ln2d")[0], 1e-5, 1e-5));
}

// ---------------------------------------------------------------- errors

TEST(NormErrors, BadShapesAndAttrsThrow) {
  Tensor x = rnd({2, 6, 3}, 1);
  // naxes out of range.
  EXPECT_THROW(run_op(Op::LayerNorm, {x}, {{"naxes", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::LayerNorm, {x}, {{"naxes", int64_t(4)}}), Error);
  // gamma/beta must have the normalized dims.
  EXPECT_THROW(run_op(Op::LayerNorm, {x, rnd({6}, 2)}), Error);
  EXPECT_THROW(run_op(Op::LayerNorm, {x, rnd({3}, 2), rnd({4}, 3)}), Error);
  EXPECT_THROW(run_op(Op::RmsNorm, {x, rnd({6, 3}, 2)}), Error);
  EXPECT_THROW(run_op(Op::LayerNorm, {x, rnd({3}, 2).to(DType::F64)}), Error);
  EXPECT_THROW(run_op(Op::LayerNorm, {x}, {{"eps", INFINITY}}), Error);
  // groups must divide C; gamma per channel.
  EXPECT_THROW(run_op(Op::GroupNorm, {x}, {{"groups", int64_t(4)}}), Error);
  EXPECT_THROW(run_op(Op::GroupNorm, {x}, {{"groups", int64_t(0)}}), Error);
  EXPECT_THROW(run_op(Op::GroupNorm, {x}), Error);  // groups is required
  EXPECT_THROW(run_op(Op::GroupNorm, {x, rnd({3}, 2)}, {{"groups", int64_t(2)}}), Error);
  EXPECT_THROW(run_op(Op::GroupNorm, {rnd({6}, 1)}, {{"groups", int64_t(2)}}), Error);
  // batch_norm parameters per channel.
  Tensor c6 = rnd({6}, 3), c5 = rnd({5}, 4);
  EXPECT_THROW(run_op(Op::BatchNorm, {x, c6, c6, c5, c6}), Error);
  EXPECT_THROW(run_op(Op::BatchNorm, {x, c6, c6, c6, rnd({6, 1}, 5)}), Error);
  EXPECT_THROW(run_op(Op::BatchNorm, {rnd({6}, 1), c6, c6, c6, c6}), Error);
  // layer_norm_2d needs NCHW and per-channel params.
  EXPECT_THROW(run_op(Op::LayerNorm2d, {x}), Error);
  EXPECT_THROW(run_op(Op::LayerNorm2d, {rnd({1, 6, 2, 2}, 1), c5}), Error);
}

// Shape inference validates at graph-build time, also with symbolic dims.
TEST(NormShapeInference, ValidatesParamsAndGroupsWhenAdded) {
  Graph g;
  const Dim seq = Dim::symbol("seq");
  NodeId x = g.input("x", Shape({Dim(2), seq, Dim(8)}, DType::F32));
  NodeId g8 = g.input("g8", Shape({Dim(8)}, DType::F32));
  NodeId g4 = g.input("g4", Shape({Dim(4)}, DType::F32));
  NodeId gs = g.input("gs", Shape({seq, Dim(8)}, DType::F32));
  NodeId g8d = g.input("g8d", Shape({Dim(8)}, DType::F64));
  EXPECT_EQ(g.node(g.add(Op::LayerNorm, {x, g8, g8})).shape.dims[1], seq);
  EXPECT_NO_THROW(g.add(Op::LayerNorm, {x, gs}, {{"naxes", int64_t(2)}}));
  EXPECT_NO_THROW(g.add(Op::RmsNorm, {x, g8}));
  EXPECT_THROW(g.add(Op::LayerNorm, {x, g4}), Error);
  EXPECT_THROW(g.add(Op::LayerNorm, {x, g8d}), Error);
  EXPECT_THROW(g.add(Op::RmsNorm, {x, g8}, {{"naxes", int64_t(3)}}), Error);
  EXPECT_THROW(g.add(Op::LayerNorm, {x}, {{"naxes", int64_t(-1)}}), Error);
  // group_norm: C = seq is symbolic, so only groups >= 1 can be checked; C = 8 is static.
  NodeId nc = g.input("nc", Shape({Dim(2), Dim(8), seq}, DType::F32));
  EXPECT_NO_THROW(
      g.add(Op::GroupNorm, {x, g.input("gc", Shape({seq}, DType::F32))}, {{"groups", int64_t(3)}}));
  EXPECT_NO_THROW(g.add(Op::GroupNorm, {nc, g8, g8}, {{"groups", int64_t(4)}}));
  EXPECT_THROW(g.add(Op::GroupNorm, {nc}, {{"groups", int64_t(3)}}), Error);
  EXPECT_THROW(g.add(Op::GroupNorm, {nc, g4}, {{"groups", int64_t(2)}}), Error);
  EXPECT_THROW(g.add(Op::BatchNorm, {nc, g8, g8, g8, g4}), Error);
  EXPECT_NO_THROW(g.add(Op::BatchNorm, {nc, g8, g8, g8, g8}));
  NodeId img = g.input("img", Shape({Dim(1), Dim(8), seq, seq}, DType::F32));
  EXPECT_NO_THROW(g.add(Op::LayerNorm2d, {img, g8, g8}));
  EXPECT_THROW(g.add(Op::LayerNorm2d, {img, g4}), Error);
  EXPECT_THROW(g.add(Op::LayerNorm2d, {nc}), Error);
}

}  // namespace
}  // namespace rlx
