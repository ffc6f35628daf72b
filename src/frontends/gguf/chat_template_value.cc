// Chat template values: construction under the caps, truthiness, Python's
// str()/repr(), JSON (transformers' tojson: key order kept, ensure_ascii off)
// and equality.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "frontends/gguf/chat_template_impl.h"

namespace rlx::llm::chat_detail {

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  depth = std::max(depth, v.depth() + 1);
  for (auto& [k, old] : items)
    if (k == key) {
      old = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value Value::str(std::string v) {
  if (v.size() > kMaxValueBytes)
    throw make_error("chat template: a string of ", v.size(), " bytes is over the ", kMaxValueBytes,
                     "-byte cap");
  Value r = make(Kind::String);
  r.s = std::move(v);
  return r;
}

Value Value::of_list(std::vector<Value> items) {
  if (items.size() > kMaxListItems)
    throw make_error("chat template: a list of ", items.size(), " items is over the cap");
  Value r = make(Kind::List);
  r.list = std::make_shared<List>();
  for (const auto& v : items) r.list->depth = std::max(r.list->depth, v.depth() + 1);
  if (r.list->depth > kMaxNesting) throw make_error("chat template: values nested too deeply");
  r.list->items = std::move(items);
  return r;
}

Value Value::of_dict(std::vector<std::pair<std::string, Value>> items, bool ns) {
  Value r = make(Kind::Dict);
  r.dict = std::make_shared<Dict>();
  r.dict->is_namespace = ns;
  for (const auto& kv : items) r.dict->depth = std::max(r.dict->depth, kv.second.depth() + 1);
  if (r.dict->depth > kMaxNesting) throw make_error("chat template: values nested too deeply");
  // Later keys win, as in dict(a=1, a=2) or {'a': 1, 'a': 2}.
  for (auto& [k, v] : items) r.dict->set(k, std::move(v));
  return r;
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None:
      return false;
    case Value::Kind::Bool:
      return v.b;
    case Value::Kind::Int:
      return v.i != 0;
    case Value::Kind::Float:
      return v.f != 0;
    case Value::Kind::String:
      return !v.s.empty();
    case Value::Kind::List:
      return !v.list->items.empty();
    case Value::Kind::Dict:
      return v.dict->is_namespace || !v.dict->items.empty();
  }
  return false;
}

const char* kind_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "undefined";
    case Value::Kind::None:
      return "none";
    case Value::Kind::Bool:
      return "boolean";
    case Value::Kind::Int:
      return "integer";
    case Value::Kind::Float:
      return "float";
    case Value::Kind::String:
      return "string";
    case Value::Kind::List:
      return "list";
    case Value::Kind::Dict:
      return v.dict->is_namespace ? "namespace" : "dict";
  }
  return "?";
}

