// Llama-family language models from GGUF files: the hyper-parameters read from
// metadata, the IR graph built from them (one graph for prefill and decode,
// with the KV cache as explicit inputs and outputs), and a session that keeps
// the cache between calls.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "rlx/gguf.h"
#include "rlx/model.h"
#include "rlx/runtime.h"

namespace rlx::llm {

// Architectures with a builder: llama (GQA, rope_freqs, tied output), qwen2
// (q/k/v biases, neox rope), qwen3 (q/k rms-norm, neox rope), phi3 (fused
// attn_qkv, ffn_up holding gate and up, neox rope), gemma2 (embeddings times
// sqrt(d), post-attention / post-ffn norms, GELU-tanh gated FFN, attention
// and final logit soft-capping, sliding-window attention on alternating
// layers), gemma3 (gemma2 without soft-capping, plus q/k rms-norm, a sliding
// window on 5 of every 6 layers and their own rope base), mistral3 (llama with
// YaRN and optional query temperature tuning).
struct Config {
  std::string arch;
  int64_t n_layer = 0, n_embd = 0, n_ff = 0, n_vocab = 0, n_ctx_train = 0;
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, n_rot = 0;
  double rope_base = 10000, rms_eps = 1e-5;
  std::string rope_style;  // "interleaved" (llama) or "neox" (the others)
  bool qkv_bias = false, qk_norm = false, rope_freqs = false, tied_output = false;
  // phi3: one attn_qkv.weight [q + 2 kv, d] instead of attn_q / attn_k / attn_v,
  // and ffn_up.weight [2 ff, d] holding the gate rows then the up rows.
  bool fused_qkv = false, fused_gate_up = false;
  std::string ffn_act = "silu";  // the gate's activation: "silu" or "gelu_tanh" (gemma)
  // gemma: post_attention_norm / post_ffw_norm on each block's output before its
  // residual add.
  bool post_norms = false;
  double embd_scale = 1;     // token embeddings are multiplied by this (gemma: sqrt(n_embd))
  double attn_scale = 0;     // the scores' scale (q.k times this); 1/sqrt(head_dim) by default
  double attn_softcap = 0;   // > 0: scores become cap * tanh(scores / cap) (gemma2)
  double final_softcap = 0;  // > 0: the same on the logits
  // Sliding-window attention: layer l sees the last n_swa keys when
  // is_swa(l): l % swa_pattern < swa_pattern - 1, every layer when
  // swa_pattern is 0 (llama.cpp's rule).
  int64_t n_swa = 0, swa_pattern = 0;
  // Rope frequencies are divided by rope_scale (linear scaling: positions
  // times 1 / factor); sliding layers use rope_base_swa and rope_scale_swa.
  double rope_scale = 1, rope_base_swa = 10000, rope_scale_swa = 1;
  // LongRoPE (phi3 files of Phi-3 128k, Phi-3.5, Phi-4-mini): the
  // rope_factors_long / _short.weight divisors, the long ones when the context
  // passes n_ctx_orig (rope.scaling.original_context_length, default
  // n_ctx_train), as llama.cpp chooses. rope_attn_factor
  // (rope.scaling.attn_factor, any architecture) scales the rotated dims of
  // queries and keys, as ggml's rope scales cos and sin.
  bool long_rope = false;
  int64_t n_ctx_orig = 0;
  double rope_attn_factor = 1;
  // YaRN (rope.scaling.type yarn; Qwen2.5 / Qwen3 long-context files,
  // mistral3): each rotated pair's frequency blends the interpolated one
  // (divided by rope_scale) and the original by a ramp over the pairs whose
  // wavelengths fit n_ctx_orig between beta_slow and beta_fast times, as
  // ggml's rope_yarn; yarn_divisors() are the resulting divisors. Its
  // magnitude correction is folded into rope_attn_factor.
  bool yarn = false;
  double yarn_beta_fast = 32, yarn_beta_slow = 1;
  // mistral3 (llama 4's temperature tuning): queries are multiplied by
  // 1 + attn_temp_scale * ln(1 + floor(position / n_ctx_orig)); 0: off.
  double attn_temp_scale = 0;
  // Mixture of experts (qwen3moe; llama with experts, as mixtral's files are):
  // each FFN routes a token to the n_expert_used of n_expert experts (FFNs of
  // n_ff_exp) with the highest softmax of ffn_gate_inp, weighted by those
  // probabilities renormalized to sum 1, times expert_weights_scale when it is
  // neither 0 nor 1. n_expert 0: dense FFNs.
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  double expert_weights_scale = 0;

  // The context chat / serve / generate use when none is asked for: the
  // model's, at most 4096.
  int64_t default_context() const;
  // Whether a graph for this context (0: default_context()) rotates with the
  // long rope factors.
  bool long_context(int64_t n_ctx) const;
  // YaRN's frequency divisors, one per rotated pair (n_rot / 2; empty without YaRN).
  std::vector<float> yarn_divisors() const;

  bool is_swa(int64_t layer) const {
    return n_swa > 0 && (swa_pattern == 0 || layer % swa_pattern < swa_pattern - 1);
  }

