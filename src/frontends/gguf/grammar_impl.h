// A grammar's rules as the builder writes them and as the matcher walks them (grammar.h).
#pragma once
#include <bitset>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/grammar.h"

namespace rlx::llm {

using ByteSet = std::bitset<256>;

// One symbol of an alternative: a byte from a set, or a rule.
struct GrammarSymbol {
  int32_t rule = -1;  // >= 0: a reference to that rule
  ByteSet bytes;
};
using GrammarAlt = std::vector<GrammarSymbol>;

// Rules are added, then filled with their alternatives; a rule may refer to itself or to a
// later one, but never as the first symbol of its own alternatives (no left recursion).
class GrammarBuilder {
 public:
  int32_t rule(std::string name);
  void alt(int32_t rule, GrammarAlt symbols);
  // A rule of these alternatives, in one call.
  int32_t rule(std::string name, std::vector<GrammarAlt> alts);

  static GrammarSymbol ref(int32_t rule) { return {rule, {}}; }
  static GrammarSymbol byte_in(std::string_view chars);  // any of these bytes
  static GrammarSymbol byte_range(uint8_t lo, uint8_t hi);
  static GrammarAlt literal(std::string_view bytes);
  // Concatenation of alternatives' symbols.
  static GrammarAlt cat(std::initializer_list<GrammarAlt> parts);

  // x repeated min..max times (max < 0: no bound), as a chain of right-recursive rules.
  int32_t repeat(const std::string& name, const GrammarAlt& x, int64_t min, int64_t max);

  std::shared_ptr<const Grammar> build(int32_t root) const;

 private:
  std::vector<std::string> names_;
  std::vector<std::vector<GrammarAlt>> rules_;
};

// Code point ranges, inclusive (gbnf_grammar.cc).
using CodePointRanges = std::vector<std::pair<uint32_t, uint32_t>>;
// Alternatives matching exactly the UTF-8 encodings of the code points in `ranges`.
std::vector<GrammarAlt> utf8_alts(const CodePointRanges& ranges);
// Sorted, merged and, for a negated class, complemented over every code point.
CodePointRanges class_ranges(CodePointRanges r, bool negate);

// A Unicode scalar value: at most U+10FFFF and not a surrogate (those have no UTF-8 form).
inline bool is_character(uint32_t cp) { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

// Readers of a grammar's own text (GBNF, regex patterns); `at` moves past what they read.
// The code point of the UTF-8 sequence at text[at], lead and continuation bytes checked, or
// nullopt (at unchanged).
std::optional<uint32_t> read_utf8(std::string_view text, size_t& at);
// The value of the n hex digits at text[at], or nullopt (at on the first that is not one).
std::optional<uint32_t> read_hex(std::string_view text, size_t& at, int n);
// A postfix quantifier * + ? {m} {m,} {m,n} at text[at]: {min, max} (max -1: no bound) with
// `at` past it, or nullopt (at unchanged) where none starts. A malformed count or one over
// 10000 (each counted copy becomes a rule) throws with where(), read at the error's place.
struct Quantifier {
  int64_t min, max;
};
std::optional<Quantifier> read_quantifier(std::string_view text, size_t& at,
                                          const std::function<std::string()>& where);

// A rule for the contents of a JSON string (between its quotes, escaped as JSON escapes
// them) whose text matches the regular expression `pattern` (JSON Schema's `pattern`: an
// ECMA-262 subset, see regex_grammar.cc). Throws rlx::Error naming the place in the pattern.
int32_t regex_string_rule(GrammarBuilder& b, std::string_view pattern);

// The flattened form: every alternative's symbols in one array, each alternative closed by an
// end marker, so a parse position is one index.
struct Grammar::Impl {
  enum class Kind : uint8_t { End, Bytes, Rule };
  struct Element {
    Kind kind;
    uint32_t arg;  // Bytes: index into sets; Rule: the rule
  };
  std::vector<Element> elements;
  std::vector<ByteSet> sets;
  std::vector<std::vector<uint32_t>> alt_starts;  // per rule
  std::vector<std::string> names;
  int32_t root = 0;
};

}  // namespace rlx::llm
