// Quantization-aware training end to end: the qat pass (where it puts fake_quantize, on which
// axis, idempotence, activations, the pipeline switch), the Trainer training a spiral classifier
// under int8 and int4 QAT to close to its float accuracy, and the int8 export: the trained model
// as a CoreML package whose weights are int8 (constexpr_affine_dequantize), run by the MIL
// interpreter to the same predictions as the fake-quantized model on the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numbers>
#include <random>

#include "backends/coreml/interp/interp.h"
#include "opt/passes.h"
#include "rlx/coreml.h"
#include "rlx/rlx.h"
#include "rlx/train.h"
#include "support/testing.h"

namespace rlx {
namespace {

namespace fs = std::filesystem;

// Three noisy spiral arms (examples/train_mlp has 3.5 rad and noise 0.08, which caps accuracy
// near 94%; here more turns and less noise, so the float model gets near 100% and quantization
// error shows).
TensorMap spirals(int64_t n, uint64_t seed, float turn = 6.0f, float sigma = 0.03f) {
  std::mt19937 rng{uint32_t(seed)};
  Tensor x({n, 2}, DType::F32), target({n}, DType::I64);
  std::normal_distribution<float> noise(0, sigma);
  std::uniform_real_distribution<float> u(0, 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = i % 3;
    const float r = u(rng), a = turn * r + float(c) * 2 * std::numbers::pi_v<float> / 3;
    x.data<float>()[2 * i] = r * std::cos(a) + noise(rng);
    x.data<float>()[2 * i + 1] = r * std::sin(a) + noise(rng);
    target.data<int64_t>()[i] = c;
  }
  return {{"x", x}, {"target", target}};
}

// 2-64-64-3 MLP with a cross-entropy loss; weights [out, in] read through transpose_b.
Model spiral_mlp() {
  Model m;
  Builder b(m.graph);
  const Dim batch = Dim::symbol("batch");
  NodeId h = b.input("x", Shape({batch, Dim(2)}, DType::F32));
  const NodeId target = b.input("target", Shape({batch}, DType::I64));
  int64_t width = 2, seed = 1;
  for (const std::string layer : {"fc1", "fc2", "fc3"}) {
    const int64_t out = layer == "fc3" ? 3 : 64;
    const float bound = 1.0f / std::sqrt(float(width));
    m.weights[layer + ".weight"] =
        testing::random_tensor({out, width}, DType::F32, uint64_t(seed++), -bound, bound);
    m.weights[layer + ".bias"] =
        testing::random_tensor({out}, DType::F32, uint64_t(seed++), -bound, bound);
    h = b.linear(h, b.param(layer + ".weight", Shape(Dims{out, width}, DType::F32)),
                 b.param(layer + ".bias", Shape(Dims{out}, DType::F32)));
    if (layer != "fc3") h = b.relu(h);
    width = out;
  }
  m.graph.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {h, target}));
  m.graph.add_output("logits", h);
  return m;
}

std::vector<const Node*> fake_quantizers(const Graph& g) {
  std::vector<const Node*> r;
  for (const Node& n : g.nodes())
    if (n.op == Op::FakeQuantize) r.push_back(&n);
  return r;
}

