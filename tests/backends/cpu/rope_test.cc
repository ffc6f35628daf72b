// rope: a scalar double reference written here, PyTorch goldens in the two conventions (HF
// `rotate_half` for neox; GPT-J / original llama complex multiply for interleaved), partial
// rotary dims, freq factors, positions (non-monotonic, large, i32), empty tensors, errors.
//
// Tolerance: angles, cos and sin are computed in double and rounded once, then each output is
// two float products and a sum: against float64 truth, ~2 ulps of |x| <= 1, so atol 1e-6.
#include <gtest/gtest.h>

#include <cmath>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

Tensor ref_rope(const Tensor& x, const std::vector<int64_t>& pos, double theta, bool neox,
                int64_t rd, const std::vector<double>& ff = {}) {
  const int64_t B = x.dim(0), H = x.dim(1), S = x.dim(2), D = x.dim(3), half = rd / 2;
  Tensor y({B, H, S, D}, DType::F64);
  double* o = y.data<double>();
  for (int64_t r = 0; r < B * H * S; ++r) {
    const int64_t s = r % S;
    for (int64_t d = 0; d < D; ++d) o[r * D + d] = x.item_as_double(r * D + d);
    for (int64_t i = 0; i < half; ++i) {
      double f = std::pow(theta, -2.0 * double(i) / double(rd));
      if (!ff.empty()) f /= ff[size_t(i)];
      const double a = double(pos[size_t(s)]) * f, c = std::cos(a), sn = std::sin(a);
      const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
      const double u = x.item_as_double(r * D + i0), w = x.item_as_double(r * D + i1);
      o[r * D + i0] = u * c - w * sn;
      o[r * D + i1] = w * c + u * sn;
    }
  }
  return y;
}

Tensor positions(const std::vector<int64_t>& p, DType t = DType::I64) {
  return Tensor::from_vector<int64_t>({int64_t(p.size())}, p, t);
}

TEST(Rope, MatchesReferenceForStylesDimsAndPositions) {
  struct Case {
    Dims x;
    std::vector<int64_t> pos;
    std::string style;
    int64_t rd;  // 0: default (D)
    double theta;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 8}, {0, 1, 2, 3}, "neox", 0, 10000},
      {{2, 3, 4, 8}, {0, 1, 2, 3}, "interleaved", 0, 10000},
      {{1, 2, 5, 64}, {7, 0, 100, 3, 42}, "neox", 32, 500000},  // partial rotary (GPT-NeoX)
      {{1, 2, 5, 64}, {7, 0, 100, 3, 42}, "interleaved", 16, 10000},
      {{1, 1, 3, 128}, {4095, 8191, 131071}, "neox", 0, 1e6},  // large positions
      {{1, 1, 2, 6}, {-3, 5}, "neox", 0, 10000},               // negative position
      {{1, 1, 1, 2}, {9}, "interleaved", 0, 10000},            // size-1 dims
      {{1, 1, 2, 6}, {1, 2}, "neox", 2, 10000},                // only one pair rotates
      {{3, 2, 2, 6}, {1, 2}, "neox", 0, 10000},
      {{1, 4, 200, 96}, {}, "neox", 64, 10000},  // threaded; positions 0..199
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    Case c = cases[n];
    SCOPED_TRACE("case " + std::to_string(n) + " " + c.style);
    if (c.pos.empty())
      for (int64_t s = 0; s < c.x[2]; ++s) c.pos.push_back(s);
    Tensor x = random_tensor(c.x, DType::F32, 10 + n, -1, 1);
    Attrs a{{"style", c.style}, {"theta", c.theta}};
    if (c.rd) a.set("rotary_dims", c.rd);
    Tensor y = run_op(Op::Rope, {x, positions(c.pos)}, a);
    Tensor want = ref_rope(x, c.pos, c.theta, c.style == "neox", c.rd ? c.rd : c.x[3]);
    EXPECT_TRUE(all_close(y, want, 1e-6, 1e-6));
    // The pass-through dims are copied exactly.
    const int64_t rd = c.rd ? c.rd : c.x[3];
    for (int64_t r = 0; r < x.numel() / c.x[3]; ++r)
      for (int64_t d = rd; d < c.x[3]; ++d)
        ASSERT_EQ(y.item_as_double(r * c.x[3] + d), x.item_as_double(r * c.x[3] + d));
    // i32 positions give the same result.
    EXPECT_TRUE(testing::all_equal(run_op(Op::Rope, {x, positions(c.pos, DType::I32)}, a), y));
  }
}

