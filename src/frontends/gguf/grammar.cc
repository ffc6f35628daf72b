// Grammars over bytes and their matcher (rlx/grammar.h). Own code: the matcher keeps every
// open parse as a stack of positions, as llama.cpp's grammar sampler does, but walks bytes
// rather than code points, so a token that splits a UTF-8 character is matched like any
// other.
#include <algorithm>
#include <cstdio>

#include "grammar_impl.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

using GrammarImpl = Grammar::Impl;
using GrammarKind = GrammarImpl::Kind;

// More open parses than this means an ambiguous grammar gone wrong, not a document.
constexpr size_t kMaxOpenParses = 1 << 14;

// Rules that can match nothing, then the rules each rule can start with (through a prefix of
// such rules): a rule among its own starts is left recursion, which no matcher can expand.
void check_no_left_recursion(const std::vector<std::vector<GrammarAlt>>& rules,
                             const std::vector<std::string>& names) {
  const size_t n = rules.size();
  std::vector<char> nullable(n, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r)
      if (!nullable[r])
        for (const GrammarAlt& a : rules[r])
          if (std::all_of(a.begin(), a.end(), [&](const GrammarSymbol& s) {
                return s.rule >= 0 && nullable[size_t(s.rule)];
              })) {
            nullable[r] = changed = true;
            break;
          }
  }
  for (size_t r = 0; r < n; ++r) {
    std::vector<char> seen(n, 0);
    std::vector<size_t> todo{r};
    while (!todo.empty()) {
      const size_t at = todo.back();
      todo.pop_back();
      for (const GrammarAlt& a : rules[at])
        for (const GrammarSymbol& s : a) {
          if (s.rule < 0) break;
          RLX_CHECK(size_t(s.rule) != r, "grammar: rule '", names[r], "' is left recursive");
          if (!seen[size_t(s.rule)]) todo.push_back(size_t(s.rule)), seen[size_t(s.rule)] = 1;
          if (!nullable[size_t(s.rule)]) break;
        }
    }
  }
}

// Expands the stack's top until it is a byte set (or the stack is empty: a finished parse),
// adding each result to out.
void expand_parse(const GrammarImpl& g, std::vector<uint32_t>& stack,
                  std::vector<std::vector<uint32_t>>& out) {
  if (stack.empty()) return out.push_back(stack);
  const uint32_t pos = stack.back();
  const GrammarImpl::Element& e = g.elements[pos];
  switch (e.kind) {
    case GrammarKind::Bytes:
      return out.push_back(stack);
    case GrammarKind::End: {
      stack.pop_back();
      expand_parse(g, stack, out);
      stack.push_back(pos);
      return;
    }
    case GrammarKind::Rule: {
      stack.back() = pos + 1;  // where the parse goes on once the rule is matched
      for (uint32_t start : g.alt_starts[e.arg]) {
        stack.push_back(start);
        expand_parse(g, stack, out);
        stack.pop_back();
      }
      stack.back() = pos;
      return;
    }
  }
}

void dedupe_parses(std::vector<std::vector<uint32_t>>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  RLX_CHECK(stacks.size() <= kMaxOpenParses, "grammar: more than ", kMaxOpenParses,
            " open parses; the grammar is too ambiguous");
}

std::string byte_set_text(const ByteSet& s) {
  std::string out = "[";
  auto put = [&](int c) {
    char buf[8];
    if (c >= 0x20 && c < 0x7f && c != ']' && c != '\\' && c != '-')
      out += char(c);
    else
      std::snprintf(buf, sizeof buf, "\\x%02X", c), out += buf;
  };
  for (int c = 0; c < 256; ++c) {
    if (!s.test(size_t(c))) continue;
    int e = c;
    while (e + 1 < 256 && s.test(size_t(e + 1))) ++e;
    put(c);
    if (e > c) out += '-', put(e);
    c = e;
  }
  return out + "]";
}

}  // namespace

int32_t GrammarBuilder::rule(std::string name) {
  names_.push_back(std::move(name));
  rules_.emplace_back();
  return int32_t(rules_.size() - 1);
}

void GrammarBuilder::alt(int32_t rule, GrammarAlt symbols) {
  rules_.at(size_t(rule)).push_back(std::move(symbols));
}

int32_t GrammarBuilder::rule(std::string name, std::vector<GrammarAlt> alts) {
  const int32_t r = rule(std::move(name));
  for (auto& a : alts) alt(r, std::move(a));
  return r;
}

GrammarSymbol GrammarBuilder::byte_in(std::string_view chars) {
  GrammarSymbol s;
  for (char c : chars) s.bytes.set(uint8_t(c));
  return s;
}

GrammarSymbol GrammarBuilder::byte_range(uint8_t lo, uint8_t hi) {
  GrammarSymbol s;
  for (int c = lo; c <= hi; ++c) s.bytes.set(size_t(c));
  return s;
}

GrammarAlt GrammarBuilder::literal(std::string_view bytes) {
  GrammarAlt a;
  for (char c : bytes) a.push_back(byte_in(std::string_view(&c, 1)));
  return a;
}

GrammarAlt GrammarBuilder::cat(std::initializer_list<GrammarAlt> parts) {
  GrammarAlt a;
  for (const GrammarAlt& p : parts) a.insert(a.end(), p.begin(), p.end());
  return a;
}

