// Text tokenizers built from a GGUF file's tokenizer.ggml.* metadata: the
// SentencePiece model ("llama": score-driven merges, U+2581 for spaces, byte
// fallback) and byte-level BPE ("gpt2": merge ranks, GPT-2 byte<->unicode
// mapping, pre-tokenizer chosen by tokenizer.ggml.pre). Token ids agree with
// llama.cpp's tokenizer on its vocab fixtures.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/gguf.h"

namespace rlx {

class Tokenizer {
 public:
  // Throws rlx::Error naming the key for missing keys, wrong value types,
  // array length mismatches and out-of-range special token ids, and for
  // unsupported tokenizer.ggml.model / tokenizer.ggml.pre values.
  static Tokenizer from_gguf(const gguf::File& file);

  // add_special: prepend BOS (and append EOS) as tokenizer.ggml.add_bos_token /
  // add_eos_token say. parse_special: text that spells a control token (e.g.
  // "<|im_start|>") becomes that token; user-defined tokens are always split
  // out. Invalid UTF-8 is tokenized byte-wise (never throws).
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = false) const;

  // The text a token stands for (bytes, not necessarily valid UTF-8). Control
  // tokens render as their text only when `special` is set. Throws rlx::Error
  // for ids outside [0, n_vocab()).
  std::string token_to_piece(int32_t id, bool special = true) const;
  // Concatenated pieces; control tokens are dropped unless render_special,
  // and the SentencePiece prefix space added by encode is removed again.
  std::string decode(std::span<const int32_t> ids, bool render_special = false) const;

  int32_t bos() const;  // -1 when the model has none
  int32_t eos() const;
  bool is_eog(int32_t id) const;  // end of generation (eos, eot, <|im_end|> ...)
  bool is_control(int32_t id) const;
  int32_t n_vocab() const;
  std::string model() const;  // "llama" or "gpt2"
  std::string pre() const;    // pre-tokenizer name ("" for SentencePiece)
  bool add_bos() const;
  const std::string& token_text(int32_t id) const;  // raw vocab string

  struct Impl;
  Tokenizer(const Tokenizer&) = default;
  Tokenizer& operator=(const Tokenizer&) = default;
  Tokenizer(Tokenizer&&) noexcept = default;
  Tokenizer& operator=(Tokenizer&&) noexcept = default;
  ~Tokenizer();

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

}  // namespace rlx
