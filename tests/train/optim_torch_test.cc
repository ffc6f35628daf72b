// Optimizers, schedules and clipping against torch.optim (1.13) over several
// steps on random params and grads; Lion against the reference update of its
// paper (torch 1.13 has no Lion), written out in Python.
#include <gtest/gtest.h>

#include <cmath>

#include "rlx/cpu_isa.h"
#include "rlx/train.h"
#include "support/testing.h"
#include "support/torch_golden.h"

namespace rlx {
namespace {

using train::OptimizerKind;

constexpr int kSteps = 6;
// Param dims: a matrix, a vector, and one large enough to be split over threads.
const std::vector<Dims> kDims = {{7, 5}, {13}, {70000}};

struct OptimizerCase {
  std::string name;
  train::OptimizerOptions opt;
  std::string ctor;  // Python: builds `opt` from the list `ps`
  train::ScheduleOptions sched;
  std::string sched_py;  // Python: `sched` from `opt`, or empty
  double clip = 0;
  double grad_mul = 1;  // large grads make clipping bite
};

TensorMap case_inputs(uint64_t seed, double grad_mul) {
  TensorMap x;
  for (size_t i = 0; i < kDims.size(); ++i) {
    x["p" + std::to_string(i)] = testing::random_tensor(kDims[i], DType::F32, seed + i);
    for (int k = 0; k < kSteps; ++k) {
      Tensor g = testing::random_tensor(kDims[i], DType::F32, seed + 100 * (k + 1) + i, -grad_mul,
                                        grad_mul);
      x["g" + std::to_string(k) + "_" + std::to_string(i)] = g;
    }
  }
  return x;
}

std::string py_for(const OptimizerCase& c) {
  std::string s = "ps = [torch.nn.Parameter(x['p' + str(i)].clone()) for i in range(" +
                  std::to_string(kDims.size()) + ")]\n";
  if (c.ctor == "lion") {
    // Lion (Chen et al. 2023), as lion-pytorch writes it.
    s += "m = [torch.zeros_like(p) for p in ps]\n"
         "lr, b1, b2, wd = " +
         std::to_string(c.sched.lr) + ", " + std::to_string(c.opt.beta1) + ", " +
         std::to_string(c.opt.beta2) + ", " + std::to_string(c.opt.weight_decay) +
         "\n"
         "with torch.no_grad():\n"
         "  for k in range(" +
         std::to_string(kSteps) +
         "):\n"
         "    for i, p in enumerate(ps):\n"
         "      g = x['g%d_%d' % (k, i)]\n"
         "      p.mul_(1 - lr * wd)\n"
         "      u = m[i].clone().mul_(b1).add(g, alpha=1 - b1).sign_()\n"
         "      p.add_(u, alpha=-lr)\n"
         "      m[i].mul_(b2).add_(g, alpha=1 - b2)\n"
         "y = [p.detach() for p in ps] + m\n";
    return s;
  }
  s += "opt = " + c.ctor + "\n";
  if (!c.sched_py.empty()) s += "sched = " + c.sched_py + "\n";
  s += "for k in range(" + std::to_string(kSteps) +
       "):\n"
       "  for i, p in enumerate(ps):\n"
       "    p.grad = x['g%d_%d' % (k, i)].clone()\n";
  if (c.clip > 0) s += "  torch.nn.utils.clip_grad_norm_(ps, " + std::to_string(c.clip) + ")\n";
  s += "  opt.step()\n";
  if (!c.sched_py.empty()) s += "  sched.step()\n";
  s += "st = [opt.state[p] for p in ps]\n"
       "key = 'momentum_buffer' if 'momentum_buffer' in st[0] else 'exp_avg'\n"
       "y = [p.detach() for p in ps] + [s_[key] for s_ in st if s_.get(key) is not None]\n";
  return s;
}

std::vector<OptimizerCase> optimizer_cases() {
  std::vector<OptimizerCase> cs;
  auto add = [&](std::string name, OptimizerKind k, std::string ctor, double lr, auto&& tweak) {
    OptimizerCase c;
    c.name = std::move(name);
    c.opt.kind = k;
    c.ctor = std::move(ctor);
    c.sched.lr = lr;
    tweak(c);
    cs.push_back(c);
  };
  auto none = [](OptimizerCase&) {};
  add("sgd_plain", OptimizerKind::sgd, "torch.optim.SGD(ps, lr=0.1)", 0.1, none);
  add("sgd_momentum_wd", OptimizerKind::sgd,
      "torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)", 0.05,
      [](OptimizerCase& c) {
        c.opt.momentum = 0.9, c.opt.dampening = 0.1, c.opt.weight_decay = 0.01;
      });
  add("sgd_nesterov", OptimizerKind::sgd,
      "torch.optim.SGD(ps, lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.001)", 0.05,
      [](OptimizerCase& c) {
        c.opt.momentum = 0.8, c.opt.nesterov = true, c.opt.weight_decay = 0.001;
      });
  add("adam", OptimizerKind::adam, "torch.optim.Adam(ps, lr=0.01)", 0.01, none);
  add("adam_wd", OptimizerKind::adam,
      "torch.optim.Adam(ps, lr=0.003, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)", 0.003,
      [](OptimizerCase& c) {
        c.opt.beta1 = 0.8, c.opt.beta2 = 0.99, c.opt.eps = 1e-6, c.opt.weight_decay = 0.1;
      });
  add("adamw", OptimizerKind::adamw, "torch.optim.AdamW(ps, lr=0.01, weight_decay=0.05)", 0.01,
      [](OptimizerCase& c) { c.opt.weight_decay = 0.05; });
  add("lion", OptimizerKind::lion, "lion", 0.001,
      [](OptimizerCase& c) { c.opt.beta1 = 0.9, c.opt.beta2 = 0.99, c.opt.weight_decay = 0.1; });
  // Schedules and clipping, stepped once per update as torch's schedulers are.
  add("sgd_steplr_clip", OptimizerKind::sgd, "torch.optim.SGD(ps, lr=0.2, momentum=0.5)", 0.2,
      [](OptimizerCase& c) {
        c.opt.momentum = 0.5;
        c.sched.kind = train::ScheduleKind::step, c.sched.step_size = 2, c.sched.gamma = 0.5;
        c.sched_py = "torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)";
        c.clip = 1.5, c.grad_mul = 10;
      });
  add("adamw_cosine_clip", OptimizerKind::adamw,
      "torch.optim.AdamW(ps, lr=0.02, weight_decay=0.01)", 0.02, [](OptimizerCase& c) {
        c.opt.weight_decay = 0.01;
        c.sched.kind = train::ScheduleKind::cosine, c.sched.total_steps = 5, c.sched.min_lr = 0.001;
        c.sched_py = "torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5, eta_min=0.001)";
        c.clip = 0.5, c.grad_mul = 3;
      });
  return cs;
}

TEST(OptimTorch, MatchesTorchOptimOverSteps) {
  const std::vector<OptimizerCase> cs = optimizer_cases();
  std::vector<testing::GoldenCase> gold;
  uint64_t seed = 11;
  for (const OptimizerCase& c : cs)
    gold.push_back({c.name, py_for(c), case_inputs(seed += 1000, c.grad_mul)});
  const auto want = testing::torch_goldens(gold);
  for (size_t ci = 0; ci < cs.size(); ++ci) {
    const OptimizerCase& c = cs[ci];
    SCOPED_TRACE(c.name);
    TensorMap params;
    for (size_t i = 0; i < kDims.size(); ++i)
      params["p" + std::to_string(i)] = gold[ci].inputs.at("p" + std::to_string(i)).clone();
    train::Optimizer opt(c.opt);
    for (int k = 0; k < kSteps; ++k) {
      TensorMap grads;
      for (size_t i = 0; i < kDims.size(); ++i)
        grads["p" + std::to_string(i)] =
            gold[ci].inputs.at("g" + std::to_string(k) + "_" + std::to_string(i));
      const train::ClipResult clip = train::clip_grad_norm(grads, c.clip);
      if (c.clip > 0) {
        EXPECT_LT(clip.scale, 1) << "clipping should bite at step " << k;
      }
      opt.step(params, grads, train::learning_rate(c.sched, k), clip.scale);
    }
    EXPECT_EQ(opt.steps(), kSteps);
    const std::vector<Tensor>& w = want.at(c.name);
    const TensorMap state = opt.state();
    const std::string buf = c.opt.kind == OptimizerKind::sgd ? "momentum_buffer" : "exp_avg";
    for (size_t i = 0; i < kDims.size(); ++i) {
      const std::string p = "p" + std::to_string(i);
      EXPECT_TRUE(testing::all_close(params.at(p), w[i], 1e-6, 1e-6)) << p;
      if (c.opt.kind != OptimizerKind::sgd || c.opt.momentum != 0) {
        EXPECT_TRUE(testing::all_close(state.at("optim::" + buf + "::" + p), w[kDims.size() + i],
                                       1e-6, 1e-6))
            << buf << " " << p;
      }
    }
  }
}

TEST(OptimSchedule, WarmupThenSchedule) {
  train::ScheduleOptions s;
  s.lr = 1.0, s.warmup = 4;
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 0), 0.25);
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 3), 1.0);
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 100), 1.0);
  s.kind = train::ScheduleKind::step, s.step_size = 3, s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 4), 1.0);    // t = 0
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 7), 0.5);    // t = 3
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 10), 0.25);  // t = 6
  s.kind = train::ScheduleKind::cosine, s.total_steps = 14, s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 4), 1.0);
  EXPECT_NEAR(train::learning_rate(s, 9), 0.55, 1e-12);  // halfway through 10 steps
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 14), 0.1);
  EXPECT_DOUBLE_EQ(train::learning_rate(s, 50), 0.1);
}

