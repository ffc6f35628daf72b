// sgemm through the MatMul op: square sizes and the three GEMMs of a BERT-base
// layer at 128/512 tokens (MxKxN: FFN up, FFN down, a QKV/out projection).
#include "bench_util.h"

namespace rlx::bench {

void register_matmul() {
  const int64_t shapes[][3] = {{256, 256, 256},    {512, 512, 512},  {1024, 1024, 1024},
                               {2048, 2048, 2048}, {128, 768, 3072}, {128, 3072, 768},
                               {512, 768, 768}};
  for (const auto& s : shapes) {
    const int64_t M = s[0], K = s[1], N = s[2];
    std::string name =
        "sgemm/" + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
    add(
        name,
        [=] {
          Case c;
          Builder b(c.graph);
          auto x = b.input("a", Shape(Dims{M, K}, DType::F32));
          auto w = b.input("b", Shape(Dims{K, N}, DType::F32));
          c.graph.add_output("y", b.matmul(x, w));
          c.inputs["a"] = random_f32({M, K}, 1);
          c.inputs["b"] = random_f32({K, N}, 2);
          return c;
        },
        2.0 * double(M) * double(K) * double(N), 0);
  }
}

}  // namespace rlx::bench
