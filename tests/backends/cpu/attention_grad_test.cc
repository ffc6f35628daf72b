// attention_grad's flash-style kernel against its primitive spelling (the
// matmuls over recomputed probabilities that CoreML lowers and autodiff's
// composed rule uses): every mask, soft-capping, grouped key heads, Sq != Sk,
// rows that see no key, several query blocks and key tiles, f32 and f64, and
// 1 and 2 threads.
#include <gtest/gtest.h>

#include "opt/autodiff/primitives.h"
#include "rlx/rlx.h"
#include "rlx/thread_pool.h"
#include "support/testing.h"

namespace rlx {
namespace {

using testing::random_tensor;

struct AttentionGradCase {
  const char* name;
  int64_t B, Hq, Hk, Sq, Sk, D, Dv;
  Attrs attrs;
  int bias = 0;  // 0: none, 1: float [Sq, Sk], 2: bool [B, 1, Sq, Sk]
};

void check_attention_grad(const AttentionGradCase& c, DType t, uint64_t seed) {
  SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(t)));
  Graph g;
  Builder b(g);
  const Dims qd{c.B, c.Hq, c.Sq, c.D}, kd{c.B, c.Hk, c.Sk, c.D}, vd{c.B, c.Hk, c.Sk, c.Dv},
      od{c.B, c.Hq, c.Sq, c.Dv};
  const Dims bd = c.bias == 1 ? Dims{c.Sq, c.Sk} : Dims{c.B, 1, c.Sq, c.Sk};
  std::vector<NodeId> in{b.input("q", Shape(qd, t)), b.input("k", Shape(kd, t)),
                         b.input("v", Shape(vd, t)), b.input("dout", Shape(od, t))};
  NodeId bias = -1;
  TensorMap feed{{"q", random_tensor(qd, t, seed, -2, 2)},
                 {"k", random_tensor(kd, t, seed + 1, -2, 2)},
                 {"v", random_tensor(vd, t, seed + 2)},
                 {"dout", random_tensor(od, t, seed + 3)}};
  if (c.bias) {
    in.push_back(bias = b.input("bias", Shape(bd, t)));
    feed["bias"] = random_tensor(bd, t, seed + 4, -1, 1);
    if (c.bias == 2) bias = b.op(Op::Ge, {bias, b.scalar(-0.6f, t)});  // ~20% of keys masked
  }
  std::vector<NodeId> args = in;
  if (c.bias) args[4] = bias;
  const auto got = b.results(Op::AttentionGrad, args, c.attrs);
  // A copy: emitting appends nodes, which may move the node holding the attributes.
  const AttentionAttrs attrs = g.node(g.node(got[0]).inputs[0]).attrs_as<AttentionAttrs>();
  opt::ad::Emit e(g);
  const auto want =
      opt::ad::attention_grad_primitives(e, in[0], in[1], in[2], bias, in[3], attrs, false);
  const char* names[] = {"dq", "dk", "dv"};
  const NodeId ref[] = {want.dq, want.dk, want.dv};
  for (int i = 0; i < 3; ++i) {
    g.add_output(names[i], got[size_t(i)]);
    g.add_output(std::string("ref_") + names[i], ref[i]);
  }
  for (int threads : {1, 2}) {
    const int saved = num_threads();
    set_num_threads(threads);
    const TensorMap out = testing::run_graph(g, feed);
    set_num_threads(saved);
    const double tol = t == DType::F64 ? 1e-12 : 2e-5;
    for (const char* n : names)
      EXPECT_TRUE(testing::all_close(out.at(n), out.at(std::string("ref_") + n), tol, tol))
          << n << " at " << threads << " threads";
  }
}

TEST(AttentionGrad, MatchesItsPrimitiveSpelling) {
  const std::string causal = "causal", sliding = "sliding", bias = "bias";
  const AttentionGradCase cases[] = {
      {"none, one tile", 1, 2, 2, 5, 7, 8, 4, {}},
      {"none, tiles and blocks", 2, 2, 1, 70, 130, 16, 8, {}},
      {"causal, gqa", 1, 4, 2, 67, 67, 8, 8, {{"mask", causal}}},
      {"causal, Sq < Sk", 1, 2, 1, 20, 90, 8, 5, {{"mask", causal}, {"scale", 0.2}}},
      {"causal, Sq > Sk: rows with no key", 1, 1, 1, 12, 5, 4, 4, {{"mask", causal}}},
      {"sliding", 1, 2, 2, 80, 80, 8, 8, {{"mask", sliding}, {"window", 9}}},
      {"sliding, soft cap",
       1,
       2,
       1,
       40,
       70,
       8,
       6,
       {{"mask", sliding}, {"window", 17}, {"softcap", 1.5}}},
      {"float bias, soft cap", 1, 2, 2, 33, 65, 8, 8, {{"mask", bias}, {"softcap", 2.0}}, 1},
      {"bool bias", 2, 2, 1, 30, 66, 4, 4, {{"mask", bias}}, 2},
  };
  uint64_t seed = 300;
  for (const AttentionGradCase& c : cases)
    for (DType t : {DType::F64, DType::F32}) check_attention_grad(c, t, seed += 5);
}

TEST(AttentionLayout, BshdEqualsTransposingAroundBhsd) {
  // attention and attention_grad reading [B, S, H, D] in place against the
  // same ops on transposed copies, at -O0 (simplify would fold the transposes).
  for (const char* mask : {"none", "causal"}) {
    SCOPED_TRACE(mask);
    Graph g;
    Builder b(g);
    const int64_t B = 2, S = 70, Hq = 4, Hk = 2, D = 8;
    const Dims qd{B, S, Hq, D}, kd{B, S + 3, Hk, D}, od{B, S, Hq, D};
    const NodeId q = b.input("q", Shape(qd, DType::F32)), k = b.input("k", Shape(kd, DType::F32)),
                 v = b.input("v", Shape(kd, DType::F32)),
                 dout = b.input("dout", Shape(od, DType::F32));
    const Attrs bshd{{"mask", std::string(mask)}, {"layout", std::string("bshd")}},
        bhsd{{"mask", std::string(mask)}};
    auto t = [&](NodeId x) {
      return b.op(Op::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}});
    };
    g.add_output("y", b.op(Op::Attention, {q, k, v}, bshd));
    g.add_output("ref_y", t(b.op(Op::Attention, {t(q), t(k), t(v)}, bhsd)));
    const auto got = b.results(Op::AttentionGrad, {q, k, v, dout}, bshd);
    const auto ref = b.results(Op::AttentionGrad, {t(q), t(k), t(v), t(dout)}, bhsd);
    const char* names[] = {"dq", "dk", "dv"};
    for (size_t i = 0; i < 3; ++i) {
      g.add_output(names[i], got[i]);
      g.add_output(std::string("ref_") + names[i], t(ref[i]));
    }
    const TensorMap out = testing::run_graph(g,
                                             {{"q", random_tensor(qd, DType::F32, 1)},
                                              {"k", random_tensor(kd, DType::F32, 2)},
                                              {"v", random_tensor(kd, DType::F32, 3)},
                                              {"dout", random_tensor(od, DType::F32, 4)}},
                                             {}, 0);
    for (const char* n : {"y", "dq", "dk", "dv"})
      EXPECT_TRUE(testing::all_equal(out.at(n), out.at(std::string("ref_") + n))) << n;
  }
}

}  // namespace
}  // namespace rlx
