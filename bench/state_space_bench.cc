// gated_delta_net at Qwen3-Next's linear-attention head size (N = 128) and a smaller one, and
// selective_scan at Mamba-130m's sizes (D = 1536 channels, N = 16). FLOP counts the step form's
// multiply-adds as 2 each: gated_delta_net 3 N^2 per (token, head) (k S, the state update, q S);
// selective_scan 3 per (token, channel, state) (decay, input term, readout) plus its exp as 1.
#include <vector>

#include "backends/cpu/gated_delta_net.h"
#include "bench_util.h"

namespace rlx::bench {
namespace {

// gated_delta_net's two CPU forms called directly on the same data (the op runs one of them),
// so they can be compared: gated_delta_net_form/{step,chunked}/nN/sS.
void register_gdn_forms(int64_t N, int64_t S) {
  const int64_t B = 1, H = 8, tok = B * S * H * N, heads = B * S * H;
  for (const cpu::GdnForm form : {cpu::GdnForm::step, cpu::GdnForm::chunked}) {
    const std::string name = std::string("gated_delta_net_form/") +
                             (form == cpu::GdnForm::step ? "step" : "chunked") + "/n" +
                             std::to_string(N) + "/s" + std::to_string(S);
    benchmark::RegisterBenchmark(
        name.c_str(),
        [=](benchmark::State& st) {
          const float ks = 1.0f / float(N);
          const Tensor q = random_f32({tok}, 21), k = random_f32({tok}, 22, -ks, ks),
                       v = random_f32({tok}, 23), g = random_f32({heads}, 24, -0.5f, 0),
                       beta = random_f32({heads}, 25, 0, 1);
          std::vector<float> o(static_cast<size_t>(tok)), state(static_cast<size_t>(B * H * N * N));
          const cpu::GdnView<float> view{q.data<float>(),
                                         k.data<float>(),
                                         v.data<float>(),
                                         g.data<float>(),
                                         beta.data<float>(),
                                         o.data(),
                                         state.data(),
                                         B,
                                         S,
                                         H,
                                         N};
          for (auto _ : st) {
            std::fill(state.begin(), state.end(), 0.0f);
            cpu::gated_delta_net_run(view, form);
            benchmark::DoNotOptimize(o.data());
          }
          st.counters["flop"] = 6.0 * double(tok * N);
        })
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
}

}  // namespace

void register_state_space() {
  for (int64_t N : {64, 128}) register_gdn_forms(N, 512);
  for (int64_t N : {64, 128}) {
    const int64_t B = 1, S = 256, H = 8;
    add(
        "gated_delta_net/n" + std::to_string(N) + "/s" + std::to_string(S),
        [=] {
          Case c;
          Builder b(c.graph);
          const Dims tok{B, S, H, N}, head{B, S, H};
          auto q = b.input("q", Shape(tok, DType::F32));
          auto k = b.input("k", Shape(tok, DType::F32));
          auto v = b.input("v", Shape(tok, DType::F32));
          auto g = b.input("g", Shape(head, DType::F32));
          auto beta = b.input("beta", Shape(head, DType::F32));
          const NodeId y = b.op(Op::GatedDeltaNet, {q, k, v, g, beta}, {{"state_size", N}});
          c.graph.add_output("o", c.graph.result(y, 0));
          const float ks = 1.0f / float(N);  // |k|^2 < 1: a stable delta rule
          c.inputs["q"] = random_f32(tok, 21);
          c.inputs["k"] = random_f32(tok, 22, -ks, ks);
          c.inputs["v"] = random_f32(tok, 23);
          c.inputs["g"] = random_f32(head, 24, -0.5f, 0);
          c.inputs["beta"] = random_f32(head, 25, 0, 1);
          return c;
        },
        6.0 * double(B * S * H * N * N), 0);
  }
  const int64_t B = 1, L = 256, D = 1536, N = 16;
  add(
      "selective_scan/d1536/n16/l256",
      [=] {
        Case c;
        Builder b(c.graph);
        const Dims xd{B, L, D}, bd{B, L, N};
        auto x = b.input("x", Shape(xd, DType::F32));
        auto dt = b.input("delta", Shape(xd, DType::F32));
        auto A = b.input("A", Shape(Dims{D, N}, DType::F32));
        auto Bm = b.input("B", Shape(bd, DType::F32));
        auto C = b.input("C", Shape(bd, DType::F32));
        auto Ds = b.input("D", Shape(Dims{D}, DType::F32));
        const NodeId y = b.op(Op::SelectiveScan, {x, dt, A, Bm, C, Ds}, {{"d_skip", true}});
        c.graph.add_output("y", c.graph.result(y, 0));
        c.inputs["x"] = random_f32(xd, 31);
        c.inputs["delta"] = random_f32(xd, 32, 0.01f, 0.2f);
        c.inputs["A"] = random_f32({D, N}, 33, -2, -0.1f);
        c.inputs["B"] = random_f32(bd, 34);
        c.inputs["C"] = random_f32(bd, 35);
        c.inputs["D"] = random_f32({D}, 36);
        return c;
      },
      7.0 * double(B * L * D * N), 0);
}

}  // namespace rlx::bench
