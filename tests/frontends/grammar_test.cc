// Grammars from JSON Schemas and their matcher: documents the schema accepts pass byte by
// byte, documents it rejects fail at the first wrong byte, random walks through a grammar
// produce JSON that nlohmann parses and that matches the schema (checked by hand below, not
// by the grammar), and unsupported schemas fail naming every problem. GBNF grammars
// (llama.cpp's notation): what they accept and reject, character classes as exactly their
// code points' UTF-8 encodings, errors naming the place or every undefined rule.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <regex>

#include "rlx/error.h"
#include "rlx/grammar.h"

namespace rlx {
namespace {

using llm::Grammar;
using llm::GrammarMatcher;
using nlohmann::ordered_json;

bool matches(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  GrammarMatcher m(g);
  return m.accept(text) && m.complete();
}

// A document built byte by byte: each step a byte the matcher takes, drawn at random; once
// the document is complete it ends with probability `stop`. Empty when it runs past max_len.
std::string random_document(const std::shared_ptr<const Grammar>& g, std::mt19937& rng, double stop,
                            size_t max_len) {
  GrammarMatcher m(g);
  std::string out;
  while (out.size() < max_len) {
    if (m.complete() && (!m.can_continue() || std::uniform_real_distribution<>(0, 1)(rng) < stop))
      return out;
    std::vector<char> next;
    for (int c = 0; c < 256; ++c)
      if (m.accepts(std::string(1, char(c)))) next.push_back(char(c));
    EXPECT_FALSE(next.empty()) << "a prefix with no way on: " << out;
    if (next.empty()) return "";
    const char c = next[std::uniform_int_distribution<size_t>(0, next.size() - 1)(rng)];
    EXPECT_TRUE(m.accept(std::string(1, c)));
    out += c;
  }
  return "";
}

TEST(Grammar, JsonObjectAcceptsObjectsOnly) {
  const auto g = Grammar::json_object();
  for (const char* ok : {"{}", " {\"a\": 1}", "{\"a\":[1, 2.5e-3, true, null, \"x\\n\"]}\n",
                         "{\"k\": {\"n\": {}}, \"s\": \"\\u00e9\xc3\xa9\"}", "{\n  \"a\": -0\n}"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"[]", "1", "{\"a\"}", "{\"a\": 01}", "{'a': 1}", "{\"a\": 1,}",
                          "{\"a\": tru}", "{\"a\": \"\x01\"}", "{\"a\": \"\\x\"}", "{} {}",
                          "{\"a\": \"\xff\"}", "{\"a\": 1}          x"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  // Prefixes are accepted but not complete; the matcher stays put on a rejected byte.
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("{\"a\": [1"));
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.accept("}"));
  EXPECT_TRUE(m.accepts("]}"));
  EXPECT_TRUE(m.accept("]}"));
  EXPECT_TRUE(m.complete());
  // Whitespace is bounded: a newline and at most 20 blanks between tokens.
  EXPECT_TRUE(matches(g, "{\n" + std::string(20, ' ') + "}"));
  EXPECT_FALSE(matches(g, "{\n" + std::string(21, ' ') + "}"));
}

const char* kPersonSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 4},
    "age": {"type": "integer", "minimum": 0},
    "role": {"enum": ["admin", "user", null]},
    "tags": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
    "kind": {"const": "person"},
    "note": {"type": ["string", "null"], "maxLength": 2}
  },
  "required": ["name", "kind"],
  "additionalProperties": false
})";

