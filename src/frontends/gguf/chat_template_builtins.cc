// Chat template builtins: filters, tests, string and dict methods, and the
// global functions (raise_exception, namespace, range, strftime_now, dict).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include "frontends/gguf/chat_template_impl.h"

namespace rlx::llm::chat_detail {
namespace {

using K = Value::Kind;

const std::string& want_str(const Value* v, const Args& a, const char* what) {
  if (!v || !v->is(K::String)) a.fail(std::string(what) + " must be a string");
  return v->s;
}

int64_t want_int(const Value* v, const Args& a, const char* what) {
  if (!v || !(v->is(K::Int) || v->is(K::Bool))) a.fail(std::string(what) + " must be an integer");
  return v->is(K::Bool) ? v->b : v->i;
}

bool in_set(char c, const std::string* set) {
  if (!set) return std::isspace(static_cast<unsigned char>(c));
  return set->find(c) != std::string::npos;
}

std::string strip(const std::string& s, const std::string* set, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && in_set(s[b], set)) ++b;
  if (right)
    while (e > b && in_set(s[e - 1], set)) --e;
  return s.substr(b, e - b);
}

// The characters argument of strip(): absent or none means whitespace.
const std::string* strip_set(const Args& a, const char* name) {
  const Value* v = a.get(0, name);
  if (!v || v->is(K::None)) return nullptr;
  return &want_str(v, a, "the characters to strip");
}

int up(int c) { return std::toupper(c); }
int low(int c) { return std::tolower(c); }

std::string map_ascii(std::string s, int (*f)(int)) {
  for (char& c : s) c = char(f(static_cast<unsigned char>(c)));
  return s;
}

std::string title(const std::string& s) {
  std::string out = s;
  bool start = true;
  for (char& c : out) {
    const unsigned char u = c;
    c = char(start ? std::toupper(u) : std::tolower(u));
    start = !std::isalpha(u);  // Python: "3rd".title() is "3Rd"
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = map_ascii(s, low);
  if (!out.empty()) out[0] = char(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace(const std::string& s, const std::string& from, const std::string& to,
                    int64_t count, const Args& a) {
  std::string out;
  size_t pos = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    if (from.empty()) {  // Python inserts `to` between characters
      if (pos > s.size()) break;
      out += to;
      if (pos < s.size()) out += s[pos];
      ++pos;
    } else {
      size_t hit = s.find(from, pos);
      if (hit == std::string::npos) break;
      out.append(s, pos, hit - pos);
      out += to;
      pos = hit + from.size();
    }
    if (out.size() > kMaxValueBytes) a.fail("replace: result over the size cap");
  }
  if (pos < s.size()) out.append(s, pos);
  return out;
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit, const Args& a) {
  std::vector<Value> out;
  if (!sep || sep->is(K::None)) {
    size_t i = 0;
    while (i < s.size()) {
      while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
        out.push_back(Value::str(s.substr(i)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      out.push_back(Value::str(s.substr(i, j - i)));
      i = j;
    }
    return Value::of_list(std::move(out));
  }
  const std::string& d = want_str(sep, a, "split's separator");
  if (d.empty()) a.fail("split: empty separator");
  size_t pos = 0;
  for (;;) {
    size_t hit = s.find(d, pos);
    if (hit == std::string::npos || (maxsplit >= 0 && int64_t(out.size()) == maxsplit)) break;
    out.push_back(Value::str(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  out.push_back(Value::str(s.substr(pos)));
  return Value::of_list(std::move(out));
}

// startswith/endswith take a string or a tuple of strings.
bool affix(const std::string& s, const Value* arg, bool start, const Args& a) {
  auto one = [&](const Value& p) {
    const std::string& x = want_str(&p, a, "the prefix");
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0
                 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg && arg->is(K::List))
    return std::any_of(arg->list->items.begin(), arg->list->items.end(), one);
  if (!arg) a.fail("startswith/endswith need an argument");
  return one(*arg);
}

Value items_of(const Value& v, const Args& a) {
  if (v.undefined()) return Value::of_list({});
  if (!v.is(K::Dict)) a.fail(std::string("items() of a ") + kind_name(v));
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict->items) {
    out.push_back(Value::of_list({Value::str(k), x}));
    out.back().list->tuple = true;
  }
  return Value::of_list(std::move(out));
}

Value join(const std::vector<Value>& items, const std::string& sep, const Args& a) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += to_str(items[i]);
    if (out.size() > kMaxValueBytes) a.fail("join: result over the size cap");
  }
  return Value::str(std::move(out));
}

Value attr_of(const Value& v, const std::string& name) {
  if (v.is(K::Dict))
    if (const Value* x = v.dict->find(name)) return *x;
  return Value();
}

// select/reject(test, args...) and selectattr/rejectattr(attr, test, args...).
Value select(const Value& v, const Args& a, bool keep, bool by_attr) {
  std::vector<Value> items = iterate(v, a), out;
  const size_t first = by_attr ? 1 : 0;
  std::string attr = by_attr ? want_str(a.get(0, "attribute"), a, "the attribute") : "";
  const Value* test = a.get(first, "test");
  Args targs;
  targs.line = a.line;
  targs.col = a.col;
  for (size_t i = first + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
  for (auto& item : items) {
    Value x = by_attr ? attr_of(item, attr) : item;
    bool pass = test ? apply_test(want_str(test, a, "the test name"), x, targs) : truthy(x);
    if (pass == keep) out.push_back(std::move(item));
  }
  return Value::of_list(std::move(out));
}

}  // namespace

const Value* Args::get(size_t i, std::string_view name) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return i < pos.size() ? &pos[i] : nullptr;
}

std::vector<Value> iterate(const Value& v, const Args& at) {
  switch (v.kind) {
    case K::Undefined:
      return {};
    case K::List:
      return v.list->items;
    case K::Dict: {
      std::vector<Value> keys;
      for (const auto& kv : v.dict->items) keys.push_back(Value::str(kv.first));
      return keys;
    }
    case K::String: {
      std::vector<Value> out;
      for (auto& c : chars(v.s)) out.push_back(Value::str(std::move(c)));
      return out;
    }
    default:
      at.fail(std::string("cannot iterate over a ") + kind_name(v));
  }
}

Value apply_filter(const std::string& f, const Value& v, const Args& a) {
  auto need_str = [&]() -> const std::string& {
    if (!v.is(K::String)) a.fail("filter '" + f + "' needs a string, got " + kind_name(v));
    return v.s;
  };
  if (f == "trim") return Value::str(strip(need_str(), strip_set(a, "chars"), true, true));
  if (f == "upper") return Value::str(map_ascii(need_str(), up));
  if (f == "lower") return Value::str(map_ascii(need_str(), low));
  if (f == "capitalize") return Value::str(capitalize(need_str()));
  if (f == "title") return Value::str(title(need_str()));
  if (f == "safe" || f == "e" || f == "escape" || f == "forceescape") return v;  // no autoescape
  if (f == "string") return Value::str(to_str(v));
  if (f == "length" || f == "count") {
    if (v.undefined()) return Value::integer(0);
    if (v.is(K::String)) return Value::integer(int64_t(char_count(v.s)));
    if (v.is(K::List)) return Value::integer(int64_t(v.list->items.size()));
    if (v.is(K::Dict)) return Value::integer(int64_t(v.dict->items.size()));
    a.fail(std::string("length of a ") + kind_name(v));
  }
  if (f == "first" || f == "last") {
    std::vector<Value> items = iterate(v, a);
    if (items.empty()) return Value();
    return f == "first" ? items.front() : items.back();
  }
  if (f == "list") return Value::of_list(iterate(v, a));
  if (f == "reverse") {
    if (v.is(K::String)) {
      std::vector<std::string> cs = chars(v.s);
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return Value::str(out);
    }
    std::vector<Value> items = iterate(v, a);
    std::reverse(items.begin(), items.end());
    return Value::of_list(std::move(items));
  }
  if (f == "items") return items_of(v, a);
  if (f == "tojson") {
    const Value* ind = a.get(0, "indent");
    int indent =
        ind && !ind->is(K::None) ? int(std::clamp<int64_t>(want_int(ind, a, "indent"), 0, 16)) : -1;
    return Value::str(to_json(v, indent));
  }
  if (f == "join") {
    const Value* sep = a.get(0, "d");
    std::vector<Value> items = iterate(v, a);
    if (const Value* at = a.get(1, "attribute"))
      for (auto& x : items) x = attr_of(x, want_str(at, a, "the attribute"));
    return join(items, sep ? want_str(sep, a, "join's separator") : "", a);
  }
  if (f == "default" || f == "d") {
    const Value* dflt = a.get(0, "default_value");
    const Value* boolean = a.get(1, "boolean");
    bool use = boolean && truthy(*boolean) ? !truthy(v) : v.undefined();
    return use ? (dflt ? *dflt : Value::str("")) : v;
  }
  if (f == "int") {
    const Value* dflt = a.get(0, "default");
    if (v.is(K::Int)) return v;
    if (v.is(K::Bool)) return Value::integer(v.b);
    if (v.is(K::Float) && std::isfinite(v.f) && std::fabs(v.f) < 9e18)
      return Value::integer(int64_t(v.f));
    if (v.is(K::String)) {
      try {
        size_t used = 0;
        std::string t = strip(v.s, nullptr, true, true);
        double d = std::stod(t, &used);
        if (used == t.size() && std::isfinite(d) && std::fabs(d) < 9e18)
          return Value::integer(int64_t(d));
      } catch (const std::exception&) {
      }
    }
    return dflt ? *dflt : Value::integer(0);
  }
  if (f == "float") {
    if (v.numeric()) return Value::number(v.as_double());
    if (v.is(K::String)) {
      try {
        return Value::number(std::stod(v.s));
      } catch (const std::exception&) {
      }
    }
    const Value* dflt = a.get(0, "default");
    return dflt ? *dflt : Value::number(0);
  }
  if (f == "abs") {
    if (v.is(K::Float)) return Value::number(std::fabs(v.f));
    if (v.is(K::Int) && v.i != INT64_MIN) return Value::integer(v.i < 0 ? -v.i : v.i);
    a.fail(std::string("abs of a ") + kind_name(v));
  }
  if (f == "replace") {
    const std::string& from = want_str(a.get(0, "old"), a, "replace's old text");
    const std::string& to = want_str(a.get(1, "new"), a, "replace's new text");
    const Value* n = a.get(2, "count");
    return Value::str(
        replace(need_str(), from, to, n && !n->is(K::None) ? want_int(n, a, "count") : -1, a));
  }
  if (f == "select" || f == "reject") return select(v, a, f == "select", false);
  if (f == "selectattr" || f == "rejectattr") return select(v, a, f == "selectattr", true);
  if (f == "map") {
    std::vector<Value> items = iterate(v, a);
    if (const Value* at = a.get(99, "attribute")) {
      for (auto& x : items) x = attr_of(x, want_str(at, a, "the attribute"));
    } else {
      const std::string& name = want_str(a.get(0, "filter"), a, "map's filter name");
      Args rest;
      rest.line = a.line;
      rest.col = a.col;
      rest.pos.assign(a.pos.begin() + 1, a.pos.end());
      for (auto& x : items) x = apply_filter(name, x, rest);
    }
    return Value::of_list(std::move(items));
  }
  a.fail("unknown filter '" + f + "'");
}

bool apply_test(const std::string& t, const Value& v, const Args& a) {
  auto arg = [&]() -> const Value& {
    const Value* x = a.get(0, "value");
    if (!x) a.fail("test '" + t + "' needs an argument");
    return *x;
  };
  if (t == "defined") return !v.undefined();
  if (t == "undefined") return v.undefined();
  if (t == "none") return v.is(K::None);
  if (t == "string") return v.is(K::String);
  if (t == "number") return v.is(K::Int) || v.is(K::Float);
  if (t == "integer") return v.is(K::Int);
  if (t == "float") return v.is(K::Float);
  if (t == "boolean") return v.is(K::Bool);
  if (t == "true") return v.is(K::Bool) && v.b;
  if (t == "false") return v.is(K::Bool) && !v.b;
  if (t == "mapping") return v.is(K::Dict);
  if (t == "iterable" || t == "sequence") return v.is(K::String) || v.is(K::List) || v.is(K::Dict);
  if (t == "callable") return false;
  if (t == "equalto" || t == "eq" || t == "==" || t == "sameas") return equal(v, arg());
  if (t == "ne" || t == "!=") return !equal(v, arg());
  if (t == "odd" || t == "even" || t == "divisibleby") {
    if (!v.is(K::Int)) a.fail("test '" + t + "' needs an integer");
    if (t == "divisibleby") {
      int64_t d = want_int(&arg(), a, "divisibleby's argument");
      if (d == 0) a.fail("divisibleby zero");
      return v.i % d == 0;
    }
    return (v.i % 2 != 0) == (t == "odd");
  }
  if (t == "in") {
    const Value& c = arg();
    if (c.is(K::String) && v.is(K::String)) return c.s.find(v.s) != std::string::npos;
    if (c.is(K::Dict)) return v.is(K::String) && c.dict->find(v.s);
    for (const auto& x : iterate(c, a))
      if (equal(x, v)) return true;
    return false;
  }
  if (t == "lower" || t == "upper") {
    if (!v.is(K::String)) return false;
    return v.s == map_ascii(v.s, t == "lower" ? low : up);
  }
  a.fail("unknown test '" + t + "'");
}

Value call_method(const Value& obj, const std::string& m, const Args& a) {
  if (obj.is(K::String)) {
    const std::string& s = obj.s;
    if (m == "strip") return Value::str(strip(s, strip_set(a, "chars"), true, true));
    if (m == "lstrip") return Value::str(strip(s, strip_set(a, "chars"), true, false));
    if (m == "rstrip") return Value::str(strip(s, strip_set(a, "chars"), false, true));
    if (m == "upper") return Value::str(map_ascii(s, up));
    if (m == "lower") return Value::str(map_ascii(s, low));
    if (m == "title") return Value::str(title(s));
    if (m == "capitalize") return Value::str(capitalize(s));
    if (m == "startswith") return Value::boolean(affix(s, a.get(0, "prefix"), true, a));
    if (m == "endswith") return Value::boolean(affix(s, a.get(0, "suffix"), false, a));
    if (m == "split") {
      const Value* n = a.get(1, "maxsplit");
      return split(s, a.get(0, "sep"), n ? want_int(n, a, "maxsplit") : -1, a);
    }
    if (m == "replace") {
      const Value* n = a.get(2, "count");
      return Value::str(replace(s, want_str(a.get(0, "old"), a, "replace's old text"),
                                want_str(a.get(1, "new"), a, "replace's new text"),
                                n ? want_int(n, a, "count") : -1, a));
    }
    if (m == "join") {
      const Value* x = a.get(0, "iterable");
      if (!x) a.fail("join needs an argument");
      return join(iterate(*x, a), s, a);
    }
    if (m == "find" || m == "count") {
      const std::string& x = want_str(a.get(0, "sub"), a, "the substring");
      if (m == "find") {
        size_t p = s.find(x);
        return Value::integer(p == std::string::npos ? -1 : int64_t(p));
      }
      if (x.empty()) return Value::integer(int64_t(char_count(s)) + 1);
      int64_t n = 0;
      for (size_t p = s.find(x); p != std::string::npos; p = s.find(x, p + x.size())) ++n;
      return Value::integer(n);
    }
  } else if (obj.is(K::Dict) && !obj.dict->is_namespace) {
    if (m == "get") {
      const Value* k = a.get(0, "key");
      const Value* d = a.get(1, "default");
      if (const Value* v = k && k->is(K::String) ? obj.dict->find(k->s) : nullptr) return *v;
      return d ? *d : Value::none();
    }
    if (m == "items") return items_of(obj, a);
    if (m == "keys" || m == "values") {
      std::vector<Value> out;
      for (const auto& [k, v] : obj.dict->items) out.push_back(m == "keys" ? Value::str(k) : v);
      return Value::of_list(std::move(out));
    }
  }
  a.fail("unknown method '" + m + "' on a " + kind_name(obj));
}

Value call_function(const std::string& f, const Args& a) {
  if (f == "raise_exception") {
    const Value* msg = a.get(0, "message");
    a.fail("raise_exception: " + (msg ? to_str(*msg) : std::string("(no message)")));
  }
  if (f == "namespace" || f == "dict") {
    std::vector<std::pair<std::string, Value>> items;
    if (!a.pos.empty()) {
      if (a.pos.size() > 1 || !a.pos[0].is(K::Dict))
        a.fail(f + "() takes a dict or keyword arguments");
      items = a.pos[0].dict->items;
    }
    for (const auto& kv : a.kw) items.push_back(kv);
    Value r = Value::of_dict(std::move(items), f == "namespace");
    if (f == "namespace")
      for (const auto& kv : r.dict->items)
        if (kv.second.is(K::Dict) && kv.second.dict->is_namespace)
          a.fail("a namespace cannot hold a namespace");
    return r;
  }
  if (f == "range") {
    if (a.pos.empty() || a.pos.size() > 3) a.fail("range takes 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = want_int(&a.pos[0], a, "range's bound");
    } else {
      start = want_int(&a.pos[0], a, "range's start");
      stop = want_int(&a.pos[1], a, "range's stop");
      if (a.pos.size() == 3) step = want_int(&a.pos[2], a, "range's step");
    }
    if (step == 0) a.fail("range step cannot be zero");
    const double n = std::ceil((double(stop) - double(start)) / double(step));
    if (n > double(kMaxListItems))
      a.fail("range of more than " + std::to_string(kMaxListItems) + " items");
    std::vector<Value> out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
      out.push_back(Value::integer(i));
    return Value::of_list(std::move(out));
  }
  if (f == "strftime_now") {
    const std::string& fmt = want_str(a.get(0, "format"), a, "strftime_now's format");
    if (fmt.size() > 256) a.fail("strftime_now: format too long");
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[1024];
    size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
    return Value::str(std::string(buf, n));
  }
  a.fail("unknown function '" + f + "'");
}

}  // namespace rlx::llm::chat_detail
