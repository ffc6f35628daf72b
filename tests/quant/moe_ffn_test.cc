// moe_ffn against a double-precision mixture of experts computed from the
// dequantized expert rows: float and quantized experts (mixed types, as real
// files mix them), decode (regrouped GEMV) and prefill (integer GEMM or
// dequantize + sgemm) token counts, every ISA path, weights bound as params so
// the regrouping runs. Where a path rounds activations to the weight type's
// 8-bit vec_dot_type (x before gate / up, act(gate) * up before down; ggml's
// numerics), the reference rounds them the same way, so what remains is f32
// against double summation (~1e-6) and, now and then, an element of
// act(gate) * up whose f32 and double values round to neighbouring 8-bit
// steps, which moves that token's outputs by one step times a weight: at most
// 3e-3 of the output's rms, 2e-4 in rms. A wrong expert, slot or path is off
// by tens of percent.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "quant/qgemm.h"
#include "rlx/builder.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx {
namespace {

using quant::GgmlType;
using testing::IsaLimit;

constexpr int64_t kExperts = 8, kUsed = 2, kD = 256, kF = 256;

struct Experts {
  GgmlType type[3];         // gate, up, down
  Tensor w[3];              // u8 [E * rows, row_bytes]
  std::vector<float> f[3];  // dequantized, [E * rows, K]
};

Experts make_experts(GgmlType gate, GgmlType up, GgmlType down, uint32_t seed) {
  Experts e{{gate, up, down}, {}, {}};
  for (int i = 0; i < 3; ++i) {
    const int64_t rows = kExperts * (i == 2 ? kD : kF), K = i == 2 ? kF : kD;
    const size_t rb = quant::row_size(e.type[i], K);
    std::vector<uint8_t> bytes = testing::random_quant_rows(e.type[i], rows, K, seed + i);
    e.w[i] = Tensor(Dims{rows, int64_t(rb)}, DType::U8);
    std::copy(bytes.begin(), bytes.end(), e.w[i].data<uint8_t>());
    e.f[i].resize(size_t(rows * K));
    for (int64_t r = 0; r < rows; ++r)
      quant::dequantize(e.type[i], bytes.data() + r * rb, e.f[i].data() + r * K, K);
  }
  return e;
}

double expert_act(double g, bool gelu) {
  if (!gelu) return g / (1 + std::exp(-g));
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
}

// Does the kernel's product on rows of `t` round the M activation rows it
// multiplies at once (an expert's tokens) to 8 bits? Few rows (the direct or
// regrouped GEMV) do; many only with the integer GEMM.
bool rounds_activations(GgmlType t, int64_t M) {
  if (quant::traits(t).vec_dot_type == GgmlType::F32) return false;
  return M < 16 || quant::qgemm::path_for(t) != quant::qgemm::Path::none;
}

// v as the kernel multiplies it with rows of `t`, M rows at a time.
std::vector<float> as_multiplied(std::vector<float> v, GgmlType t, int64_t M) {
  if (!rounds_activations(t, M)) return v;
  const GgmlType vdt = quant::traits(t).vec_dot_type;
  std::vector<uint8_t> q(quant::row_size(vdt, int64_t(v.size())));
  quant::quantize_activations(vdt, v.data(), q.data(), int64_t(v.size()));
  quant::dequantize(vdt, q.data(), v.data(), int64_t(v.size()));
  return v;
}

std::vector<double> moe_reference(const Experts& e, const Tensor& x, const Tensor& ids,
                                  const Tensor& w, bool gelu) {
  const int64_t T = x.dims()[0];
  std::vector<double> y(size_t(T * kD), 0.0);
  std::vector<float> h(kF);
  std::vector<int64_t> rows(kExperts, 0);  // each expert's tokens
  for (int64_t i = 0; i < T * kUsed; ++i) ++rows[size_t(ids.data<int64_t>()[i])];
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < kUsed; ++j) {
      const int64_t ex = ids.data<int64_t>()[t * kUsed + j], M = rows[size_t(ex)];
      const float* x0 = x.data<float>() + t * kD;
      const std::vector<float> xg = as_multiplied({x0, x0 + kD}, e.type[0], M),
                               xu = as_multiplied({x0, x0 + kD}, e.type[1], M);
      for (int64_t n = 0; n < kF; ++n) {
        double g = 0, u = 0;
        const float* gr = e.f[0].data() + (ex * kF + n) * kD;
        const float* ur = e.f[1].data() + (ex * kF + n) * kD;
        for (int64_t k = 0; k < kD; ++k)
          g += double(gr[k]) * xg[size_t(k)], u += double(ur[k]) * xu[size_t(k)];
        h[size_t(n)] = float(expert_act(g, gelu) * u);
      }
      const std::vector<float> hd = as_multiplied(h, e.type[2], M);
      for (int64_t n = 0; n < kD; ++n) {
        const float* dr = e.f[2].data() + (ex * kD + n) * kF;
        double s = 0;
        for (int64_t k = 0; k < kF; ++k) s += double(dr[k]) * hd[size_t(k)];
        y[size_t(t * kD + n)] += w.data<float>()[t * kUsed + j] * s;
      }
    }
  return y;
}

Graph moe_graph(const Experts& e, bool gelu) {
  Graph g;
  Builder b(g);
  const Dim T = Dim::symbol("tokens");
  NodeId x = b.input("x", Shape({T, Dim(kD)}, DType::F32));
  NodeId ids = b.input("ids", Shape({T, Dim(kUsed)}, DType::I64));
  NodeId w = b.input("w", Shape({T, Dim(kUsed)}, DType::F32));
  std::vector<NodeId> in{x, ids, w};
  const char* names[3] = {"gate", "up", "down"};
  for (int i = 0; i < 3; ++i) in.push_back(b.param(names[i], e.w[i].shape()));
  g.add_output("y", b.op(Op::MoeFfn, in,
                         {{"experts", kExperts},
                          {"gate_scheme", std::string(quant::traits(e.type[0]).name)},
                          {"up_scheme", std::string(quant::traits(e.type[1]).name)},
                          {"down_scheme", std::string(quant::traits(e.type[2]).name)},
                          {"activation", std::string(gelu ? "gelu_tanh" : "silu")}}));
  return g;
}