TEST(Grammar, SchemaKeywordsShapeTheDocument) {
  const auto g = Grammar::from_json_schema(kPersonSchema);
  for (const char* ok : {R"({"name": "ab", "kind": "person"})",
                         R"({"name":"a","age":0,"role":null,"tags":[true],"kind":"person"})",
                         "{\"name\": \"abcd\", \"age\": 42, \"role\": \"user\",\n"
                         "  \"tags\": [false, true], \"kind\": \"person\", \"note\": null}",
                         R"({"name": "x", "kind": "person", "note": "hi"})"})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad :
       {R"({"kind": "person"})",                                           // name is required
        R"({"name": "", "kind": "person"})",                               // minLength
        R"({"name": "abcde", "kind": "person"})",                          // maxLength
        R"({"name": "a", "age": -1, "kind": "person"})",                   // minimum 0
        R"({"name": "a", "age": 1.5, "kind": "person"})",                  // integer
        R"({"name": "a", "role": "root", "kind": "person"})",              // enum
        R"({"name": "a", "tags": [], "kind": "person"})",                  // minItems
        R"({"name": "a", "tags": [1], "kind": "person"})",                 // items
        R"({"name": "a", "tags": [true, true, true], "kind": "person"})",  // maxItems
        R"({"name": "a", "kind": "robot"})",                               // const
        R"({"kind": "person", "name": "a"})",                              // the schema's order
        R"({"name": "a", "kind": "person", "extra": 1})",                  // additionalProperties
        R"({"name": "a", "kind": "person", "note": "abc"})"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

// Random documents of the person schema parse as JSON and satisfy it, as checked by hand.
TEST(Grammar, RandomWalksMakeValidDocuments) {
  const auto g = Grammar::from_json_schema(kPersonSchema);
  std::mt19937 rng(7);
  int made = 0;
  for (int i = 0; i < 200; ++i) {
    const std::string doc = random_document(g, rng, 0.5, 4000);
    if (doc.empty()) continue;
    ++made;
    const ordered_json j = ordered_json::parse(doc, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << doc;
    ASSERT_TRUE(j.is_object()) << doc;
    ASSERT_TRUE(j.contains("name") && j["name"].is_string()) << doc;
    const size_t n = j["name"].get<std::string>().size();  // bytes: >= characters
    EXPECT_GE(n, 1u) << doc;
    EXPECT_EQ(j["kind"], "person") << doc;
    for (const auto& [k, v] : j.items()) {
      if (k == "age") {
        EXPECT_TRUE(v.is_number_integer() && v.get<int64_t>() >= 0) << doc;
      }
      if (k == "role") {
        EXPECT_TRUE(v.is_null() || v == "admin" || v == "user") << doc;
      }
      if (k == "tags") {
        EXPECT_TRUE(v.is_array() && !v.empty() && v.size() <= 2) << doc;
        for (const auto& t : v) EXPECT_TRUE(t.is_boolean()) << doc;
      }
      if (k == "note") {
        EXPECT_TRUE(v.is_null() || v.is_string()) << doc;
      }
      EXPECT_TRUE(k == "name" || k == "age" || k == "role" || k == "tags" || k == "kind" ||
                  k == "note")
          << doc;
    }
  }
  EXPECT_GT(made, 150);
}

TEST(Grammar, RefsAnyOfAndRecursion) {
  const auto g = Grammar::from_json_schema(R"({
    "$defs": {"node": {"type": "object", "properties": {
      "v": {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
      "required": ["v"]}},
    "$ref": "#/$defs/node"})");
  EXPECT_TRUE(matches(g, R"({"v": 1, "kids": [{"v": "a"}, {"v": 2, "kids": [{"v": 3}]}]})"));
  EXPECT_FALSE(matches(g, R"({"v": 1, "kids": [{"v": "ab"}]})"));
  EXPECT_FALSE(matches(g, R"({"v": 1, "kids": [{"w": 1}]})"));
  // Without properties, an object takes any members; `true` and {} are any value.
  const auto any = Grammar::from_json_schema(R"({"type": "object"})");
  EXPECT_TRUE(matches(any, R"({"x": [1, {"y": null}]})"));
  EXPECT_TRUE(matches(Grammar::from_json_schema("true"), "[1, \"a\"]"));
  EXPECT_TRUE(matches(Grammar::from_json_schema("{}"), "-1.5E+3"));
  // additionalProperties as a schema.
  const auto extra = Grammar::from_json_schema(
      R"({"properties": {"a": {"type": "null"}}, "additionalProperties": {"type": "boolean"}})");
  EXPECT_TRUE(matches(extra, R"({"a": null, "b": true, "c": false})"));
  EXPECT_TRUE(matches(extra, R"({"b": true})"));
  EXPECT_FALSE(matches(extra, R"({"a": null, "b": 1})"));
}

TEST(Grammar, UnsupportedSchemasNameEveryProblem) {
  try {
    Grammar::from_json_schema(R"({"type": "object", "properties": {
      "zip": {"type": "string", "pattern": "^[0-9]+(?=x)$"},
      "n": {"not": {"type": "null"}},
      "t": {"type": "tuple"},
      "r": {"$ref": "#/$defs/missing"}}})");
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("4 problems"), std::string::npos) << m;
    EXPECT_NE(m.find("#/properties/zip: pattern \"^[0-9]+(?=x)$\" at offset 9: lookarounds are "
                     "not supported"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("#/properties/n: 'not' is not supported"), std::string::npos) << m;
    EXPECT_NE(m.find("unknown type 'tuple'"), std::string::npos) << m;
    EXPECT_NE(m.find("#/$defs/missing names nothing"), std::string::npos) << m;
  }
  EXPECT_THROW(Grammar::from_json_schema("{\"type\": "), Error);
  EXPECT_THROW(Grammar::from_json_schema("false"), Error);
  // A schema that is only a reference to itself has no first byte: left recursion.
  EXPECT_THROW(Grammar::from_json_schema(R"({"$ref": "#"})"), Error);
}

std::shared_ptr<const Grammar> pattern_schema(const std::string& pattern) {
  return Grammar::from_json_schema(ordered_json{{"type", "string"}, {"pattern", pattern}}.dump());
}

// A string schema's `pattern`: the string's JSON text, escapes and all, against the regular
// expression, anchored only where it says ^ or $.
TEST(Grammar, PatternsMatchTheirStrings) {
  struct Case {
    const char* pattern;
    std::vector<const char*> accept, reject;  // JSON texts
  };
  const Case cases[] = {
      {"^[0-9]{3}-[0-9]{4}$", {R"("555-1234")"}, {R"("5551234")", R"("555-12345")", R"("")"}},
      {"ab", {R"("ab")", R"("xxabyy")"}, {R"("a")", R"("xaxb")"}},
      {"^(cat|dog)s?$", {R"("cat")", R"("dogs")"}, {R"("cow")", R"("cats!")"}},
      {"^\\d+\\.\\d*$", {R"("3.14")", R"("10.")"}, {R"("3x14")", R"(".5")"}},
      {"^a\"b\\\\c$", {R"("a\"b\\c")"}, {R"("a"b\c")", R"("ab\c")"}},
      {"^a\\nb\\t$", {R"("a\nb\t")"}, {"\"a\nb\t\""}},
      {"^[é-ë]+ü$", {"\"\xc3\xa9\xc3\xab\xc3\xbc\""}, {"\"\xc3\xac\xc3\xbc\""}},
      {"^[^a]$", {R"("b")", R"("\"")", R"("\u0001")", "\"\xe2\x82\xac\""}, {R"("a")", R"("bb")"}},
      {"^.$", {R"("x")"}, {R"("\n")", R"("xy")"}},
      {"^a|b$", {R"("a")", R"("ax")", R"("xb")"}, {R"("xa")", R"("bx")"}},
      {"^(?:x|y){2,3}z*?$", {R"("xy")", R"("yxyzz")"}, {R"("x")", R"("xyxy")"}},
      {"^[\\w-]+@[a-z]+\\.(com|org)$", {R"("a_b-1@site.org")"}, {R"("a@b.net")", R"("@x.com")"}},
  };
  for (const Case& c : cases) {
    const auto g = pattern_schema(c.pattern);
    for (const char* t : c.accept) EXPECT_TRUE(matches(g, t)) << c.pattern << " on " << t;
    for (const char* t : c.reject) EXPECT_FALSE(matches(g, t)) << c.pattern << " on " << t;
  }
}

// Text as code points (wchar_t is 32 bits here), so std::wregex counts characters, as the
// grammar does, not bytes.
std::wstring utf32(const std::string& s) {
  std::wstring out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80 ? 1 : c >> 5 == 6 ? 2 : c >> 4 == 14 ? 3 : 4;
    uint32_t cp = len == 1 ? c : c & (0x7F >> len);
    for (int k = 1; k < len && i + size_t(k) < s.size(); ++k)
      cp = cp << 6 | (static_cast<unsigned char>(s[i + size_t(k)]) & 0x3F);
    out.push_back(wchar_t(cp));
    i += size_t(len);
  }
  return out;
}

// Random walks through a pattern's grammar make JSON strings that std::wregex (ECMAScript)
// finds the pattern in: an independent check of the subset rlx takes.
TEST(Grammar, PatternWalksMatchStdRegex) {
  for (const char* pattern : {"^[A-Z][a-z]{1,5}( [A-Z][a-z]*)?$", "^(\\d{2}|x+)-[^-\\s]{2}\\.?$",
                              "^(ab|c)*d$", "^x$|^(yz)+$"}) {
    const auto g = pattern_schema(pattern);
    const std::wregex re(utf32(pattern), std::regex::ECMAScript);
    std::mt19937 rng(11);
    int made = 0;
    for (int i = 0; i < 60; ++i) {
      const std::string doc = random_document(g, rng, 0.3, 80);
      if (doc.empty()) continue;
      ++made;
      const ordered_json j = ordered_json::parse(doc, nullptr, false);
      ASSERT_TRUE(j.is_string()) << pattern << ": " << doc;
      EXPECT_TRUE(std::regex_search(utf32(j.get<std::string>()), re)) << pattern << ": " << doc;
    }
    EXPECT_GT(made, 40) << pattern;
  }
}

// The formats a grammar holds strings to; the others stay unchecked.
TEST(Grammar, DateTimeAndUuidFormats) {
  auto format = [](const char* f) {
    return Grammar::from_json_schema(
        ordered_json{{"type", "string"}, {"format", f}, {"maxLength", 40}}.dump());
  };
  const auto date = format("date"), time = format("time"), stamp = format("date-time");
  const auto uuid = format("uuid"), email = format("email");
  EXPECT_TRUE(matches(date, R"("2026-12-07")"));
  EXPECT_FALSE(matches(date, R"("2026-13-07")"));
  EXPECT_FALSE(matches(date, R"("2026-12-32")"));
  EXPECT_TRUE(matches(time, R"("23:59:60.5+05:30")"));
  EXPECT_TRUE(matches(time, R"("08:00:00Z")"));
  EXPECT_FALSE(matches(time, R"("24:00:00Z")"));
  EXPECT_FALSE(matches(time, R"("08:00:00")"));  // RFC 3339 times carry an offset
  EXPECT_TRUE(matches(stamp, R"("2026-12-07T15:40:32.123Z")"));
  EXPECT_FALSE(matches(stamp, R"("2026-12-07 15:40:32Z")"));
  EXPECT_TRUE(matches(uuid, R"("123e4567-e89b-12d3-a456-426614174000")"));
  EXPECT_FALSE(matches(uuid, R"("123e4567-e89b-12d3-a456-42661417400")"));
  EXPECT_TRUE(matches(email, R"("not an address")"));
}

TEST(Grammar, UnsupportedPatternsSayWhatAndWhere) {
  const std::pair<const char*, const char*> cases[] = {
      {"a(?!b)", "offset 3: lookarounds are not supported"},
      {"(a)\\1", "'\\1' is not supported"},
      {"\\bword", "'\\b' is not supported"},
      {"a^b", "'^' is supported only at the ends of the pattern's alternatives"},
      {"(a$)", "'$' is supported only at the ends of the pattern's alternatives"},
      {"a)", "unbalanced ')'"},
      {"[ab", "'[' without ']'"},
      {"(ab", "'(' without ')'"},
      {"a{3,2}", "expected {m}, {m,} or {m,n} with n >= m"},
      {"*a", "'*' repeats nothing"},
      {"a**", "a quantifier on a quantifier"},
      {"[z-a]", "a class range ends before it starts"},
      {"a{20000}", "a count over 10000"},
      {"[]", "a class that matches nothing"},
      {"^\\ud800$", "U+d800 is not a character"},
  };
  for (const auto& [pattern, want] : cases) {
    try {
      pattern_schema(pattern);
      ADD_FAILURE() << pattern << ": no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << pattern << ": " << e.what();
    }
  }
  EXPECT_THROW(Grammar::from_json_schema(R"({"type": "string", "pattern": "a", "maxLength": 3})"),
               Error);
  EXPECT_THROW(Grammar::from_json_schema(R"({"type": "string", "pattern": 5})"), Error);
}

TEST(Grammar, ToolCallsInTheTemplatesForm) {
  const std::string tools = R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {
      "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "now"}}])";
  const auto hermes = Grammar::tool_calls(llm::ToolCallFormat::hermes, tools);
  EXPECT_TRUE(matches(hermes,
                      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"x\"}}\n"
                      "</tool_call>"));
  EXPECT_TRUE(matches(hermes,
                      "<tool_call>{\"name\": \"now\", \"arguments\": {}}</tool_call>\n<tool_call>"
                      "{\"name\": \"now\", \"arguments\": {\"tz\": 1}}</tool_call>"));
  EXPECT_FALSE(matches(hermes,
                       "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}"
                       "</tool_call>"));  // city is required
  EXPECT_FALSE(matches(hermes, "<tool_call>{\"name\": \"later\", \"arguments\": {}}</tool_call>"));
  EXPECT_FALSE(matches(hermes,
                       "Sure! <tool_call>{\"name\": \"now\", \"arguments\": {}}"
                       "</tool_call>"));
  const auto json_form = Grammar::tool_calls(llm::ToolCallFormat::json, tools, "now");
  EXPECT_TRUE(matches(json_form, "{\"name\": \"now\", \"parameters\": {}}"));
  EXPECT_FALSE(matches(json_form, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"\"}}"));
  EXPECT_THROW(Grammar::tool_calls(llm::ToolCallFormat::json, tools, "later"), Error);
  EXPECT_THROW(Grammar::tool_calls(llm::ToolCallFormat::hermes, "[{}]"), Error);
}

// A code point's UTF-8 bytes (an encoder of its own, for the GBNF classes' tests).
std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) return s += char(cp), s;
  const int len = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  s += char((0xF00 >> len) | (cp >> 6 * (len - 1)));
  for (int i = len - 2; i >= 0; --i) s += char(0x80 | ((cp >> 6 * i) & 0x3F));
  return s;
}

TEST(Gbnf, ArithmeticExpressions) {
  const auto g = Grammar::from_gbnf(R"gbnf(# integer arithmetic
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (
    ("*" | "/") factor
  )*
factor ::= [0-9]+ | "(" expr ")"  # a parenthesized one
)gbnf");
  for (const char* ok : {"1", "12+3", "1+2*(3-40)/5", "((7))"}) EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"", "+1", "1+", "1++2", "(1", "1)", "a", "1 + 2"})
    EXPECT_FALSE(matches(g, bad)) << bad;
  GrammarMatcher m(g);
  EXPECT_TRUE(m.accept("(1+2"));
  EXPECT_FALSE(m.complete());
  EXPECT_FALSE(m.accept("x"));
  EXPECT_TRUE(m.accept(")"));
  EXPECT_TRUE(m.complete());
}

