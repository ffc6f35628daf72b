// GBNF (llama.cpp's grammar notation) to rlx's byte-level grammar. Own code,
// following the notation as llama.cpp's grammars/README.md describes it:
// `name ::= alternatives` rules, "literals" and [character classes] with
// escapes, `.`, ( groups ), * + ? {m} {m,} {m,n}, # comments; a rule's body
// may go on over lines only after a `|` or inside parentheses. Characters
// are Unicode code points, so a class becomes alternatives of UTF-8 byte
// ranges covering exactly its code points (no surrogates, none past U+10FFFF).
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "frontends/gguf/grammar_impl.h"
#include "frontends/gguf/unicode.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

using B = GrammarBuilder;
using Ranges = CodePointRanges;

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A code point's UTF-8 bytes as values: the lead byte's payload, then 6 bits a byte.
std::vector<uint32_t> utf8_digits(uint32_t cp, int len) {
  std::vector<uint32_t> d(static_cast<size_t>(len));
  for (int i = len - 1; i > 0; --i, cp >>= 6) d[size_t(i)] = cp & 0x3F;
  d[0] = cp;
  return d;
}

// The byte set of digit values [lo, hi] at byte position i of a len-byte encoding.
GrammarSymbol utf8_digit_bytes(int len, int i, uint32_t lo, uint32_t hi) {
  const uint32_t base = i > 0 ? 0x80 : len == 1 ? 0 : (0xF00u >> len) & 0xFF;
  return B::byte_range(uint8_t(base | lo), uint8_t(base | hi));
}