TEST(OptimClip, NormAndScale) {
  TensorMap g{{"a", Tensor::from_vector<float>({2}, {3, 0}, DType::F32)},
              {"b", Tensor::from_vector<float>({1}, {4}, DType::F32)}};
  train::ClipResult r = train::clip_grad_norm(g, 1);
  EXPECT_NEAR(r.norm, 5, 1e-6);
  EXPECT_NEAR(r.scale, 0.2, 1e-6);
  EXPECT_EQ(train::clip_grad_norm(g, 10).scale, 1);
  EXPECT_EQ(train::clip_grad_norm(g, 0).scale, 1);
}

TEST(OptimErrors, NamesTheProblem) {
  EXPECT_NE(testing::error_of([] { train::parse_optimizer("adagrad"); }).find("sgd, adam, adamw"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { train::parse_schedule("poly"); }).find("constant, step"),
            std::string::npos);
  train::OptimizerOptions o;
  o.nesterov = true;
  EXPECT_NE(testing::error_of([&] { train::Optimizer{o}; }).find("Nesterov"), std::string::npos);
  train::Optimizer opt({});
  TensorMap p{{"w", Tensor({2}, DType::F32)}};
  EXPECT_NE(testing::error_of([&] { opt.step(p, {}, 0.1); }).find("no gradient for param 'w'"),
            std::string::npos);
}