TEST(Rope, DefaultsAreNeoxThetaTenThousandFullDims) {
  Tensor x = random_tensor({1, 2, 3, 8}, DType::F32, 3, -1, 1);
  Tensor y = run_op(Op::Rope, {x, positions({1, 5, 9})});
  EXPECT_TRUE(all_close(y, ref_rope(x, {1, 5, 9}, 10000, true, 8), 1e-6, 1e-6));
  // Position 0 is the identity.
  Tensor y0 = run_op(Op::Rope, {x, positions({0, 0, 0})});
  EXPECT_TRUE(testing::all_equal(y0, x));
}

TEST(Rope, FreqFactorsDivideFrequencies) {
  Tensor x = random_tensor({1, 2, 4, 16}, DType::F32, 4, -1, 1);
  std::vector<double> ff{1, 1, 2, 4, 8, 8, 16, 32};
  Tensor fft = Tensor::from_vector<double>({8}, ff, DType::F32);
  Tensor y = run_op(Op::Rope, {x, positions({0, 3, 77, 1000}), fft}, {{"theta", 500000.0}});
  EXPECT_TRUE(all_close(y, ref_rope(x, {0, 3, 77, 1000}, 500000, true, 16, ff), 1e-6, 1e-6));
  // With rotary_dims = 8 the factors have 4 entries.
  Tensor ff4 = Tensor::from_vector<double>({4}, {1, 2, 3, 4}, DType::F32);
  Tensor y4 = run_op(Op::Rope, {x, positions({0, 3, 77, 1000}), ff4},
                     {{"rotary_dims", int64_t(8)}, {"style", std::string("interleaved")}});
  EXPECT_TRUE(
      all_close(y4, ref_rope(x, {0, 3, 77, 1000}, 10000, false, 8, {1, 2, 3, 4}), 1e-6, 1e-6));
}

TEST(Rope, F64EmptyAndF16) {
  Tensor x = random_tensor({2, 2, 3, 10}, DType::F64, 5, -1, 1);
  Tensor y = run_op(Op::Rope, {x, positions({2, 4, 6})}, {{"style", std::string("interleaved")}});
  EXPECT_EQ(y.dtype(), DType::F64);
  EXPECT_TRUE(all_close(y, ref_rope(x, {2, 4, 6}, 10000, false, 10), 1e-14, 1e-14));
  EXPECT_EQ(run_op(Op::Rope, {random_tensor({1, 2, 0, 8}, DType::F32, 1), positions({})}).numel(),
            0);
  EXPECT_EQ(
      run_op(Op::Rope, {random_tensor({0, 2, 3, 8}, DType::F32, 1), positions({1, 2, 3})}).numel(),
      0);
  Tensor xh = x.to(DType::F16);
  EXPECT_TRUE(all_close(run_op(Op::Rope, {xh, positions({2, 4, 6})}),
                        ref_rope(xh, {2, 4, 6}, 10000, true, 10), 2e-3, 2e-3));
}

// ---------------------------------------------------------------- PyTorch goldens

const std::map<std::string, std::vector<Tensor>>& goldens() {
  static const auto g = [] {
    // HF transformers (llama): inv_freq, cat(freqs, freqs), x * cos + rotate_half(x) * sin.
    const std::string hf = R"(
def hf_rope(x, pos, theta, rd):
    x = x.double()
    inv = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd))
    f = pos.double()[:, None] * inv[None, :]
    emb = torch.cat((f, f), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    xr, xp = x[..., :rd], x[..., rd:]
    x1, x2 = xr[..., : rd // 2], xr[..., rd // 2 :]
    rot = torch.cat((-x2, x1), dim=-1)
    return torch.cat((xr * cos + rot * sin, xp), dim=-1)
)";
    // Original llama / GPT-J: adjacent pairs as complex numbers times e^{i pos f}.
    const std::string gptj = R"(
def gptj_rope(x, pos, theta):
    x = x.double()
    d = x.shape[-1]
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    f = torch.outer(pos.double(), inv)
    cis = torch.polar(torch.ones_like(f), f)
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(xc * cis).flatten(-2)
)";
    std::vector<testing::GoldenCase> cases;
    cases.push_back({"hf",
                     hf + "y = hf_rope(x['x'], x['p'], 10000.0, 64)",
                     {{"x", random_tensor({2, 4, 6, 64}, DType::F32, 61, -1, 1)},
                      {"p", positions({0, 1, 2, 3, 4, 5})}}});
    cases.push_back({"hf_partial",
                     hf + "y = hf_rope(x['x'], x['p'], 1000000.0, 32)",
                     {{"x", random_tensor({1, 3, 4, 80}, DType::F32, 62, -1, 1)},
                      {"p", positions({10, 2000, 3, 65535})}}});
    cases.push_back({"gptj",
                     gptj + "y = gptj_rope(x['x'], x['p'], 10000.0)",
                     {{"x", random_tensor({2, 2, 5, 32}, DType::F32, 63, -1, 1)},
                      {"p", positions({5, 6, 7, 8, 9})}}});
    return testing::torch_goldens(cases);
  }();
  return g;
}

