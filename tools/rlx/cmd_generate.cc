// rlx generate MODEL.gguf -p "text" -n 64: prefill the prompt once, then
// decode one token at a time over the KV cache, streaming text as it comes, in
// whole UTF-8 characters.
#include <chrono>
#include <cstdio>
#include <memory>

#include "commands.h"
#include "rlx/llm.h"
#include "rlx/tokenizer.h"
#include "rlx/utf8.h"

namespace rlx::cli {
namespace {

struct GenerateOptions {
  std::string model, prompt, tokens;
  int n_predict = 64;
  int threads = 0;
  bool dequantize = false, ignore_eos = false, no_bos = false, warmup = false;
  llm::SamplerOptions sampling;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void generate(const GenerateOptions& o) {
  set_num_threads(o.threads);
  RLX_CHECK(o.prompt.empty() != o.tokens.empty(),
            "generate: pass exactly one of -p/--prompt and --tokens");
  gguf::File f = gguf::read(o.model);
  llm::Config c = llm::Config::from_gguf(f);
  Tokenizer tok = Tokenizer::from_gguf(f);
  std::vector<int32_t> ids =
      o.tokens.empty() ? tok.encode(o.prompt, !o.no_bos, true) : parse_token_list(o.tokens);
  RLX_CHECK(!ids.empty(), "generate: the prompt encodes to no tokens");
  std::fprintf(stderr, "%s\n", c.summary().c_str());
  Model m = llm::build_model(f, c, {}, weight_mode(o.dequantize));
  llm::Session session(Executable::compile(std::move(m.graph), m.weights), c);
  llm::Sampler sampler(o.sampling);

  // Whole characters only: a character split over tokens waits for its rest,
  // and bytes that never make one are written as U+FFFD (utf8.h).
  Utf8Stream text;
  auto write = [](const std::string& s) {
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);
  };
  for (int32_t id : ids) write(text.push(tok.token_to_piece(id, false)));
  if (o.warmup) {  // touch the mapped weights and plan the shapes once, untimed
    session.feed(ids);
    session.feed(std::span(ids).first(1));
    session.reset();
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits = session.feed(ids);
  const double prefill_s = seconds_since(t0);
  std::vector<int32_t> history = ids;
  int produced = 0;
  t0 = std::chrono::steady_clock::now();
  for (; produced < o.n_predict; ++produced) {
    int32_t next = sampler.sample(logits, history);
    if (!o.ignore_eos && tok.is_eog(next)) break;
    write(text.push(tok.token_to_piece(next)));
    history.push_back(next);
    if (produced + 1 < o.n_predict) logits = session.feed(std::span(&next, 1));
  }
  const double decode_s = seconds_since(t0);
  write(text.finish());
  std::printf("\n");
  std::fflush(stdout);
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tokens/s)\n", ids.size(), prefill_s,
               double(ids.size()) / prefill_s);
  std::fprintf(stderr, "decode: %d tokens in %.3f s (%.1f tokens/s), %d threads\n", produced,
               decode_s, decode_s > 0 ? produced / decode_s : 0.0, num_threads());
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  auto* cmd = app.add_subcommand("generate", "Generate text with a GGUF language model");
  cmd->add_option("model", o->model, "GGUF model (llama, qwen2, qwen3)")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text");
  cmd->add_option("--tokens", o->tokens, "Prompt as token ids instead of text (\"1 15043\")");
  cmd->add_option("-n,--n-predict", o->n_predict, "Tokens to generate")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--temp", o->sampling.temperature, "Temperature (0: greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sampling.top_k, "Keep the k most likely tokens (0: off)")
      ->capture_default_str();
  cmd->add_option("--top-p", o->sampling.top_p, "Nucleus sampling mass (1: off)")
      ->capture_default_str();
  cmd->add_option("--min-p", o->sampling.min_p, "Drop tokens below min-p x the best probability")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", o->sampling.repeat_penalty,
                  "Penalty for repeated tokens (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", o->sampling.repeat_last_n, "Window of the repetition penalty")
      ->capture_default_str();
  cmd->add_option("--seed", o->sampling.seed, "Random seed")->capture_default_str();
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--dequantize", o->dequantize, "Dequantize every weight to f32 up front");
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Keep going past end-of-generation tokens");
  cmd->add_flag("--no-bos", o->no_bos, "Do not add the BOS token to the prompt");
  cmd->add_flag("--warmup", o->warmup,
                "Run the prompt once untimed first (page in weights, plan shapes) for benchmarks");
  cmd->callback([o] { generate(*o); });
}

}  // namespace rlx::cli