TEST(OptimState, RoundTripContinuesExactly) {
  train::OptimizerOptions o;
  o.kind = OptimizerKind::adam;
  TensorMap a{{"w", testing::random_tensor({9}, DType::F32, 1)}};
  TensorMap b{{"w", a.at("w").clone()}};
  train::Optimizer full(o), first(o);
  for (int k = 0; k < 4; ++k) {
    const TensorMap g{{"w", testing::random_tensor({9}, DType::F32, 50 + k)}};
    full.step(a, g, 0.01);
    if (k < 2) first.step(b, g, 0.01);
    if (k == 1) {
      train::Optimizer resumed(o);
      resumed.load_state(first.state(), b);
      EXPECT_EQ(resumed.steps(), 2);
      first = std::move(resumed);
    }
    if (k >= 2) first.step(b, g, 0.01);
  }
  EXPECT_TRUE(testing::all_equal(a.at("w"), b.at("w")));
}

TEST(OptimPaths, VectorAndScalarUpdatesGiveTheSameBits) {
  // The AVX2 loops multiply and add separately and divide exactly, as the
  // scalar ones: both paths must agree to the bit, tails included.
  if (detected_isa() < Isa::avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const Isa limit = isa_limit();
  std::vector<train::OptimizerOptions> kinds(6);
  kinds[0].momentum = 0.9;
  kinds[0].nesterov = true;
  kinds[0].weight_decay = 0.01;
  kinds[1].momentum = 0.8;
  kinds[1].dampening = 0.1;
  kinds[2].kind = OptimizerKind::adam;
  kinds[2].weight_decay = 0.01;
  kinds[3].kind = OptimizerKind::adamw;
  kinds[3].weight_decay = 0.1;
  kinds[4].kind = OptimizerKind::lion;
  kinds[4].beta2 = 0.99;
  kinds[4].weight_decay = 0.1;
  kinds[5].kind = OptimizerKind::lion;  // zero grads: sign 0
  for (size_t k = 0; k < kinds.size(); ++k) {
    SCOPED_TRACE(std::string(train::optimizer_name(kinds[k].kind)) + " #" + std::to_string(k));
    TensorMap result[2];
    for (int path = 0; path < 2; ++path) {
      set_isa_limit(path ? Isa::avx2 : Isa::portable);
      train::Optimizer opt(kinds[k]);
      TensorMap p{{"a", testing::random_tensor({70003}, DType::F32, 7)},
                  {"b", testing::random_tensor({13}, DType::F32, 8)}};
      for (int step = 0; step < 3; ++step) {
        TensorMap g;
        for (const auto& [name, t] : p)
          g[name] = k == 5 ? Tensor(t.dims(), DType::F32)
                           : testing::random_tensor(t.dims(), DType::F32, 100 + step);
        opt.step(p, g, 0.01, 0.5);
      }
      result[path] = p;
    }
    set_isa_limit(limit);
    for (const auto& [name, t] : result[0])
      EXPECT_TRUE(testing::all_equal(t, result[1].at(name))) << name;
  }
}

}  // namespace
}  // namespace rlx
