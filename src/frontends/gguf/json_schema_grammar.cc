// JSON Schema to grammar (rlx/grammar.h: Grammar::from_json_schema, json_object, tool_calls).
// Own code; the shape follows llama.cpp's json-schema-to-grammar where the two meet: the
// properties of an object in the schema's order, whitespace bounded (a space, or a newline
// and at most 20 blanks of indent) so a model cannot pad forever.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "grammar_impl.h"
#include "rlx/error.h"

namespace rlx::llm {
namespace {

using json = nlohmann::ordered_json;
using B = GrammarBuilder;

// Keywords that describe without constraining, and constraints the grammar does not enforce
// (they need arithmetic, or grammars that grow with the bound: formats other than date, time,
// date-time and uuid, numeric ranges, uniqueness, property counts).
const std::set<std::string, std::less<>> kIgnored = {"title",
                                                     "description",
                                                     "default",
                                                     "examples",
                                                     "$schema",
                                                     "$id",
                                                     "$comment",
                                                     "deprecated",
                                                     "readOnly",
                                                     "writeOnly",
                                                     "$defs",
                                                     "definitions",
                                                     "contentEncoding",
                                                     "contentMediaType",
                                                     "format",
                                                     "maximum",
                                                     "exclusiveMaximum",
                                                     "multipleOf",
                                                     "uniqueItems",
                                                     "minProperties",
                                                     "maxProperties",
                                                     "minimum",
                                                     "exclusiveMinimum",
                                                     "strict"};
const std::set<std::string, std::less<>> kHandled = {
    "type",   "properties", "required",  "additionalProperties",
    "items",  "minItems",   "maxItems",  "enum",
    "const",  "anyOf",      "oneOf",     "allOf",
    "$ref",   "minLength",  "maxLength", "nullable",
    "pattern"};

class SchemaGrammar {
 public:
  SchemaGrammar() {
    ws_ = b_.rule(
        "ws",
        {{},
         B::literal(" "),
         B::cat({B::literal("\n"), {B::ref(b_.repeat("indent", {B::byte_in(" \t")}, 0, 20))}})});
  }

  B& builder() { return b_; }
  GrammarAlt ws() const { return {B::ref(ws_)}; }

  // A rule for the JSON texts `s` accepts; `doc` is the document its $refs point into.
  int32_t convert(const json& doc, const json& s, const std::string& where) {
    const json* saved = doc_;
    doc_ = &doc;
    const int32_t r = schema(s, where);
    doc_ = saved;
    return r;
  }

  // Throws every problem found, one a line.
  void check() const {
    if (errors_.empty()) return;
    std::string msg = "json schema: " + std::to_string(errors_.size()) +
                      (errors_.size() == 1 ? " problem" : " problems");
    for (const auto& e : errors_) msg += "\n  " + e;
    throw Error(msg);
  }

  int32_t any_value() {
    if (value_ >= 0) return value_;
    value_ = b_.rule("value");
    b_.alt(value_, {B::ref(any_object())});
    b_.alt(value_, {B::ref(any_array())});
    b_.alt(value_, {B::ref(string_rule(0, -1))});
    b_.alt(value_, {B::ref(number_rule(false, false))});
    b_.alt(value_, {B::ref(literal_rule("true|false"))});
    b_.alt(value_, {B::ref(literal_rule("null"))});
    return value_;
  }

  int32_t any_object() {
    if (object_ >= 0) return object_;
    object_ = b_.rule("object");
    const int32_t member = b_.rule(
        "member",
        {B::cat(
            {{B::ref(string_rule(0, -1))}, ws(), B::literal(":"), ws(), {B::ref(any_value())}})});
    const int32_t more =
        b_.repeat("members", B::cat({ws(), B::literal(","), ws(), {B::ref(member)}}), 0, -1);
    b_.alt(object_, B::cat({B::literal("{"), ws(), B::literal("}")}));
    b_.alt(object_,
           B::cat({B::literal("{"), ws(), {B::ref(member), B::ref(more)}, ws(), B::literal("}")}));
    return object_;
  }

 private:
  int32_t any_array() {
    if (array_ >= 0) return array_;
    return array_ = array_rule(any_value(), 0, -1);
  }

  // "a|b": a rule of these literals.
  int32_t literal_rule(const std::string& alts) {
    auto it = literals_.find(alts);
    if (it != literals_.end()) return it->second;
    const int32_t r = b_.rule(alts == "null" ? "null" : "boolean");
    for (size_t at = 0; at <= alts.size();) {
      const size_t bar = std::min(alts.find('|', at), alts.size());
      b_.alt(r, B::literal(alts.substr(at, bar - at)));
      at = bar + 1;
    }
    return literals_[alts] = r;
  }

