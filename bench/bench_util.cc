#include "bench_util.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "rlx/cpu_isa.h"

namespace rlx::bench {

int bench_threads() {
  static const int n = [] {
    const char* s = std::getenv("RLX_BENCH_THREADS");
    int v = s ? std::atoi(s) : 2;
    return v > 0 ? v : 2;
  }();
  return n;
}

namespace {

// cpufreq's cpuinfo_max_freq (kHz) when the kernel exposes it (bare metal);
// otherwise the highest "cpu MHz" line of /proc/cpuinfo (VMs usually report
// the nominal clock there, so turbo can push measured numbers above "peak").
void find_frequency(MachinePeak& p) {
  std::ifstream f("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  double khz = 0;
  if (f >> khz && khz > 0) {
    p.ghz = khz / 1e6;
    p.ghz_source = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq";
    return;
  }
  std::ifstream c("/proc/cpuinfo");
  std::string line;
  double mhz = 0;
  while (std::getline(c, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    auto colon = line.find(':');
    if (colon != std::string::npos) mhz = std::max(mhz, std::atof(line.c_str() + colon + 1));
  }
  p.ghz = mhz / 1e3;
  p.ghz_source = mhz > 0 ? "/proc/cpuinfo 'cpu MHz' (max over CPUs)" : "unknown";
}

}  // namespace

const MachinePeak& machine_peak() {
  static const MachinePeak p = [] {
    MachinePeak m;
    find_frequency(m);
    m.online_cpus = int(std::max(1u, std::thread::hardware_concurrency()));
    m.cores = std::min(bench_threads(), m.online_cpus);
    // Two FMA pipes x lanes x 2 FLOP: 8 lanes on AVX2, 16 on the AVX-512 path.
    m.flop_per_cycle = cpu_isa() == Isa::avx512 ? 64 : 32;
    m.gflops = m.cores * m.ghz * m.flop_per_cycle;
    return m;
  }();
  return p;
}

Tensor random_f32(const Dims& dims, uint64_t seed, float lo, float hi) {
  Tensor t(dims, DType::F32);
  float* p = t.data<float>();
  uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (int64_t i = 0; i < t.numel(); ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    float u = float(s >> 40) * (1.0f / 16777216.0f);  // top 24 bits -> [0, 1)
    p[i] = lo + (hi - lo) * u;
  }
  return t;
}

namespace {

struct Prepared {
  std::shared_ptr<Executable> exe;
  std::unique_ptr<Session> session;
  TensorMap inputs;
  std::string error;  // non-empty: compile or warm-up failed
};

// Only the benchmark being run keeps its data: repetitions of one benchmark
// reuse it, and moving on frees the previous one (big sgemm / bandwidth
// buffers would otherwise pile up).
std::string g_current;
std::unique_ptr<Prepared> g_prepared;

Prepared& prepare(const std::string& name, const std::function<Case()>& make) {
  if (g_prepared && g_current == name) return *g_prepared;
  g_prepared.reset();
  auto p = std::make_unique<Prepared>();
  try {
    Case c = make();
    p->inputs = std::move(c.inputs);
    p->exe = Executable::compile(std::move(c.graph), c.weights, c.options);
    p->session = std::make_unique<Session>(p->exe);
    // Warm-up: plan cache, arena, and the allocator. Each run allocates its
    // outputs; glibc's aligned_alloc grows the heap for the first ~10 large
    // ones of a size before it reuses memory, and first-touch page faults
    // cost ~20 us per 4 KiB page on this kind of VM. Time the steady state.
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
      p->session->run(p->inputs);
      if (std::chrono::steady_clock::now() - t0 > std::chrono::milliseconds(300)) break;
    }
  } catch (const std::exception& e) {
    p->error = e.what();
    if (p->error.size() > 300) p->error = p->error.substr(0, 300) + "...";
  }
  g_current = name;
  g_prepared = std::move(p);
  return *g_prepared;
}

}  // namespace

void add(const std::string& name, std::function<Case()> make, double flop, double bytes) {
  benchmark::RegisterBenchmark(
      name.c_str(),
      [name, make, flop, bytes](benchmark::State& st) {
        Prepared& p = prepare(name, make);
        if (!p.error.empty()) {
          st.SkipWithError(p.error.c_str());
          return;
        }
        for (auto _ : st) {
          TensorMap out = p.session->run(p.inputs);
          benchmark::DoNotOptimize(out);
        }
        using C = benchmark::Counter;
        st.counters["flop"] = C(flop);
        st.counters["bytes"] = C(bytes);
        if (flop > 0) {
          st.counters["GFLOP"] = C(flop * 1e-9, C::kIsIterationInvariantRate);
          st.counters["peak_pct"] =
              C(flop * 1e-9 * 100 / machine_peak().gflops, C::kIsIterationInvariantRate);
        }
        if (bytes > 0) st.counters["GB"] = C(bytes * 1e-9, C::kIsIterationInvariantRate);
      })
      ->UseRealTime()  // the work runs on the pool's threads, not just this one
      ->Unit(benchmark::kMillisecond);
}

}  // namespace rlx::bench
