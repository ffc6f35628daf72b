// An untyped attribute map: name -> int, float, bool, string or lists. It is
// what JSON, importers and builders speak; parse_attrs (op_attrs.h) turns it
// into the op's typed struct, checked against ops.def.
#pragma once
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace rlx {

using AttrValue =
    std::variant<int64_t, double, bool, std::string, std::vector<int64_t>, std::vector<double>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> init) {
    for (auto& [k, v] : init) set(k, v);
  }

  Attrs& set(const std::string& name, AttrValue v);
  void erase(const std::string& name);  // no-op when absent
  bool has(const std::string& name) const { return find(name) != nullptr; }
  const AttrValue* get_if(const std::string& name) const { return find(name); }

  // Typed reads. The one-argument forms throw rlx::Error when the attribute is
  // missing or has another kind; the two-argument forms return the default.
  int64_t i(const std::string& name) const;
  int64_t i(const std::string& name, int64_t def) const;
  double f(const std::string& name) const;  // accepts ints too
  double f(const std::string& name, double def) const;
  const std::string& s(const std::string& name) const;
  std::string s(const std::string& name, const std::string& def) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  std::vector<int64_t> ints(const std::string& name, std::vector<int64_t> def) const;
  std::vector<double> floats(const std::string& name) const;

  const std::vector<std::pair<std::string, AttrValue>>& items() const { return items_; }
  bool operator==(const Attrs& o) const { return items_ == o.items_; }
  bool operator<(const Attrs& o) const { return items_ < o.items_; }
  // "axis=1, eps=1e-05, perm=[0,2,1]"
  std::string str() const;

 private:
  const AttrValue* find(const std::string& name) const;
  const AttrValue& get(const std::string& name) const;
  std::vector<std::pair<std::string, AttrValue>> items_;  // sorted by name
};

std::string attr_value_str(const AttrValue& v);

}  // namespace rlx
