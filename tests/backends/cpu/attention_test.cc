// attention: a naive full-softmax double reference written here, PyTorch goldens (manual attention
// with masks, float64), GQA, decode, sliding windows, long sequences across block boundaries,
// biases (float and bool, broadcast), fully masked rows, empty tensors and errors.
//
// Tolerance: f32 dot products over D <= 64 and softmax sums over <= 301 keys; against float64
// truth the largest observed error is 1.7e-7, so atol = 2e-6, rtol = 1e-5 (10x headroom); a wrong
// mask or offset moves outputs by ~1e-1.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;
using testing::run_op;

constexpr double kAtol = 2e-6, kRtol = 1e-5;

struct AttentionSpec {
  std::string mask = "none";
  int64_t window = 0;
  double scale = 0;  // 0: default 1/sqrt(D)
  double softcap = 0;
};

// Naive reference. bias (optional) is broadcast to [B,Hq,Sq,Sk] by right-aligned dims.
Tensor ref_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionSpec& s,
                     const Tensor* bias = nullptr) {
  const int64_t B = q.dim(0), Hq = q.dim(1), Sq = q.dim(2), D = q.dim(3);
  const int64_t Hk = k.dim(1), Sk = k.dim(2), Dv = v.dim(3);
  const double scale = s.scale != 0 ? s.scale : 1 / std::sqrt(double(D));
  const int64_t off = Sk - Sq;
  Tensor out({B, Hq, Sq, Dv}, DType::F64);
  double* o = out.data<double>();
  const Tensor q64 = q.to(DType::F64), k64 = k.to(DType::F64), v64 = v.to(DType::F64);
  const double *qd = q64.data<double>(), *kd = k64.data<double>(), *vd = v64.data<double>();
  auto bias_at = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    int64_t idx[4] = {b, h, i, j}, flat = 0;
    const int r = bias->rank();
    for (int d = 0; d < r; ++d) {
      int64_t bd = bias->dim(d);
      flat = flat * bd + (bd == 1 ? 0 : idx[4 - r + d]);
    }
    if (bias->dtype() == DType::Bool)
      return bias->item_as_double(flat) != 0 ? 0.0 : -std::numeric_limits<double>::infinity();
    return bias->item_as_double(flat);
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t g = h / (Hq / Hk);
      for (int64_t i = 0; i < Sq; ++i) {
        std::vector<double> sc(size_t(Sk), -std::numeric_limits<double>::infinity());
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < Sk; ++j) {
          bool vis = true;
          if (s.mask == "causal" || s.mask == "sliding") vis = j <= i + off;
          if (s.mask == "sliding") vis = vis && j > i + off - s.window;
          if (!vis) continue;
          double d = 0;
          for (int64_t t = 0; t < D; ++t)
            d += qd[((b * Hq + h) * Sq + i) * D + t] * kd[((b * Hk + g) * Sk + j) * D + t];
          d *= scale;
          if (s.softcap > 0) d = s.softcap * std::tanh(d / s.softcap);
          if (bias) d += bias_at(b, h, i, j);
          sc[size_t(j)] = d;
          mx = std::max(mx, d);
        }
        double sum = 0;
        std::vector<double> acc(size_t(Dv), 0.0);
        if (mx != -std::numeric_limits<double>::infinity())
          for (int64_t j = 0; j < Sk; ++j) {
            double p = std::exp(sc[size_t(j)] - mx);
            sum += p;
            for (int64_t t = 0; t < Dv; ++t)
              acc[size_t(t)] += p * vd[((b * Hk + g) * Sk + j) * Dv + t];
          }
        for (int64_t t = 0; t < Dv; ++t)
          o[((b * Hq + h) * Sq + i) * Dv + t] = sum > 0 ? acc[size_t(t)] / sum : 0.0;
      }
    }
  return out;
}