// T tokens routed to two distinct experts each, expert 7 never used.
TensorMap routing(int64_t T, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor ids(Dims{T, kUsed}, DType::I64), w(Dims{T, kUsed}, DType::F32);
  for (int64_t t = 0; t < T; ++t) {
    // Expert 0 in every token's first slot: with T >= 16 it takes the
    // many-rows path while the others take the few-rows one.
    const int64_t a = T >= 16 ? 0 : int64_t(rng() % 7), b = (a + 1 + int64_t(rng() % 6)) % 7;
    ids.data<int64_t>()[t * kUsed] = a;
    ids.data<int64_t>()[t * kUsed + 1] = b;
    const float p = 0.2f + 0.6f * float(rng() % 1000) / 1000.f;
    w.data<float>()[t * kUsed] = p;
    w.data<float>()[t * kUsed + 1] = 1 - p;
  }
  return {{"x", testing::random_tensor({T, kD}, DType::F32, seed, -1, 1)}, {"ids", ids}, {"w", w}};
}

void check_moe(const Experts& e, int64_t T, bool gelu, const std::string& what) {
  const TensorMap in = routing(T, uint32_t(T) * 7 + 1);
  const std::vector<double> want = moe_reference(e, in.at("x"), in.at("ids"), in.at("w"), gelu);
  const TensorMap weights{{"gate", e.w[0]}, {"up", e.w[1]}, {"down", e.w[2]}};
  const Tensor got = testing::run_graph(moe_graph(e, gelu), in, weights).at("y");
  ASSERT_EQ(got.dims(), (Dims{T, kD})) << what;
  double rms = 0, se = 0, worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double err = std::fabs(got.data<float>()[i] - want[i]);
    rms += want[i] * want[i];
    se += err * err;
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  rms = std::sqrt(rms / double(want.size()));
  se = std::sqrt(se / double(want.size()));
  ASSERT_GT(rms, 0.01) << what;
  EXPECT_LE(worst, 3e-3 * rms) << what << ": rms " << rms;
  EXPECT_LE(se, 2e-4 * rms) << what << ": rms " << rms;
}

TEST(MoeFfn, MatchesDoubleReferenceOnEveryPath) {
  const struct {
    GgmlType gate, up, down;
  } kinds[] = {{GgmlType::F32, GgmlType::F32, GgmlType::F32},
               {GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0},
               {GgmlType::Q4_0, GgmlType::Q4_0, GgmlType::Q8_0},
               {GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K},
               {GgmlType::Q5_K, GgmlType::Q5_K, GgmlType::Q3_K}};
  for (const auto& k : kinds) {
    const Experts e = make_experts(k.gate, k.up, k.down, 11);
    for (Isa isa : {Isa::avx512, Isa::avx2, Isa::portable}) {
      if (isa > detected_isa()) continue;
      IsaLimit limit(isa);
      for (int64_t T : {1, 5, 40}) {
        const std::string what = std::string(quant::traits(k.gate).name) + "/" +
                                 quant::traits(k.down).name + " " + isa_name(isa) +
                                 " T=" + std::to_string(T);
        check_moe(e, T, false, what);
      }
    }
  }
}

TEST(MoeFfn, GeluTanhExperts) {
  const Experts e = make_experts(GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 5);
  check_moe(e, 3, true, "gelu_tanh decode");
  check_moe(e, 20, true, "gelu_tanh prefill");
}

TEST(MoeFfn, ExpertIdOutOfRangeIsAnError) {
  const Experts e = make_experts(GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 3);
  TensorMap in = routing(2, 9);
  in.at("ids").data<int64_t>()[3] = kExperts;
  const TensorMap weights{{"gate", e.w[0]}, {"up", e.w[1]}, {"down", e.w[2]}};
  const std::string err =
      testing::error_of([&] { testing::run_graph(moe_graph(e, false), in, weights); });
  EXPECT_NE(err.find("moe_ffn: token 1 slot 1 selects expert 8, outside [0, 8)"), std::string::npos)
      << err;
}

TEST(MoeFfn, ShapeErrorsNameTheWeights) {
  const Experts e = make_experts(GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 3);
  const Tensor x = testing::random_tensor({2, kD}, DType::F32, 1);
  const Tensor ids(Dims{2, kUsed}, DType::I64), w(Dims{2, kUsed}, DType::F32);
  auto run = [&](const Tensor& down, int64_t experts) {
    return testing::error_of([&] {
      testing::run_op(Op::MoeFfn, {x, ids, w, e.w[0], e.w[1], down},
                      {{"experts", experts},
                       {"gate_scheme", std::string("q8_0")},
                       {"up_scheme", std::string("q8_0")},
                       {"down_scheme", std::string("q8_0")}});
    });
  };
  const Tensor short_down(Dims{kExperts * 128, e.w[2].dims()[1]}, DType::U8);  // d = 128 rows
  EXPECT_NE(run(short_down, kExperts).find("do not agree"), std::string::npos);
  EXPECT_NE(run(e.w[2], 3).find("does not hold 3 experts' rows"), std::string::npos);
  // The well-formed call runs.
  EXPECT_EQ(run(e.w[2], kExperts), "");
}

}  // namespace
}  // namespace rlx