  int32_t char_rule() {
    if (char_ >= 0) return char_;
    GrammarSymbol plain = B::byte_range(0x20, 0x7f);
    plain.bytes.reset('"').reset('\\');
    const GrammarSymbol cont = B::byte_range(0x80, 0xbf),
                        hex = B::byte_in("0123456789abcdefABCDEF");
    // Valid UTF-8 only (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF).
    char_ = b_.rule("char", {{plain},
                             {B::byte_range(0xc2, 0xdf), cont},
                             {B::byte_in("\xe0"), B::byte_range(0xa0, 0xbf), cont},
                             {B::byte_range(0xe1, 0xec), cont, cont},
                             {B::byte_in("\xed"), B::byte_range(0x80, 0x9f), cont},
                             {B::byte_range(0xee, 0xef), cont, cont},
                             {B::byte_in("\xf0"), B::byte_range(0x90, 0xbf), cont, cont},
                             {B::byte_range(0xf1, 0xf3), cont, cont, cont},
                             {B::byte_in("\xf4"), B::byte_range(0x80, 0x8f), cont, cont},
                             B::cat({B::literal("\\"), {B::byte_in("\"\\/bfnrt")}}),
                             B::cat({B::literal("\\u"), {hex, hex, hex, hex}})});
    return char_;
  }

  int32_t string_rule(int64_t min, int64_t max) {
    const std::string key = std::to_string(min) + ":" + std::to_string(max);
    auto it = strings_.find(key);
    if (it != strings_.end()) return it->second;
    const int32_t chars = b_.repeat("chars", {B::ref(char_rule())}, min, max);
    return strings_[key] =
               b_.rule("string", {B::cat({B::literal("\""), {B::ref(chars)}, B::literal("\"")})});
  }

  int32_t number_rule(bool integer, bool nonnegative) {
    int32_t& r = numbers_[integer * 2 + nonnegative];
    if (r >= 0) return r;
    const GrammarSymbol digit = B::byte_range('0', '9');
    const int32_t digits = b_.repeat("digits", {digit}, 1, -1);
    // The integral part: 0, or up to 16 digits without a leading zero.
    const int32_t whole = b_.rule(
        "integral",
        {B::literal("0"), {B::byte_range('1', '9'), B::ref(b_.repeat("digits", {digit}, 0, 15))}});
    GrammarAlt body{B::ref(whole)};
    if (!integer) {
      const int32_t frac = b_.rule("fraction", {{}, B::cat({B::literal("."), {B::ref(digits)}})});
      const int32_t exp = b_.rule(
          "exponent",
          {{},
           {B::byte_in("eE"), B::ref(b_.rule("sign", {{}, {B::byte_in("+-")}})), B::ref(digits)}});
      body.push_back(B::ref(frac));
      body.push_back(B::ref(exp));
    }
    r = b_.rule(integer ? "integer" : "number", {body});
    if (!nonnegative) b_.alt(r, B::cat({B::literal("-"), body}));
    return r;
  }

  int32_t array_rule(int32_t item, int64_t min, int64_t max) {
    const int32_t r = b_.rule("array");
    if (max != 0) {
      const int32_t more = b_.repeat("items", B::cat({ws(), B::literal(","), ws(), {B::ref(item)}}),
                                     std::max<int64_t>(min - 1, 0), max < 0 ? -1 : max - 1);
      b_.alt(r,
             B::cat({B::literal("["), ws(), {B::ref(item), B::ref(more)}, ws(), B::literal("]")}));
    }
    if (min == 0) b_.alt(r, B::cat({B::literal("["), ws(), B::literal("]")}));
    return r;
  }

  void problem(const std::string& where, const std::string& what) {
    errors_.push_back(where + ": " + what);
  }

  // A non-negative integer keyword, or fallback.
  int64_t count(const json& s, const char* key, int64_t fallback, const std::string& where) {
    auto it = s.find(key);
    if (it == s.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000) {
      problem(where, std::string("'") + key + "' must be an integer in [0, 100000]");
      return fallback;
    }
    return it->get<int64_t>();
  }

