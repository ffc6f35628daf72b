// The sampling flags of rlx generate and rlx chat.
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

}  // namespace rlx::cli