TEST(Gbnf, ClassesEscapesAndCounts) {
  const auto g = Grammar::from_gbnf(
      "root ::= ident ws \"=\" ws value\n"
      "ident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,3}\n"
      "ws ::= [ \\t]?\n"
      "value ::= \"\\\"\" [^\"\\\\\\n]* \"\\\"\" | \"\\x41\" | [\\u00e9-\\u00ea]{2,} | . \"!\"\n");
  for (const char* ok : {"a=A", "x_12 = \"a b \xc3\xa9\"", "k\t=\t\xc3\xa9\xc3\xaa\xc3\xa9",
                         "z=\xe2\x82\xac!", "z=\xf0\x9f\x98\x80!", "z=\"\""})
    EXPECT_TRUE(matches(g, ok)) << ok;
  for (const char* bad : {"1a=A", "abcde=A", "a  =A", "a=B", "a=\"x\"y\"", "a=\"\n\"", "a=\xc3\xa9",
                          "a=\xc3\xa8\xc3\xa8", "a=\xc0\x80!", "a=\xed\xa0\x80!"})
    EXPECT_FALSE(matches(g, bad)) << bad;
}

// [lo-hi] and [^lo-hi] accept a code point's UTF-8 bytes exactly when it is inside (outside):
// every code point below U+3000, every 61st above, and the ranges' and encodings' edges.
TEST(Gbnf, ClassesMatchExactlyTheirCodePoints) {
  const std::pair<uint32_t, uint32_t> ranges[] = {
      {0x41, 0x5A},     {0x7F, 0x80},      {0x3A9, 0x7FF},     {0x7C0, 0x1234},
      {0xD000, 0xE100}, {0xFFFE, 0x10001}, {0x1F600, 0x10FFFF}};
  for (auto [lo, hi] : ranges)
    for (bool negate : {false, true}) {
      char text[64];
      std::snprintf(text, sizeof text, "root ::= [%s\\U%08X-\\U%08X]", negate ? "^" : "", lo, hi);
      const auto g = Grammar::from_gbnf(text);
      std::vector<uint32_t> cps = {lo - 1, lo,     hi,     hi + 1,  0x7FF,   0x800,
                                   0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF};
      for (uint32_t cp = 0; cp < 0x3000; ++cp) cps.push_back(cp);
      for (uint32_t cp = 0x3000; cp <= 0x10FFFF; cp += 61) cps.push_back(cp);
      for (uint32_t cp : cps) {
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
        const bool inside = cp >= lo && cp <= hi;
        ASSERT_EQ(matches(g, utf8_of(cp)), inside != negate) << text << " U+" << std::hex << cp;
      }
    }
}

