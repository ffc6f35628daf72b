// dequant_matmul: GEMV (M = 1, one decode step) and M = 64 (a prompt chunk)
// for K = N = 4096 per weight type, through the runtime, the weight a constant. When ggml-cpu can
// be dlopen()ed (libggml-base.so + libggml-cpu-haswell.so from node-llama-cpp, path from
// RLX_GGML_LIB), each benchmark also times ggml's own from_float + vec_dot over the same data with
// the same pool and row tiling, alternating runs with rlx so both see the same background load, and
// reports the medians: rlx_GBps, ggml_GBps (weight bytes read per second) and rlx/ggml.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "bench_util.h"
#include "rlx/quant.h"

namespace rlx::bench {
namespace {

using quant::GgmlType;

struct GgmlCpuTraits {  // struct ggml_type_traits_cpu (ggml-cpu.h)
  void (*from_float)(const float*, void*, int64_t);
  void (*vec_dot)(int n, float* s, size_t bs, const void* x, size_t bx, const void* y, size_t by,
                  int nrc);
  int vec_dot_type;
  int64_t nrows;
};
using GetCpuTraits = const GgmlCpuTraits* (*)(int);

GetCpuTraits ggml_cpu() {
  static GetCpuTraits fn = []() -> GetCpuTraits {
    if (!__builtin_cpu_supports("avx2")) return nullptr;
    std::filesystem::path base;
    if (const char* p = std::getenv("RLX_GGML_LIB")) {
      base = p;
    } else {
      const char* home = std::getenv("HOME");
      base = std::string(home ? home : "") +
             "/.cache/rlx-peers/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/"
             "libggml-base.so";
    }
    if (!std::filesystem::exists(base) || !dlopen(base.c_str(), RTLD_NOW | RTLD_GLOBAL))
      return nullptr;
    void* cpu = dlopen((base.parent_path() / "libggml-cpu-haswell.so").c_str(), RTLD_NOW);
    if (!cpu) return nullptr;
    if (auto init = reinterpret_cast<void (*)()>(dlsym(cpu, "ggml_cpu_init"))) init();
    return reinterpret_cast<GetCpuTraits>(dlsym(cpu, "ggml_get_type_traits_cpu"));
  }();
  return fn;
}

// ggml's kernels driven like rlx's direct path: activations converted with
// its from_float, then tiles of weight rows over rlx's pool.
void ggml_matmul(const GgmlCpuTraits& wt, const GgmlCpuTraits& at, const float* x, const uint8_t* w,
                 size_t rb, int64_t M, int64_t N, int64_t K, GgmlType vdt, std::vector<uint8_t>& qa,
                 float* y) {
  const size_t ab = quant::row_size(vdt, K);
  qa.resize(size_t(M) * ab);
  for (int64_t m = 0; m < M; ++m) at.from_float(x + m * K, qa.data() + m * ab, K);
  const int64_t TN = std::clamp<int64_t>(int64_t((32 << 10) / rb), 1, 64);
  parallel_for((N + TN - 1) / TN, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t)
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = t * TN; n < std::min(N, (t + 1) * TN); ++n)
          wt.vec_dot(int(K), y + m * N + n, 0, w + n * rb, 0, qa.data() + m * ab, 0, 1);
  });
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

