// The integer GEMM (src/quant/qgemm*.cc) on every path this CPU has (AVX-512
// VNNI, AVX2; forced by set_isa_limit): weight decoding against dequantize,
// every output against the per-row vec_dot on the same activation bytes (the
// same integer products, so only float summation order may differ), against
// a double product of the dequantized weights and dequantized activations,
// and through dequant_matmul at prefill sizes.
#include "quant/qgemm.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/vec_dot.h"
#include "rlx/cpu_isa.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx {
namespace {

using quant::GgmlType;
using quant::qgemm::Path;

const GgmlType kQgemmTypes[] = {GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                                GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

using testing::IsaLimit;

// The paths this machine can run, each with the ISA limit that selects it.
std::vector<std::pair<Path, Isa>> paths() {
  std::vector<std::pair<Path, Isa>> v;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    IsaLimit lim(isa);
    const Path p = quant::qgemm::path_for(GgmlType::Q8_0);
    if (p != Path::none && (v.empty() || v.back().first != p)) v.push_back({p, isa});
  }
  return v;
}

TEST(DequantMatmulQgemm, DecodeMatchesDequantize) {
  for (GgmlType t : kQgemmTypes) {
    const auto f = quant::qgemm::format(t);
    ASSERT_GT(f.group, 0) << quant::traits(t).name;
    const int64_t K = 512, N = 6;
    const auto w = testing::random_quant_rows(t, N, K, 3);
    const size_t rb = quant::row_size(t, K);
    std::vector<int8_t> v(static_cast<size_t>(K));
    std::vector<float> s(static_cast<size_t>(K / f.group)), o(s.size(), 0.f),
        ref(static_cast<size_t>(K));
    for (int64_t n = 0; n < N; ++n) {
      quant::dequantize(t, w.data() + size_t(n) * rb, ref.data(), K);
      quant::qgemm::decode_row(t, w.data() + size_t(n) * rb, K, v.data(), s.data(), o.data());
      for (int64_t k = 0; k < K; ++k) {
        const float got = s[size_t(k / f.group)] * float(v[size_t(k)]) +
                          (f.has_min ? o[size_t(k / f.group)] : 0.f);
        ASSERT_NEAR(got, ref[size_t(k)], 1e-6f * (std::fabs(ref[size_t(k)]) + 1e-3f))
            << quant::traits(t).name << " row " << n << " k " << k;
      }
    }
  }
}

// qgemm vs vec_dot and vs the double product of dequantized operands, over
// shapes that leave partial tiles and row blocks (and split M into blocks).
TEST(DequantMatmulQgemm, MatchesVecDotOnEveryPath) {
  const auto ps = paths();
  if (ps.empty()) GTEST_SKIP() << "no AVX2";
  for (const auto& [path, isa] : ps) {
    IsaLimit lim(isa);
    ASSERT_EQ(quant::qgemm::path_for(GgmlType::Q4_K), path);
    for (GgmlType t : kQgemmTypes) {
      const auto& tr = quant::traits(t);
      const auto& ta = quant::traits(tr.vec_dot_type);
      const bool kq = tr.block_size == 256;
      for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, kq ? 256 : 32},
                                    {5, 7, kq ? 256 : 96},
                                    {16, 33, 512},
                                    {37, 70, kq ? 768 : 160},
                                    {64, 8, 256},
                                    {9, 130, 1024}}) {
        const auto w = testing::random_quant_rows(t, N, K, uint32_t(M * 131 + N));
        const size_t rb = quant::row_size(t, K);
        const Tensor x = testing::random_tensor({M, K}, DType::F32, uint64_t(M + N), -2, 2);
        const Tensor bias = testing::random_tensor({N}, DType::F32, 5);
        const bool with_bias = N % 2 == 0;
        std::vector<float> y(size_t(M * N), -7.f);
        quant::qgemm::matmul(t, x.data<float>(), M, K, w.data(), rb, N,
                             with_bias ? bias.data<float>() : nullptr, y.data());
        const size_t ab = quant::row_size(tr.vec_dot_type, K);
        std::vector<uint8_t> a(ab);
        std::vector<float> wf(static_cast<size_t>(K)), af(static_cast<size_t>(K));
        int bad = 0;
        for (int64_t m = 0; m < M; ++m) {
          quant::quantize_activations(tr.vec_dot_type, x.data<float>() + m * K, a.data(), K);
          ta.dequantize_row(a.data(), af.data(), K);
          for (int64_t n = 0; n < N; ++n) {
            const uint8_t* wr = w.data() + size_t(n) * rb;
            tr.dequantize_row(wr, wf.data(), K);
            double exact = 0, mag = 0;
            for (int64_t k = 0; k < K; ++k) {
              exact += double(wf[size_t(k)]) * double(af[size_t(k)]);
              mag += std::fabs(double(wf[size_t(k)]) * double(af[size_t(k)]));
            }
            const double b = with_bias ? bias.data<float>()[n] : 0.0;
            const double vd = double(tr.vec_dot(wr, a.data(), K)) + b;
            const double got = y[size_t(m * N + n)];
            // f32 rounding of K / G scaled group sums, plus (q4_1 / q5_1) the
            // fp16 rounding of Q8_1's stored sum that vec_dot and qgemm share
            // but the dequantized activations do not have.
            const double tol = 4e-6 * mag + 1e-6 * std::fabs(b) + 1e-6;
            const double tol_exact =
                (t == GgmlType::Q4_1 || t == GgmlType::Q5_1 ? 2e-3 : 4e-6) * mag + 1e-5;
            if ((!(std::fabs(got - vd) <= tol) || !(std::fabs(got - exact - b) <= tol_exact)) &&
                bad++ < 3)
              ADD_FAILURE() << tr.name << " " << quant::qgemm::path_name(path) << " M=" << M
                            << " N=" << N << " K=" << K << " [" << m << "," << n << "]: got " << got
                            << " vec_dot " << vd << " exact " << exact + b;
          }
        }
        EXPECT_EQ(bad, 0) << tr.name << " " << quant::qgemm::path_name(path);
      }
    }
  }
}

