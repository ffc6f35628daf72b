// Builds a small MLP classifier with the C++ builder API and saves it as an
// rlx model directory (model.rlx.json + weights.safetensors) together with
// an inputs file, ready for `rlx run` and `rlx inspect`.
//
//   make_mlp OUT_DIR
#include <cmath>
#include <cstdio>
#include <random>

#include "rlx/rlx.h"

using namespace rlx;

namespace {
Tensor random_weight(const Dims& dims, std::mt19937& rng) {
  // Kaiming-uniform-like scale, as nn.Linear initializes.
  float bound = 1.0f / std::sqrt(float(dims.back()));
  std::uniform_real_distribution<float> u(-bound, bound);
  Tensor t(dims, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t batch = 8, in = 64, hidden = 256, classes = 10;
  try {
    Graph g;
    Builder b(g);
    NodeId x = b.input("x", Shape(Dims{batch, in}, DType::F32));
    NodeId w1 = b.param("fc1.weight", Shape(Dims{hidden, in}, DType::F32));
    NodeId b1 = b.param("fc1.bias", Shape(Dims{hidden}, DType::F32));
    NodeId w2 = b.param("fc2.weight", Shape(Dims{classes, hidden}, DType::F32));
    NodeId b2 = b.param("fc2.bias", Shape(Dims{classes}, DType::F32));
    b.set_origin("fc1");
    NodeId h = b.unary(Op::Gelu, b.linear(x, w1, b1));
    b.set_origin("fc2");
    NodeId logits = b.linear(h, w2, b2);
    b.set_origin("head");
    g.add_output("logits", logits);
    g.add_output("probs", b.softmax(logits, -1));

    std::mt19937 rng(1234);
    TensorMap weights{{"fc1.weight", random_weight({hidden, in}, rng)},
                      {"fc1.bias", random_weight({hidden}, rng)},
                      {"fc2.weight", random_weight({classes, hidden}, rng)},
                      {"fc2.bias", random_weight({classes}, rng)}};
    save_model(dir, g, weights);
    std::normal_distribution<float> n01;
    Tensor xs({batch, in}, DType::F32);
    for (int64_t i = 0; i < xs.numel(); ++i) xs.data<float>()[i] = n01(rng);
    write_safetensors(dir + "/inputs.safetensors", {{"x", xs}});
    std::printf("wrote %s/{%s,%s,inputs.safetensors}\n", dir.c_str(), kGraphFile, kWeightsFile);
  } catch (const Error& e) {
    std::fprintf(stderr, "make_mlp: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
