// Constrained generation: a context-free grammar over bytes, built from a JSON
// Schema, and a matcher that says which bytes may come next. The generation
// loop (llm_generate.h) keeps a matcher beside its sampler and samples only
// tokens whose bytes the matcher accepts, so the reply is a document of the
// grammar (JSON mode, structured outputs, function-call arguments).
#pragma once
#include <bitset>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/chat_template.h"

namespace rlx::llm {

// Immutable once built; shared by every matcher over it.
class Grammar {
 public:
  // The JSON texts a schema accepts (JSON Schema 2020-12, the subset structured outputs use):
  // type (one or a list), properties / required / additionalProperties, items with
  // minItems / maxItems, enum, const, anyOf / oneOf, a one-schema allOf, $ref into $defs or
  // definitions (recursion allowed), minLength / maxLength, nullable, and minimum >= 0 (no
  // minus sign). Properties come in the schema's order. Not enforced, as they shape no
  // grammar of bounded size: format, the other numeric bounds, multipleOf, uniqueItems,
  // min/maxProperties. Any other keyword (pattern, not, if, prefixItems, ...) throws
  // rlx::Error naming it and where it sits, all of them at once.
  static std::shared_ptr<const Grammar> from_json_schema(std::string_view schema_json);
  // Any JSON object (OpenAI's response_format {"type": "json_object"}).
  static std::shared_ptr<const Grammar> json_object();
  // Replies made of function calls in a chat template's call format: for hermes,
  // one or more "<tool_call>{"name": N, "arguments": A}</tool_call>" blocks; for json,
  // one {"name": N, "parameters": A} object; N one of the tools' names (or `function`
  // alone when it is named) and A its parameters' schema. `tools` is OpenAI's array.
  static std::shared_ptr<const Grammar> tool_calls(ToolCallFormat format, std::string_view tools,
                                                   const std::string& function = {});
  // A grammar in llama.cpp's GBNF notation (`root ::= ...` rules of "literals", [classes],
  // `.`, groups and * + ? {m,n} repetitions, # comments), starting from rule `root`.
  // Characters are code points, matched as their UTF-8 bytes. Syntax errors name the line
  // and column; every rule used and not defined is listed at once.
  static std::shared_ptr<const Grammar> from_gbnf(std::string_view text,
                                                  const std::string& root = "root");
  // The grammar in a GBNF-like notation, one rule a line (tests and debugging).
  std::string to_string() const;

  struct Impl;
  explicit Grammar(std::shared_ptr<const Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

// Where a text stands in a grammar: the set of parses still open, each a stack of grammar
// positions. Copyable (a copy is a checkpoint).
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> g);
  // Advances over `bytes`; false, and unchanged, when the grammar rejects them.
  bool accept(std::string_view bytes);
  // Whether accept(bytes) would succeed; the matcher does not move.
  bool accepts(std::string_view bytes) const;
  // The bytes so far make a whole document of the grammar.
  bool complete() const;
  // Some byte may still follow.
  bool can_continue() const { return first_bytes_.any(); }
  // The bytes that may come next.
  const std::bitset<256>& next_bytes() const { return first_bytes_; }

 private:
  using Stack = std::vector<uint32_t>;
  std::vector<Stack> step(const std::vector<Stack>& from, uint8_t byte) const;
  void set_stacks(std::vector<Stack> stacks);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Stack> stacks_;
  std::bitset<256> first_bytes_;  // the bytes some stack can take next
};

}  // namespace rlx::llm