  int32_t reference(const std::string& ref, const std::string& where) {
    const std::string key = std::to_string(reinterpret_cast<uintptr_t>(doc_)) + ref;
    auto it = refs_.find(key);
    if (it != refs_.end()) return it->second;
    const json* target = nullptr;
    if (ref.starts_with("#")) try {
        target = &doc_->at(json::json_pointer(ref.substr(1)));
      } catch (const json::exception&) {
      }
    if (!target) {
      problem(where, "'$ref' " + ref + " names nothing in this document (only local #/... refs)");
      return any_value();
    }
    // The rule exists before its body, so a schema may refer to itself.
    const int32_t r = b_.rule("ref " + ref);
    refs_[key] = r;
    b_.alt(r, {B::ref(schema(*target, ref))});
    return r;
  }

  int32_t object_rule(const json& s, const std::string& where) {
    struct Property {
      std::string key;
      int32_t value;
      bool required;
    };
    std::vector<Property> props;
    std::set<std::string> required;
    if (auto it = s.find("required"); it != s.end()) {
      if (!it->is_array()) problem(where, "'required' must be an array of names");
      for (const json& n : it->is_array() ? *it : json::array())
        if (n.is_string())
          required.insert(n.get<std::string>());
        else
          problem(where, "'required' must be an array of names");
    }
    std::set<std::string> listed;
    if (auto it = s.find("properties"); it != s.end()) {
      if (!it->is_object()) problem(where, "'properties' must be an object");
      if (it->is_object())
        for (const auto& [k, v] : it->items()) {
          props.push_back({k, schema(v, where + "/properties/" + k), required.count(k) > 0});
          listed.insert(k);
        }
    }
    for (const std::string& k : required)  // required but not described: any value
      if (!listed.count(k)) props.push_back({k, any_value(), true});
    // Other members: as additionalProperties says; when it is absent, only an object without
    // properties takes any (the reply keeps to the keys the schema names).
    int32_t extra = props.empty() ? any_value() : -1;
    if (auto it = s.find("additionalProperties"); it != s.end())
      extra = it->is_boolean() ? (it->get<bool>() ? any_value() : -1)
                               : schema(*it, where + "/additionalProperties");

    // tail[i][first]: the members from property i on; first: no comma before the next one.
    const size_t n = props.size();
    std::vector<std::array<int32_t, 2>> tail(n + 1);
    for (size_t i = 0; i <= n; ++i)
      for (int f = 0; f < 2; ++f) tail[i][size_t(f)] = b_.rule("members");
    auto sep = [&](int first) {
      return first ? GrammarAlt{} : B::cat({ws(), B::literal(","), ws()});
    };
    for (int f = 0; f < 2; ++f) {
      const int32_t end = tail[n][size_t(f)];
      b_.alt(end, {});
      if (extra >= 0)
        b_.alt(end, B::cat({sep(f),
                            {B::ref(string_rule(0, -1))},
                            ws(),
                            B::literal(":"),
                            ws(),
                            {B::ref(extra), B::ref(tail[n][0])}}));
    }
    for (size_t i = n; i-- > 0;)
      for (int f = 0; f < 2; ++f) {
        const int32_t r = tail[i][size_t(f)];
        b_.alt(r, B::cat({sep(f),
                          B::literal(json(props[i].key).dump()),
                          ws(),
                          B::literal(":"),
                          ws(),
                          {B::ref(props[i].value), B::ref(tail[i + 1][0])}}));
        if (!props[i].required) b_.alt(r, {B::ref(tail[i + 1][size_t(f)])});
      }
    return b_.rule("object",
                   {B::cat({B::literal("{"), ws(), {B::ref(tail[0][1])}, ws(), B::literal("}")})});
  }

  // A string whose text matches `pattern` (regex_grammar.cc); a format's pattern fixes the
  // length itself, so lengths beside it are not checked.
  int32_t pattern_rule(const json& s, const json& pattern, const std::string& where,
                       bool format = false) {
    if (!pattern.is_string()) {
      problem(where, "'pattern' must be a string");
    } else if (!format && (s.contains("minLength") || s.contains("maxLength"))) {
      problem(where, "'pattern' beside 'minLength' or 'maxLength' is not supported");
    } else {
      try {
        const int32_t body = regex_string_rule(b_, pattern.get<std::string>());
        return b_.rule("string", {B::cat({B::literal("\""), {B::ref(body)}, B::literal("\"")})});
      } catch (const Error& e) {
        problem(where, e.what());
      }
    }
    return string_rule(0, -1);
  }

