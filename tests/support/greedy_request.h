// A greedy request that ignores end tokens, so its length is exactly
// max_tokens: what the generation, scheduler and server tests compare.
#pragma once
#include <vector>

#include "rlx/llm_generate.h"

namespace rlx::testing {

inline llm::GenerateRequest greedy_request(std::vector<int32_t> prompt, int64_t max_tokens) {
  llm::GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  r.ignore_eos = true;
  return r;
}

}  // namespace rlx::testing
