// rlx bench-llm MODEL.gguf [-p 512] [-n 128] [-d 0] [-r 5]: prefill and decode
// speed in llama-bench's terms (pp<P>: one batch of P tokens; tg<N>: N
// single-token steps; "@ d<D>" after D cached tokens), so a comparison with
// llama.cpp is one command on each side. Tokens are random ids drawn from a
// seeded generator, as llama-bench's are.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>

#include "commands.h"
#include "rlx/llm.h"

namespace rlx::cli {
namespace {

struct BenchLlmOptions {
  std::string model;
  int prompt = 512, gen = 128, depth = 0, reps = 5, threads = 0, parallel = 1;
  bool dequantize = false, json = false;
  std::string kv_type = "f16";
};

struct Stat {
  double mean = 0, sd = 0;
};

Stat stat_of(const std::vector<double>& v) {
  Stat s;
  for (double x : v) s.mean += x;
  s.mean /= double(v.size());
  for (double x : v) s.sd += (x - s.mean) * (x - s.mean);
  s.sd = v.size() > 1 ? std::sqrt(s.sd / double(v.size() - 1)) : 0;
  return s;
}

std::string bench_human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (b >= 1024 && u < 3) b /= 1024, ++u;
  char s[32];
  std::snprintf(s, sizeof s, "%.2f %s", b, units[u]);
  return s;
}

void bench_llm(const BenchLlmOptions& o) {
  set_num_threads(o.threads);
  RLX_CHECK(o.prompt > 0 || o.gen > 0, "bench-llm: nothing to time (-p 0 and -n 0)");
  gguf::File f = gguf::read(o.model);
  const llm::Config c = llm::Config::from_gguf(f);
  int64_t params = 0;
  for (const auto& t : f.tensors) params += t.numel();
  const auto size = double(std::filesystem::file_size(o.model));
  Model m = llm::build_model(f, c, {.kv_dtype = kv_dtype(o.kv_type)}, weight_mode(o.dequantize));
  auto exe = Executable::compile(std::move(m.graph), m.weights);
  llm::Session session(exe, c);
  // --parallel: the decode test steps that many sessions as one batch (rlx serve's slots).
  std::unique_ptr<llm::BatchDecoder> batch;
  std::vector<std::unique_ptr<llm::Session>> slots;
  if (o.parallel > 1) {
    Model b = llm::build_model(f, c, {.batch = true, .kv_dtype = kv_dtype(o.kv_type)},
                               weight_mode(o.dequantize));
    batch =
        std::make_unique<llm::BatchDecoder>(Executable::compile(std::move(b.graph), b.weights), c);
    for (int s = 0; s < o.parallel; ++s) slots.push_back(std::make_unique<llm::Session>(exe, c));
  }
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> pick(0, int32_t(c.n_vocab - 1));
  auto tokens = [&](int n) {
    std::vector<int32_t> v(static_cast<size_t>(n), 0);
    for (int32_t& t : v) t = pick(rng);
    return v;
  };
  // The batched decode test: every slot gets the depth's tokens (untimed), then o.gen steps of
  // one token per slot, each the argmax of its last logits (a generator's sampling cost).
  auto run_batched = [&] {
    std::vector<llm::Session*> ptrs;
    std::vector<int32_t> next;
    for (auto& s : slots) {
      s->reset();
      if (o.depth > 0) s->feed(tokens(o.depth));
      ptrs.push_back(s.get());
      next.push_back(tokens(1)[0]);
    }
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < o.gen; ++i) {
      const std::vector<std::vector<float>> logits = batch->feed(ptrs, next);
      for (size_t s = 0; s < next.size(); ++s)
        next[s] = int32_t(std::max_element(logits[s].begin(), logits[s].end()) - logits[s].begin());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(o.gen) * double(o.parallel) / s;
  };
  // One test: reset, the depth's tokens cached (untimed), then the timed part.
  auto run = [&](bool prefill) {
    if (!prefill && batch) return run_batched();
    session.reset();
    if (o.depth > 0) session.feed(tokens(o.depth));
    const std::vector<int32_t> in = tokens(prefill ? o.prompt : o.gen);
    const auto t0 = std::chrono::steady_clock::now();
    if (prefill) {
      session.feed(in);
    } else {
      for (int32_t t : in) session.feed(std::span(&t, 1));
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return double(in.size()) / s;
  };
  const std::string at = o.depth > 0 ? " @ d" + std::to_string(o.depth) : "";
  struct Row {
    bool prefill;
    std::string test;
    Stat s;
  };
  std::vector<Row> rows;
  for (bool prefill : {true, false}) {
    if ((prefill ? o.prompt : o.gen) <= 0) continue;
    run(prefill);  // warm-up: pages in the weights, plans the shapes
    std::vector<double> v;
    for (int r = 0; r < o.reps; ++r) v.push_back(run(prefill));
    rows.push_back({prefill,
                    (prefill ? "pp" + std::to_string(o.prompt) : "tg" + std::to_string(o.gen)) +
                        (!prefill && batch ? " x" + std::to_string(o.parallel) : "") + at,
                    stat_of(v)});
  }
  const std::string name = std::filesystem::path(o.model).filename().string();
  if (o.json) {
    std::printf("{\"model\": \"%s\", \"threads\": %d", name.c_str(), num_threads());
    for (const Row& r : rows) {
      const char* key = r.prefill ? "prefill" : "decode";
      std::printf(", \"%s_tok_s\": %.3f, \"%s_sd\": %.3f", key, r.s.mean, key, r.s.sd);
    }
    std::printf("}\n");
    return;
  }
  std::printf("| model | size | params | threads | test | t/s |\n");
  std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (const Row& r : rows)
    std::printf("| %s (%s) | %s | %.2f M | %d | %s | %.2f ± %.2f |\n", name.c_str(), c.arch.c_str(),
                bench_human_bytes(size).c_str(), double(params) / 1e6, num_threads(),
                r.test.c_str(), r.s.mean, r.s.sd);
}

}  // namespace

void add_bench_llm_command(CLI::App& app) {
  auto o = std::make_shared<BenchLlmOptions>();
  auto* cmd = app.add_subcommand(
      "bench-llm",
      "Prefill and decode speed of a GGUF language model in llama-bench's terms: pp<P> (one "
      "batch of P tokens) and tg<N> (N single-token steps), mean ± sd tokens/s over the reps");
  cmd->add_option(
         "model", o->model,
         "GGUF model (llama, qwen2, qwen3, qwen3moe, phi3, gemma2, gemma3; MoE llama as mixtral)")
      ->required();
  cmd->add_option("-p,--n-prompt", o->prompt, "Prompt tokens of the prefill test (0: skip it)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("-n,--n-gen", o->gen, "Tokens of the decode test (0: skip it)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("-d,--n-depth", o->depth,
                  "Tokens already in the KV cache before each test (untimed), as llama-bench -d")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("-r,--repetitions", o->reps, "Timed runs of each test (after one warm-up)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--parallel", o->parallel,
                  "Sequences the decode test steps as one batch, as rlx serve --parallel does "
                  "(tok/s over all of them; row tg<N> x<P>)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dequantize", o->dequantize, "Dequantize every weight to f32 up front");
  add_kv_type_flag(cmd, o->kv_type);
  cmd->add_flag("--json", o->json,
                "One JSON line (prefill_tok_s, decode_tok_s and their sd) instead of the table");
  cmd->callback([o] { bench_llm(*o); });
}

}  // namespace rlx::cli