  // The `format`s a grammar can hold a string to (RFC 3339's date, time and date-time, as
  // JSON Schema defines them, and UUIDs), as patterns; the others are not enforced.
  static const char* format_pattern(const json& s) {
    auto it = s.find("format");
    if (it == s.end() || !it->is_string()) return nullptr;
#define RLX_DATE "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
#define RLX_TIME                                                                                   \
  "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-" \
  "9])"
    static const std::map<std::string, const char*, std::less<>> kFormats = {
        {"date", "^" RLX_DATE "$"},
        {"time", "^" RLX_TIME "$"},
        {"date-time", "^" RLX_DATE "[Tt]" RLX_TIME "$"},
        {"uuid", "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"}};
#undef RLX_DATE
#undef RLX_TIME
    auto f = kFormats.find(it->get<std::string>());
    return f == kFormats.end() ? nullptr : f->second;
  }

  // One type's rule, the other keywords of s applying to it.
  int32_t typed(const std::string& type, const json& s, const std::string& where) {
    auto nonnegative = [&] {
      for (const char* k : {"minimum", "exclusiveMinimum"})
        if (auto it = s.find(k); it != s.end() && it->is_number() && it->get<double>() >= 0)
          return true;
      return false;
    };
    if (type == "object") return object_rule(s, where);
    if (type == "array") {
      auto it = s.find("items");
      const int32_t item = it == s.end() ? any_value() : schema(*it, where + "/items");
      const int64_t min = count(s, "minItems", 0, where), max = count(s, "maxItems", -1, where);
      if (max >= 0 && max < min) problem(where, "'maxItems' is below 'minItems'");
      return array_rule(item, min, max < 0 ? max : std::max(max, min));
    }
    if (type == "string") {
      if (auto it = s.find("pattern"); it != s.end()) return pattern_rule(s, *it, where);
      if (const char* p = format_pattern(s)) return pattern_rule(s, p, where, true);
      const int64_t min = count(s, "minLength", 0, where), max = count(s, "maxLength", -1, where);
      if (max >= 0 && max < min) problem(where, "'maxLength' is below 'minLength'");
      return string_rule(min, max < 0 ? max : std::max(max, min));
    }
    if (type == "number" || type == "integer") return number_rule(type == "integer", nonnegative());
    if (type == "boolean") return literal_rule("true|false");
    if (type == "null") return literal_rule("null");
    problem(where, "unknown type '" + type + "'");
    return any_value();
  }

  int32_t alternatives(const std::string& name, const std::vector<int32_t>& rules) {
    const int32_t r = b_.rule(name);
    for (int32_t x : rules) b_.alt(r, {B::ref(x)});
    return r;
  }

  int32_t schema(const json& s, const std::string& where) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) problem(where, "the schema 'false' accepts nothing");
      return any_value();
    }
    if (!s.is_object()) {
      problem(where, "a schema must be an object or a boolean, got " + s.dump());
      return any_value();
    }
    for (const auto& [k, v] : s.items())
      if (!kIgnored.count(k) && !kHandled.count(k)) problem(where, "'" + k + "' is not supported");
    const bool nullable = s.value("nullable", false);
    auto or_null = [&](int32_t r) {
      return nullable ? alternatives("nullable", {r, literal_rule("null")}) : r;
    };
    if (auto it = s.find("$ref"); it != s.end()) {
      if (!it->is_string()) problem(where, "'$ref' must be a string");
      return or_null(it->is_string() ? reference(it->get<std::string>(), where) : any_value());
    }
    if (auto it = s.find("const"); it != s.end())
      return or_null(b_.rule("const", {B::literal(it->dump())}));
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array() || it->empty()) {
        problem(where, "'enum' must be a non-empty array");
        return any_value();
      }
      const int32_t r = b_.rule("enum");
      for (const json& v : *it) b_.alt(r, B::literal(v.dump()));
      return or_null(r);
    }
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array() || it->empty()) {
        problem(where, std::string("'") + key + "' must be a non-empty array of schemas");
        return any_value();
      }
      for (const char* k : {"type", "properties", "items"})
        if (s.contains(k))
          problem(where, std::string("'") + key + "' beside '" + k + "' is not supported");
      if (std::string_view(key) == "allOf" && it->size() != 1)
        problem(where, "'allOf' of more than one schema is not supported");
      std::vector<int32_t> alts;
      for (size_t i = 0; i < it->size(); ++i)
        alts.push_back(schema((*it)[i], where + "/" + key + "/" + std::to_string(i)));
      return or_null(alternatives(key, alts));
    }
    std::vector<std::string> types;
    if (auto it = s.find("type"); it != s.end()) {
      for (const json& t : it->is_array() ? *it : json::array({*it}))
        if (t.is_string())
          types.push_back(t.get<std::string>());
        else
          problem(where, "'type' must be a string or an array of strings");
    } else if (s.contains("properties") || s.contains("additionalProperties") ||
               s.contains("required")) {
      types = {"object"};
    } else if (s.contains("items")) {
      types = {"array"};
    } else {
      return or_null(any_value());
    }
    std::vector<int32_t> alts;
    for (const std::string& t : types) alts.push_back(typed(t, s, where));
    if (nullable) alts.push_back(literal_rule("null"));
    return alts.size() == 1 ? alts[0] : alternatives("types", alts);
  }

  B b_;
  int32_t ws_ = -1, value_ = -1, object_ = -1, array_ = -1, char_ = -1;
  int32_t numbers_[4] = {-1, -1, -1, -1};
  std::map<std::string, int32_t> literals_, strings_, refs_;
  const json* doc_ = nullptr;
  std::vector<std::string> errors_;
};

