// Random-weight llama-family GGUF files for tests, and an independent scalar
// forward pass (plain loops in double, no rlx kernels) to check them against.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "rlx/gguf.h"

namespace rlx::testing {

struct TinyLlm {
  std::string arch =
      "llama";  // llama | mistral3 | qwen2 | qwen3 | qwen3moe | phi3 | gemma2 | gemma3
  int64_t n_layer = 2, n_embd = 32, n_ff = 48, n_head = 4, n_head_kv = 2, head_dim = 8;
  int64_t n_vocab = 50, n_rot = 8;
  double rope_base = 10000, eps = 1e-5;
  bool tied = false, rope_freqs = false;  // gemma2 is always tied
  // gemma2 / gemma3: written as <arch>.attention.sliding_window(_pattern),
  // <arch>.attn_logit_softcapping, <arch>.final_logit_softcapping,
  // <arch>.rope.freq_base_swa and <arch>.rope.scaling.factor when > 0.
  int64_t n_swa = 0, swa_pattern = 0;
  double attn_softcap = 0, final_softcap = 0, rope_base_swa = 0, rope_scale = 0;
  // > 0: every FFN is a mixture of n_expert experts of n_ff (llama: mixtral's
  // layout; qwen3moe, which needs it: written as expert_feed_forward_length),
  // n_expert_used per token.
  int64_t n_expert = 0, n_expert_used = 2;
  // > 0: phi3's LongRoPE as Phi-3 128k files hold it: rope_factors_long /
  // _short.weight, rope.scaling.original_context_length n_ctx_orig and, when
  // > 0, rope.scaling.attn_factor. The reference rotates with the long set
  // when n_ctx (the graph's GraphOptions::n_ctx; 0: the file's 256) passes
  // n_ctx_orig.
  int64_t n_ctx_orig = 0, n_ctx = 0;
  double rope_attn_factor = 0;
  // > 0: YaRN by rope_scale from this original context (rope.scaling.type
  // yarn); mistral3 also writes yarn_beta_fast / _slow when > 0 (32 / 1
  // otherwise) and attention.temperature_scale when attn_temp_scale != 0.
  int64_t yarn_orig = 0;
  double yarn_beta_fast = 0, yarn_beta_slow = 0, attn_temp_scale = 0;
  uint64_t seed = 1;
  // Texts of the last extra_tokens.size() ids (in place of letters), e.g. JSON punctuation
  // for constrained generation; json_tokens() spells every byte a JSON document needs.
  std::vector<std::string> extra_tokens;
  static std::vector<std::string> json_tokens();

  // Writes the model (f32 tensors) as GGUF bytes.
  std::string gguf_bytes() const;
  // Logits [tokens.size(), n_vocab] computed from the same weights by plain
  // scalar code.
  std::vector<std::vector<double>> reference_logits(const std::vector<int32_t>& tokens) const;
};

// gtest names parameters with this instead of a byte dump.
inline void PrintTo(const TinyLlm& m, std::ostream* os) { *os << m.arch; }

}  // namespace rlx::testing
