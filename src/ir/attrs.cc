#include "rlx/attrs.h"

#include <algorithm>
#include <cstdio>

#include "rlx/error.h"

namespace rlx {
namespace {
const char* attr_kind_name(const AttrValue& v) {
  static const char* names[] = {"int", "float", "bool", "string", "int list", "float list"};
  return names[v.index()];
}
}  // namespace

Attrs& Attrs::set(const std::string& name, AttrValue v) {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& a, const std::string& n) { return a.first < n; });
  if (it != items_.end() && it->first == name)
    it->second = std::move(v);
  else
    items_.insert(it, {name, std::move(v)});
  return *this;
}

void Attrs::erase(const std::string& name) {
  std::erase_if(items_, [&](const auto& kv) { return kv.first == name; });
}

const AttrValue* Attrs::find(const std::string& name) const {
  auto it = std::lower_bound(items_.begin(), items_.end(), name,
                             [](const auto& a, const std::string& n) { return a.first < n; });
  return it != items_.end() && it->first == name ? &it->second : nullptr;
}

const AttrValue& Attrs::get(const std::string& name) const {
  const AttrValue* v = find(name);
  RLX_CHECK(v, "missing attribute '", name, "'");
  return *v;
}

int64_t Attrs::i(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<int64_t>(&v)) return *p;
  throw make_error("attribute '", name, "' is a ", attr_kind_name(v), ", expected int");
}
int64_t Attrs::i(const std::string& name, int64_t def) const { return has(name) ? i(name) : def; }

double Attrs::f(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<int64_t>(&v)) return double(*p);
  throw make_error("attribute '", name, "' is a ", attr_kind_name(v), ", expected float");
}
double Attrs::f(const std::string& name, double def) const { return has(name) ? f(name) : def; }

const std::string& Attrs::s(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<std::string>(&v)) return *p;
  throw make_error("attribute '", name, "' is a ", attr_kind_name(v), ", expected string");
}
std::string Attrs::s(const std::string& name, const std::string& def) const {
  return has(name) ? s(name) : def;
}

const std::vector<int64_t>& Attrs::ints(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<std::vector<int64_t>>(&v)) return *p;
  throw make_error("attribute '", name, "' is a ", attr_kind_name(v), ", expected int list");
}
std::vector<int64_t> Attrs::ints(const std::string& name, std::vector<int64_t> def) const {
  return has(name) ? ints(name) : def;
}

std::vector<double> Attrs::floats(const std::string& name) const {
  const AttrValue& v = get(name);
  if (auto p = std::get_if<std::vector<double>>(&v)) return *p;
  if (auto p = std::get_if<std::vector<int64_t>>(&v)) return {p->begin(), p->end()};
  throw make_error("attribute '", name, "' is a ", attr_kind_name(v), ", expected float list");
}

namespace {

// Error messages print attributes: an absurd list shows its head, its last
// value and its length, and a long string its head, never megabytes.
struct AttrPrinter {
  static constexpr size_t kMaxItems = 16, kMaxChars = 200;
  std::string operator()(int64_t x) const { return std::to_string(x); }
  std::string operator()(double x) const {
    char b[32];
    std::snprintf(b, sizeof b, "%g", x);
    return b;
  }
  std::string operator()(bool x) const { return x ? "true" : "false"; }
  std::string operator()(const std::string& x) const {
    return "\"" + (x.size() <= kMaxChars ? x : x.substr(0, kMaxChars) + "...") + "\"";
  }
  std::string operator()(const std::vector<int64_t>& x) const { return list(x); }
  std::string operator()(const std::vector<double>& x) const { return list(x); }
  template <typename T>
  std::string list(const std::vector<T>& x) const {
    std::string s = "[";
    for (size_t i = 0; i < x.size(); ++i) {
      if (x.size() > kMaxItems && i == kMaxItems - 1)
        return s + ",...," + (*this)(x.back()) + "] (" + std::to_string(x.size()) + " values)";
      s += (i ? "," : "") + (*this)(x[i]);
    }
    return s + "]";
  }
};

}  // namespace

std::string attr_value_str(const AttrValue& v) { return std::visit(AttrPrinter{}, v); }

std::string Attrs::str() const {
  std::string s;
  for (const auto& [k, v] : items_) s += (s.empty() ? "" : ", ") + k + "=" + attr_value_str(v);
  return s;
}

}  // namespace rlx
