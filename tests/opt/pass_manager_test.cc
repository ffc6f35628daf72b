// The pass manager: pipelines from CompileOptions, disabled passes, unknown
// names, the after-pass hook, and each pass's effect inside a real compile
// (graph before/after and equal outputs with and without it).
#include <gtest/gtest.h>
#include <algorithm>

#include "opt/pass.h"
#include "pass_test_util.h"

namespace rlx {
namespace {

using testing::count_op;
using testing::random_tensor;
using testing::S;

std::vector<std::string> names(const std::vector<PassInfo>& v, bool enabled_only) {
  std::vector<std::string> r;
  for (const auto& p : v)
    if (p.enabled || !enabled_only) r.push_back(p.name);
  return r;
}

// y = relu(x @ (w1 + w2) * 1) + relu(x @ (w1 + w2) * 1) with a dead branch:
// every pass has something to do.
struct TestModel {
  Graph g;
  TensorMap weights;
  TensorMap inputs;
  TestModel() {
    Builder b(g);
    NodeId x = b.input("x", S({3, 4}));
    NodeId w1 = b.param("w1", S({4, 5}));
    NodeId w2 = b.param("w2", S({4, 5}));
    NodeId one = b.constant(Tensor::from_vector<float>({5}, std::vector<float>(5, 1), DType::F32));
    NodeId h1 = b.relu(b.mul(b.matmul(x, b.add(w1, w2)), one));
    NodeId h2 = b.relu(b.mul(b.matmul(x, b.add(w1, w2)), one));
    b.unary(Op::Exp, x);  // dead
    g.add_output("y", b.add(h1, h2));
    weights = {{"w1", random_tensor({4, 5}, DType::F32, 1)},
               {"w2", random_tensor({4, 5}, DType::F32, 2)}};
    inputs = {{"x", random_tensor({3, 4}, DType::F32, 3)}};
  }
};

// The default pipeline's names: blocked_conv runs after epilogue on AVX-512.
std::vector<std::string> pipeline(std::vector<std::string> names) {
  const auto at = std::find(names.begin(), names.end(), "epilogue");
  if (cpu_isa() >= Isa::avx512 && at != names.end()) names.insert(at + 1, "blocked_conv");
  return names;
}

TEST(PassManager, PipelineFollowsTheOptions) {
  CompileOptions o;
  EXPECT_EQ(names(describe_pipeline(o), true),
            pipeline({"simplify", "bn_train", "fold", "attention", "conv_bn", "epilogue", "cse",
                      "elementwise", "dce"}));
  for (const auto& p : describe_pipeline(o)) {
    EXPECT_FALSE(p.description.empty());
    if (p.name != "specialize") {
      EXPECT_NE(p.keeps, "nothing");
    }
  }
  EXPECT_EQ(describe_pipeline(o)[0].why_not, "no input shapes given");  // specialize
  EXPECT_EQ(describe_pipeline(o)[1].why_not,
            "off (CompileOptions::qat_bits = 0; rlx run --qat int8)");  // qat
  EXPECT_EQ(describe_pipeline(o)[4].needs, "params-bound");             // fold
  o.disabled_passes = {"cse", "fold"};
  auto info = describe_pipeline(o);
  EXPECT_EQ(names(info, true), pipeline({"simplify", "bn_train", "attention", "conv_bn", "epilogue",
                                         "elementwise", "dce"}));
  EXPECT_EQ(info[4].why_not, "disabled");
  o.disabled_passes = {};
  o.opt_level = 0;
  info = describe_pipeline(o);
  EXPECT_TRUE(names(info, true).empty());
  EXPECT_EQ(info[2].why_not, "needs -O1");
  o.input_shapes = {{"x", {3, 4}}};  // specialization is asked for, so it runs at -O0 too
  EXPECT_EQ(names(describe_pipeline(o), true), (std::vector<std::string>{"specialize"}));
  o.qat_bits = 8;  // so is quantization-aware training
  EXPECT_EQ(names(describe_pipeline(o), true), (std::vector<std::string>{"specialize", "qat"}));
  EXPECT_EQ(names(info, false).size(), opt::pass_registry().size());
}

TEST(PassManager, UnknownPassNamesListTheValidOnes) {
  CompileOptions o;
  o.disabled_passes = {"cse", "constant-folding"};
  TestModel m;
  try {
    Executable::compile(m.g, m.weights, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unknown pass 'constant-folding'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("specialize, qat, simplify, bn_train, fold, attention, conv_bn, epilogue, "
                       "blocked_conv, cse, remat, elementwise, dce"),
              std::string::npos)
        << msg;
  }
}

TEST(PassManager, HookSeesEveryPassInOrderAndDisabledOnesNever) {
  TestModel m;
  std::vector<std::string> seen;
  std::vector<size_t> before, after;
  CompileOptions o;
  o.after_pass = [&](std::string_view pass, size_t n_before, const Graph& g) {
    seen.emplace_back(pass);
    before.push_back(n_before);
    after.push_back(g.size());
  };
  auto exe = Executable::compile(m.g, m.weights, o);
  EXPECT_EQ(seen, pipeline({"simplify", "bn_train", "fold", "attention", "conv_bn", "epilogue",
                            "cse", "elementwise", "dce"}));
  EXPECT_EQ(before.front(), m.g.size());  // binding params keeps the node count
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_EQ(before[i], after[i - 1]);
  EXPECT_EQ(after.back(), exe->graph().size());

  seen.clear();
  o.disabled_passes = {"simplify", "dce"};
  Executable::compile(m.g, m.weights, o);
  EXPECT_EQ(seen, pipeline({"bn_train", "fold", "attention", "conv_bn", "epilogue", "cse",
                            "elementwise"}));
  seen.clear();
  o.opt_level = 0;
  Executable::compile(m.g, m.weights, o);
  EXPECT_TRUE(seen.empty());
}

TEST(PassManager, DisabledPassesAreReallySkipped) {
  TestModel m;
  // (elementwise would fuse the relu and adds these counts look at)
  Graph all = testing::compiled_graph(m.g, m.weights, {"elementwise"});
  // fold + cse + dce leave x, the folded weight, matmul, relu, add.
  EXPECT_EQ(count_op(all, Op::Mul), 0) << to_text(all);
  EXPECT_EQ(count_op(all, Op::MatMul), 1) << to_text(all);
  EXPECT_EQ(count_op(all, Op::Exp), 0) << to_text(all);
  EXPECT_EQ(count_op(all, Op::Add), 1) << to_text(all);

  Graph no_fold = testing::compiled_graph(m.g, m.weights, {"fold", "elementwise"});
  EXPECT_EQ(count_op(no_fold, Op::Add), 2) << to_text(no_fold);  // w1 + w2 (once, CSE) and h1 + h2
  Graph no_simplify = testing::compiled_graph(m.g, m.weights, {"simplify", "elementwise"});
  EXPECT_EQ(count_op(no_simplify, Op::Mul), 1) << to_text(no_simplify);
  Graph no_cse = testing::compiled_graph(m.g, m.weights, {"cse", "elementwise"});
  EXPECT_EQ(count_op(no_cse, Op::MatMul), 2) << to_text(no_cse);
  Graph no_dce = testing::compiled_graph(m.g, m.weights, {"dce", "elementwise"});
  EXPECT_EQ(count_op(no_dce, Op::Exp), 1) << to_text(no_dce);
}

TEST(PassManager, EveryPassKeepsTheOutputs) {
  TestModel m;
  for (const auto& p : opt::pass_registry())
    EXPECT_TRUE(testing::same_with_and_without(m.g, m.inputs, m.weights, std::string(p->name())));
  // And -O0 against -O1.
  auto o1 = testing::run_without(m.g, m.inputs, m.weights, {});
  auto o0 = testing::run_graph(m.g, m.inputs, m.weights, 0);
  EXPECT_TRUE(testing::all_close(o1.at("y"), o0.at("y"), 1e-6, 1e-6));
}

TEST(PassManager, FoldNeedsBoundParams) {
  // compile binds params before the pipeline, so the contract holds there;
  // a missing weight is reported before any pass runs.
  TestModel m;
  TensorMap partial{{"w1", m.weights.at("w1")}};
  EXPECT_THROW(Executable::compile(m.g, partial), Error);
}

}  // namespace
}  // namespace rlx
