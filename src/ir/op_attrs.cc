// The one attribute parser and printer, generated from ops.def's schema.
#include "rlx/op_attrs.h"

#include <algorithm>
#include <type_traits>

#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {
namespace {

// visit_fields(a, defaults, f) calls f(key, field, default_field, required)
// for every field of the set, in ops.def order.
#define INT(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define FLOAT(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define BOOL(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define STR(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define INTS(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define FLOATS(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define ENUM(name, T, def) f(#name, a.name, d.name, false);
#define DTYPE(name, ...) f(#name, a.name, d.name, sizeof(#__VA_ARGS__) == 1);
#define OPT_INT(name) f(#name, a.name, d.name, false);
#define OPT_FLOAT(name) f(#name, a.name, d.name, false);
#define OP(name) f(#name, a.name, d.name, true);
#define RLX_ATTRS(S, ...)                                                                  \
  template <typename A, typename F>                                                        \
  requires std::is_same_v<std::remove_const_t<A>, S##Attrs> void visit_fields(             \
      [[maybe_unused]] A& a, [[maybe_unused]] const S##Attrs& d, [[maybe_unused]] F&& f) { \
    __VA_ARGS__                                                                            \
  }
#include "rlx/ops.def"
#undef RLX_ATTRS
#undef INT
#undef FLOAT
#undef BOOL
#undef STR
#undef INTS
#undef FLOATS
#undef ENUM
#undef DTYPE
#undef OPT_INT
#undef OPT_FLOAT
#undef OP

// ---- one field: kind names, reading from and writing to AttrValue

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

// What a field of type T accepts, for messages and the schema listing.
template <typename T>
std::string kind_name() {
  if constexpr (IsOptional<T>::value) {
    return kind_name<typename T::value_type>();
  } else if constexpr (AttrEnum<T>) {
    std::string s;
    for (int i = 0;; ++i) {
      std::string_view v = enum_value_name(EnumInfo<T>::values, i);
      if (v.empty()) return s;
      s += (i ? "|" : "") + std::string(v);
    }
  } else {
    if constexpr (std::is_same_v<T, int64_t>) return "int";
    if constexpr (std::is_same_v<T, double>) return "float";
    if constexpr (std::is_same_v<T, bool>) return "bool";
    if constexpr (std::is_same_v<T, std::string>) return "string";
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) return "int list";
    if constexpr (std::is_same_v<T, std::vector<double>>) return "float list";
    if constexpr (std::is_same_v<T, DType>) return "dtype";
    if constexpr (std::is_same_v<T, Op>) return "op name";
  }
}

// Reads `v` into `out`; false when the kind does not fit.
bool read(const AttrValue& v, int64_t& out) {
  auto p = std::get_if<int64_t>(&v);
  return p && (out = *p, true);
}
bool read(const AttrValue& v, double& out) {
  if (auto p = std::get_if<double>(&v)) return out = *p, true;
  if (auto p = std::get_if<int64_t>(&v)) return out = double(*p), true;
  // JSON has no inf/NaN: the serializer spells them as strings.
  if (auto p = std::get_if<std::string>(&v)) {
    if (*p == "inf") return out = INFINITY, true;
    if (*p == "-inf") return out = -INFINITY, true;
    if (*p == "nan") return out = NAN, true;
  }
  return false;
}
bool read(const AttrValue& v, bool& out) {
  if (auto p = std::get_if<bool>(&v)) return out = *p, true;
  // Version-1 graphs and older builders spell flags 0/1.
  if (auto p = std::get_if<int64_t>(&v); p && (*p == 0 || *p == 1)) return out = *p != 0, true;
  return false;
}
bool read(const AttrValue& v, std::string& out) {
  auto p = std::get_if<std::string>(&v);
  return p && (out = *p, true);
}
bool read(const AttrValue& v, std::vector<int64_t>& out) {
  auto p = std::get_if<std::vector<int64_t>>(&v);
  return p && (out = *p, true);
}
bool read(const AttrValue& v, std::vector<double>& out) {
  if (auto p = std::get_if<std::vector<double>>(&v)) return out = *p, true;
  if (auto p = std::get_if<std::vector<int64_t>>(&v)) return out.assign(p->begin(), p->end()), true;
  return false;
}
bool read(const AttrValue& v, DType& out) {
  auto p = std::get_if<std::string>(&v);
  return p && (out = parse_dtype(*p), true);
}
bool read(const AttrValue& v, Op& out) {
  auto p = std::get_if<std::string>(&v);
  return p && (out = parse_op(*p), true);
}
template <AttrEnum E>
bool read(const AttrValue& v, E& out) {
  auto p = std::get_if<std::string>(&v);
  return p && (out = parse_enum<E>(*p), true);
}
template <typename T>
bool read(const AttrValue& v, std::optional<T>& out) {
  T x{};
  return read(v, x) && (out = x, true);
}

template <typename T>
std::optional<AttrValue> write(const T& x) {
  if constexpr (std::is_same_v<T, DType>)
    return std::string(dtype_name(x));
  else if constexpr (std::is_same_v<T, Op>)
    return std::string(op_name(x));
  else if constexpr (AttrEnum<T>)
    return std::string(to_string(x));
  else
    return AttrValue(x);
}
template <typename T>
std::optional<AttrValue> write(const std::optional<T>& x) {
  return x ? write(*x) : std::nullopt;
}

template <typename S>
std::string schema_of() {
  std::string s;
  S a{};
  visit_fields(a, a, [&](const char* key, const auto& field, const auto&, bool required) {
    using T = std::remove_cvref_t<decltype(field)>;
    s += (s.empty() ? "" : ", ") + std::string(key) + ": " + kind_name<T>();
    if (required)
      s += " (required)";
    else if (auto v = write(field))
      s += " = " + attr_value_str(*v);
    else
      s += " (optional)";
  });
  return s.empty() ? "no attributes" : s;
}

