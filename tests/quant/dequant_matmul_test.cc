// dequant_matmul: every ggml type against a double-precision reference
// dequantize(w) . x, through the real runtime (run_op); the direct vec_dot
// kernels (AVX2 and portable), the activation quantizers, and error paths.
//
// Tolerances. Direct quant types (q4_0 q4_1 q5_0 q5_1 q8_0 q2_K..q6_K) quantize the
// activations to 8 bits, so each output may be off by at most
//   sum_i |w_i| * (amax_block(i) / 254)      half a step of the Q8 grid
//   + 1e-3 * sum_i |w_i x_i|                  fp16 rounding of the Q8_0 scale
//   + 5e-4 * sum_b max_b|w| sum_b|x|          fp16 rounding of Q8_1's block sum
//                                             (times |m| <= max|w| of q4_1/q5_1)
// (a rigorous bound, checked per output), and the rms error over all
// outputs must stay below 1e-2 of the reference rms (the expected size).
// Float weights and the dequantize-then-sgemm path only add f32 rounding of
// a K-term sum: 1e-5 * sum |w_i x_i| (errors grow ~ sqrt(K) * 6e-8).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/vec_dot.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx {
namespace {

using quant::GgmlType;
using quant::TypeTraits;
using namespace rlx::testing;

bool direct_quant(GgmlType t) {
  const TypeTraits& tr = quant::traits(t);
  return tr.vec_dot && tr.vec_dot_type != GgmlType::F32;
}

// N rows of K random values quantized with our quantizer; types without one
// get random blocks (fp16 scales kept finite, values kept moderate).
Tensor random_weight(GgmlType t, int64_t N, int64_t K, uint32_t seed) {
  const TypeTraits& tr = quant::traits(t);
  const size_t rb = quant::row_size(t, K);
  Tensor w(Dims{N, int64_t(rb)}, DType::U8);
  uint8_t* p = w.data<uint8_t>();
  std::mt19937 rng(seed);
  if (tr.quantize_row) {
    std::normal_distribution<float> d(0.f, 1.f);
    std::vector<float> row{std::vector<float>(size_t(K))};
    for (int64_t n = 0; n < N; ++n) {
      const float scale = 0.5f + float(n % 5) * 0.3f;  // rows of different magnitude
      for (float& v : row) v = d(rng) * scale;
      quant::quantize(t, row.data(), p + n * rb, K);
    }
    return w;
  }
  std::vector<float> tmp(size_t(tr.block_size));
  for (int64_t b = 0; b < N * (K / tr.block_size); ++b) {
    uint8_t* blk = p + b * tr.type_size;
    for (int tries = 0;; ++tries) {
      for (size_t j = 0; j < tr.type_size; ++j) blk[j] = uint8_t(rng()) & 0xBF;
      if (t == GgmlType::MXFP4) blk[0] = uint8_t(124 + rng() % 6);  // 2^(e-127) scale
      tr.dequantize_row(blk, tmp.data(), tr.block_size);
      bool ok = true;
      for (float v : tmp) ok = ok && std::isfinite(v) && std::fabs(v) < 1e4f;
      if (ok) break;
      if (tries > 1000) throw std::runtime_error(std::string("no finite blocks for ") + tr.name);
    }
  }
  return w;
}

struct DequantRef {
  std::vector<double> y, absdot, qerr;  // per output: value, sum|w x|, Q8 half-step bound
};

// Double reference, with the error-bound terms of the header comment.
DequantRef dequant_reference(GgmlType t, const Tensor& w, const Tensor& x, const float* bias,
                             int64_t N, int64_t K) {
  const int64_t M = x.numel() / K;
  const size_t rb = quant::row_size(t, K);
  std::vector<float> wf(size_t(N * K));
  for (int64_t n = 0; n < N; ++n)
    quant::dequantize(t, w.data<uint8_t>() + n * rb, wf.data() + n * K, K);
  const int64_t ab = quant::traits(quant::traits(t).vec_dot_type).block_size;
  DequantRef r;
  r.y.resize(size_t(M * N));
  r.absdot = r.qerr = r.y;
  const float* xp = x.data<float>();
  for (int64_t m = 0; m < M; ++m) {
    std::vector<double> amax(size_t(K / ab + 1), 0.0);
    for (int64_t k = 0; k < K; ++k)
      amax[k / ab] = std::max(amax[k / ab], double(std::fabs(xp[m * K + k])));
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, a = 0, q = 0;
      for (int64_t k0 = 0; k0 < K; k0 += ab) {
        double wmax = 0, xsum = 0;
        for (int64_t k = k0; k < k0 + ab; ++k) {
          const double wv = wf[n * K + k], xv = xp[m * K + k];
          s += wv * xv;
          a += std::fabs(wv * xv);
          q += std::fabs(wv) * amax[k / ab] / 254.0;
          wmax = std::max(wmax, std::fabs(wv));
          xsum += std::fabs(xv);
        }
        q += 5e-4 * wmax * xsum;  // Q8_1: fp16 rounding of s = d * sum(q), times the min m
      }
      r.y[m * N + n] = s + (bias ? bias[n] : 0.0);
      r.absdot[m * N + n] = a;
      r.qerr[m * N + n] = q;
    }
  }
  return r;
}