// Alternatives for the len-byte encodings from digits a to digits b (a <= b, equal before
// position i), each a run of byte ranges: the usual split of a range of numbers into
// prefix + [range] + any... patterns, in base 64.
void encodings_between(const std::vector<uint32_t>& a, const std::vector<uint32_t>& b, int i,
                       GrammarAlt prefix, std::vector<GrammarAlt>& out) {
  const int len = int(a.size());
  if (i == len) {
    out.push_back(std::move(prefix));
    return;
  }
  auto with = [&](GrammarSymbol s) {
    GrammarAlt p = prefix;
    p.push_back(s);
    return p;
  };
  if (a[size_t(i)] == b[size_t(i)])
    return encodings_between(a, b, i + 1,
                             with(utf8_digit_bytes(len, i, a[size_t(i)], a[size_t(i)])), out);
  bool a_low = true, b_high = true;  // a's tail all zeros, b's tail all ones
  for (int j = i + 1; j < len; ++j) {
    a_low = a_low && a[size_t(j)] == 0;
    b_high = b_high && b[size_t(j)] == 0x3F;
  }
  if (!a_low) {
    std::vector<uint32_t> top = a;
    for (int j = i + 1; j < len; ++j) top[size_t(j)] = 0x3F;
    encodings_between(a, top, i + 1, with(utf8_digit_bytes(len, i, a[size_t(i)], a[size_t(i)])),
                      out);
  }
  const uint32_t from = a[size_t(i)] + (a_low ? 0 : 1), to = b[size_t(i)] - (b_high ? 0 : 1);
  if (from <= to) {
    GrammarAlt p = with(utf8_digit_bytes(len, i, from, to));
    for (int j = i + 1; j < len; ++j) p.push_back(utf8_digit_bytes(len, j, 0, 0x3F));
    out.push_back(std::move(p));
  }
  if (!b_high) {
    std::vector<uint32_t> bottom = b;
    for (int j = i + 1; j < len; ++j) bottom[size_t(j)] = 0;
    encodings_between(bottom, b, i + 1, with(utf8_digit_bytes(len, i, b[size_t(i)], b[size_t(i)])),
                      out);
  }
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  std::shared_ptr<const Grammar> parse(const std::string& root) {
    skip(true);
    while (at_ < s_.size()) {
      const std::string name = name_here();
      RLX_CHECK(!name.empty(), where(), ": expected a rule name");
      skip(false);
      RLX_CHECK(s_.substr(at_, 3) == "::=", where(), ": expected '::=' after '", name, "'");
      at_ += 3;
      skip(true);
      const int32_t r = rule_id(name);
      RLX_CHECK(defined_.insert(name).second, where(), ": rule '", name, "' is defined twice");
      for (GrammarAlt& alt : alternatives(name, false)) b_.alt(r, std::move(alt));
      skip(false);
      RLX_CHECK(at_ >= s_.size() || s_[at_] == '\n', where(), ": unexpected '", s_[at_], "'");
      skip(true);
    }
    std::string undefined;
    for (const auto& [name, line] : used_)
      if (!defined_.count(name))
        undefined +=
            (undefined.empty() ? "" : ", ") + name + " (line " + std::to_string(line) + ")";
    RLX_CHECK(undefined.empty(), "GBNF grammar: undefined rules: ", undefined);
    RLX_CHECK(defined_.count(root), "GBNF grammar: no rule '", root, "' to start from");
    return b_.build(rule_id(root));
  }

 private:
  std::string where() const {
    int64_t line = 1, col = 1;
    for (size_t i = 0; i < at_ && i < s_.size(); ++i) {
      col = s_[i] == '\n' ? 1 : col + 1;
      line += s_[i] == '\n';
    }
    return "GBNF grammar, line " + std::to_string(line) + ", column " + std::to_string(col);
  }

  // Blanks and comments; newlines too when `newlines`.
  void skip(bool newlines) {
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c == '#') {
        while (at_ < s_.size() && s_[at_] != '\n') ++at_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++at_;
      } else {
        break;
      }
    }
  }

  static bool name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  }
  std::string name_here() {
    const size_t from = at_;
    while (at_ < s_.size() && name_char(s_[at_])) ++at_;
    return std::string(s_.substr(from, at_ - from));
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    return ids_[name] = b_.rule(name);
  }

  // One code point of a literal or class (escapes decoded); at_ moves past it.
  uint32_t code_point() {
    RLX_CHECK(at_ < s_.size(), where(), ": unexpected end of the grammar");
    const unsigned char c = static_cast<unsigned char>(s_[at_]);
    if (c == '\\') {
      RLX_CHECK(at_ + 1 < s_.size(), where(), ": a '\\' ends the grammar");
      const char e = s_[at_ + 1];
      at_ += 2;
      switch (e) {
        case 'n':
          return '\n';
        case 'r':
          return '\r';
        case 't':
          return '\t';
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
          return uint32_t(e);
        case 'x':
          return hex_digits(2);
        case 'u':
          return hex_digits(4);
        case 'U':
          return hex_digits(8);
        default:
          throw make_error(where(), ": unknown escape '\\", e, "'");
      }
    }
    // A UTF-8 sequence in the grammar's own text.
    const std::optional<uint32_t> cp = read_utf8(s_, at_);
    RLX_CHECK(cp, where(), ": invalid UTF-8");
    return *cp;
  }
  uint32_t hex_digits(int n) {
    const std::optional<uint32_t> v = read_hex(s_, at_, n);
    RLX_CHECK(v, where(), ": expected ", n, " hex digits");
    RLX_CHECK(is_character(*v), where(), ": U+", std::hex, *v, " is not a character");
    return *v;
  }

  // A rule of the given alternatives (a class, a group), returned as a reference.
  GrammarSymbol sub_rule(const std::string& hint, std::vector<GrammarAlt> alts) {
    return B::ref(b_.rule(hint + "-" + std::to_string(++subs_), std::move(alts)));
  }

  // alternatives := sequence ('|' sequence)*; inside parentheses newlines are blanks.
  std::vector<GrammarAlt> alternatives(const std::string& name, bool nested) {
    std::vector<GrammarAlt> alts{sequence(name, nested)};
    while (at_ < s_.size() && s_[at_] == '|') {
      ++at_;
      skip(true);
      alts.push_back(sequence(name, nested));
    }
    return alts;
  }

  GrammarAlt sequence(const std::string& name, bool nested) {
    GrammarAlt seq;
    for (;;) {
      skip(nested);
      if (at_ >= s_.size()) break;
      const char c = s_[at_];
      if (c == '|' || c == ')' || c == '\n') break;
      GrammarAlt item;  // one element: bytes, or a reference
      if (c == '"') {
        ++at_;
        std::string bytes;
        while (at_ < s_.size() && s_[at_] != '"') tok::append_utf8(bytes, code_point());
        RLX_CHECK(at_ < s_.size(), where(), ": unterminated string");
        ++at_;
        item = B::literal(bytes);
      } else if (c == '[') {
        ++at_;
        const bool negate = at_ < s_.size() && s_[at_] == '^';
        at_ += negate;
        Ranges ranges;
        while (at_ < s_.size() && s_[at_] != ']') {
          const uint32_t lo = code_point();
          uint32_t hi = lo;
          if (at_ + 1 < s_.size() && s_[at_] == '-' && s_[at_ + 1] != ']') {
            ++at_;
            hi = code_point();
            RLX_CHECK(hi >= lo, where(), ": class range ends before it starts");
          }
          ranges.emplace_back(lo, hi);
        }
        RLX_CHECK(at_ < s_.size(), where(), ": unterminated character class");
        ++at_;
        item = {sub_rule(name, utf8_alts(class_ranges(ranges, negate)))};
      } else if (c == '.') {
        ++at_;
        item = {sub_rule(name, utf8_alts(class_ranges({}, true)))};
      } else if (c == '(') {
        ++at_;
        RLX_CHECK(++depth_ <= kMaxDepth, where(), ": groups nested deeper than ", kMaxDepth);
        skip(true);
        auto alts = alternatives(name, true);
        --depth_;
        skip(true);
        RLX_CHECK(at_ < s_.size() && s_[at_] == ')', where(), ": expected ')'");
        ++at_;
        item = {sub_rule(name, std::move(alts))};
      } else if (name_char(c)) {
        const std::string ref = name_here();
        skip(nested);
        RLX_CHECK(s_.substr(at_, 3) != "::=", where(), ": a new rule '", ref,
                  "' starts inside the last one (its body ended without a newline)");
        used_.emplace(ref, line_here());
        item = {B::ref(rule_id(ref))};
      } else {
        throw make_error(where(), ": unexpected '", c, "'");
      }
      repetition(name, item);
      seq.insert(seq.end(), item.begin(), item.end());
    }
    return seq;
  }

  int64_t line_here() const { return 1 + std::count(s_.begin(), s_.begin() + long(at_), '\n'); }

  // A postfix * + ? {m} {m,} {m,n} on `item`, which becomes a reference to the repetition.
  void repetition(const std::string& name, GrammarAlt& item) {
    const auto q = read_quantifier(s_, at_, [this] { return where(); });
    if (!q) return;
    item = {B::ref(b_.repeat(name + "-rep-" + std::to_string(++subs_), item, q->min, q->max))};
  }

  // Bound for text from a request: nesting is recursion here.
  static constexpr int kMaxDepth = 64;
  std::string_view s_;
  size_t at_ = 0;
  int depth_ = 0;
  GrammarBuilder b_;
  std::map<std::string, int32_t> ids_;
  std::set<std::string> defined_;
  std::multimap<std::string, int64_t> used_;  // referenced rules and where
  int subs_ = 0;
};

}  // namespace

