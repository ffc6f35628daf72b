// Loads and runs a model with the installed rlx (see CMakeLists.txt).
//   rlx_consumer          builds y = relu(x W^T + b) with the builder API, saves
//                         it as a model directory, loads it back, runs it and
//                         checks the result against plain loops
//   rlx_consumer MODEL    loads MODEL (any format rlx reads) and runs it on
//                         zeros of its declared (static) input shapes
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "rlx/rlx.h"

namespace {

int run_builtin() {
  using namespace rlx;
  const int64_t n = 2, in = 3, out = 4;
  Graph g;
  Builder b(g);
  NodeId x = b.input("x", Shape(Dims{n, in}, DType::F32));
  NodeId w = b.param("w", Shape(Dims{out, in}, DType::F32));
  NodeId bias = b.param("b", Shape(Dims{out}, DType::F32));
  g.add_output("y", b.unary(Op::Relu, b.linear(x, w, bias)));
  std::vector<float> wv, bv, xv;
  for (int i = 0; i < out * in; ++i) wv.push_back(0.25f * float(i % 5) - 0.5f);
  for (int i = 0; i < out; ++i) bv.push_back(0.1f * float(i));
  for (int i = 0; i < n * in; ++i) xv.push_back(float(i) - 2.0f);

  const auto dir = std::filesystem::temp_directory_path() / "rlx_consumer_model";
  save_model(dir.string(), g,
             {{"w", Tensor::from_vector({out, in}, wv, DType::F32)},
              {"b", Tensor::from_vector({out}, bv, DType::F32)}});
  Model m = load_model(dir.string());
  Session s(Executable::compile(std::move(m.graph), m.weights));
  Tensor y = s.run({{"x", Tensor::from_vector({n, in}, xv, DType::F32)}}).at("y");
  std::filesystem::remove_all(dir);

  double worst = 0;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double want = bv[size_t(o)];
      for (int64_t i = 0; i < in; ++i)
        want += double(xv[size_t(r * in + i)]) * wv[size_t(o * in + i)];
      want = std::max(want, 0.0);
      worst = std::max(worst, std::abs(want - double(y.data<float>()[r * out + o])));
    }
  std::printf("rlx %s: y = relu(x W^T + b) %s, max |err| %.3g\n", kVersion, y.shape().str().c_str(),
              worst);
  return worst < 1e-6 ? 0 : 1;
}

int run_model(const std::string& path) {
  using namespace rlx;
  Model m = load_model(path);
  TensorMap inputs;
  for (NodeId id : m.graph.inputs()) {
    const Node& node = m.graph.node(id);
    inputs[node.name] = Tensor(node.shape.concrete(), node.shape.dtype);
  }
  const Graph g = m.graph;
  Session s(Executable::compile(std::move(m.graph), m.weights));
  TensorMap outs = s.run(inputs);
  for (const auto& o : g.outputs())
    std::printf("%s %s\n", o.name.c_str(), outs.at(o.name).shape().str().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return argc > 1 ? run_model(argv[1]) : run_builtin();
  } catch (const rlx::Error& e) {
    std::fprintf(stderr, "rlx_consumer: error: %s\n", e.what());
    return 1;
  }
}