// Activations at the top of the 8-bit range against weights at the ends of
// theirs, the worst case for the AVX2 kernel's 16-bit partial sums.
TEST(DequantMatmulQgemm, ExtremeValuesDoNotSaturate) {
  const auto ps = paths();
  if (ps.empty()) GTEST_SKIP() << "no AVX2";
  for (const auto& [path, isa] : ps) {
    IsaLimit lim(isa);
    for (GgmlType t : kQgemmTypes) {
      const auto& tr = quant::traits(t);
      const int64_t M = 4, N = 8, K = 512;
      const size_t rb = quant::row_size(t, K);
      std::vector<uint8_t> w(size_t(N) * rb);
      std::vector<float> row(static_cast<size_t>(K));
      for (int64_t n = 0; n < N; ++n) {
        // Constant blocks of one sign, then a block with one large value.
        for (int64_t k = 0; k < K; ++k)
          row[size_t(k)] = (k / 64) % 3 == 2 ? (k % 64 == 5 ? -9.f : 0.1f) : (n % 2 ? 1.f : -1.f);
        quant::quantize(t, row.data(), w.data() + size_t(n) * rb, K);
      }
      std::vector<float> x(size_t(M * K));
      for (int64_t i = 0; i < M * K; ++i) x[size_t(i)] = (i / K) % 2 ? 2.f : -2.f;
      std::vector<float> y(size_t(M * N));
      quant::qgemm::matmul(t, x.data(), M, K, w.data(), rb, N, nullptr, y.data());
      std::vector<uint8_t> a(quant::row_size(tr.vec_dot_type, K));
      for (int64_t m = 0; m < M; ++m) {
        quant::quantize_activations(tr.vec_dot_type, x.data() + m * K, a.data(), K);
        for (int64_t n = 0; n < N; ++n) {
          const float want = tr.vec_dot(w.data() + size_t(n) * rb, a.data(), K);
          EXPECT_NEAR(y[size_t(m * N + n)], want, 1e-5f * (std::fabs(want) + 1.f))
              << tr.name << " " << quant::qgemm::path_name(path) << " [" << m << "," << n << "]";
        }
      }
    }
  }
}

// Through the dequant_matmul op at prefill sizes (M >= 16 takes qgemm): the
// same values as row-by-row runs (M = 1 takes vec_dot).
TEST(DequantMatmulQgemm, OpPrefillEqualsRowByRow) {
  const auto ps = paths();
  if (ps.empty()) GTEST_SKIP() << "no AVX2";
  for (const auto& [path, isa] : ps) {
    IsaLimit lim(isa);
    for (GgmlType t : kQgemmTypes) {
      const auto& tr = quant::traits(t);
      const int64_t M = 24, N = 45, K = 512;
      const auto wb = testing::random_quant_rows(t, N, K, 17);
      Tensor w(Dims{N, int64_t(quant::row_size(t, K))}, DType::U8);
      std::memcpy(w.data<uint8_t>(), wb.data(), wb.size());
      const Tensor x = testing::random_tensor({M, K}, DType::F32, 8);
      const Attrs attrs{{"scheme", std::string(tr.name)}, {"k", int64_t(K)}};
      const Tensor all = testing::run_op(Op::DequantMatmul, {x, w}, attrs);
      for (int64_t m = 0; m < M; m += 7) {
        Tensor xr(Dims{1, K}, DType::F32);
        std::memcpy(xr.data<float>(), x.data<float>() + m * K, size_t(K) * 4);
        const Tensor one = testing::run_op(Op::DequantMatmul, {xr, w}, attrs);
        for (int64_t n = 0; n < N; ++n) {
          const float want = one.data<float>()[n];
          EXPECT_NEAR(all.data<float>()[m * N + n], want, 1e-4 * (std::fabs(want) + 1))
              << tr.name << " " << quant::qgemm::path_name(path) << " [" << m << "," << n << "]";
        }
      }
    }
  }
}

