// The regrouped decode GEMV (quant/row_groups.h): the q4_0 / q8_0 layout
// against the file's rows, every kernel bit for bit against the portable one, all of them
// against a double-precision dot of the same quants, extremes that would
// saturate 16-bit pair sums, and dequant_matmul on a constant weight (the
// path decoding takes) on every ISA path against the file-layout kernels.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/row_groups.h"
#include "quant/vec_dot.h"
#include "rlx/backend.h"
#include "rlx/cpu_isa.h"
#include "rlx/graph.h"
#include "rlx/quant.h"
#include "rlx/runtime.h"
#include "support/testing.h"

namespace rlx {
namespace {

using quant::GgmlType;
using quant::GroupKernel;

using testing::IsaLimit;

// A quantized activation row and its per-block data.
struct ActRow {
  std::vector<uint8_t> q8;
  std::vector<float> d;
  std::vector<int32_t> sum;
  quant::GroupActivation view() const { return {q8.data(), d.data(), sum.data()}; }
};

// x quantized to the vec_dot_type of weight type t (Q8_0 or Q8_K).
ActRow activation(GgmlType t, const std::vector<float>& x) {
  const int64_t K = int64_t(x.size());
  const GgmlType at = quant::traits(t).vec_dot_type;
  ActRow a;
  a.q8.resize(quant::row_size(at, K));
  a.d.resize(size_t(quant::group_activation_entries(K)));
  a.sum.resize(size_t(quant::group_activation_entries(K)));
  quant::quantize_activations(at, x.data(), a.q8.data(), K);
  quant::prepare_group_activation(t, a.q8.data(), K, a.d.data(), a.sum.data());
  return a;
}

ActRow random_activation(GgmlType t, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<float> x(static_cast<size_t>(K));
  for (float& v : x) v = u(rng);
  return activation(t, x);
}

// Row n . a in double from the dequantized quants (the same 8-bit activations).
double exact_dot(GgmlType t, const uint8_t* row, const ActRow& a, int64_t K, double* mag) {
  std::vector<float> w(static_cast<size_t>(K)), x(static_cast<size_t>(K));
  quant::dequantize(t, row, w.data(), K);
  quant::dequantize(quant::traits(t).vec_dot_type, a.q8.data(), x.data(), K);
  double s = 0;
  *mag = 0;
  for (int64_t k = 0; k < K; ++k) {
    s += double(w[size_t(k)]) * double(x[size_t(k)]);
    *mag += std::fabs(double(w[size_t(k)]) * double(x[size_t(k)]));
  }
  return s;
}

std::vector<GroupKernel> simd_kernels() {
  std::vector<GroupKernel> ks;
  for (Isa isa : {Isa::avx512, Isa::avx2}) {
    IsaLimit lim(isa);
    const GroupKernel k = quant::group_kernel(GgmlType::Q4_0);
    if (k != GroupKernel::none && (ks.empty() || ks.back() != k)) ks.push_back(k);
  }
  return ks;
}

TEST(RowGroups, LayoutHoldsEveryRowsScalesAndQuants) {
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    const int64_t N = 19, K = 96, nb = K / 32, V = t == GgmlType::Q4_0 ? 4 : 8;
    const size_t rb = quant::row_size(t, K), bb = quant::traits(t).type_size;
    const auto w = testing::random_quant_rows(t, N, K, 3);
    const quant::RowGroups rg = quant::make_row_groups(t, w.data(), rb, N, K);
    ASSERT_EQ(rg.groups(), 2);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(rg.data) % 64, 0u);
    EXPECT_EQ(rg.scale_bytes % 64, 0u);
    for (int64_t n = 0; n < 2 * quant::kGroupRows; ++n) {
      const uint8_t* g = rg.data + size_t(n / quant::kGroupRows) * rg.group_bytes;
      const int64_t r = n % quant::kGroupRows;
      for (int64_t b = 0; b < nb; ++b) {
        uint8_t got[34] = {}, want[34] = {};  // d, then quants; padding rows are zeros
        if (n < N) std::memcpy(want, w.data() + size_t(n) * rb + size_t(b) * bb, bb);
        std::memcpy(got, g + (b * quant::kGroupRows + r) * 2, 2);
        for (int64_t j = 0; j < V; ++j)
          std::memcpy(got + 2 + 4 * j,
                      g + rg.scale_bytes + size_t((b * V + j) * quant::kGroupRows + r) * 4, 4);
        EXPECT_EQ(std::memcmp(got, want, bb), 0) << quant::traits(t).name << " row " << n;
      }
    }
  }
}

constexpr GgmlType kRowGroupTypes[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,
                                       GgmlType::Q5_K, GgmlType::Q6_K};