TEST(QatPass, PutsPerChannelQuantizersOnEveryWeight) {
  const Model m = spiral_mlp();
  const Graph q = opt::insert_fake_quant(m.graph, 4, false);
  const auto fq = fake_quantizers(q);
  ASSERT_EQ(fq.size(), 3u);
  for (const Node* n : fq) {
    const Node& w = q.node(n->inputs[0]);
    EXPECT_EQ(w.op, Op::Param);
    EXPECT_NE(w.name.find(".weight"), std::string::npos) << w.name;  // biases stay float
    const auto& a = n->attrs_as<FakeQuantAttrs>();
    EXPECT_EQ(a.bits, 4);
    EXPECT_EQ(a.axis, std::optional<int64_t>(0));  // [out, in]: one scale per output row
    EXPECT_EQ(a.scale, FakeQuantScale::batch);
  }
  // Idempotent; activations add one per matmul input (x and the two relu outputs).
  EXPECT_EQ(fake_quantizers(opt::insert_fake_quant(q, 4, false)).size(), 3u);
  const Graph qa = opt::insert_fake_quant(m.graph, 8, true);
  EXPECT_EQ(fake_quantizers(qa).size(), 6u);
  EXPECT_EQ(fake_quantizers(opt::insert_fake_quant(qa, 8, true)).size(), 6u);
  EXPECT_NE(testing::error_of([&] {
              opt::insert_fake_quant(m.graph, 3, false);
            }).find("bits must be 8, 4 or 2, got 3"),
            std::string::npos);

  // A conv's filter [O, I, kh, kw] per output channel; a matmul weight [K, N] (no transpose)
  // along N, also when reached through a transpose.
  Graph g;
  Builder b(g);
  const NodeId x = b.input("x", Shape(Dims{1, 3, 8, 8}, DType::F32));
  const NodeId c = b.op(Op::Conv, {x, b.param("conv.w", Shape(Dims{4, 3, 3, 3}, DType::F32))});
  const NodeId f = b.reshape(c, {1, 144});
  const NodeId y = b.op(Op::MatMul, {f, b.param("kn", Shape(Dims{144, 5}, DType::F32))});
  const NodeId t = b.op(Op::Transpose, {b.param("nk", Shape(Dims{7, 5}, DType::F32))},
                        {{"perm", std::vector<int64_t>{1, 0}}});
  g.add_output("z", b.op(Op::MatMul, {y, t}));
  const Graph gq = opt::insert_fake_quant(g, 8, false);
  std::map<std::string, int64_t> axis;
  for (const Node* n : fake_quantizers(gq))
    axis[gq.node(n->inputs[0]).name] = *n->attrs_as<FakeQuantAttrs>().axis;
  EXPECT_EQ(axis, (std::map<std::string, int64_t>{{"conv.w", 0}, {"kn", 1}, {"nk", 0}}));
}

TEST(QatPass, CompileOptionsRunItAsAPass) {
  const Model m = spiral_mlp();
  const TensorMap data = spirals(16, 3);
  CompileOptions o;
  o.qat_bits = 8;
  const TensorMap via_pass = Session(Executable::compile(m.graph, m.weights, o)).run(data);
  const TensorMap direct =
      Session(Executable::compile(opt::insert_fake_quant(m.graph, 8, false), m.weights)).run(data);
  const TensorMap plain = Session(Executable::compile(m.graph, m.weights)).run(data);
  EXPECT_TRUE(testing::all_equal(via_pass.at("logits"), direct.at("logits")));
  EXPECT_FALSE(testing::all_equal(via_pass.at("logits"), plain.at("logits")));
  EXPECT_TRUE(testing::all_close(via_pass.at("logits"), plain.at("logits"), 0.05, 0.05));
}

TensorMap rows(const TensorMap& d, int64_t b, int64_t e) {
  TensorMap r;
  for (const auto& [k, t] : d) {
    Dims dims = t.dims();
    const int64_t row = t.numel() / dims[0];
    dims[0] = e - b;
    Tensor s(dims, t.dtype());
    std::memcpy(s.raw(),
                static_cast<const std::byte*>(t.raw()) + size_t(b * row) * dtype_size(t.dtype()),
                size_t((e - b) * row) * dtype_size(t.dtype()));
    r[k] = s;
  }
  return r;
}

double accuracy(const Tensor& logits, const Tensor& target) {
  const int64_t n = logits.dim(0), c = logits.dim(1);
  int64_t ok = 0;
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 1; j < c; ++j)
      if (logits.item_as_double(i * c + j) > logits.item_as_double(i * c + best)) best = j;
    ok += best == target.item_as_double(i);
  }
  return double(ok) / double(n);
}