Tensor dmm(GgmlType t, const Tensor& x, const Tensor& w, const Tensor* bias, int64_t K) {
  std::vector<Tensor> in{x, w};
  if (bias) in.push_back(*bias);
  return run_op(Op::DequantMatmul, in,
                {{"scheme", std::string(quant::traits(t).name)}, {"k", int64_t(K)}});
}

void check_dequant(GgmlType t, const Tensor& got, const DequantRef& r, const std::string& what) {
  const char* name = quant::traits(t).name;
  ASSERT_EQ(got.dtype(), DType::F32);
  ASSERT_EQ(size_t(got.numel()), r.y.size()) << name;
  const float* g = got.data<float>();
  double se = 0, sr = 0;
  int bad = 0;
  for (size_t i = 0; i < r.y.size(); ++i) {
    const double err = std::fabs(double(g[i]) - r.y[i]);
    const double tol =
        direct_quant(t) ? 1.02 * r.qerr[i] + 1e-3 * r.absdot[i] + 1e-6 : 1e-5 * r.absdot[i] + 1e-6;
    if (!(err <= tol) && bad++ < 3)
      ADD_FAILURE() << name << " " << what << " output " << i << ": got " << g[i] << " want "
                    << r.y[i] << " (tol " << tol << ")";
    se += err * err;
    sr += r.y[i] * r.y[i];
  }
  EXPECT_EQ(bad, 0) << name << " " << what;
  if (sr > 0) {
    const double rel = std::sqrt(se / sr);
    EXPECT_LE(rel, direct_quant(t) ? 1e-2 : 2e-6) << name << " " << what;
  }
}

std::vector<GgmlType> all_types() {
  std::vector<GgmlType> v;
  for (uint32_t id = 0; id < 64; ++id) {
    const TypeTraits* t = quant::find_traits(id);
    if (!t || (!t->is_quantized && t->type != GgmlType::F32 && t->type != GgmlType::F16 &&
               t->type != GgmlType::BF16))
      continue;
    if (t->type == GgmlType::Q8_K || t->type == GgmlType::Q8_1) continue;  // activation formats
    v.push_back(t->type);
  }
  return v;
}

int64_t test_k(const TypeTraits& t) {
  return t.block_size >= 64 ? 2 * std::max<int64_t>(t.block_size, 256) : 96;
}

TEST(DequantMatmul, EveryTypeMatchesDoubleReference) {
  int n_types = 0;
  for (GgmlType t : all_types()) {
    const TypeTraits& tr = quant::traits(t);
    const int64_t K = test_k(tr), N = 37;
    const Tensor w = random_weight(t, N, K, 7 + uint32_t(t));
    const Tensor bias = random_tensor({N}, DType::F32, 3);
    for (const Dims& xd : {Dims{K}, Dims{2, 3, K}, Dims{70, K}}) {
      const Tensor x = random_tensor(xd, DType::F32, 11 + uint64_t(xd.size()));
      const DequantRef r = dequant_reference(t, w, x, bias.data<float>(), N, K);
      check_dequant(t, dmm(t, x, w, &bias, K), r, "x rank " + std::to_string(xd.size()));
    }
    ++n_types;
  }
  EXPECT_EQ(n_types, 28);  // 25 quant types (not the q8_1 / q8_K activation formats) + f32 f16 bf16
}