// The AVX2 activation quantizer writes the same bytes and floats as
// quantize_activations + the scalar re-layout, for every activation format
// and group size, with ties, zero blocks and repeated extremes of both signs.
TEST(DequantMatmulQgemm, SimdActivationsBitExact) {
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "no AVX2";
  const int64_t K = 1024;
  Tensor x = testing::random_tensor({K}, DType::F32, 77, -3, 3);
  float* xp = x.data<float>();
  for (int64_t k = 0; k < 32; ++k) xp[k] = 0.f;                         // a zero block
  for (int64_t k = 256; k < 512; ++k) xp[k] = float(k % 7 - 3) * 0.5f;  // half-way ties
  xp[600] = 5.f;
  xp[700] = -5.f;  // same magnitude, other sign, later: the first one sets Q8_K's scale
  for (int64_t k = 768; k < 1024; ++k) xp[k] = 0.f;  // a zero super-block
  struct Case {
    GgmlType vdt;
    int G;
  };
  for (const Case& c : {Case{GgmlType::Q8_0, 32}, Case{GgmlType::Q8_1, 32},
                        Case{GgmlType::Q8_K, 32}, Case{GgmlType::Q8_K, 16}}) {
    for (bool offset : {true, false}) {
      const size_t ng = size_t(K / c.G);
      std::vector<uint8_t> q0(static_cast<size_t>(K)), q1(static_cast<size_t>(K));
      std::vector<float> d0(ng), d1(ng), m0(ng), m1(ng);
      quant::qgemm::pack_activation_row(c.vdt, c.G, offset, xp, K, q0.data(), d0.data(), m0.data(),
                                        false);
      quant::qgemm::pack_activation_row(c.vdt, c.G, offset, xp, K, q1.data(), d1.data(), m1.data(),
                                        true);
      const std::string what = std::string(quant::traits(c.vdt).name) +
                               " G=" + std::to_string(c.G) + (offset ? " +128" : "");
      EXPECT_EQ(q0, q1) << what;
      EXPECT_EQ(0, std::memcmp(d0.data(), d1.data(), ng * 4)) << what;
      if (c.vdt != GgmlType::Q8_0) {
        EXPECT_EQ(0, std::memcmp(m0.data(), m1.data(), ng * 4)) << what;
      }
    }
  }
}

TEST(DequantMatmulQgemm, PathSelection) {
  {
    IsaLimit lim(Isa::portable);
    EXPECT_EQ(quant::qgemm::path_for(GgmlType::Q4_K), Path::none);
  }
  EXPECT_EQ(quant::qgemm::path_for(GgmlType::Q2_K), Path::none);
  EXPECT_EQ(quant::qgemm::path_for(GgmlType::IQ4_NL), Path::none);
  if (detected_isa() >= Isa::avx2) {
    IsaLimit lim(Isa::avx2);
    EXPECT_EQ(quant::qgemm::path_for(GgmlType::Q8_0), Path::avx2);
  }
}

// The four-row decode kernels equal four one-row dots bit for bit (the direct
// path mixes them: four rows at a time, then the rest one by one), for an even
// and an odd number of blocks, q8_0's -128 included, on AVX2 and AVX-512 VNNI.
TEST(DequantMatmulQgemm, FourRowDotsEqualOneRowDots) {
  if (!quant::detail::vec_dot_uses_avx2()) GTEST_SKIP() << "vec_dot on its portable path";
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0})
    for (int64_t K : {int64_t(256), int64_t(96), int64_t(32)}) {
      const auto w = testing::random_quant_rows(t, 4, K, 11);
      Tensor x = testing::random_tensor({K}, DType::F32, 12, -2, 2);
      std::vector<uint8_t> a(quant::row_size(GgmlType::Q8_0, K));
      quant::quantize_activations(GgmlType::Q8_0, x.data<float>(), a.data(), K);
      const size_t rb = quant::row_size(t, K);
      ASSERT_NE(quant::detail::vec_dot4(t), nullptr) << quant::traits(t).name;
      std::vector<quant::detail::VecDot4Fn> kernels{t == GgmlType::Q4_0
                                                        ? quant::detail::vec_dot4_q4_0_avx2
                                                        : quant::detail::vec_dot4_q8_0_avx2};
      if (detected_isa() >= Isa::avx512 && quant::detail::cpu_has_avx512_vnni())
        kernels.push_back(t == GgmlType::Q4_0 ? quant::detail::vec_dot4_q4_0_vnni
                                              : quant::detail::vec_dot4_q8_0_vnni);
      for (size_t k = 0; k < kernels.size(); ++k) {
        float four[4];
        kernels[k](w.data(), rb, a.data(), K, four);
        for (int r = 0; r < 4; ++r) {
          const float one = quant::traits(t).vec_dot(w.data() + size_t(r) * rb, a.data(), K);
          EXPECT_EQ(std::bit_cast<uint32_t>(four[r]), std::bit_cast<uint32_t>(one))
              << quant::traits(t).name << " K=" << K << " row " << r << (k ? " (VNNI)" : " (AVX2)");
        }
      }
    }
  quant::detail::force_portable_vec_dot(true);
  EXPECT_EQ(quant::detail::vec_dot4(GgmlType::Q8_0), nullptr);
  quant::detail::force_portable_vec_dot(false);
}

}  // namespace
}  // namespace rlx