TEST(Gbnf, ErrorsNameThePlaceOrEveryUndefinedRule) {
  auto error = [](const char* text) {
    try {
      Grammar::from_gbnf(text);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      error("root ::= a b\na ::= c | \"x\"\n").find("undefined rules: b (line 1), c (line 2)"),
      std::string::npos)
      << error("root ::= a b\na ::= c | \"x\"\n");
  EXPECT_NE(error("root ::= \"x\"\nroot ::= \"y\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error("start ::= \"x\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error("root ::= \"x\" )").find("line 1, column 14"), std::string::npos)
      << error("root ::= \"x\" )");
  EXPECT_NE(error("root ::= [ab").find("unterminated"), std::string::npos);
  EXPECT_NE(error("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error("root ::= [z-a]").find("ends before it starts"), std::string::npos);
  EXPECT_NE(error("root ::= \"a\"{3,1}").find("n >= m"), std::string::npos);
  EXPECT_NE(error("root ::= root \"a\" | \"b\"").find("left"), std::string::npos)
      << error("root ::= root \"a\" | \"b\"");
  EXPECT_EQ(error("x ::= \"y\""), "GBNF grammar: no rule 'root' to start from");
  // Bounds on what a request may ask for.
  EXPECT_NE(error("root ::= \"a\"{20000}").find("a count over 10000"), std::string::npos);
  EXPECT_NE(error(("root ::= " + std::string(100, '(') + "\"a\"" + std::string(100, ')')).c_str())
                .find("nested deeper than 64"),
            std::string::npos);
}

}  // namespace
}  // namespace rlx