Attrs attention_attrs(const AttentionSpec& s) {
  Attrs a{{"mask", s.mask}};
  if (s.mask == "sliding") a.set("window", s.window);
  if (s.scale != 0) a.set("scale", s.scale);
  if (s.softcap != 0) a.set("softcap", s.softcap);
  return a;
}

struct Qkv {
  Tensor q, k, v;
};
Qkv make(int64_t B, int64_t Hq, int64_t Hk, int64_t Sq, int64_t Sk, int64_t D, int64_t Dv,
         uint64_t seed) {
  return {random_tensor({B, Hq, Sq, D}, DType::F32, seed, -1, 1),
          random_tensor({B, Hk, Sk, D}, DType::F32, seed + 1, -1, 1),
          random_tensor({B, Hk, Sk, Dv}, DType::F32, seed + 2, -1, 1)};
}

void check_attention(const Qkv& t, const AttentionSpec& s, const Tensor* bias = nullptr) {
  std::vector<Tensor> in{t.q, t.k, t.v};
  if (bias) in.push_back(*bias);
  Tensor y = run_op(Op::Attention, in, attention_attrs(s));
  EXPECT_TRUE(all_close(y, ref_attention(t.q, t.k, t.v, s, bias), kAtol, kRtol));
}

// f16 keys and values with an f32 query (an f16 KV cache): decode widens
// them a key tile at a time, a prefill all at once; either equals attention
// over the same values widened to f32 beforehand, which the f32 tests check.
TEST(Attention, F16KeysAndValuesEqualTheirWidenedValues) {
  struct Case {
    int64_t Hq, Hk, Sq, Sk, D, Dv;
    AttentionSpec s;
  };
  for (const Case& c : std::vector<Case>{{4, 2, 1, 301, 64, 64, {"causal"}},  // decode, 3 tiles
                                         {2, 2, 1, 37, 40, 24, {"sliding", 9}},
                                         {4, 1, 7, 300, 32, 48, {"causal"}},  // prefill, GQA
                                         {2, 2, 5, 5, 16, 16, {}}}) {
    SCOPED_TRACE("Sq " + std::to_string(c.Sq) + " Sk " + std::to_string(c.Sk));
    const Qkv t = make(2, c.Hq, c.Hk, c.Sq, c.Sk, c.D, c.Dv, 7 + uint64_t(c.Sk));
    const Tensor k16 = t.k.to(DType::F16), v16 = t.v.to(DType::F16);
    const Tensor want =
        run_op(Op::Attention, {t.q, k16.to(DType::F32), v16.to(DType::F32)}, attention_attrs(c.s));
    const Tensor got = run_op(Op::Attention, {t.q, k16, v16}, attention_attrs(c.s));
    EXPECT_EQ(got.dtype(), DType::F32);
    EXPECT_TRUE(all_close(got, want, 1e-6, 1e-6));
    EXPECT_FALSE(
        all_close(got, run_op(Op::Attention, {t.q, t.k, t.v}, attention_attrs(c.s)), 1e-7, 0));
  }
  // Only f16 beside f32: f16 keys with f64 queries, or keys and values of two dtypes, are errors.
  const Qkv t = make(1, 2, 2, 3, 3, 8, 8, 5);
  EXPECT_THROW(run_op(Op::Attention, {t.q.to(DType::F64), t.k.to(DType::F16), t.v.to(DType::F16)},
                      attention_attrs({})),
               Error);
  EXPECT_THROW(run_op(Op::Attention, {t.q, t.k.to(DType::F16), t.v}, attention_attrs({})), Error);
}