std::vector<std::string> chars(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const unsigned char c = s[i];
    if (c >= 0xF0)
      n = 4;
    else if (c >= 0xE0)
      n = 3;
    else if (c >= 0xC0)
      n = 2;
    n = std::min(n, s.size() - i);
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

namespace {

std::string float_str(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, f);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";  // Python prints 1.0
  return s;
}

std::string quote_repr(const std::string& s) {
  const char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return out + q;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

void json(std::string& out, const Value& v, int indent, int level) {
  if (out.size() > kMaxOutputBytes) throw make_error("chat template: tojson output over the cap");
  auto newline = [&](int lv) {
    if (indent < 0) return;
    out += '\n';
    out.append(size_t(indent) * size_t(lv), ' ');
  };
  const char* sep = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Value::Kind::Undefined:
      throw make_error("chat template: tojson of an undefined value");
    case Value::Kind::None:
      out += "null";
      return;
    case Value::Kind::Bool:
      out += v.b ? "true" : "false";
      return;
    case Value::Kind::Int:
      out += std::to_string(v.i);
      return;
    case Value::Kind::Float: {
      std::string f = float_str(v.f);
      out += f == "nan" ? "NaN" : f == "inf" ? "Infinity" : f == "-inf" ? "-Infinity" : f;
      return;
    }
    case Value::Kind::String:
      json_string(out, v.s);
      return;
    case Value::Kind::List: {
      if (v.list->items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        json(out, v.list->items[i], indent, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < v.dict->items.size(); ++i) {
        if (i) out += sep;
        newline(level + 1);
        json_string(out, v.dict->items[i].first);
        out += ": ";
        json(out, v.dict->items[i].second, indent, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
  }
}

}  // namespace

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::String:
      return quote_repr(v.s);
    case Value::Kind::List: {
      const bool t = v.list->tuple;
      std::string out = t ? "(" : "[";
      for (size_t i = 0; i < v.list->items.size(); ++i) {
        if (i) out += ", ";
        out += repr(v.list->items[i]);
        if (out.size() > kMaxValueBytes) throw make_error("chat template: repr over the cap");
      }
      if (t && v.list->items.size() == 1) out += ",";
      return out + (t ? ")" : "]");
    }
    case Value::Kind::Dict: {
      if (v.dict->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t i = 0; i < v.dict->items.size(); ++i) {
        if (i) out += ", ";
        out += quote_repr(v.dict->items[i].first) + ": " + repr(v.dict->items[i].second);
        if (out.size() > kMaxValueBytes) throw make_error("chat template: repr over the cap");
      }
      return out + "}";
    }
    default:
      return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
      return "";
    case Value::Kind::None:
      return "None";
    case Value::Kind::Bool:
      return v.b ? "True" : "False";
    case Value::Kind::Int:
      return std::to_string(v.i);
    case Value::Kind::Float:
      return float_str(v.f);
    case Value::Kind::String:
      return v.s;
    default:
      return repr(v);
  }
}

std::string to_json(const Value& v, int indent) {
  std::string out;
  json(out, v, indent, 0);
  return out;
}

namespace {
Value from_parsed(const nlohmann::ordered_json& j, int depth) {
  RLX_CHECK(depth < kMaxNesting, "chat template: JSON nested deeper than ", kMaxNesting);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::object: {
      std::vector<std::pair<std::string, Value>> items;
      for (auto it = j.begin(); it != j.end(); ++it)
        items.push_back({it.key(), from_parsed(it.value(), depth + 1)});
      return Value::of_dict(std::move(items));
    }
    case nlohmann::ordered_json::value_t::array: {
      RLX_CHECK(j.size() <= kMaxListItems, "chat template: a JSON array of ", j.size(), " items");
      std::vector<Value> items;
      for (const auto& e : j) items.push_back(from_parsed(e, depth + 1));
      return Value::of_list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_float:
      return Value::number(j.get<double>());
    default:
      return Value::none();
  }
}
}  // namespace

Value from_json(const std::string& text) {
  RLX_CHECK(text.size() <= kMaxValueBytes, "chat template: JSON of ", text.size(),
            " bytes is past the ", kMaxValueBytes, "-byte cap");
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(text, nullptr, false);
  RLX_CHECK(!j.is_discarded(),
            "chat template: not valid JSON: ", text.substr(0, std::min<size_t>(text.size(), 80)));
  return from_parsed(j, 0);
}

bool equal(const Value& a, const Value& b) {
  if (a.numeric() && b.numeric()) {
    if (a.is(Value::Kind::Float) || b.is(Value::Kind::Float)) return a.as_double() == b.as_double();
    return (a.is(Value::Kind::Bool) ? int64_t(a.b) : a.i) ==
           (b.is(Value::Kind::Bool) ? int64_t(b.b) : b.i);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::String:
      return a.s == b.s;
    case Value::Kind::List: {
      if (a.list->items.size() != b.list->items.size()) return false;
      for (size_t i = 0; i < a.list->items.size(); ++i)
        if (!equal(a.list->items[i], b.list->items[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.dict == b.dict) return true;
      if (a.dict->is_namespace || b.dict->is_namespace) return false;
      if (a.dict->items.size() != b.dict->items.size()) return false;
      for (const auto& [k, v] : a.dict->items) {
        const Value* o = b.dict->find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    }
    default:
      return true;  // undefined == undefined, none == none
  }
}

}  // namespace rlx::llm::chat_detail