  // Reads `<arch>.*` keys and checks them against the tensors present; throws
  // rlx::Error naming the file and key on anything missing or inconsistent.
  static Config from_gguf(const gguf::File& f);
  std::string summary() const;  // "llama: 2 layers, d=64, 4/2 heads x 16, ff 128, vocab 32000"
};

enum class Weights {
  Quantized,  // projections run dequant_matmul on the file's blocks (zero copy)
  F32,        // every tensor dequantized to f32 up front (convert, debugging)
};

struct GraphOptions {
  bool kv_cache = true;     // cache_k.N / cache_v.N inputs and outputs
  bool all_logits = false;  // logits for every token, else only the last
  // > 0: the graph takes exactly this many tokens (export targets that need
  // static lengths, CoreML); 0: a symbolic token count.
  int64_t n_tokens = 0;
  // One decode step of B sequences at once (BatchDecoder): token i is the
  // next of sequence i; caches [B, P, n_head_kv, head_dim] padded to a common
  // P, with bool inputs kv_mask (and kv_mask_swa on models with sliding
  // layers) [B, 1, 1, P + 1] saying which keys each sequence sees; logits
  // for every sequence. Needs kv_cache.
  bool batch = false;
  // The KV cache's element type: f32, or f16 (half the memory and the bytes
  // each decode step reads, as llama.cpp's default; keys and values are
  // rounded to f16 when written and widened tile by tile by attention).
  DType kv_dtype = DType::F32;
  // The context (prompt + completion) the graph serves; on LongRoPE models it
  // picks the long or short rope factors. 0: Config::default_context().
  int64_t n_ctx = 0;
};

// Graph inputs: tokens i64[T], positions i64[T] and, with kv_cache,
// cache_k.N / cache_v.N [1, P, n_head_kv, head_dim] per layer; outputs: logits
// [T or 1, n_vocab] and the updated caches [1, P + T, n_head_kv, head_dim].
Model build_model(const gguf::File& f, const Config& c, const GraphOptions& g, Weights w);

// The `tokens` and `positions` inputs for tokens placed at positions
// first_position..; throws naming any id outside [0, n_vocab).
TensorMap token_inputs(std::span<const int32_t> tokens, int64_t first_position, int64_t n_vocab);

class BatchDecoder;

// Prefill then one-token decode steps over a compiled KV-cache graph.
class Session {
 public:
  Session(std::shared_ptr<const Executable> exe, Config c);
  // Runs `tokens` at positions n_past()..; returns logits of the last one.
  std::vector<float> feed(std::span<const int32_t> tokens);
  int64_t n_past() const { return int64_t(tokens_.size()); }
  // The tokens the cache holds, in order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Keeps the cache of the first n tokens only (n <= n_past()), so a prompt
  // that shares a prefix with the previous one is fed from where they part.
  void truncate(int64_t n);
  void reset();

 private:
  friend class BatchDecoder;
  Config c_;
  DType kv_dtype_;  // the graph's cache inputs' (GraphOptions::kv_dtype)
  rlx::Session session_;
  TensorMap cache_;
  std::vector<int32_t> tokens_;
};

// One decode step of several sessions at once over a batched graph
// (GraphOptions::batch): the new tokens' projections and FFNs run as one
// matrix product, so every weight is read once for all of them, and each
// token attends to its own session's cache. The caches are gathered into one
// padded batch (a copy of each per step); each session's new keys and values
// are appended to its own cache, in place when its buffer has room.
class BatchDecoder {
 public:
  BatchDecoder(std::shared_ptr<const Executable> batched, Config c);
  // Feeds tokens[i] to sessions[i] (distinct sessions of this model); returns
  // each one's logits, as sessions[i]->feed(tokens[i]) would.
  std::vector<std::vector<float>> feed(std::span<Session* const> sessions,
                                       std::span<const int32_t> tokens);

 private:
  Config c_;
  DType kv_dtype_;
  rlx::Session session_;
};

struct SamplerOptions {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: off
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  uint64_t seed = 0;
};

// Whether a token may come next (a grammar's verdict).
using TokenFilter = std::function<bool(int32_t)>;

// llama.cpp's order: repetition penalty, top-k, top-p, min-p, temperature,
// then a draw (or argmax when greedy).
class Sampler {
 public:
  explicit Sampler(SamplerOptions o);
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  // Only tokens `allowed` takes, as if the others' logits were -inf: top-k keeps the k best
  // allowed tokens. Tokens whose logit is -inf are out without asking; the others are asked
  // in logit order until the sampler has what it needs (the best one when greedy, top-k of
  // them), so a filter is asked about every token only without top-k. -1 when no token is
  // allowed.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history,
                 const TokenFilter& allowed);

 private:
  std::vector<float> penalized(std::span<const float> logits,
                               std::span<const int32_t> history) const;
  int32_t draw(const std::vector<float>& l, std::vector<int32_t> idx);
  SamplerOptions o_;
  uint64_t state_;
  double uniform();
};

}  // namespace rlx::llm