// Every SIMD kernel equals the portable one bit for bit, and all are within
// f32 rounding of the double dot of the same quants.
TEST(RowGroups, KernelsEqualThePortableOneAndTheExactDot) {
  const auto kernels = simd_kernels();
  for (GgmlType t : kRowGroupTypes)
    for (auto [N, K] :
         {std::pair<int64_t, int64_t>{1, 32}, {15, 64}, {16, 768}, {17, 4096}, {45, 2304}}) {
      K = (K + quant::traits(t).block_size - 1) / quant::traits(t).block_size *
          quant::traits(t).block_size;
      const size_t rb = quant::row_size(t, K);
      const auto w = testing::random_quant_rows(t, N, K, uint32_t(N + K));
      const quant::RowGroups rg = quant::make_row_groups(t, w.data(), rb, N, K);
      const ActRow a = random_activation(t, K, uint32_t(K));
      std::vector<float> ref(static_cast<size_t>(N));
      quant::gemv_row_groups(GroupKernel::portable, rg, a.view(), 0, rg.groups(), ref.data());
      for (int64_t n = 0; n < N; ++n) {
        double mag = 0;
        const double exact = exact_dot(t, w.data() + size_t(n) * rb, a, K, &mag);
        EXPECT_NEAR(ref[size_t(n)], exact, 1e-6 * mag + 1e-30)
            << quant::traits(t).name << " N=" << N << " K=" << K << " row " << n;
      }
      for (GroupKernel k : kernels) {
        std::vector<float> got(static_cast<size_t>(N), -1.f);
        quant::gemv_row_groups(k, rg, a.view(), 0, rg.groups(), got.data());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), size_t(N) * 4), 0)
            << quant::traits(t).name << " " << quant::group_kernel_name(k) << " N=" << N
            << " K=" << K;
      }
    }
}

// Several activation rows against each group at once (batched decode) give every row the bits
// one row at a time gives, for 1..9 rows (chunks of 4 and a remainder) and a short last group.
TEST(RowGroups, SeveralRowsAtOnceEqualOneAtATime) {
  IsaLimit lim(Isa::avx512);
  int checked = 0;
  for (GgmlType t : kRowGroupTypes) {
    const GroupKernel k = quant::group_kernel(t);
    const int64_t N = 70, K = 1024;
    const auto w = testing::random_quant_rows(t, N, K, 3);
    const quant::RowGroups rg = quant::make_row_groups(t, w.data(), quant::row_size(t, K), N, K);
    std::vector<ActRow> rows;
    std::vector<quant::GroupActivation> acts;
    for (uint32_t m = 0; m < 9; ++m) rows.push_back(random_activation(t, K, 100 + m));
    for (const ActRow& a : rows) acts.push_back(a.view());
    for (int64_t M = 1; M <= 9; ++M) {
      std::vector<float> got(size_t(M * N), -1.f), want(size_t(M * N), -2.f);
      // Groups 1..4 of 5: y starts at row 16, and the last group is short.
      if (!quant::gemv_row_groups_rows(k, rg, acts.data(), M, 1, rg.groups(), got.data(), N)) break;
      for (int64_t m = 0; m < M; ++m)
        quant::gemv_row_groups(k, rg, acts[size_t(m)], 1, rg.groups(), want.data() + m * N);
      for (int64_t m = 0; m < M; ++m)
        EXPECT_EQ(std::memcmp(got.data() + m * N, want.data() + m * N, size_t(N - 16) * 4), 0)
            << quant::traits(t).name << " M=" << M << " row " << m;
      ++checked;
    }
  }
  if (checked == 0) GTEST_SKIP() << "no several-row kernel on this CPU";
  EXPECT_EQ(checked, 45);  // every regrouped type on AVX-512 VNNI
}

// A block of extreme quants: every quant at its largest or smallest (by the
// parity of the byte's place plus n), every K-quant scale and min at its
// extremes, float scales 1.
void extreme_block(GgmlType t, int64_t n, uint8_t* blk) {
  const size_t bb = quant::traits(t).type_size;
  const uint16_t one = 0x3C00;  // 1.0 in f16
  for (size_t i = 0; i < bb; ++i) {
    const bool odd = (n + int64_t(i)) % 2;
    blk[i] = t == GgmlType::Q8_0 ? uint8_t(odd ? 0x80 : 0x7F) : uint8_t(odd ? 0xFF : 0x00);
  }
  if (t == GgmlType::Q6_K) {
    for (size_t i = 192; i < 208; ++i) blk[i] = (n + int64_t(i)) % 2 ? 0x80 : 0x7F;  // -128, 127
    std::memcpy(blk + 208, &one, 2);
    return;
  }
  std::memcpy(blk, &one, 2);
  if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) {
    std::memcpy(blk + 2, &one, 2);
    std::memset(blk + 4, 0xFF, 12);  // every 6-bit scale and min 63
  }
}