TEST(Attention, MasksGqaDecodeAndShapes) {
  struct Case {
    int64_t B, Hq, Hk, Sq, Sk, D, Dv;
    AttentionSpec s;
  };
  const std::vector<Case> cases = {
      {2, 4, 4, 5, 5, 16, 16, {}},
      {2, 4, 4, 7, 7, 16, 16, {"causal"}},
      {1, 8, 2, 9, 9, 32, 32, {"causal"}},          // GQA 4:1
      {1, 6, 1, 4, 11, 8, 8, {}},                   // MQA, Sk > Sq
      {2, 4, 2, 1, 37, 64, 64, {"causal"}},         // decode: sees all 37 keys
      {2, 4, 2, 3, 37, 64, 64, {"causal"}},         // chunked decode
      {1, 2, 2, 1, 37, 16, 16, {"sliding", 8}},     // decode, last 8 keys
      {1, 3, 1, 1, 203, 40, 72, {"causal"}},        // decode, vector tails in D, Dv and keys
      {1, 2, 2, 1, 9, 128, 136, {}},                // decode, Dv past two column blocks
      {1, 2, 1, 50, 50, 16, 24, {"sliding", 4}},    // Dv != D
      {1, 2, 2, 50, 50, 16, 16, {"sliding", 1}},    // only the diagonal
      {1, 2, 2, 20, 20, 16, 16, {"sliding", 100}},  // window wider than the sequence
      {1, 2, 2, 9, 5, 8, 8, {"causal"}},            // Sk < Sq: first 4 rows see nothing
      {1, 1, 1, 1, 1, 1, 1, {}},                    // size-1 everything
      {1, 1, 1, 1, 1, 1, 1, {"causal"}},
      {1, 2, 2, 6, 6, 8, 8, {"none", 0, 0.7}},  // explicit scale
      {1, 3, 3, 4, 4, 5, 3, {"causal", 0, 2.5}},
  };
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    SCOPED_TRACE("case " + std::to_string(n) + " mask=" + c.s.mask);
    check_attention(make(c.B, c.Hq, c.Hk, c.Sq, c.Sk, c.D, c.Dv, 100 + 3 * n), c.s);
  }
}

// Soft-capping (gemma2): scores cap * tanh(s / cap) under every mask, with a bias added after the
// cap, on the GEMM path (many queries) and the one-query decode path. Scores of ~N(0, 4) with a cap
// of 1.2 put most of them in tanh's bent part, so a missing or misplaced cap is far off.
TEST(Attention, SoftCapping) {
  const Qkv t = make(1, 4, 2, 40, 40, 16, 16, 31);
  for (const AttentionSpec& s : std::vector<AttentionSpec>{{"none", 0, 2.0, 1.2},
                                                           {"causal", 0, 2.0, 1.2},
                                                           {"sliding", 8, 2.0, 1.2},
                                                           {"causal", 0, 0, 50}}) {
    SCOPED_TRACE(s.mask + " cap " + std::to_string(s.softcap));
    check_attention(t, s);
    check_attention(make(2, 4, 2, 1, 37, 32, 32, 32), s);  // decode
  }
  Tensor bias = random_tensor({40, 40}, DType::F32, 33, -2, 2);
  check_attention(t, {"bias", 0, 2.0, 1.2}, &bias);
  // The cap changes the result (against the same call without it).
  Tensor capped = run_op(Op::Attention, {t.q, t.k, t.v}, attention_attrs({"causal", 0, 2.0, 1.2}));
  Tensor plain = run_op(Op::Attention, {t.q, t.k, t.v}, attention_attrs({"causal", 0, 2.0}));
  EXPECT_FALSE(all_close(capped, plain, 1e-2, 0));
  EXPECT_THROW(run_op(Op::Attention, {t.q, t.k, t.v}, {{"softcap", -1.0}}), Error);
}

TEST(Attention, LongSequencesCrossBlockBoundaries) {
  // 300 queries and keys: several 32-query blocks and 64-key tiles, with partial tails.
  const Qkv t = make(1, 4, 2, 300, 300, 64, 64, 7);
  check_attention(t, {});
  check_attention(t, {"causal"});
  check_attention(t, {"sliding", 70});
  const Qkv d = make(1, 2, 1, 5, 301, 32, 32, 8);  // decode with a 301-key cache
  check_attention(d, {"causal"});
  check_attention(d, {"sliding", 65});
}