// Adam, 40 epochs of 1500 samples in batches of 50, the same order for every run.
std::unique_ptr<train::Trainer> train_spirals(int qat_bits, bool activations,
                                              const TensorMap& data) {
  train::TrainerOptions o;
  o.optimizer.kind = train::OptimizerKind::adam;
  o.schedule.kind = train::ScheduleKind::cosine;
  o.schedule.lr = 1e-2;
  o.schedule.total_steps = 1200;
  o.compile.qat_bits = qat_bits;
  o.compile.qat_activations = activations;
  auto t = std::make_unique<train::Trainer>(spiral_mlp(), o);
  for (int epoch = 0; epoch < 40; ++epoch)
    for (int64_t b = 0; b < 1500; b += 50) t->step(rows(data, b, b + 50));
  return t;
}

TEST(QatTrain, Int8AndInt4TrainToCloseToFloatAccuracy) {
  const TensorMap data = spirals(1500, 1), eval = spirals(600, 2);
  auto acc = [&](train::Trainer& t) {
    return accuracy(t.evaluate(eval).at("logits"), eval.at("target"));
  };
  auto flt = train_spirals(0, false, data);
  auto q8 = train_spirals(8, true, data);
  auto q4 = train_spirals(4, false, data);
  auto q2 = train_spirals(2, false, data);
  const double af = acc(*flt), a8 = acc(*q8), a4 = acc(*q4), a2 = acc(*q2);
  std::printf(
      "[qat] spiral MLP eval accuracy: float %.4f  int8 (+act) %.4f  int4 %.4f  int2 %.4f\n", af,
      a8, a4, a2);
  EXPECT_GE(af, 0.95);
  EXPECT_GE(a8, af - 0.01);
  EXPECT_GE(a4, af - 0.03);
  EXPECT_GE(a2, 0.6);  // ternary weights still learn something
  // The trained model keeps its quantizers (a model dir `rlx run` runs quantized).
  EXPECT_EQ(fake_quantizers(q8->model().graph).size(), 6u);
  // The baseline: the float model's weights quantized after training (the qat pass at compile
  // time, no QAT). At 2 bits that loses most of the accuracy QAT keeps.
  CompileOptions ptq;
  ptq.qat_bits = 4;
  Session s(Executable::compile(flt->model().graph, flt->weights(), ptq));
  const double p4 = accuracy(s.run(eval).at("logits"), eval.at("target"));
  ptq.qat_bits = 2;
  Session s2(Executable::compile(flt->model().graph, flt->weights(), ptq));
  const double p2 = accuracy(s2.run(eval).at("logits"), eval.at("target"));
  std::printf(
      "[qat] post-training quantization of the float model (no QAT): int4 %.4f  int2 %.4f\n", p4,
      p2);
  EXPECT_GT(a2, p2);  // training with the quantizer beats quantizing afterwards
}

