// Constant weights packed once per compiled graph (weight_pack.h) give the
// results of the per-call path, run after run: a Linear-style matmul (packed
// B) and a conv (packed A) through a Session, against the same graph run on
// OpenBLAS (RLX_ISA=portable path); then the same Session on a lower ISA,
// whose kernel cannot use what was packed for the first. Float rows of a
// dequant_matmul are copied into huge pages once, shared between graphs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/cpu/quant_matmul.h"
#include "backends/cpu/weight_pack.h"
#include "rlx/builder.h"
#include "rlx/cpu_isa.h"
#include "rlx/runtime.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::all_close;
using testing::random_tensor;

TEST(WeightPack, PackedWeightsMatchTheUnpackedPathRunAfterRun) {
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "packing is for rlx's AVX2 / AVX-512 kernels";
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{70, 300}, DType::F32));
  NodeId w = b.param("w", Shape(Dims{200, 300}, DType::F32));
  g.add_output("y", g.add(Op::MatMul, {x, w}, MatMulAttrs{.transpose_b = true}));
  NodeId img = b.input("img", Shape(Dims{2, 16, 20, 20}, DType::F32));
  NodeId k = b.param("k", Shape(Dims{40, 16, 3, 3}, DType::F32));
  g.add_output("z", g.add(Op::Conv, {img, k},
                          ConvAttrs{.stride = {1, 1}, .pads = {1, 1, 1, 1}, .dilation = {1, 1}}));
  const TensorMap weights{{"w", random_tensor({200, 300}, DType::F32, 1)},
                          {"k", random_tensor({40, 16, 3, 3}, DType::F32, 2)}};
  const TensorMap in{{"x", random_tensor({70, 300}, DType::F32, 3)},
                     {"img", random_tensor({2, 16, 20, 20}, DType::F32, 4)}};
  const int saved = num_threads();
  set_num_threads(2);
  const Isa saved_limit = isa_limit();
  set_isa_limit(Isa::portable);
  const TensorMap want = Session(Executable::compile(g, weights)).run(in);
  set_isa_limit(saved_limit);
  Session s(Executable::compile(g, weights));
  for (int run = 0; run < 3; ++run) {  // the first run packs, the others reuse
    const TensorMap got = s.run(in);
    EXPECT_TRUE(all_close(got.at("y"), want.at("y"), 1e-4, 1e-5)) << "run " << run;
    EXPECT_TRUE(all_close(got.at("z"), want.at("z"), 1e-4, 1e-5)) << "run " << run;
  }
  if (detected_isa() >= Isa::avx512) {
    set_isa_limit(Isa::avx2);  // weights packed for the AVX-512 kernel: packed per call
    const TensorMap got = s.run(in);
    EXPECT_TRUE(all_close(got.at("y"), want.at("y"), 1e-4, 1e-5));
    EXPECT_TRUE(all_close(got.at("z"), want.at("z"), 1e-4, 1e-5));
    set_isa_limit(saved_limit);
  }
  set_num_threads(saved);
}

// A weight of `rows` f16 rows of K, as a GGUF file holds it.
Tensor f16_rows(int64_t rows, int64_t K, uint64_t seed) {
  const Tensor f = random_tensor({rows, K}, DType::F32, seed);
  Tensor w(Dims{rows, K * 2}, DType::U8);
  auto* h = reinterpret_cast<uint16_t*>(w.data<uint8_t>());
  for (int64_t i = 0; i < f.numel(); ++i) h[i] = f32_to_f16(f.data<float>()[i]);
  return w;
}

TEST(WeightPack, FloatRowsCopiedOnceIntoHugePagesSharedByGraphs) {
  const int64_t K = 1024, N = 2048;  // 4 MiB of f16 rows: the smallest that is copied
  const Tensor w = f16_rows(N, K, 7);
  const auto* src = w.data<uint8_t>();
  const size_t bytes = size_t(w.numel());
  ASSERT_EQ(bytes, kHugeBufferMin);
  cpu::WeightPack a, b, c;
  const uint8_t* copy = cpu::resident_rows(&a, src, bytes);
  ASSERT_NE(copy, src);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(copy) % (size_t(2) << 20), 0u);
  EXPECT_EQ(std::memcmp(copy, src, bytes), 0);
  EXPECT_EQ(cpu::resident_rows(&a, src, bytes), copy);  // made once
  EXPECT_EQ(cpu::resident_rows(&b, src, bytes), copy);  // another graph's pack shares it
  // Small weights, no pack, or a pack holding another weight's copy: the rows as they are.
  EXPECT_EQ(cpu::resident_rows(&c, src, bytes - 1), src);
  EXPECT_EQ(cpu::resident_rows(nullptr, src, bytes), src);
  const Tensor other = f16_rows(N, K, 8);
  EXPECT_EQ(cpu::resident_rows(&a, other.data<uint8_t>(), bytes), other.data<uint8_t>());
}

// Decode (one row) and prefill (many rows) through a Session read the copy:
// the same numbers as a double reference, run after run.
TEST(WeightPack, FloatRowsFromTheCopyMatchTheReference) {
  const int64_t K = 1024, N = 2048;
  Graph g;
  Builder bld(g);
  NodeId w = bld.param("w", Shape(Dims{N, K * 2}, DType::U8));
  const Attrs attrs{{"scheme", std::string("f16")}, {"k", K}};
  for (const int64_t M : {1, 40}) {
    NodeId x = bld.input("x" + std::to_string(M), Shape(Dims{M, K}, DType::F32));
    g.add_output("y" + std::to_string(M), g.add(Op::DequantMatmul, {x, w}, attrs));
  }
  const Tensor wt = f16_rows(N, K, 9);
  const TensorMap in{{"x1", random_tensor({1, K}, DType::F32, 10)},
                     {"x40", random_tensor({40, K}, DType::F32, 11)}};
  Session s(Executable::compile(g, {{"w", wt}}));
  const auto* h = reinterpret_cast<const uint16_t*>(wt.data<uint8_t>());
  for (int run = 0; run < 2; ++run) {
    const TensorMap got = s.run(in);
    for (const int64_t M : {1, 40}) {
      const std::string name = std::to_string(M);
      const float* x = in.at("x" + name).data<float>();
      const float* y = got.at("y" + name).data<float>();
      int bad = 0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
          double want = 0, size = 0;
          for (int64_t k = 0; k < K; ++k) {
            const double p = double(f16_to_f32(h[n * K + k])) * x[m * K + k];
            want += p;
            size += std::fabs(p);
          }
          bad += std::fabs(y[m * N + n] - want) > 1e-5 * size + 1e-6;
        }
      EXPECT_EQ(bad, 0) << "M = " << M << ", run " << run;
    }
  }
}

}  // namespace
}  // namespace rlx