TEST(Attention, BiasBroadcastBoolAndFullyMaskedRows) {
  const Qkv t = make(2, 4, 2, 6, 10, 8, 8, 21);
  for (const Dims& bd :
       std::vector<Dims>{{2, 4, 6, 10}, {2, 1, 6, 10}, {6, 10}, {10}, {1, 1, 1, 1}}) {
    SCOPED_TRACE(dims_str(bd));
    Tensor bias = random_tensor(bd, DType::F32, 22, -3, 3);
    check_attention(t, {"bias"}, &bias);
  }
  // A boolean keep-mask, and the same mask as a -inf additive bias: identical results.
  Tensor keep = random_tensor({2, 1, 6, 10}, DType::Bool, 23);
  check_attention(t, {"bias"}, &keep);
  Tensor add({2, 1, 6, 10}, DType::F32);
  for (int64_t i = 0; i < add.numel(); ++i)
    add.data<float>()[i] = keep.data<bool>()[i] ? 0.0f : -INFINITY;
  Tensor y1 = run_op(Op::Attention, {t.q, t.k, t.v, keep}, {{"mask", std::string("bias")}});
  Tensor y2 = run_op(Op::Attention, {t.q, t.k, t.v, add}, {{"mask", std::string("bias")}});
  EXPECT_TRUE(testing::all_equal(y1, y2));
  // Row 2 of every head fully masked: its output is exactly 0 (documented), not NaN.
  Tensor rowmask({6, 10}, DType::F32);
  for (int64_t j = 0; j < 10; ++j) rowmask.data<float>()[2 * 10 + j] = -INFINITY;
  Tensor y = run_op(Op::Attention, {t.q, t.k, t.v, rowmask}, {{"mask", std::string("bias")}});
  for (int64_t bh = 0; bh < 8; ++bh)
    for (int64_t d = 0; d < 8; ++d) EXPECT_EQ(y.item_as_double((bh * 6 + 2) * 8 + d), 0.0);
  check_attention(t, {"bias"}, &rowmask);
}

TEST(Attention, EmptyAndF64) {
  // No keys: every row sees nothing -> zeros. No queries / batch: empty output.
  const Qkv nokeys = make(1, 2, 2, 3, 0, 4, 4, 31);
  Tensor y = run_op(Op::Attention, {nokeys.q, nokeys.k, nokeys.v});
  EXPECT_EQ(y.dims(), (Dims{1, 2, 3, 4}));
  for (int64_t i = 0; i < y.numel(); ++i) EXPECT_EQ(y.item_as_double(i), 0.0);
  const Qkv noq = make(0, 2, 2, 3, 5, 4, 4, 32);
  EXPECT_EQ(run_op(Op::Attention, {noq.q, noq.k, noq.v}).numel(), 0);
  const Qkv t = make(1, 2, 1, 40, 70, 16, 16, 33);
  Tensor q = t.q.to(DType::F64), k = t.k.to(DType::F64), v = t.v.to(DType::F64);
  Tensor y64 = run_op(Op::Attention, {q, k, v}, {{"mask", std::string("causal")}});
  EXPECT_EQ(y64.dtype(), DType::F64);
  EXPECT_TRUE(all_close(y64, ref_attention(q, k, v, {"causal"}), 1e-12, 1e-12));
}

// ---------------------------------------------------------------- PyTorch goldens