// Quants and scales at their extremes against activations of +-127: the
// products whose pair sums overflow 16 bits if a kernel took them
// signed-by-signed, and the largest integer sums per block; every kernel must
// keep them exact.
TEST(RowGroups, ExtremeQuantsDoNotSaturate) {
  const auto kernels = simd_kernels();
  const int64_t N = 16, K = 256;
  std::vector<float> x(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) x[size_t(k)] = (k % 3 == 0) ? -1.f : 1.f;
  for (GgmlType t : kRowGroupTypes) {
    const ActRow a = activation(t, x);
    const size_t rb = quant::row_size(t, K), bb = quant::traits(t).type_size;
    std::vector<uint8_t> w(size_t(N) * rb);
    for (int64_t n = 0; n < N; ++n)
      for (size_t b = 0; b < rb / bb; ++b) extreme_block(t, n, w.data() + size_t(n) * rb + b * bb);
    const quant::RowGroups rg = quant::make_row_groups(t, w.data(), rb, N, K);
    std::vector<float> ref(static_cast<size_t>(N));
    quant::gemv_row_groups(GroupKernel::portable, rg, a.view(), 0, 1, ref.data());
    for (int64_t n = 0; n < N; ++n) {
      double mag = 0;
      EXPECT_NEAR(ref[size_t(n)], exact_dot(t, w.data() + size_t(n) * rb, a, K, &mag), 1e-6 * mag)
          << quant::traits(t).name;
    }
    for (GroupKernel k : kernels) {
      std::vector<float> got(static_cast<size_t>(N));
      quant::gemv_row_groups(k, rg, a.view(), 0, 1, got.data());
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), size_t(N) * 4), 0)
          << quant::traits(t).name << " " << quant::group_kernel_name(k);
    }
  }
}

TEST(RowGroups, OnlyItsTypesAndNotOnThePortablePath) {
  EXPECT_EQ(quant::group_kernel(GgmlType::Q3_K), GroupKernel::none);
  EXPECT_EQ(quant::group_kernel(GgmlType::F16), GroupKernel::none);
  IsaLimit lim(Isa::portable);
  EXPECT_EQ(quant::group_kernel(GgmlType::Q4_0), GroupKernel::none);
  EXPECT_THROW(quant::make_row_groups(GgmlType::Q3_K, nullptr, 110, 1, 256), Error);
  EXPECT_THROW(quant::make_row_groups(GgmlType::Q4_0, nullptr, 17, 1, 32), Error);
}

// dequant_matmul with the weight a graph param (packable, as in a GGUF model)
// at decode sizes: regrouped on the first run, and equal within f32 rounding
// to the same op with the weight as an input (the file-layout kernels), on
// every ISA path; bias and a row count that is not a multiple of 16 included.
TEST(RowGroups, DequantMatmulOnAConstantWeightMatchesTheFileLayout) {
  for (Isa isa : {Isa::avx512, Isa::avx2, Isa::portable}) {
    if (isa > detected_isa()) continue;
    IsaLimit lim(isa);
    for (GgmlType t : kRowGroupTypes)
      for (auto [M, N, K] :
           {std::array<int64_t, 3>{1, 70, 512}, {3, 70, 512}, {1, 300, 4096}, {5, 300, 4096}}) {
        // (At K = 4096 several rows take the groups a cache-sized block at a time: 2-3 groups a
        // block, a short group at the end.)
        const auto& tr = quant::traits(t);
        const auto wb = testing::random_quant_rows(t, N, K, 5);
        Tensor w(Dims{N, int64_t(quant::row_size(t, K))}, DType::U8);
        std::memcpy(w.data<uint8_t>(), wb.data(), wb.size());
        const Tensor x = testing::random_tensor({M, K}, DType::F32, 6);
        const Tensor bias = testing::random_tensor({N}, DType::F32, 7);
        const Attrs attrs{{"scheme", std::string(tr.name)}, {"k", int64_t(K)}};
        const Tensor want = testing::run_op(Op::DequantMatmul, {x, w, bias}, attrs);
        Graph g;
        const NodeId xi = g.input("x", x.shape());
        const NodeId y = g.add(Op::DequantMatmul,
                               {xi, g.param("w", w.shape()), g.param("b", bias.shape())}, attrs);
        g.add_output("y", y);
        Session s(Executable::compile(g, {{"w", w}, {"b", bias}}, {}));
        for (int run = 0; run < 2; ++run) {  // the first run regroups, the second reuses
          const Tensor got = s.run({{"x", x}}).at("y");
          EXPECT_TRUE(testing::all_close(got, want, 2e-4, 1e-5))
              << tr.name << " M=" << M << " K=" << K << " isa " << isa_name(isa) << " run " << run;
        }
        // CpuOptions::regroup_weights off: the file-layout kernels, bit for bit.
        CompileOptions off;
        off.backend = make_cpu_backend({.regroup_weights = false});
        Session plain(Executable::compile(g, {{"w", w}, {"b", bias}}, off));
        const Tensor same = plain.run({{"x", x}}).at("y");
        EXPECT_EQ(std::memcmp(same.raw(), want.raw(), size_t(want.numel()) * 4), 0) << tr.name;
      }
  }
}

}  // namespace
}  // namespace rlx
