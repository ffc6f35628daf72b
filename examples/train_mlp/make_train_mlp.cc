// Builds a small classifier whose graph has a `loss` output (cross-entropy)
// and a synthetic three-class data set, ready for `rlx train`:
//
//   make_train_mlp OUT_DIR
//     OUT_DIR/model.rlx.json, weights.safetensors   the model (batch dim symbolic)
//     OUT_DIR/train.safetensors, eval.safetensors  x [N, 2] f32, target [N] i64
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>

#include "rlx/rlx.h"

using namespace rlx;

namespace {

Tensor random_weight(const Dims& dims, std::mt19937& rng) {
  const float bound = 1.0f / std::sqrt(float(dims.back()));  // as nn.Linear initializes
  std::uniform_real_distribution<float> u(-bound, bound);
  Tensor t(dims, DType::F32);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// Three interleaved noisy spiral arms in the plane: not linearly separable,
// so the hidden layers have something to learn.
TensorMap spirals(int64_t n, std::mt19937& rng) {
  Tensor x({n, 2}, DType::F32), target({n}, DType::I64);
  std::normal_distribution<float> noise(0, 0.08f);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % 3;
    const float r = u(rng), a = 3.5f * r + float(c) * 2 * std::numbers::pi_v<float> / 3;
    x.data<float>()[2 * i] = r * std::cos(a) + noise(rng);
    x.data<float>()[2 * i + 1] = r * std::sin(a) + noise(rng);
    target.data<int64_t>()[i] = c;
  }
  return {{"x", x}, {"target", target}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int64_t hidden = 64, classes = 3;
  try {
    Graph g;
    Builder b(g);
    const Dim batch = Dim::symbol("batch");
    const NodeId x = b.input("x", Shape({batch, Dim(2)}, DType::F32));
    const NodeId target = b.input("target", Shape({batch}, DType::I64));
    std::mt19937 rng(0);
    TensorMap w;
    NodeId h = x;
    int64_t width = 2;
    for (const char* layer : {"fc1", "fc2", "fc3"}) {
      const int64_t out = std::string(layer) == "fc3" ? classes : hidden;
      const std::string name = layer;
      w[name + ".weight"] = random_weight({out, width}, rng);
      w[name + ".bias"] = random_weight({out}, rng);
      h = b.linear(h, b.param(name + ".weight", Shape(Dims{out, width}, DType::F32)),
                   b.param(name + ".bias", Shape(Dims{out}, DType::F32)));
      if (name != "fc3") h = b.relu(h);
      width = out;
    }
    g.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {h, target}));
    g.add_output("logits", h);
    save_model(dir, g, w);
    write_safetensors(dir + "/train.safetensors", spirals(1500, rng));
    write_safetensors(dir + "/eval.safetensors", spirals(300, rng));
    std::printf("wrote %s (model, train.safetensors, eval.safetensors)\n", dir.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "make_train_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
