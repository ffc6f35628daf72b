// What rlx generate, chat, serve and bench-llm share: the sampling and KV
// cache flags, and loading a model with its chat template.
#include <fstream>
#include <sstream>

#include "commands.h"

namespace rlx::cli {

void add_sampling_flags(CLI::App* cmd, llm::SamplerOptions& s) {
  cmd->add_option("--temp", s.temperature, "Temperature (0: greedy)")->capture_default_str();
  cmd->add_option("--top-k", s.top_k, "Keep the k most likely tokens (0: off)")
      ->capture_default_str();
  cmd->add_option("--top-p", s.top_p, "Nucleus sampling mass (1: off)")->capture_default_str();
  cmd->add_option("--min-p", s.min_p, "Drop tokens below min-p x the best probability")
      ->capture_default_str();
  cmd->add_option("--repeat-penalty", s.repeat_penalty, "Penalty for repeated tokens (1: off)")
      ->capture_default_str();
  cmd->add_option("--repeat-last-n", s.repeat_last_n, "Window of the repetition penalty")
      ->capture_default_str();
  cmd->add_option("--seed", s.seed, "Random seed")->capture_default_str();
}

void add_kv_type_flag(CLI::App* cmd, std::string& kv_type) {
  cmd->add_option("--kv-type", kv_type,
                  "KV cache element type: f16 (half the memory and decode reads, llama.cpp's "
                  "default) or f32 (exact)")
      ->check(CLI::IsMember({"f16", "f32"}))
      ->capture_default_str();
}

DType kv_dtype(const std::string& kv_type) { return kv_type == "f32" ? DType::F32 : DType::F16; }

llm::ChatModel load_chat_model(const std::string& path, bool dequantize,
                               const std::string& template_file, bool batched,
                               const std::string& kv_type, int64_t ctx) {
  std::string source;
  if (!template_file.empty()) {
    std::ifstream in(template_file, std::ios::binary);
    RLX_CHECK(in, template_file, ": cannot open the chat template");
    std::ostringstream text;
    text << in.rdbuf();
    source = text.str();
    RLX_CHECK(!source.empty(), template_file, ": the chat template is empty");
  }
  return llm::ChatModel::load(path, weight_mode(dequantize), source, batched, kv_dtype(kv_type),
                              ctx);
}

int64_t context_size(const llm::Config& c, int64_t requested) {
  return requested > 0 ? requested : c.default_context();
}

std::string rope_factors_line(const llm::Config& c, int64_t n_ctx) {
  if (!c.long_rope) return "";
  const int64_t ctx = context_size(c, n_ctx);
  return std::string("rope: the ") + (c.long_context(ctx) ? "long" : "short") +
         " factors for a context of " + std::to_string(ctx) + " (original " +
         std::to_string(c.n_ctx_orig) + ")\n";
}

}  // namespace rlx::cli