TEST(RopeTorch, MatchesHfAndGptjConventions) {
  const auto& g = goldens();
  EXPECT_TRUE(all_close(run_op(Op::Rope, {random_tensor({2, 4, 6, 64}, DType::F32, 61, -1, 1),
                                          positions({0, 1, 2, 3, 4, 5})}),
                        g.at("hf")[0], 1e-6, 1e-6));
  EXPECT_TRUE(all_close(
      run_op(Op::Rope,
             {random_tensor({1, 3, 4, 80}, DType::F32, 62, -1, 1), positions({10, 2000, 3, 65535})},
             {{"theta", 1e6}, {"rotary_dims", int64_t(32)}}),
      g.at("hf_partial")[0], 1e-6, 1e-6));
  EXPECT_TRUE(all_close(
      run_op(Op::Rope,
             {random_tensor({2, 2, 5, 32}, DType::F32, 63, -1, 1), positions({5, 6, 7, 8, 9})},
             {{"style", std::string("interleaved")}}),
      g.at("gptj")[0], 1e-6, 1e-6));
}

// ---------------------------------------------------------------- errors

TEST(RopeErrors, BadShapesAndAttrsThrow) {
  Tensor x = random_tensor({1, 2, 3, 8}, DType::F32, 1);
  Tensor p = positions({0, 1, 2});
  EXPECT_THROW(run_op(Op::Rope, {x, p}, {{"rotary_dims", int64_t(5)}}), Error);   // odd
  EXPECT_THROW(run_op(Op::Rope, {x, p}, {{"rotary_dims", int64_t(10)}}), Error);  // > D
  EXPECT_THROW(run_op(Op::Rope, {x, p}, {{"rotary_dims", int64_t(-2)}}), Error);
  EXPECT_THROW(run_op(Op::Rope, {x, p}, {{"style", std::string("gptj")}}), Error);
  EXPECT_THROW(run_op(Op::Rope, {x, p}, {{"theta", 0.0}}), Error);
  EXPECT_THROW(run_op(Op::Rope, {x, positions({0, 1})}), Error);  // S mismatch
  EXPECT_THROW(run_op(Op::Rope, {x, Tensor::from_vector<float>({3}, {0, 1, 2}, DType::F32)}),
               Error);  // float positions
  EXPECT_THROW(run_op(Op::Rope, {random_tensor({2, 3, 8}, DType::F32, 1), p}), Error);  // rank 3
  EXPECT_THROW(run_op(Op::Rope, {x, p, random_tensor({3}, DType::F32, 2)}), Error);     // ff != D/2
  Tensor zero_ff = Tensor::from_vector<float>({4}, {1, 0, 1, 1}, DType::F32);
  EXPECT_THROW(run_op(Op::Rope, {x, p, zero_ff}), Error);
}

TEST(RopeShapeInference, ValidatesWhenAdded) {
  Graph g;
  const Dim seq = Dim::symbol("seq");
  NodeId x = g.input("x", Shape({Dim(1), Dim(2), seq, Dim(8)}, DType::F32));
  NodeId p = g.input("p", Shape({seq}, DType::I64));
  NodeId p3 = g.input("p3", Shape({Dim(3)}, DType::I64));
  NodeId pf = g.input("pf", Shape({seq}, DType::F32));
  NodeId ff = g.input("ff", Shape({Dim(2)}, DType::F32));
  EXPECT_NO_THROW(g.add(Op::Rope, {x, p}));
  EXPECT_NO_THROW(g.add(Op::Rope, {x, p3}));  // seq may be 3
  EXPECT_NO_THROW(g.add(Op::Rope, {x, p, ff}, {{"rotary_dims", int64_t(4)}}));
  EXPECT_THROW(g.add(Op::Rope, {x, p, ff}), Error);  // needs D/2 = 4 factors
  EXPECT_THROW(g.add(Op::Rope, {x, pf}), Error);
  EXPECT_THROW(g.add(Op::Rope, {x, p}, {{"rotary_dims", int64_t(3)}}), Error);
  EXPECT_THROW(g.add(Op::Rope, {x, p}, {{"style", std::string("half")}}), Error);
  NodeId x4 = g.input("x4", Shape({Dim(1), Dim(2), Dim(4), Dim(8)}, DType::F32));
  EXPECT_THROW(g.add(Op::Rope, {x4, p3}), Error);
}

}  // namespace
}  // namespace rlx
