// Constant weights packed once per compiled graph (weight_pack.h) give the
// results of the per-call path, run after run: a Linear-style matmul (packed
// B) and a conv (packed A) through a Session, against the same graph run on
// OpenBLAS (RLX_ISA=portable path); then the same Session on a lower ISA,
// whose kernel cannot use what was packed for the first.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rlx