void run_case(benchmark::State& st, GgmlType type, int64_t M, int64_t K, int64_t N) {
  const quant::TypeTraits& tr = quant::traits(type);
  const size_t rb = quant::row_size(type, K);
  // Weights: our quantizer on random rows (types without one: fixed bytes).
  Tensor w(Dims{N, int64_t(rb)}, DType::U8);
  const Tensor src = random_f32({1, K}, 7);
  for (int64_t n = 0; n < N; ++n) {
    if (tr.quantize_row) {
      tr.quantize_row(src.data<float>(), w.data<uint8_t>() + n * rb, K);
    } else {
      for (size_t j = 0; j < rb; ++j) w.data<uint8_t>()[n * rb + j] = uint8_t((n + j) * 37) & 0xBF;
    }
  }
  // The weight a constant, as a model's is: decode runs its regrouped (or
  // huge-page) copy, made in the warm-up runs.
  Graph g;
  Builder b(g);
  const NodeId xi = b.input("x", Shape(Dims{M, K}, DType::F32));
  const NodeId wi = b.param("w", Shape(Dims{N, int64_t(rb)}, DType::U8));
  g.add_output("y",
               g.add(Op::DequantMatmul, {xi, wi}, {{"scheme", std::string(tr.name)}, {"k", K}}));
  auto exe = Executable::compile(std::move(g), {{"w", w}});
  Session sess(exe);
  TensorMap in{{"x", random_f32({M, K}, 3)}};
  for (int i = 0; i < 3; ++i) sess.run(in);

  const GgmlCpuTraits* gw = ggml_cpu() ? ggml_cpu()(int(type)) : nullptr;
  const GgmlCpuTraits* ga = gw ? ggml_cpu()(gw->vec_dot_type) : nullptr;
  const bool with_ggml = gw && gw->vec_dot && ga && ga->from_float && tr.is_quantized;
  std::vector<uint8_t> qa;
  std::vector<float> gy(size_t(M * N));
  std::vector<double> t_rlx, t_ggml;
  using clock = std::chrono::steady_clock;
  for (auto _ : st) {
    auto t0 = clock::now();
    TensorMap out = sess.run(in);
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    benchmark::DoNotOptimize(out);
    t_rlx.push_back(dt);
    st.SetIterationTime(dt);
    if (with_ggml) {
      t0 = clock::now();
      ggml_matmul(*gw, *ga, in.at("x").data<float>(), w.data<uint8_t>(), rb, M, N, K,
                  GgmlType(gw->vec_dot_type), qa, gy.data());
      t_ggml.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
  }
  const double bytes = double(rb) * double(N);
  using C = benchmark::Counter;
  st.counters["bytes"] = C(bytes);
  st.counters["flop"] = C(2.0 * double(M) * double(N) * double(K));
  st.counters["rlx_GBps"] = C(bytes / median(t_rlx) * 1e-9);
  st.counters["rlx_GMACps"] = C(double(M) * double(N) * double(K) / median(t_rlx) * 1e-9);
  if (with_ggml) {
    st.counters["ggml_GBps"] = C(bytes / median(t_ggml) * 1e-9);
    st.counters["rlx_over_ggml"] = C(median(t_ggml) / median(t_rlx));  // > 1: rlx faster
  }
}

// dequant_matmul/<type>/M<M>xK<K>xN<N>.
void add_case(GgmlType t, int64_t M, int64_t K, int64_t N) {
  const std::string name = std::string("dequant_matmul/") + quant::traits(t).name + "/M" +
                           std::to_string(M) + "xK" + std::to_string(K) + "xN" + std::to_string(N);
  benchmark::RegisterBenchmark(name.c_str(),
                               [=](benchmark::State& st) { run_case(st, t, M, K, N); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

void register_dequant_matmul() {
  const GgmlType types[] = {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K,  GgmlType::Q5_K,
                            GgmlType::Q6_K, GgmlType::F16,  GgmlType::IQ4_XS};
  for (GgmlType t : types)
    for (int64_t M : {int64_t(1), int64_t(64)}) add_case(t, M, 4096, 4096);
  // Decode from memory: 64Ki rows of K = 4096 (150-540 MB, far beyond the
  // last-level cache, as a model's weights are together); set rlx_GBps
  // beside membw/read_sum_256MiB_huge_pages.
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::F16})
    add_case(t, 1, 4096, 65536);
  // Prefill of the 100M test model (scripts/make_test_llm.py --preset 100m):
  // 512 prompt rows through its FFN up / down projections (the integer GEMM).
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K}) {
    add_case(t, 512, 768, 2304);
    add_case(t, 512, 2304, 768);
  }
  // Decode of the same model: one row through an FFN projection and its output head.
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q8_0}) {
    add_case(t, 1, 768, 2304);
    add_case(t, 1, 768, 32000);
  }
}

}  // namespace rlx::bench