template <typename S>
OpAttrs parse_set(Op op, const Attrs& map) {
  S a{};
  const S defaults{};
  size_t used = 0;
  visit_fields(a, defaults, [&](const char* key, auto& field, const auto&, bool required) {
    const AttrValue* v = map.get_if(key);
    if (!v) {
      RLX_CHECK(!required, op_name(op), ": missing attribute '", key, "' (", op_name(op), " takes ",
                schema_of<S>(), ")");
      return;
    }
    ++used;
    bool ok;
    try {
      ok = read(*v, field);
    } catch (const Error& e) {
      throw e.with_context(std::string(op_name(op)) + ": attribute '" + key + "'");
    }
    using T = std::remove_cvref_t<decltype(field)>;
    RLX_CHECK(ok, op_name(op), ": attribute '", key, "' is ", attr_value_str(*v), ", expected ",
              kind_name<T>());
  });
  if (used != map.items().size()) {
    std::string unknown;
    // Not `auto& [k, v]`: clang 14 cannot capture a structured binding in a lambda.
    for (const auto& item : map.items()) {
      const std::string& k = item.first;
      bool known = false;
      visit_fields(a, defaults,
                   [&](const char* key, auto&, const auto&, bool) { known = known || k == key; });
      if (!known) unknown += (unknown.empty() ? "'" : ", '") + k + "'";
    }
    throw make_error(op_name(op), ": unknown attribute ", unknown, " (", op_name(op), " takes ",
                     schema_of<S>(), ")");
  }
  return a;
}

template <typename S>
Attrs map_of(const S& a, bool skip_defaults) {
  Attrs m;
  const S defaults{};
  visit_fields(a, defaults,
               [&](const char* key, const auto& field, const auto& def, bool required) {
                 if (skip_defaults && !required && field == def) return;
                 if (auto v = write(field)) m.set(key, std::move(*v));
               });
  return m;
}

}  // namespace

std::string_view enum_value_name(std::string_view values, int index) {
  for (int i = 0; !values.empty(); ++i) {
    size_t comma = values.find(',');
    std::string_view v = values.substr(0, comma);
    while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
    while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
    if (i == index) return v;
    if (comma == std::string_view::npos) break;
    values.remove_prefix(comma + 1);
  }
  return {};
}

int parse_enum_value(std::string_view type, std::string_view values, std::string_view name) {
  for (int i = 0;; ++i) {
    std::string_view v = enum_value_name(values, i);
    if (v.empty()) break;
    if (v == name) return i;
  }
  // `values` is the declaration itself, "a, b, c": already the list to show.
  throw make_error("unknown ", type, " '", name, "' (valid: ", values, ")");
}

OpAttrs default_attrs(Op op) {
  switch (op) {
#define RLX_OP(e, name, fam, set, ...) \
  case Op::e:                          \
    return set##Attrs{};
#include "rlx/ops.def"
#undef RLX_OP
  }
  return {};
}

OpAttrs parse_attrs(Op op, const Attrs& map) {
  switch (op) {
#define RLX_OP(e, name, fam, set, ...) \
  case Op::e:                          \
    return parse_set<set##Attrs>(op, map);
#include "rlx/ops.def"
#undef RLX_OP
  }
  return {};
}

Attrs attrs_to_map(const OpAttrs& a, bool skip_defaults) {
  return std::visit(
      [&](const auto& s) -> Attrs {
        if constexpr (std::is_same_v<std::remove_cvref_t<decltype(s)>, std::monostate>)
          return {};
        else
          return map_of(s, skip_defaults);
      },
      a);
}

std::string attrs_schema(Op op) {
  switch (op) {
#define RLX_OP(e, name, fam, set, ...) \
  case Op::e:                          \
    return schema_of<set##Attrs>();
#include "rlx/ops.def"
#undef RLX_OP
  }
  return {};
}

// The OpAttrs alternative each op holds, so attrs_match (run on every node
// a pass appends) compares an index instead of building a default struct.
template <typename T, typename... Ts>
constexpr size_t alternative_index(std::variant<Ts...>*) {
  size_t i = 0;
  (void)((std::is_same_v<T, Ts> ? false : (++i, true)) && ...);
  return i;
}
constexpr size_t kAttrsIndex[] = {
#define RLX_OP(e, name, fam, set, ...) \
  alternative_index<set##Attrs>(static_cast<OpAttrs*>(nullptr)),
#include "rlx/ops.def"
#undef RLX_OP
};

bool attrs_match(Op op, const OpAttrs& a) { return a.index() == kAttrsIndex[size_t(op)]; }

OpAttrs activation_attrs(const ActivationGradAttrs& g) {
  const Attrs all = attrs_to_map(g);
  Attrs own;
  for (const auto& [k, v] : all.items())
    if (k != "kind") own.set(k, v);
  return parse_attrs(activation_kind(g.kind), own);
}

ActivationGradAttrs activation_grad_attrs(Op kind, const OpAttrs& activation) {
  Attrs m = attrs_to_map(activation, true);
  m.set("kind", std::string(op_name(activation_kind(kind))));
  return std::get<ActivationGradAttrs>(parse_attrs(Op::ActivationGrad, m));
}

void throw_not_in_family(Op op, OpFamily want) {
  throw make_error("'", op_name(op), "' is a ", to_string(op_family(op)), " op, not a ",
                   to_string(want), " op");
}

}  // namespace rlx