std::vector<GrammarAlt> utf8_alts(const CodePointRanges& ranges) {
  std::vector<GrammarAlt> out;
  const uint32_t limits[] = {0x7F, 0x7FF, 0xFFFF, kMaxCodePoint};
  for (auto [lo, hi] : ranges) {
    uint32_t first = 0;
    for (int len = 1; len <= 4; ++len) {
      const uint32_t a = std::max(lo, first), b = std::min(hi, limits[len - 1]);
      first = limits[len - 1] + 1;
      if (a > b) continue;
      if (len == 3 && a <= 0xDFFF && b >= 0xD800) {  // surrogates have no encoding
        if (a < 0xD800) encodings_between(utf8_digits(a, 3), utf8_digits(0xD7FF, 3), 0, {}, out);
        if (b > 0xDFFF) encodings_between(utf8_digits(0xE000, 3), utf8_digits(b, 3), 0, {}, out);
        continue;
      }
      encodings_between(utf8_digits(a, len), utf8_digits(b, len), 0, {}, out);
    }
  }
  return out;
}

std::optional<uint32_t> read_utf8(std::string_view text, size_t& at) {
  if (at >= text.size()) return std::nullopt;
  const unsigned char c = static_cast<unsigned char>(text[at]);
  const int len = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : c >> 3 == 30 ? 4 : 0;
  if (len == 0 || at + size_t(len) > text.size()) return std::nullopt;
  uint32_t cp = len == 1 ? c : c & (0x7F >> len);
  for (int i = 1; i < len; ++i) {
    const unsigned char k = static_cast<unsigned char>(text[at + size_t(i)]);
    if (k >> 6 != 2) return std::nullopt;
    cp = cp << 6 | (k & 0x3F);
  }
  at += size_t(len);
  return cp;
}

std::optional<uint32_t> read_hex(std::string_view text, size_t& at, int n) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i, ++at) {
    if (at >= text.size() || !std::isxdigit(static_cast<unsigned char>(text[at])))
      return std::nullopt;
    const char h = text[at];
    v = v * 16 + uint32_t(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
  }
  return v;
}

std::optional<Quantifier> read_quantifier(std::string_view text, size_t& at,
                                          const std::function<std::string()>& where) {
  constexpr int64_t kMaxCount = 10000;
  if (at >= text.size()) return std::nullopt;
  const char c = text[at];
  if (c == '*' || c == '+' || c == '?') {
    ++at;
    return Quantifier{c == '+' ? 1 : 0, c == '?' ? 1 : -1};
  }
  if (c != '{') return std::nullopt;
  ++at;
  auto number = [&] {
    const size_t from = at;
    while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
    RLX_CHECK(at > from && at - from < 7, where(), ": expected a count in { }");
    return std::stoll(std::string(text.substr(from, at - from)));
  };
  Quantifier q;
  q.min = q.max = number();
  if (at < text.size() && text[at] == ',') {
    ++at;
    q.max = at < text.size() && text[at] == '}' ? -1 : number();
  }
  RLX_CHECK(at < text.size() && text[at] == '}' && (q.max < 0 || q.max >= q.min), where(),
            ": expected {m}, {m,} or {m,n} with n >= m");
  RLX_CHECK(std::max(q.min, q.max) <= kMaxCount, where(), ": a count over ", kMaxCount,
            " (each counted copy is a rule)");
  ++at;
  return q;
}

CodePointRanges class_ranges(CodePointRanges r, bool negate) {
  std::sort(r.begin(), r.end());
  CodePointRanges merged;
  for (auto [lo, hi] : r) {
    if (!merged.empty() && lo <= merged.back().second + 1)
      merged.back().second = std::max(merged.back().second, hi);
    else
      merged.emplace_back(lo, hi);
  }
  if (!negate) return merged;
  CodePointRanges out;
  uint32_t next = 0;
  for (auto [lo, hi] : merged) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

std::shared_ptr<const Grammar> Grammar::from_gbnf(std::string_view text, const std::string& root) {
  return GbnfParser(text).parse(root);
}

}  // namespace rlx::llm