json parse_json_text(std::string_view text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(std::string(what) + " is not valid JSON: " + e.what());
  }
}

// ws x ws: a document may start after a blank (a tokenizer's leading space) and end with one.
std::shared_ptr<const Grammar> padded_root(SchemaGrammar& g, int32_t body) {
  g.check();
  return g.builder().build(g.builder().rule("root", {B::cat({g.ws(), {B::ref(body)}, g.ws()})}));
}

}  // namespace

std::shared_ptr<const Grammar> Grammar::from_json_schema(std::string_view schema_json) {
  const json schema = parse_json_text(schema_json, "json schema");
  SchemaGrammar g;
  const int32_t body = g.convert(schema, schema, "#");
  return padded_root(g, body);
}

std::shared_ptr<const Grammar> Grammar::json_object() {
  SchemaGrammar g;
  const int32_t body = g.any_object();
  return padded_root(g, body);
}

std::shared_ptr<const Grammar> Grammar::tool_calls(ToolCallFormat format, std::string_view tools,
                                                   const std::string& function) {
  RLX_CHECK(format != ToolCallFormat::none,
            "tool-call grammar: the chat template writes calls in no form rlx knows");
  const json list = parse_json_text(tools, "tools");
  RLX_CHECK(list.is_array() && !list.empty(),
            "tool-call grammar: 'tools' must be a non-empty array");
  SchemaGrammar g;
  B& b = g.builder();
  const char* args_key = format == ToolCallFormat::hermes ? "\"arguments\"" : "\"parameters\"";
  const int32_t call = b.rule("call");
  size_t offered = 0;
  for (size_t i = 0; i < list.size(); ++i) {
    const json& t = list[i];
    const json* f = t.is_object() && t.contains("function") ? &t["function"] : &t;
    RLX_CHECK(f->is_object() && f->contains("name") && (*f)["name"].is_string(),
              "tool-call grammar: tools[", i, "] has no function name");
    const std::string name = (*f)["name"].get<std::string>();
    if (!function.empty() && name != function) continue;
    ++offered;
    const json params = f->contains("parameters") ? (*f)["parameters"] : json::object();
    const int32_t args =
        params.empty() ? g.any_object()
                       : g.convert(params, params, "tools[" + std::to_string(i) + "].parameters");
    b.alt(call, B::cat({B::literal("{"),
                        g.ws(),
                        B::literal("\"name\""),
                        g.ws(),
                        B::literal(":"),
                        g.ws(),
                        B::literal(json(name).dump()),
                        g.ws(),
                        B::literal(","),
                        g.ws(),
                        B::literal(args_key),
                        g.ws(),
                        B::literal(":"),
                        g.ws(),
                        {B::ref(args)},
                        g.ws(),
                        B::literal("}")}));
  }
  RLX_CHECK(offered > 0, "tool-call grammar: no tool is named '", function, "'");
  g.check();
  if (format == ToolCallFormat::json) return padded_root(g, call);
  const int32_t block = b.rule("block", {B::cat({B::literal("<tool_call>"),
                                                 g.ws(),
                                                 {B::ref(call)},
                                                 g.ws(),
                                                 B::literal("</tool_call>")})});
  const int32_t more = b.repeat("blocks", B::cat({g.ws(), {B::ref(block)}}), 0, -1);
  return padded_root(g, b.rule("calls", {{B::ref(block), B::ref(more)}}));
}

}  // namespace rlx::llm
