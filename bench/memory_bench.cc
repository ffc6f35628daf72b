// Bandwidth yardsticks for the GB/s columns: a parallel sum (read only) and a
// parallel memcpy (read + write) over 256 MiB, far beyond any cache. They call
// rlx's thread pool directly, not a graph, so they measure the machine rather
// than an rlx kernel.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "bench_util.h"
#include "core/huge_pages.h"

namespace rlx::bench {

namespace {

constexpr int64_t kBytes = int64_t(256) << 20;
constexpr int64_t kFloats = kBytes / 4;
constexpr int64_t kGrain = int64_t(1) << 20;  // 4 MiB per chunk

__attribute__((target("avx2,fma"))) float sum_avx2(const float* p, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(p + i + 24));
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  alignas(32) float t[8];
  _mm256_store_ps(t, s);
  float r = t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
  for (; i < n; ++i) r += p[i];
  return r;
}

float sum_scalar(const float* p, int64_t n) {
  float r0 = 0, r1 = 0, r2 = 0, r3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) r0 += p[i], r1 += p[i + 1], r2 += p[i + 2], r3 += p[i + 3];
  for (; i < n; ++i) r0 += p[i];
  return r0 + r1 + r2 + r3;
}

float sum(const float* p, int64_t n) {
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return avx2 ? sum_avx2(p, n) : sum_scalar(p, n);
}

// Read-only sum over `src` (kFloats of it).
void read_sum(benchmark::State& st, const float* src) {
  std::vector<float> partial(size_t(kFloats / kGrain + 1));
  for (auto _ : st) {
    parallel_for(kFloats, kGrain,
                 [&](int64_t b, int64_t e) { partial[size_t(b / kGrain)] = sum(src + b, e - b); });
    benchmark::DoNotOptimize(partial.data());
    benchmark::ClobberMemory();
  }
  st.counters["flop"] = 0;
  st.counters["bytes"] = double(kBytes);
  st.counters["GB"] =
      benchmark::Counter(double(kBytes) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void bm_read(benchmark::State& st) {
  static std::vector<float> src(size_t(kFloats), 1.0f);  // kept across repetitions
  read_sum(st, src.data());
}

// The same on huge pages, as decode reads its weights (core/huge_pages.h):
// the yardstick for a decode GEMV's share of the bandwidth.
void bm_read_huge(benchmark::State& st) {
  static const HugeBuffer src = [] {
    HugeBuffer b = alloc_huge(size_t(kBytes));
    std::fill_n(reinterpret_cast<float*>(b.get()), kFloats, 1.0f);
    return b;
  }();
  read_sum(st, reinterpret_cast<const float*>(src.get()));
}

void bm_copy(benchmark::State& st) {
  static std::vector<char> src(size_t(kBytes), 1), dst(size_t(kBytes), 0);
  for (auto _ : st) {
    parallel_for(kBytes, kGrain * 4, [&](int64_t b, int64_t e) {
      std::memcpy(dst.data() + b, src.data() + b, size_t(e - b));
    });
    benchmark::ClobberMemory();
  }
  st.counters["flop"] = 0;
  st.counters["bytes"] = 2.0 * double(kBytes);  // read + write (write-allocate not counted)
  st.counters["GB"] = benchmark::Counter(2.0 * double(kBytes) * 1e-9,
                                         benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace

void register_memory() {
  benchmark::RegisterBenchmark("membw/read_sum_256MiB", bm_read)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("membw/read_sum_256MiB_huge_pages", bm_read_huge)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("membw/memcpy_256MiB", bm_copy)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace rlx::bench
