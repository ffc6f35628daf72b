// Shared plumbing for rlx_bench: thread count, machine peak, and a helper that
// registers one benchmark = one small graph compiled once and run in the timed
// loop. Numbers are reported, never asserted.
//
// Every benchmark exports two plain per-iteration counters, `flop` and `bytes`
// (0 when not meaningful), so bench/compare.py can compute rates from the
// real time itself. Rate counters GFLOP, GB and peak_pct (shown "/s" on the
// console, divided by real time) are only there for reading the console.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>

#include "rlx/rlx.h"

namespace rlx::bench {

// RLX_BENCH_THREADS (default 2): threads for rlx's pool, set once in main.
int bench_threads();

struct MachinePeak {
  double ghz = 0;          // max frequency found
  std::string ghz_source;  // which file it came from
  int cores = 0;           // cores counted in the peak (min(threads, online CPUs))
  int online_cpus = 0;
  int flop_per_cycle = 0;  // per core: 32 on the AVX2 path, 64 on AVX-512
  double gflops = 0;       // cores * ghz * flop_per_cycle
};
const MachinePeak& machine_peak();

// Uniform [lo, hi) f32 tensor from a fixed seed (fast LCG; data only has to be
// finite and not denormal, not statistically good).
Tensor random_f32(const Dims& dims, uint64_t seed, float lo = -1, float hi = 1);

// What a benchmark needs: a graph with its outputs and the feed for its inputs.
struct Case {
  Graph graph;
  TensorMap inputs;
  TensorMap weights;  // params bound at compile, so kernels pre-pack them as a model's
  CompileOptions options;
};

// Registers `name`: `make` is called once, lazily (outside any timed region),
// the graph is compiled with the default options, one untimed warm-up run is
// done, then Session::run is timed. A kernel that throws (not written yet)
// turns into SkipWithError with the message, so the rest of the suite runs.
void add(const std::string& name, std::function<Case()> make, double flop, double bytes);

// Families, one per file.
void register_matmul();
void register_elementwise();
void register_conv();
void register_attention();
void register_attention_grad();
void register_memory();
void register_dequant_matmul();
void register_state_space();

}  // namespace rlx::bench