TEST(DequantMatmul, DirectKernelsLargeKAndNoBias) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    ASSERT_NE(quant::traits(t).vec_dot, nullptr) << quant::traits(t).name;
    const int64_t K = 4096, N = 19;
    const Tensor w = random_weight(t, N, K, 5);
    const Tensor x = random_tensor({3, K}, DType::F32, 9, -2, 2);
    check_dequant(t, dmm(t, x, w, nullptr, K), dequant_reference(t, w, x, nullptr, N, K), "K=4096");
  }
}

// Prefill rows of types without an integer GEMM run in tiles of 64 weight rows
// over one packed copy of the activations (512 rows of them at a time); here
// three tiles, the last 12 rows wide (a product too narrow for the packed
// copy, which packs its own), and 40 or 520 activation rows.
TEST(DequantMatmul, PrefillTilesShareOnePackedActivation) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q2_K}) {
    const int64_t K = 256, N = 140;
    const Tensor w = random_weight(t, N, K, 21);
    const Tensor bias = random_tensor({N}, DType::F32, 25);
    for (int64_t M : {40, 520}) {
      const Tensor x = random_tensor({M, K}, DType::F32, 23);
      check_dequant(t, dmm(t, x, w, &bias, K), dequant_reference(t, w, x, bias.data<float>(), N, K),
                    std::to_string(M) + " x 140 tiled");
    }
  }
}

// The portable (non-AVX2) vec_dot path, forced, against the same bounds.
TEST(DequantMatmul, PortablePathMatches) {
  quant::detail::force_portable_vec_dot(true);
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
    const int64_t K = 512, N = 9;
    const Tensor w = random_weight(t, N, K, 21);
    const Tensor x = random_tensor({4, K}, DType::F32, 22);
    check_dequant(t, dmm(t, x, w, nullptr, K), dequant_reference(t, w, x, nullptr, N, K),
                  "portable");
  }
  quant::detail::force_portable_vec_dot(false);
}

// AVX2 and portable vec_dot agree closely on identical activation bytes (the
// same integer products; only float summation order differs).
TEST(DequantMatmul, Avx2AndPortableVecDotAgree) {
  if (!quant::detail::vec_dot_uses_avx2()) GTEST_SKIP() << "no AVX2";
  for (GgmlType t :
       {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0,
        GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K}) {
    const TypeTraits& tr = quant::traits(t);
    const int64_t K = 1024;
    const Tensor w = random_weight(t, 1, K, 31);
    const Tensor x = random_tensor({K}, DType::F32, 32);
    std::vector<uint8_t> a(quant::row_size(tr.vec_dot_type, K));
    quant::quantize_activations(tr.vec_dot_type, x.data<float>(), a.data(), K);
    const float fast = tr.vec_dot(w.raw(), a.data(), K);
    quant::detail::force_portable_vec_dot(true);
    const float slow = tr.vec_dot(w.raw(), a.data(), K);
    quant::detail::force_portable_vec_dot(false);
    EXPECT_NEAR(fast, slow, 1e-4 * (std::fabs(slow) + 1)) << tr.name;
  }
}

TEST(DequantMatmul, F16InputUpcasts) {
  const int64_t K = 64, N = 5;
  const Tensor w = random_weight(GgmlType::Q8_0, N, K, 1);
  const Tensor x32 = random_tensor({2, K}, DType::F32, 2);
  const Tensor x16 = x32.to(DType::F16);
  const Tensor x16f = x16.to(DType::F32);
  const Tensor got = dmm(GgmlType::Q8_0, x16, w, nullptr, K);
  EXPECT_EQ(got.dims(), (Dims{2, N}));
  check_dequant(GgmlType::Q8_0, got, dequant_reference(GgmlType::Q8_0, w, x16f, nullptr, N, K),
                "f16 x");
}