// Plain torch attention in float64, masks built with torch ops (tril / triu), GQA via
// repeat_interleave, as HF / llama.cpp-style reference code does.
const char* kTorchAttention = R"(
def att(q, k, v, mask='none', window=0, scale=None, bias=None):
    q, k, v = q.double(), k.double(), v.double()
    rep = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(rep, dim=1)
    v = v.repeat_interleave(rep, dim=1)
    sq, sk = q.shape[2], k.shape[2]
    scale = scale if scale is not None else q.shape[-1] ** -0.5
    s = q @ k.transpose(-1, -2) * scale
    ones = torch.ones(sq, sk, dtype=torch.bool)
    if mask in ('causal', 'sliding'):
        keep = ones.tril(diagonal=sk - sq)
        if mask == 'sliding':
            keep = keep & ones.triu(diagonal=sk - sq - window + 1)
        s = s.masked_fill(~keep, float('-inf'))
    if bias is not None:
        s = s + bias.double()
    return torch.softmax(s, dim=-1) @ v
)";

const std::map<std::string, std::vector<Tensor>>& attention_goldens() {
  static const auto g = [] {
    std::vector<testing::GoldenCase> cases;
    auto add = [&](const std::string& name, const Qkv& t, const std::string& call,
                   const Tensor* bias = nullptr) {
      TensorMap in{{"q", t.q}, {"k", t.k}, {"v", t.v}};
      if (bias) in["bias"] = *bias;
      cases.push_back({name, std::string(kTorchAttention) + "y = " + call, in});
    };
    add("none", make(2, 4, 4, 5, 5, 16, 16, 41), "att(x['q'], x['k'], x['v'])");
    add("causal_gqa", make(1, 8, 2, 33, 33, 32, 32, 42), "att(x['q'], x['k'], x['v'], 'causal')");
    add("decode", make(2, 4, 2, 1, 37, 64, 64, 43), "att(x['q'], x['k'], x['v'], 'causal')");
    add("sliding", make(1, 2, 1, 70, 90, 16, 16, 44), "att(x['q'], x['k'], x['v'], 'sliding', 9)");
    add("long", make(1, 2, 2, 300, 300, 64, 64, 45),
        "att(x['q'], x['k'], x['v'], 'causal', scale=0.2)");
    Tensor bias = random_tensor({2, 1, 6, 10}, DType::F32, 46, -2, 2);
    add("bias", make(2, 4, 2, 6, 10, 8, 8, 47), "att(x['q'], x['k'], x['v'], bias=x['bias'])",
        &bias);
    return testing::torch_goldens(cases);
  }();
  return g;
}

TEST(AttentionTorch, MatchesPyTorch) {
  const auto& g = attention_goldens();
  auto run = [](const Qkv& t, const Attrs& a, const Tensor* bias = nullptr) {
    std::vector<Tensor> in{t.q, t.k, t.v};
    if (bias) in.push_back(*bias);
    return run_op(Op::Attention, in, a);
  };
  const std::string causal = "causal";
  EXPECT_TRUE(all_close(run(make(2, 4, 4, 5, 5, 16, 16, 41), {}), g.at("none")[0], kAtol, kRtol));
  EXPECT_TRUE(all_close(run(make(1, 8, 2, 33, 33, 32, 32, 42), {{"mask", causal}}),
                        g.at("causal_gqa")[0], kAtol, kRtol));
  EXPECT_TRUE(all_close(run(make(2, 4, 2, 1, 37, 64, 64, 43), {{"mask", causal}}),
                        g.at("decode")[0], kAtol, kRtol));
  EXPECT_TRUE(all_close(run(make(1, 2, 1, 70, 90, 16, 16, 44),
                            {{"mask", std::string("sliding")}, {"window", int64_t(9)}}),
                        g.at("sliding")[0], kAtol, kRtol));
  EXPECT_TRUE(
      all_close(run(make(1, 2, 2, 300, 300, 64, 64, 45), {{"mask", causal}, {"scale", 0.2}}),
                g.at("long")[0], kAtol, kRtol));
  Tensor bias = random_tensor({2, 1, 6, 10}, DType::F32, 46, -2, 2);
  EXPECT_TRUE(all_close(run(make(2, 4, 2, 6, 10, 8, 8, 47), {{"mask", std::string("bias")}}, &bias),
                        g.at("bias")[0], kAtol, kRtol));
}

