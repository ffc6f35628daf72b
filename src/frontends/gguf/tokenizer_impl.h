// Internal state of rlx::Tokenizer, shared by the vocab loader, the
// SentencePiece and BPE encoders and the pre-tokenizers.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rlx/tokenizer.h"

namespace rlx {

namespace tok {

// GGUF tokenizer.ggml.token_type values.
enum TokenType : int32_t {
  kTypeUndefined = 0,
  kTypeNormal = 1,
  kTypeUnknown = 2,
  kTypeControl = 3,
  kTypeUserDefined = 4,
  kTypeUnused = 5,
  kTypeByte = 6,
};

// Pre-tokenizer families (several tokenizer.ggml.pre names share one).
enum class Pre {
  Default,
  Llama3,
  Qwen2,
  Qwen35,
  Gpt2,
  DeepseekLlm,
  DeepseekCoder,
  Falcon,
  Starcoder,
  Bloom,   // " ?[^(\\s|.,!?…。，、।۔،)]+" (bloom, poro, gpt3-finnish)
  Viking,  // Bloom's pattern, then \\p{N}
};

// Splits text into pre-tokenizer words (byte ranges into `text`, in order,
// covering it). Linear time.
std::vector<std::string_view> pre_split(Pre pre, std::string_view text);

// SentencePiece symbol (UTF-8 lead-byte length, possibly truncated) packed
// into an integer; used for the adjacent-pair table.
uint32_t spm_unit(std::string_view s, size_t pos, size_t len);

struct PairHash {
  size_t operator()(uint64_t v) const { return std::hash<uint64_t>()(v * 0x9E3779B97F4A7C15ull); }
};

}  // namespace tok

struct Tokenizer::Impl {
  bool spm = false;  // else byte-level BPE
  std::string model, pre_name;
  tok::Pre pre = tok::Pre::Default;
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::unordered_map<std::string_view, int32_t> token_ids;  // views into `tokens`

  // BPE merges over interned strings: vocab ids, then merge parts not in the
  // vocab (ids >= n_vocab) so that every merge is a pair of ints.
  std::vector<std::string> extra_syms;
  std::unordered_map<std::string, int32_t> extra_ids;
  struct Merge {
    int32_t rank;
    int32_t result;  // interned id of the concatenation
  };
  std::unordered_map<uint64_t, Merge, tok::PairHash> merges;

  int32_t bos = -1, eos = -1, unk = -1, eot = -1, eom = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false, ignore_merges = false;
  std::unordered_set<int32_t> eog;
  std::vector<int32_t> special_cache;  // control / user-defined / unknown, longest text first
  // SentencePiece: every pair of adjacent symbols inside some token.
  std::unordered_set<uint64_t, tok::PairHash> spm_pairs;
  int32_t byte_tokens[256];  // byte -> token (SPM <0xXX>, BPE mapped char), -1 if none

  int32_t n_vocab() const { return static_cast<int32_t>(tokens.size()); }
  int32_t find(std::string_view s) const {
    auto it = token_ids.find(s);
    return it == token_ids.end() ? -1 : it->second;
  }
  int32_t find_sym(std::string_view s) const;  // interned id (vocab or extra), -1 if none
  std::string_view sym_text(int32_t id) const {
    return id < n_vocab() ? std::string_view(tokens[id])
                          : std::string_view(extra_syms[id - n_vocab()]);
  }
  bool is_control(int32_t id) const { return types[id] == tok::kTypeControl; }

  void encode_spm(std::string_view text, std::vector<int32_t>& out) const;
  void encode_spm_chunk(std::string_view text, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
};

}  // namespace rlx