int32_t GrammarBuilder::repeat(const std::string& name, const GrammarAlt& x, int64_t min,
                               int64_t max) {
  RLX_CHECK(min >= 0 && (max < 0 || max >= min), "grammar: repeat ", min, "..", max);
  // The optional tail: unbounded is one self-recursive rule, bounded a chain of max - min.
  int32_t tail = rule(name + "-rest");
  if (max < 0) {
    alt(tail, cat({x, {ref(tail)}}));
    alt(tail, {});
  } else {
    const int32_t first = tail;
    for (int64_t k = min; k < max; ++k) {
      const int32_t next = k + 1 < max ? rule(name + "-rest") : -1;
      alt(tail, next >= 0 ? cat({x, {ref(next)}}) : x);
      alt(tail, {});
      if (next >= 0) tail = next;
    }
    if (max == min) alt(first, {});
    tail = first;
  }
  GrammarAlt seq;
  for (int64_t k = 0; k < min; ++k) seq.insert(seq.end(), x.begin(), x.end());
  seq.push_back(ref(tail));
  return rule(name, {seq});
}

std::shared_ptr<const Grammar> GrammarBuilder::build(int32_t root) const {
  RLX_CHECK(root >= 0 && size_t(root) < rules_.size(), "grammar: no root rule");
  check_no_left_recursion(rules_, names_);
  auto g = std::make_shared<GrammarImpl>();
  g->root = root;
  g->names = names_;
  g->alt_starts.resize(rules_.size());
  for (size_t r = 0; r < rules_.size(); ++r) {
    RLX_CHECK(!rules_[r].empty(), "grammar: rule '", names_[r], "' has no alternatives");
    for (const GrammarAlt& a : rules_[r]) {
      g->alt_starts[r].push_back(uint32_t(g->elements.size()));
      for (const GrammarSymbol& s : a) {
        if (s.rule >= 0) {
          g->elements.push_back({GrammarKind::Rule, uint32_t(s.rule)});
          continue;
        }
        auto it = std::find(g->sets.begin(), g->sets.end(), s.bytes);
        if (it == g->sets.end()) it = g->sets.insert(g->sets.end(), s.bytes);
        g->elements.push_back({GrammarKind::Bytes, uint32_t(it - g->sets.begin())});
      }
      g->elements.push_back({GrammarKind::End, 0});
    }
  }
  return std::make_shared<Grammar>(std::move(g));
}

Grammar::Grammar(std::shared_ptr<const GrammarImpl> impl) : impl_(std::move(impl)) {}

std::string Grammar::to_string() const {
  const GrammarImpl& g = *impl_;
  std::string out;
  for (size_t r = 0; r < g.alt_starts.size(); ++r) {
    out += g.names[r] + " ::=";
    for (size_t a = 0; a < g.alt_starts[r].size(); ++a) {
      if (a) out += " |";
      for (uint32_t p = g.alt_starts[r][a]; g.elements[p].kind != GrammarKind::End; ++p) {
        const GrammarImpl::Element& e = g.elements[p];
        out += ' ';
        out += e.kind == GrammarKind::Rule ? g.names[e.arg] : byte_set_text(g.sets[e.arg]);
      }
    }
    out += '\n';
  }
  return out;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> g) : grammar_(std::move(g)) {
  RLX_CHECK(grammar_, "GrammarMatcher: no grammar");
  const GrammarImpl& impl = grammar_->impl();
  std::vector<Stack> start;
  for (uint32_t s : impl.alt_starts[size_t(impl.root)]) {
    Stack stack{s};
    expand_parse(impl, stack, start);
  }
  dedupe_parses(start);
  set_stacks(std::move(start));
}

void GrammarMatcher::set_stacks(std::vector<Stack> stacks) {
  stacks_ = std::move(stacks);
  first_bytes_.reset();
  const GrammarImpl& g = grammar_->impl();
  for (const Stack& s : stacks_)
    if (!s.empty()) first_bytes_ |= g.sets[g.elements[s.back()].arg];
}

std::vector<GrammarMatcher::Stack> GrammarMatcher::step(const std::vector<Stack>& from,
                                                        uint8_t byte) const {
  const GrammarImpl& g = grammar_->impl();
  std::vector<Stack> out;
  for (const Stack& s : from) {
    if (s.empty() || !g.sets[g.elements[s.back()].arg].test(byte)) continue;
    Stack next = s;
    ++next.back();
    expand_parse(g, next, out);
  }
  dedupe_parses(out);
  return out;
}

bool GrammarMatcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  if (!first_bytes_.test(uint8_t(bytes[0]))) return false;
  std::vector<Stack> at = stacks_;
  for (char c : bytes) {
    at = step(at, uint8_t(c));
    if (at.empty()) return false;
  }
  set_stacks(std::move(at));
  return true;
}

bool GrammarMatcher::accepts(std::string_view bytes) const {
  if (bytes.empty()) return true;
  if (!first_bytes_.test(uint8_t(bytes[0]))) return false;
  std::vector<Stack> at = step(stacks_, uint8_t(bytes[0]));
  for (size_t i = 1; i < bytes.size() && !at.empty(); ++i) at = step(at, uint8_t(bytes[i]));
  return !at.empty();
}

bool GrammarMatcher::complete() const {
  return std::any_of(stacks_.begin(), stacks_.end(), [](const Stack& s) { return s.empty(); });
}

}  // namespace rlx::llm