// After int8 QAT: a CoreML package with int8 weights, whose predictions (run by the MIL
// interpreter) are those of the fake-quantized model on the CPU.
TEST(QatExport, CoreMLInt8WeightsGiveTheFakeQuantizedPredictions) {
  const TensorMap data = spirals(1500, 1), eval = spirals(600, 2);
  auto t = train_spirals(8, false, data);
  const fs::path dir = testing::process_temp_dir("rlx_qat_export");
  t->save((dir / "model").string());
  const Model m = load_model((dir / "model").string());
  const TensorMap cpu = Session(Executable::compile(m.graph, m.weights)).run(eval);
  const fs::path pkg = dir / "qat.mlpackage";
  coreml::export_package(m.graph, m.weights, pkg.string());
  EXPECT_TRUE(coreml::check_package(pkg.string()).empty());
  // weight.bin: the three weight matrices as int8 (1 byte each), biases inline or f32
  const fs::path bin = pkg / "Data/com.apple.CoreML/weights/weight.bin";
  const int64_t f32_bytes = 4 * (2 * 64 + 64 * 64 + 64 * 3);
  EXPECT_LT(int64_t(fs::file_size(bin)), f32_bytes / 2) << fs::file_size(bin);
  std::ifstream model_file(pkg / "Data/com.apple.CoreML/model.mlmodel", std::ios::binary);
  const std::string proto((std::istreambuf_iterator<char>(model_file)), {});
  size_t ops = 0;
  for (size_t p = proto.find("constexpr_affine_dequantize"); p != std::string::npos;
       p = proto.find("constexpr_affine_dequantize", p + 1))
    ++ops;
  EXPECT_EQ(ops, 3u);
  const TensorMap ml = coreml::run_package(pkg.string(), eval);
  const testing::Parity p = testing::parity(ml.at("logits"), cpu.at("logits"));
  std::printf(
      "[qat] int8 CoreML vs fake-quantized CPU: max|err| %.2e (max|ref| %.2e), "
      "accuracy %.4f vs %.4f\n",
      p.max_abs, p.max_ref, accuracy(ml.at("logits"), eval.at("target")),
      accuracy(cpu.at("logits"), eval.at("target")));
  EXPECT_LE(p.max_abs, 1e-5 * std::max(1.0, p.max_ref));
  EXPECT_EQ(accuracy(ml.at("logits"), eval.at("target")),
            accuracy(cpu.at("logits"), eval.at("target")));
  // Same argmax on every sample.
  const Tensor &a = ml.at("logits"), &b = cpu.at("logits");
  for (int64_t i = 0; i < a.dim(0); ++i) {
    int64_t ia = 0, ib = 0;
    for (int64_t j = 1; j < 3; ++j) {
      if (a.item_as_double(i * 3 + j) > a.item_as_double(i * 3 + ia)) ia = j;
      if (b.item_as_double(i * 3 + j) > b.item_as_double(i * 3 + ib)) ib = j;
    }
    ASSERT_EQ(ia, ib) << "sample " << i;
  }
  fs::remove_all(dir);
}

// The command line: rlx train --qat int8, then rlx compile --target coreml, coreml-check and
// coreml-run on the result.
TEST(QatCli, TrainQatThenExportInt8) {
  const fs::path dir = testing::process_temp_dir("rlx_qat_cli");
  const Model m = spiral_mlp();
  save_model((dir / "model").string(), m.graph, m.weights);
  write_safetensors((dir / "train.safetensors").string(), spirals(600, 1));
  write_safetensors((dir / "eval.safetensors").string(), spirals(300, 2));
  const std::string d = dir.string();
  auto r = testing::run_cli("train " + d + "/model --data " + d + "/train.safetensors --eval " + d +
                            "/eval.safetensors --optimizer adam --lr 1e-2 --epochs 5 " +
                            "--batch 50 --qat int8 --out " + d + "/qat");
  ASSERT_EQ(r.status, 0) << r.output;
  std::ifstream j(dir / "qat" / "model.rlx.json");
  const std::string json((std::istreambuf_iterator<char>(j)), {});
  EXPECT_NE(json.find("fake_quantize"), std::string::npos);
  r = testing::run_cli("compile " + d + "/qat --target coreml -o " + d + "/q.mlpackage");
  ASSERT_EQ(r.status, 0) << r.output;
  r = testing::run_cli("coreml-check " + d + "/q.mlpackage");
  EXPECT_EQ(r.status, 0) << r.output;
  r = testing::run_cli("coreml-run " + d + "/q.mlpackage -i " + d + "/eval.safetensors -o " + d +
                       "/ml.safetensors");
  ASSERT_EQ(r.status, 0) << r.output;
  r = testing::run_cli("run " + d + "/qat -i " + d + "/eval.safetensors -o " + d +
                       "/cpu.safetensors");
  ASSERT_EQ(r.status, 0) << r.output;
  const TensorMap ml = read_safetensors(d + "/ml.safetensors"),
                  cpu = read_safetensors(d + "/cpu.safetensors");
  EXPECT_TRUE(testing::all_close(ml.at("logits"), cpu.at("logits"), 1e-5, 1e-5));
  r = testing::run_cli("train " + d + "/model --data " + d +
                       "/train.safetensors --qat int3 --out " + d + "/bad");
  EXPECT_NE(r.status, 0);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rlx
