// Fused Attention op, BERT/GPT-2-base head layout: B=1, H=12, D=64, self
// attention (Sq = Sk = S), mask none or causal. FLOP counts only the useful
// work: 4*D per (query, key) pair (QK^T and PV), S*S pairs without a mask and
// S*(S+1)/2 causal ones, so a kernel that skips masked blocks is not penalized.
// attention_grad/<kernel|composed>/...: the backward as the flash-style
// kernel and as autodiff's primitive spelling (scores materialized), 10*D
// FLOP per pair (the kernel recomputes the forward: it does more of them).
#include "bench_util.h"
#include "opt/autodiff/primitives.h"

namespace rlx::bench {

void register_attention() {
  const int64_t B = 1, H = 12, D = 64;
  for (const char* mask : {"none", "causal"}) {
    for (int64_t S : {128, 512, 1024, 2048}) {
      const double pairs =
          std::string(mask) == "causal" ? double(S) * double(S + 1) / 2 : double(S) * double(S);
      const double flop = 4.0 * double(B * H * D) * pairs;
      std::string m = mask;
      add(
          "attention/" + m + "/s" + std::to_string(S),
          [=] {
            Case c;
            Builder b(c.graph);
            const Dims d{B, H, S, D};
            auto q = b.input("q", Shape(d, DType::F32));
            auto k = b.input("k", Shape(d, DType::F32));
            auto v = b.input("v", Shape(d, DType::F32));
            // scale defaults to 1/sqrt(D); set explicitly so both sides agree.
            Attrs a{{"mask", m}, {"scale", 0.125}};
            c.graph.add_output("y", b.op(Op::Attention, {q, k, v}, a));
            c.inputs["q"] = random_f32(d, 11);
            c.inputs["k"] = random_f32(d, 12);
            c.inputs["v"] = random_f32(d, 13);
            return c;
          },
          flop, 0);
    }
  }
}

void register_attention_grad() {
  const int64_t B = 1, H = 12, D = 64;
  for (const char* form : {"kernel", "composed"})
    for (const char* mask : {"none", "causal"})
      for (int64_t S : {512, 1024}) {
        const std::string m = mask, f = form;
        const double pairs = m == "causal" ? double(S) * double(S + 1) / 2 : double(S) * double(S);
        add(
            "attention_grad/" + f + "/" + m + "/s" + std::to_string(S),
            [=] {
              Case c;
              Builder b(c.graph);
              const Dims d{B, H, S, D};
              std::vector<NodeId> in;
              for (const char* n : {"q", "k", "v", "dout"}) {
                in.push_back(b.input(n, Shape(d, DType::F32)));
                c.inputs[n] = random_f32(d, uint64_t(in.size()) + 20);
              }
              AttentionAttrs a;
              a.mask = m == "causal" ? MaskKind::causal : MaskKind::none;
              a.scale = 0.125;
              NodeId dq, dk, dv;
              if (f == "kernel") {
                const auto r = b.results(Op::AttentionGrad, in, {{"mask", m}, {"scale", 0.125}});
                dq = r[0], dk = r[1], dv = r[2];
              } else {
                opt::ad::Emit e(c.graph);
                const auto r =
                    opt::ad::attention_grad_primitives(e, in[0], in[1], in[2], -1, in[3], a, false);
                dq = r.dq, dk = r.dk, dv = r.dv;
              }
              c.graph.add_output("dq", dq);
              c.graph.add_output("dk", dk);
              c.graph.add_output("dv", dv);
              return c;
            },
            10.0 * double(B * H * D) * pairs, 0);
      }
}

}  // namespace rlx::bench
