// The Trainer on small builder-made models: a cross-entropy MLP against
// torch (same weights, batch and SGD steps), loss going down, buffer updates
// and the rlx::step input, symbolic batch dims, state round trips, errors.
#include <gtest/gtest.h>

#include "rlx/autodiff.h"
#include "rlx/train.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

// logits = fc2(relu(fc1(x))), loss = cross_entropy(logits, target); batch
// dim `batch` static or symbolic.
Model mlp(Dim batch, uint64_t seed = 1) {
  Model m;
  m.source = "mlp";
  Builder b(m.graph);
  const NodeId x = b.input("x", Shape({batch, Dim(4)}, DType::F32));
  const NodeId target = b.input("target", Shape({batch}, DType::I64));
  const NodeId w1 = b.param("fc1.weight", Shape(Dims{16, 4}, DType::F32));
  const NodeId b1 = b.param("fc1.bias", Shape(Dims{16}, DType::F32));
  const NodeId w2 = b.param("fc2.weight", Shape(Dims{3, 16}, DType::F32));
  const NodeId b2 = b.param("fc2.bias", Shape(Dims{3}, DType::F32));
  const NodeId logits = b.linear(b.relu(b.linear(x, w1, b1)), w2, b2);
  m.graph.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {logits, target}));
  m.graph.add_output("logits", logits);
  m.weights["fc1.weight"] = testing::random_tensor({16, 4}, DType::F32, seed, -0.5, 0.5);
  m.weights["fc1.bias"] = testing::random_tensor({16}, DType::F32, seed + 1, -0.5, 0.5);
  m.weights["fc2.weight"] = testing::random_tensor({3, 16}, DType::F32, seed + 2, -0.5, 0.5);
  m.weights["fc2.bias"] = testing::random_tensor({3}, DType::F32, seed + 3, -0.5, 0.5);
  return m;
}

TensorMap batch_of(int64_t n, uint64_t seed) {
  return {{"x", testing::random_tensor({n, 4}, DType::F32, seed)},
          {"target", testing::random_tensor({n}, DType::I64, seed + 1, 0, 2)}};
}

