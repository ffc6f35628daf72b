// JSON Schema's `pattern` (an ECMA-262 regular expression) as grammar rules over
// the contents of a JSON string. Own code. The subset: literals, `.`, classes
// [...] and [^...] with ranges, the escapes \d \D \w \W \s \S \n \r \t \v \f
// \0 \xHH \uHHHH and escaped punctuation, groups (...), (?:...) and
// (?<name>...), alternation |, and the quantifiers * + ? {m} {m,} {m,n}
// (a lazy ? after one matches the same strings). Not taken, with an error
// that says so: lookarounds, backreferences, word boundaries, \p{...}, and
// ^ or $ anywhere but at the ends of the pattern's top-level alternatives.
//
// As JSON Schema says, a pattern matches anywhere in the string: without ^
// (or $) any text may come before (or after) it. The grammar describes the
// string as written in JSON, so each character it allows is allowed in the
// form a JSON encoder writes it: `"` and `\` escaped, control characters as
// \n \r \t or \u00XX, everything else as its UTF-8 bytes.
#include <algorithm>
#include <cctype>
#include <map>

#include "frontends/gguf/grammar_impl.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

using B = GrammarBuilder;

// The JSON form of a character that cannot stand for itself inside a string.
std::string json_escape(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default: {
      static const char* hex = "0123456789abcdef";
      return std::string("\\u00") + hex[cp >> 4] + hex[cp & 15];
    }
  }
}

