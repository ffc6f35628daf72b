// training_step_graph: one training step as a pure graph (rlx compile
// --train). Run on the CPU for several steps, feeding next__ outputs back, it
// must give the Trainer's weights, optimizer state and buffers for every
// optimizer (with clipping); exported to CoreML, the MIL interpreter must give
// the CPU's step.
#include <gtest/gtest.h>

#include "backends/coreml/interp_support.h"
#include "rlx/train.h"
#include "support/testing.h"

namespace rlx {
namespace {

using train::OptimizerKind;

// logits = fc2(relu(fc1(x))); loss = cross_entropy; a running mean of the
// hidden layer as an update:: buffer (BatchNorm's pattern).
Model mlp_with_buffer() {
  Model m;
  m.source = "mlp";
  Builder b(m.graph);
  const NodeId x = b.input("x", Shape(Dims{8, 4}, DType::F32));
  const NodeId target = b.input("target", Shape(Dims{8}, DType::I64));
  const NodeId w1 = b.param("fc1.weight", Shape(Dims{16, 4}, DType::F32));
  const NodeId b1 = b.param("fc1.bias", Shape(Dims{16}, DType::F32));
  const NodeId w2 = b.param("fc2.weight", Shape(Dims{3, 16}, DType::F32));
  const NodeId b2 = b.param("fc2.bias", Shape(Dims{3}, DType::F32));
  const NodeId mean = b.param("bn.running_mean", Shape(Dims{16}, DType::F32));
  const NodeId h = b.relu(b.linear(x, w1, b1));
  const NodeId logits = b.linear(h, w2, b2);
  m.graph.add_output("loss", b.op(Op::SoftmaxCrossEntropy, {logits, target}));
  m.graph.add_output("logits", logits);
  m.graph.add_output(
      "update::bn.running_mean",
      b.add(b.mul(mean, b.scalar(0.9f)), b.mul(b.reduce(Op::ReduceMean, h, {0}), b.scalar(0.1f))));
  uint64_t seed = 1;
  for (NodeId p : {w1, b1, w2, b2}) {
    const Node& n = m.graph.node(p);
    m.weights[n.name] = testing::random_tensor(n.shape.concrete(), DType::F32, seed++, -0.5, 0.5);
  }
  m.weights["bn.running_mean"] = Tensor(Dims{16}, DType::F32);
  m.non_trainable = {"bn.running_mean"};
  return m;
}

TensorMap batch(uint64_t seed) {
  return {{"x", testing::random_tensor({8, 4}, DType::F32, seed)},
          {"target", testing::random_tensor({8}, DType::I64, seed + 1, 0, 2)}};
}

struct StepConfig {
  const char* name;
  train::OptimizerOptions opt;
  double clip = 0;
};

std::vector<StepConfig> configs() {
  std::vector<StepConfig> v(6);
  v[0].name = "sgd_nesterov_wd";
  v[0].opt.momentum = 0.9;
  v[0].opt.nesterov = true;
  v[0].opt.weight_decay = 0.01;
  v[1].name = "sgd_dampening_clip";
  v[1].opt.momentum = 0.8;
  v[1].opt.dampening = 0.3;
  v[1].clip = 0.2;
  v[2].name = "adam_wd";
  v[2].opt.kind = OptimizerKind::adam;
  v[2].opt.weight_decay = 0.01;
  v[3].name = "adamw_clip";
  v[3].opt.kind = OptimizerKind::adamw;
  v[3].opt.weight_decay = 0.1;
  v[3].clip = 0.3;
  v[4].name = "lion";
  v[4].opt.kind = OptimizerKind::lion;
  v[4].opt.beta2 = 0.99;
  v[4].opt.weight_decay = 0.1;
  v[5].name = "sgd_plain";
  return v;
}

// The inputs of update number `step` (1-based): the state, batch 99 + step, lr.
TensorMap step_feed(const TensorMap& state, int step, double lr) {
  TensorMap feed = state;
  for (auto& [name, t] : batch(99 + uint64_t(step))) feed[name] = t;
  feed[train::kLrInput] = Tensor::from_vector<float>({}, {float(lr)}, DType::F32);
  feed[train::kOptimStepInput] = Tensor::from_vector<float>({}, {float(step)}, DType::F32);
  return feed;
}

// k steps of the step graph on the CPU from its initial state; the state after them.
TensorMap run_steps(const train::StepGraph& sg, int k, double lr, TensorMap* last_out = nullptr) {
  auto exe = Executable::compile(sg.graph, sg.weights);
  Session s(exe);
  TensorMap state = sg.initial;
  for (int i = 0; i < k; ++i) {
    const TensorMap out = s.run(step_feed(state, i + 1, lr));
    for (auto& [name, t] : state) t = out.at(train::kNextPrefix + name).clone();
    if (last_out) *last_out = out;
  }
  return state;
}

TEST(StepGraph, EqualsTheTrainerForEveryOptimizer) {
  const Model m = mlp_with_buffer();
  const double lr = 0.05;
  for (const StepConfig& c : configs()) {
    SCOPED_TRACE(c.name);
    train::TrainerOptions o;
    o.optimizer = c.opt;
    o.schedule.lr = lr;
    o.clip_norm = c.clip;
    train::Trainer t(m, o);
    float loss = 0;
    for (int i = 0; i < 3; ++i) loss = t.step(batch(100 + uint64_t(i)));

    const train::StepGraph sg = train::training_step_graph(m, c.opt, c.clip);
    TensorMap out;
    const TensorMap state = run_steps(sg, 3, lr, &out);
    EXPECT_NEAR(out.at("loss").item_as_double(0), loss, 1e-6);
    // Every state tensor against what the Trainer holds under the same name.
    TensorMap want = t.state();
    int compared = 0;
    for (const auto& [in, holds] : sg.holds) {
      ASSERT_TRUE(want.count(holds)) << holds;
      EXPECT_TRUE(testing::all_close(state.at(in), want.at(holds), 1e-6, 1e-5)) << in;
      ++compared;
    }
    const int buffers = c.opt.kind == OptimizerKind::sgd    ? (c.opt.momentum != 0 ? 1 : 0)
                        : c.opt.kind == OptimizerKind::lion ? 1
                                                            : 2;
    EXPECT_EQ(compared, 4 * (1 + buffers) + 1);  // params, their buffers, the running mean
  }
}

TEST(StepGraph, RunsInTheMilInterpreterAsOnTheCpu) {
  const Model m = mlp_with_buffer();
  for (const StepConfig& c : configs()) {
    if (std::string(c.name) != "adamw_clip" && std::string(c.name) != "sgd_nesterov_wd") continue;
    SCOPED_TRACE(c.name);
    const train::StepGraph sg = train::training_step_graph(m, c.opt, c.clip);
    // The second step: the state is no longer the initial one, and t = 2.
    const TensorMap state = run_steps(sg, 1, 0.05);
    const TensorMap feed = step_feed(state, 2, 0.05);
    const TensorMap cpu = testing::run_graph(sg.graph, feed, sg.weights);
    const TensorMap mil =
        coreml_test::export_and_interpret(sg.graph, sg.weights, feed, {.opset = 6, .fp16 = false});
    for (const auto& [name, want] : cpu) {
      ASSERT_TRUE(mil.count(name)) << name;
      EXPECT_TRUE(testing::all_close(mil.at(name), want, 1e-6, 1e-5)) << name;
    }
  }
}

TEST(StepGraph, ClearErrors) {
  Model m = mlp_with_buffer();
  m.graph.outputs().erase(m.graph.outputs().begin());  // no loss
  EXPECT_NE(
      testing::error_of([&] { train::training_step_graph(m, {}); }).find("no output named 'loss'"),
      std::string::npos);
  Model sym;
  sym.source = "sym";
  Builder b(sym.graph);
  const NodeId x = b.input("x", Shape({Dim::symbol("batch"), Dim(2)}, DType::F32));
  const NodeId w = b.param("w", Shape(Dims{2}, DType::F32));
  sym.graph.add_output("loss", b.reduce(Op::ReduceSum, b.mul(x, w), {}));
  sym.weights["w"] = Tensor(Dims{2}, DType::F32);
  const std::string e = testing::error_of([&] { train::training_step_graph(sym, {}); });
  EXPECT_NE(e.find("symbolic dims"), std::string::npos) << e;
  EXPECT_NE(e.find("--input-shape"), std::string::npos) << e;
}

}  // namespace
}  // namespace rlx