TEST(DequantMatmul, EmptyAndZeroK) {
  const Tensor w = random_weight(GgmlType::Q4_0, 4, 32, 1);
  const Tensor y = dmm(GgmlType::Q4_0, Tensor(Dims{0, 32}, DType::F32), w, nullptr, 32);
  EXPECT_EQ(y.dims(), (Dims{0, 4}));
  // K = 0: the output is the bias.
  const Tensor w0(Dims{3, 0}, DType::U8);
  const Tensor b = random_tensor({3}, DType::F32, 4);
  const Tensor y0 = dmm(GgmlType::Q4_K, Tensor(Dims{2, 0}, DType::F32), w0, &b, 0);
  ASSERT_EQ(y0.dims(), (Dims{2, 3}));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y0.data<float>()[i], b.data<float>()[i % 3]);
}

TEST(DequantMatmul, ErrorPaths) {
  const Tensor x = random_tensor({2, 256}, DType::F32, 1);
  const Tensor w = random_weight(GgmlType::Q4_K, 3, 256, 1);
  auto run = [&](const Tensor& xx, const Tensor& ww, const std::string& scheme, int64_t k,
                 const Tensor* bias = nullptr) {
    std::vector<Tensor> in{xx, ww};
    if (bias) in.push_back(*bias);
    return run_op(Op::DequantMatmul, in, {{"scheme", scheme}, {"k", k}});
  };
  EXPECT_NO_THROW(run(x, w, "q4_K", 256));
  // Wrong row bytes: a q4_K row of 256 is 144 bytes, not 210 (q6_K).
  try {
    run(x, w, "q6_K", 256);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q6_K"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("210"), std::string::npos) << e.what();
  }
  try {
    run(x, w, "q4_X", 256);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'q4_X'"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(run(x, w, "Q4_K", 256));  // names match case-insensitively, as users type them
  EXPECT_THROW(run(x, w, "q4_K", 128), Error);  // k not a block multiple
  EXPECT_THROW(run(x, w, "q4_K", 512), Error);  // x last dim != k
  EXPECT_THROW(run(x, random_tensor({3, 144}, DType::F32, 1), "q4_K", 256), Error);  // w not u8
  const Tensor b4 = random_tensor({4}, DType::F32, 1);
  EXPECT_THROW(run(x, w, "q4_K", 256, &b4), Error);  // bias length != N
  EXPECT_THROW(run(Tensor(Dims{2, 256}, DType::I32), w, "q4_K", 256), Error);
  EXPECT_THROW(quant::parse_type_name("q4_2"), Error);
  EXPECT_EQ(quant::parse_type_name("iq2_xxs"), GgmlType::IQ2_XXS);
  EXPECT_EQ(quant::parse_type_name("bf16"), GgmlType::BF16);
}

// Q8_0 activations round like ggml-cpu (127 / amax, half to even), which is
// not the reference quantizer's roundf.
TEST(QuantActivations, Q8_0RoundsHalfToEven) {
  std::vector<float> x(32, 0.f);
  x[0] = 127.f;  // amax 127: id = 1, values land exactly on halves
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 0.5f;
  std::vector<uint8_t> q(34), ref(34);
  quant::quantize_activations(GgmlType::Q8_0, x.data(), q.data(), 32);
  const auto* qs = reinterpret_cast<const int8_t*>(q.data() + 2);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], 2);
  EXPECT_EQ(qs[2], -4);
  EXPECT_EQ(qs[3], 0);
  quant::quantize(GgmlType::Q8_0, x.data(), ref.data(), 32);
  EXPECT_EQ(reinterpret_cast<const int8_t*>(ref.data() + 2)[1], 3);  // roundf: away from zero
  // Q8_K activations are the reference quantizer's bytes.
  std::vector<float> y = std::vector<float>(256);
  for (int i = 0; i < 256; ++i) y[i] = std::sin(float(i));
  std::vector<uint8_t> a(292), b(292);
  quant::quantize_activations(GgmlType::Q8_K, y.data(), a.data(), 256);
  quant::quantize(GgmlType::Q8_K, y.data(), b.data(), 256);
  EXPECT_EQ(a, b);
  EXPECT_THROW(quant::quantize_activations(GgmlType::Q4_0, y.data(), a.data(), 256), Error);
  EXPECT_THROW(quant::quantize_activations(GgmlType::Q8_0, y.data(), a.data(), 33), Error);
}

}  // namespace
}  // namespace rlx