bool needs_escape(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\'; }

class RegexGrammar {
 public:
  RegexGrammar(GrammarBuilder& b, std::string_view pattern) : b_(b), p_(pattern) {}

  // The top level's alternatives, each anchored by its own ^ and $ (as in ECMAScript,
  // ^a|b$ is "starts with a" or "ends with b").
  int32_t parse() {
    const GrammarSymbol any =
        B::ref(b_.repeat("pattern-any", {chars(class_ranges({}, true))}, 0, -1));
    std::vector<GrammarAlt> alts;
    depth_ = 1;
    do {
      const bool from_start = eat('^');
      GrammarAlt seq = sequence();
      const bool to_end = eat('$');
      if (!from_start) seq.insert(seq.begin(), any);
      if (!to_end) seq.push_back(any);
      alts.push_back(std::move(seq));
    } while (eat('|'));
    RLX_CHECK(at_ == p_.size(), where(), ": unbalanced ')'");
    return b_.rule("pattern-string", std::move(alts));
  }

 private:
  std::string where() const {
    return "pattern \"" + std::string(p_) + "\" at offset " + std::to_string(at_);
  }
  bool eat(char c) {
    if (at_ < p_.size() && p_[at_] == c) return ++at_, true;
    return false;
  }
  bool at_end_of_sequence() const {
    return at_ == p_.size() || p_[at_] == '|' || p_[at_] == ')' ||
           (p_[at_] == '$' && depth_ == 1 && (at_ + 1 == p_.size() || p_[at_ + 1] == '|'));
  }

  std::vector<GrammarAlt> alternatives() {
    RLX_CHECK(++depth_ <= kMaxDepth, where(), ": groups nested deeper than ", kMaxDepth);
    std::vector<GrammarAlt> alts{sequence()};
    while (eat('|')) alts.push_back(sequence());
    --depth_;
    return alts;
  }

  GrammarAlt sequence() {
    GrammarAlt seq;
    while (!at_end_of_sequence()) {
      GrammarAlt item = atom();
      repetition(item);
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  GrammarAlt atom() {
    const char c = p_[at_];
    if (c == '(') {
      ++at_;
      if (eat('?')) {
        if (eat('<') && at_ < p_.size() && p_[at_] != '=' && p_[at_] != '!') {
          while (at_ < p_.size() && p_[at_] != '>') ++at_;  // a named group: its name
          RLX_CHECK(eat('>'), where(), ": a group name without '>'");
        } else {
          RLX_CHECK(eat(':'), where(), ": lookarounds are not supported");
        }
      }
      std::vector<GrammarAlt> alts = alternatives();
      RLX_CHECK(eat(')'), where(), ": '(' without ')'");
      return {B::ref(b_.rule("pattern-group", std::move(alts)))};
    }
    if (c == '[') {
      ++at_;
      return {chars(char_class())};
    }
    if (c == '.') {
      ++at_;  // any character but a line terminator
      return {chars(class_ranges({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true))};
    }
    RLX_CHECK(c != '*' && c != '+' && c != '?' && c != '{', where(), ": '", c, "' repeats nothing");
    RLX_CHECK(c != '^' && c != '$', where(), ": '", c,
              "' is supported only at the ends of the pattern's alternatives");
    if (c == '\\') {
      CodePointRanges set;
      if (class_escape(set)) return {chars(set)};
      return literal(set.front().first);
    }
    return literal(code_point());
  }

  // A single character (a surrogate or a value past U+10FFFF has no UTF-8 form to match).
  GrammarAlt literal(uint32_t cp) {
    RLX_CHECK(is_character(cp), where(), ": U+", std::hex, cp, " is not a character");
    if (needs_escape(cp)) return B::literal(json_escape(cp));
    return utf8_alts({{cp, cp}}).front();
  }

  // One code point of the pattern's UTF-8 text.
  uint32_t code_point() {
    const std::optional<uint32_t> cp = read_utf8(p_, at_);
    RLX_CHECK(cp, where(), ": invalid UTF-8");
    return *cp;
  }

  uint32_t hex(int n) {
    const std::optional<uint32_t> v = read_hex(p_, at_, n);
    RLX_CHECK(v, where(), ": expected ", n, " hex digits");
    return *v;
  }

  // An escape at at_ (a '\'): a class escape's ranges (true), or one code point as the
  // single range of `set` (false).
  bool class_escape(CodePointRanges& set) {
    ++at_;
    RLX_CHECK(at_ < p_.size(), where(), ": a '\\' ends the pattern");
    const char e = p_[at_++];
    static const CodePointRanges digit{{'0', '9'}};
    static const CodePointRanges word{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
    static const CodePointRanges space{
        {'\t', '\r'},     {' ', ' '},       {0xa0, 0xa0},     {0x1680, 0x1680}, {0x2000, 0x200a},
        {0x2028, 0x2029}, {0x202f, 0x202f}, {0x205f, 0x205f}, {0x3000, 0x3000}, {0xfeff, 0xfeff}};
    auto single = [&](uint32_t cp) {
      set = {{cp, cp}};
      return false;
    };
    switch (e) {
      case 'd':
      case 'D':
        set = class_ranges(digit, e == 'D');
        return true;
      case 'w':
      case 'W':
        set = class_ranges(word, e == 'W');
        return true;
      case 's':
      case 'S':
        set = class_ranges(space, e == 'S');
        return true;
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 't':
        return single('\t');
      case 'v':
        return single('\v');
      case 'f':
        return single('\f');
      case '0':
        return single(0);
      case 'x':
        return single(hex(2));
      case 'u':
        return single(hex(4));
      default:
        RLX_CHECK(!std::isalnum(static_cast<unsigned char>(e)), where(), ": '\\", e,
                  "' is not supported (backreferences, \\b, \\p{...} and the like)");
        --at_;
        return single(code_point());  // escaped punctuation stands for itself
    }
  }

  // The code points of a class after its '[', up to and past its ']'.
  CodePointRanges char_class() {
    const bool negate = eat('^');
    CodePointRanges set;
    while (true) {  // as in ECMAScript, [] matches nothing and [^] anything
      RLX_CHECK(at_ < p_.size(), where(), ": '[' without ']'");
      if (p_[at_] == ']') break;
      CodePointRanges item;
      if (p_[at_] == '\\') {
        if (class_escape(item)) {
          set.insert(set.end(), item.begin(), item.end());
          continue;
        }
      } else {
        item = {{code_point(), 0}};
        item[0].second = item[0].first;
      }
      uint32_t lo = item[0].first, hi = lo;
      if (at_ + 1 < p_.size() && p_[at_] == '-' && p_[at_ + 1] != ']') {
        ++at_;
        CodePointRanges end;
        if (p_[at_] == '\\') {
          RLX_CHECK(!class_escape(end), where(), ": a range ends in a class escape");
          hi = end[0].first;
        } else {
          hi = code_point();
        }
        RLX_CHECK(hi >= lo, where(), ": a class range ends before it starts");
      }
      set.emplace_back(lo, hi);
    }
    ++at_;  // the ']'
    return class_ranges(set, negate);
  }

  // One character of `set` as JSON writes it (a rule, shared by equal sets).
  GrammarSymbol chars(const CodePointRanges& set) {
    std::string key;
    for (auto [lo, hi] : set) key += std::to_string(lo) + "-" + std::to_string(hi) + ",";
    if (auto it = sets_.find(key); it != sets_.end()) return B::ref(it->second);
    // The characters that need an escape as their escapes, the rest as UTF-8.
    static const CodePointRanges escaped{{0, 0x1f}, {'"', '"'}, {'\\', '\\'}};
    CodePointRanges plain;
    std::vector<GrammarAlt> alts;
    for (auto [lo, hi] : set) {
      for (uint32_t cp = lo; cp <= std::min<uint32_t>(hi, '\\'); ++cp)
        if (needs_escape(cp)) alts.push_back(B::literal(json_escape(cp)));
      uint32_t from = lo;
      for (auto [elo, ehi] : escaped) {
        if (ehi < from) continue;
        if (elo > hi) break;
        if (elo > from) plain.emplace_back(from, elo - 1);
        from = ehi + 1;
      }
      if (from <= hi) plain.emplace_back(from, hi);
    }
    for (GrammarAlt& a : utf8_alts(plain)) alts.push_back(std::move(a));
    RLX_CHECK(!alts.empty(), where(), ": a class that matches nothing");
    const int32_t r = b_.rule("pattern-char", std::move(alts));
    sets_.emplace(key, r);
    return B::ref(r);
  }

  void repetition(GrammarAlt& item) {
    const auto q = read_quantifier(p_, at_, [this] { return where(); });
    if (!q) return;
    eat('?');  // lazy: the same strings
    RLX_CHECK(at_ >= p_.size() || (p_[at_] != '*' && p_[at_] != '+' && p_[at_] != '{'), where(),
              ": a quantifier on a quantifier");
    item = {B::ref(b_.repeat("pattern-rep", item, q->min, q->max))};
  }

  // Bound for text from a request, as for GBNF grammars.
  static constexpr int kMaxDepth = 64;
  GrammarBuilder& b_;
  std::string_view p_;
  size_t at_ = 0;
  int depth_ = 0;
  std::map<std::string, int32_t> sets_;
};

}  // namespace

int32_t regex_string_rule(GrammarBuilder& b, std::string_view pattern) {
  return RegexGrammar(b, pattern).parse();
}

}  // namespace rlx::llm