// ---------------------------------------------------------------- errors

TEST(AttentionErrors, BadShapesAndAttrsThrow) {
  const Qkv t = make(1, 4, 2, 3, 5, 8, 8, 51);
  auto att = [](std::vector<Tensor> in, Attrs a = {}) { return run_op(Op::Attention, in, a); };
  const Qkv h3 = make(1, 4, 3, 3, 5, 8, 8, 52);  // 4 query heads, 3 key heads
  EXPECT_THROW(att({h3.q, h3.k, h3.v}), Error);
  EXPECT_THROW(att({t.q, random_tensor({1, 2, 5, 7}, DType::F32, 1), t.v}), Error);  // D differs
  EXPECT_THROW(att({t.q, t.k, random_tensor({1, 2, 4, 8}, DType::F32, 1)}), Error);  // Sk differs
  EXPECT_THROW(att({t.q, t.k, random_tensor({2, 2, 5, 8}, DType::F32, 1)}), Error);  // B differs
  EXPECT_THROW(att({t.q, t.k, t.v}, {{"mask", std::string("sliding")}, {"window", int64_t(0)}}),
               Error);
  EXPECT_THROW(att({t.q, t.k, t.v}, {{"mask", std::string("sliding")}}), Error);  // no window
  EXPECT_THROW(att({t.q, t.k, t.v}, {{"mask", std::string("bias")}}), Error);     // no bias
  EXPECT_THROW(att({t.q, t.k, t.v}, {{"mask", std::string("alibi")}}), Error);
  Tensor bad_bias = random_tensor({1, 4, 3, 4}, DType::F32, 2);  // Sk is 5
  EXPECT_THROW(att({t.q, t.k, t.v, bad_bias}, {{"mask", std::string("bias")}}), Error);
  EXPECT_THROW(att({t.q, t.k, t.v, random_tensor({5}, DType::F32, 2)}), Error);  // bias w/o mask
  EXPECT_THROW(att({t.q, t.k, t.v, random_tensor({5}, DType::I64, 2, 0, 3)},
                   {{"mask", std::string("bias")}}),
               Error);
  EXPECT_THROW(att({random_tensor({4, 3, 8}, DType::F32, 1), t.k, t.v}), Error);
}

TEST(AttentionShapeInference, ValidatesWhenAdded) {
  Graph g;
  const Dim s = Dim::symbol("s");
  auto in = [&](const char* n, std::vector<Dim> d, DType t = DType::F32) {
    return g.input(n, Shape(std::move(d), t));
  };
  NodeId q = in("q", {Dim(1), Dim(4), s, Dim(8)});
  NodeId k = in("k", {Dim(1), Dim(2), s, Dim(8)});
  NodeId v = in("v", {Dim(1), Dim(2), s, Dim(6)});
  NodeId v3 = in("v3", {Dim(1), Dim(3), s, Dim(6)});
  NodeId b = in("b", {Dim(1), Dim(1), s, s});
  NodeId b5 = in("b5", {Dim(1), Dim(5), s, s});
  NodeId bb = in("bb", {s, s}, DType::Bool);
  EXPECT_EQ(g.node(g.add(Op::Attention, {q, k, v})).shape.dims[3], Dim(6));
  EXPECT_NO_THROW(g.add(Op::Attention, {q, k, v, b}, {{"mask", std::string("bias")}}));
  EXPECT_NO_THROW(g.add(Op::Attention, {q, k, v, bb}, {{"mask", std::string("bias")}}));
  EXPECT_THROW(g.add(Op::Attention, {q, k, v, b5}, {{"mask", std::string("bias")}}), Error);
  EXPECT_THROW(g.add(Op::Attention, {q, k, v3}), Error);
  EXPECT_THROW(
      g.add(Op::Attention, {q, k, v}, {{"mask", std::string("sliding")}, {"window", int64_t(0)}}),
      Error);
}

}  // namespace
}  // namespace rlx