TEST(Trainer, SgdStepsMatchTorch) {
  const Model m = mlp(Dim(8));
  const TensorMap batch = batch_of(8, 7);
  train::TrainerOptions o;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 0.01;
  o.schedule.lr = 0.1;
  o.clip_norm = 0.5;
  train::Trainer t(m, o);
  std::vector<float> losses;
  for (int k = 0; k < 3; ++k) losses.push_back(t.step(batch));
  EXPECT_EQ(t.step_count(), 3);

  TensorMap in = batch;
  for (const auto& [name, w] : m.weights) in[name] = w;
  const std::string code = R"(
ps = {k: torch.nn.Parameter(x[k].clone()) for k in ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']}
opt = torch.optim.SGD(list(ps.values()), lr=0.1, momentum=0.9, weight_decay=0.01)
losses = []
for k in range(3):
  opt.zero_grad()
  h = torch.relu(F.linear(x['x'], ps['fc1.weight'], ps['fc1.bias']))
  loss = F.cross_entropy(F.linear(h, ps['fc2.weight'], ps['fc2.bias']), x['target'])
  loss.backward()
  torch.nn.utils.clip_grad_norm_(list(ps.values()), 0.5)
  opt.step()
  losses.append(loss.detach())
y = [ps[k].detach() for k in ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias']] + [torch.stack(losses)]
)";
  const auto want = testing::torch_goldens({{"mlp_sgd", code, in}}).at("mlp_sgd");
  const TensorMap w = t.weights();
  const char* names[] = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(testing::all_close(w.at(names[i]), want[size_t(i)], 1e-6, 1e-5)) << names[i];
  EXPECT_TRUE(
      testing::all_close(Tensor::from_vector<float>({3}, losses, DType::F32), want[4], 1e-6, 1e-5));
}

TEST(Trainer, GradNormWithoutClippingIsMeasuredWhenAsked) {
  // Without clipping the norm is computed on demand from the step's
  // gradients; it must equal the one clipping computes (a bound that never bites).
  const Model m = mlp(Dim(8));
  train::TrainerOptions lazy, eager;
  eager.clip_norm = 1e30;
  train::Trainer a(m, lazy), b(m, eager);
  for (int k = 0; k < 2; ++k) {
    a.step(batch_of(8, 20 + uint64_t(k)));
    b.step(batch_of(8, 20 + uint64_t(k)));
    EXPECT_GT(b.last_grad_norm(), 0);
    EXPECT_EQ(a.last_grad_norm(), b.last_grad_norm());
    EXPECT_EQ(a.last_grad_norm(), b.last_grad_norm());  // asked twice: the same
  }
  for (const auto& [name, w] : a.weights())
    EXPECT_TRUE(testing::all_equal(w, b.weights().at(name))) << name;
}

TEST(Trainer, LossGoesDownAndEvaluateChangesNothing) {
  train::TrainerOptions o;
  o.optimizer.kind = train::OptimizerKind::adam;
  o.schedule.lr = 0.02;
  train::Trainer t(mlp(Dim(16)), o);
  const TensorMap batch = batch_of(16, 3);
  const float before = float(t.evaluate(batch).at("loss").item_as_double(0));
  EXPECT_EQ(float(t.evaluate(batch).at("loss").item_as_double(0)), before);
  float loss = 0;
  for (int k = 0; k < 60; ++k) loss = t.step(batch);
  EXPECT_LT(loss, before * 0.5f);
  EXPECT_EQ(t.last_outputs().count("logits"), 1u);
  EXPECT_EQ(t.last_outputs().count("grad::fc1.weight"), 0u);
}

TEST(Trainer, SymbolicBatchCompilesPerShape) {
  train::Trainer t(mlp(Dim::symbol("batch")), {});
  const float a = t.step(batch_of(8, 1));
  const float b = t.step(batch_of(5, 2));
  EXPECT_TRUE(std::isfinite(a) && std::isfinite(b));
  EXPECT_EQ(t.evaluate(batch_of(3, 4)).at("logits").dim(0), 3);
}

TEST(Trainer, UpdatesBuffersAndFeedsTheStep) {
  // loss = sum(w * x) + 0 * count; update::count = count + 1; seen = step.
  Model m;
  Builder b(m.graph);
  const NodeId x = b.input("x", Shape(Dims{3}, DType::F32));
  const NodeId step = b.input("rlx::step", Shape(Dims{}, DType::I64));
  const NodeId w = b.param("w", Shape(Dims{3}, DType::F32));
  const NodeId count = b.param("count", Shape(Dims{1}, DType::F32));
  const NodeId loss = b.reduce(Op::ReduceSum, b.mul(w, x), {0});
  m.graph.add_output("loss", loss);
  m.graph.add_output("update::count", b.add(count, b.full({1}, 1)));
  m.graph.add_output("seen", b.cast(step, DType::F32));
  m.weights["w"] = Tensor::from_vector<float>({3}, {1, 2, 3}, DType::F32);
  m.weights["count"] = Tensor({1}, DType::F32);
  m.non_trainable = {"count"};
  train::TrainerOptions o;
  o.schedule.lr = 0.5;
  train::Trainer t(m, o);
  EXPECT_EQ(t.trainable(), std::vector<std::string>{"w"});
  const TensorMap in{{"x", Tensor::from_vector<float>({3}, {1, -1, 2}, DType::F32)}};
  t.step(in);
  EXPECT_EQ(t.last_outputs().at("seen").item_as_double(0), 0);
  t.step(in);
  EXPECT_EQ(t.last_outputs().at("seen").item_as_double(0), 1);
  const TensorMap wts = t.weights();
  EXPECT_EQ(wts.at("count").item_as_double(0), 2);
  // d loss / d w = x: w -= 2 * 0.5 * x.
  EXPECT_TRUE(
      testing::all_close(wts.at("w"), Tensor::from_vector<float>({3}, {0, 3, 1}, DType::F32)));
  EXPECT_EQ(t.evaluate(in).count("update::count"), 0u);

  // The buffer hook sees the updated buffers and what it writes is kept.
  o.on_buffers = [](TensorMap& buffers) {
    ASSERT_EQ(buffers.size(), 1u);
    buffers.at("count").data<float>()[0] *= 10;
  };
  train::Trainer hooked(m, o);
  hooked.step(in);
  hooked.step(in);
  EXPECT_EQ(hooked.weights().at("count").item_as_double(0), 110);  // (0 + 1) * 10, then + 1, * 10
}

TEST(Trainer, StateRoundTripContinuesExactly) {
  train::TrainerOptions o;
  o.optimizer.kind = train::OptimizerKind::adamw;
  o.optimizer.weight_decay = 0.1;
  o.schedule.lr = 0.01;
  o.schedule.warmup = 2;
  train::Trainer full(mlp(Dim(8)), o), first(mlp(Dim(8)), o), second(mlp(Dim(8)), o);
  for (int k = 0; k < 4; ++k) full.step(batch_of(8, 10 + k));
  for (int k = 0; k < 2; ++k) first.step(batch_of(8, 10 + k));
  second.load_state(first.state());
  EXPECT_EQ(second.step_count(), 2);
  for (int k = 2; k < 4; ++k) second.step(batch_of(8, 10 + k));
  for (const auto& [name, w] : full.weights())
    EXPECT_TRUE(testing::all_equal(second.weights().at(name), w)) << name;

  const auto dir = testing::process_temp_dir("trainer_save");
  full.save((dir / "m").string());
  const Model back = load_model((dir / "m").string());
  EXPECT_TRUE(testing::all_equal(back.weights.at("fc2.bias"), full.weights().at("fc2.bias")));
}

// Conv + BatchNorm (inference form) + pools: the pipeline's conv+BN folding
// and constant folding must not bake in weights that change every step. The
// reference differentiates the same graph with gradient_graph at -O0 and
// applies plain SGD by hand, binding the current weights each time.
TEST(Trainer, CnnWithBatchNormMatchesHandLoopAtO0) {
  Model m;
  m.source = "cnn";
  Builder b(m.graph);
  uint64_t seed = 20;
  auto param = [&](const std::string& name, Dims d, double lo = -0.5, double hi = 0.5) {
    m.weights[name] = testing::random_tensor(d, DType::F32, seed++, lo, hi);
    return b.param(name, Shape(d, DType::F32));
  };
  const NodeId x = b.input("x", Shape(Dims{4, 2, 6, 6}, DType::F32));
  const NodeId target = b.input("target", Shape(Dims{4}, DType::I64));
  NodeId h = b.op(Op::Conv, {x, param("c1.w", {5, 2, 3, 3}), param("c1.b", {5})},
                  {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  h = b.op(Op::BatchNorm, {h, param("bn.mean", {5}, -0.1, 0.1), param("bn.var", {5}, 0.5, 1.5),
                           param("bn.g", {5}, 0.5, 1.5), param("bn.b", {5})});
  h = b.op(Op::MaxPool2d, {b.relu(h)},
           {{"kernel", std::vector<int64_t>{2, 2}}, {"stride", std::vector<int64_t>{2, 2}}});
  h = b.linear(b.reshape(h, {4, 45}), param("fc.w", {3, 45}), param("fc.b", {3}));
  m.graph.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {h, target}));
  m.non_trainable = {"bn.mean", "bn.var"};
  const TensorMap batch{{"x", testing::random_tensor({4, 2, 6, 6}, DType::F32, 5)},
                        {"target", testing::random_tensor({4}, DType::I64, 6, 0, 2)}};
  const double lr = 0.2;
  train::TrainerOptions o;
  o.schedule.lr = lr;
  train::Trainer t(m, o);
  EXPECT_EQ(t.trainable().size(), 6u);

  GradientGraph gg = gradient_graph(m.graph, {.non_trainable = m.non_trainable});
  TensorMap w;
  for (const auto& [name, v] : m.weights) w[name] = v.clone();
  for (int k = 0; k < 3; ++k) {
    const float loss = t.step(batch);
    const TensorMap out = testing::run_graph(gg.graph, batch, w, /*opt_level=*/0);
    EXPECT_NEAR(loss, out.at("loss").item_as_double(0), 1e-5) << "step " << k;
    for (const std::string& name : t.trainable()) {
      Tensor& p = w.at(name);
      const Tensor g = out.at("grad::" + name);
      for (int64_t i = 0; i < p.numel(); ++i) p.data<float>()[i] -= float(lr) * g.data<float>()[i];
    }
  }
  for (const auto& [name, v] : t.weights())
    EXPECT_TRUE(testing::all_close(v, w.at(name), 1e-5, 1e-5)) << name;
}

TEST(Trainer, GradientHookSeesAndChangesGradients) {
  // Halving every gradient in the hook equals plain SGD at half the rate.
  train::TrainerOptions half, hooked;
  half.schedule.lr = 0.05;
  hooked.schedule.lr = 0.1;
  size_t seen = 0;
  hooked.on_gradients = [&](TensorMap& grads) {
    seen = grads.size();
    for (auto& [name, g] : grads)
      for (int64_t i = 0; i < g.numel(); ++i) g.data<float>()[i] *= 0.5f;
  };
  train::Trainer a(mlp(Dim(8)), half), b(mlp(Dim(8)), hooked);
  for (int k = 0; k < 3; ++k) {
    a.step(batch_of(8, 40 + k));
    b.step(batch_of(8, 40 + k));
  }
  EXPECT_EQ(seen, 4u);
  for (const auto& [name, w] : a.weights())
    EXPECT_TRUE(testing::all_equal(b.weights().at(name), w)) << name;
}

TEST(Trainer, ClearErrors) {
  Model no_loss = mlp(Dim(8));
  no_loss.graph.outputs().erase(no_loss.graph.outputs().begin());
  EXPECT_NE(testing::error_of([&] {
              train::Trainer(no_loss, {});
            }).find("no output named 'loss' to train on; its outputs are logits"),
            std::string::npos);
  Model frozen = mlp(Dim(8));
  frozen.non_trainable = {"fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
  EXPECT_NE(testing::error_of([&] { train::Trainer(frozen, {}); }).find("no trainable"),
            std::string::npos);
  train::Trainer t(mlp(Dim(8)), {});
  TensorMap missing = batch_of(8, 1);
  missing.erase("target");
  EXPECT_NE(testing::error_of([&] { t.step(missing); }).find("no tensor for input 'target'"),
            std::string::npos);
  TensorMap extra = batch_of(8, 1);
  extra["y"] = Tensor({8}, DType::F32);
  EXPECT_NE(testing::error_of([&] { t.step(extra); }).find("'y', which is not an input"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { t.step(batch_of(5, 1)); }), "");
}

}  // namespace
}  // namespace rlx
