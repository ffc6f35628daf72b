#include "frontends/torch/torch_ir.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "core/json_depth.h"
#include "core/json_int.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {
using json = nlohmann::json;

std::vector<int64_t> ints_of(const json& v, const char* what) {
  RLX_CHECK(v.is_array(), what, " must be an array of integers, got ", v.type_name());
  RLX_CHECK(v.size() <= size_t(kMaxRank), what, " has ", v.size(), " entries (the most rlx ",
            "supports is ", kMaxRank, ")");
  std::vector<int64_t> out;
  for (const auto& e : v) out.push_back(json_int(e, what));
  return out;
}

// An input's "dynamic" list: per dim -1 (static), a symbol number k >= 0
// (named by symbol_name) or a symbol's name (torch.export's Dim names: an
// identifier). The same symbol on two dims means the same size.
std::vector<std::string> dynamic_of(const json& v) {
  RLX_CHECK(v.is_array() && v.size() <= size_t(kMaxRank),
            "\"dynamic\" must be an array of at most ", kMaxRank, " entries");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) {
      const int64_t k = json_int(e, "\"dynamic\"");
      RLX_CHECK(k >= -1, "\"dynamic\" entry ", k, ": -1 (static), a symbol number >= 0 or a name");
      out.push_back(k < 0 ? std::string() : symbol_name(k));
      continue;
    }
    const std::string name = e.get<std::string>();
    bool ok =
        !name.empty() && name.size() <= 64 && !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char ch : name) ok = ok && (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_');
    RLX_CHECK(ok, "\"dynamic\" symbol name '", name.substr(0, 64),
              "' is not an identifier (letters, digits, '_'; at most 64)");
    out.push_back(name);
  }
  return out;
}

// No loaded graph has more nodes (README, "Limits"): a bound far above real
// models that stops a document from making the importer build an absurd graph.
constexpr size_t kMaxNodes = 10'000'000;

const json& array_of(const json& v, const char* what) {
  RLX_CHECK(v.is_array(), what, " must be an array, got ", v.type_name());
  return v;
}

Arg parse_arg(const json& j) {
  RLX_CHECK(j.is_object() && j.size() == 1, "an Arg must be a one-key object, got ", j.dump());
  const std::string k = j.begin().key();
  const auto& v = j.begin().value();
  Arg a;
  if (k == "ref") {
    a.kind = Arg::Ref;
    a.text = v.get<std::string>();
  } else if (k == "int") {
    a.kind = Arg::Int;
    a.i = json_int(v, "an int Arg");
  } else if (k == "float") {
    a.kind = Arg::Float;
    // inf/nan arrive as strings or as large numbers depending on the writer.
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      if (s == "inf" || s == "Infinity") {
        a.f = INFINITY;
      } else if (s == "-inf" || s == "-Infinity") {
        a.f = -INFINITY;
      } else {
        RLX_CHECK(s == "nan" || s == "NaN", "a float Arg string must be nan, inf or -inf, got '", s,
                  "'");
        a.f = NAN;
      }
    } else {
      a.f = v.get<double>();
    }
  } else if (k == "bool") {
    a.kind = Arg::Bool;
    a.i = v.get<bool>();
  } else if (k == "str") {
    a.kind = Arg::Str;
    a.text = v.get<std::string>();
  } else if (k == "dtype") {
    a.kind = Arg::DTypeArg;
    a.text = v.get<std::string>();
  } else if (k == "none") {
    a.kind = Arg::None;
  } else if (k == "list") {
    a.kind = Arg::List;
    for (const auto& e : array_of(v, "a list Arg")) a.list.push_back(parse_arg(e));
  } else {
    throw make_error("unknown Arg kind '", k, "'");
  }
  return a;
}

TensorMeta meta_from(const json& j) {
  return parse_meta(ints_of(j.at("shape"), "shape"), j.at("dtype").get<std::string>());
}

Out parse_out(const json& j) {
  Out o;
  if (j.is_null()) return o;
  if (j.is_array()) {
    o.kind = Out::Tuple;
    for (const auto& e : j)
      o.tuple.push_back(e.is_object() && e.contains("shape") ? std::optional(meta_from(e))
                                                             : std::nullopt);
  } else if (j.is_object() && j.contains("scalar")) {
    o.kind = Out::Scalar;
    o.scalar = parse_arg(j["scalar"]);
  } else if (j.is_object() && j.contains("shape")) {
    o.kind = Out::Tensor;
    o.tensor = meta_from(j);
  }
  return o;
}

}  // namespace

std::string symbol_name(int64_t k) {
  static const char* names[] = {"batch", "seq", "rows", "past_seq"};
  return k >= 0 && k < 4 ? names[k] : "s" + std::to_string(k);
}

TensorMeta parse_meta(const Dims& shape, const std::string& dtype) {
  TensorMeta m;
  m.shape = shape;
  check_dims(shape, "tensor");  // non-negative, bounded rank and element count
  if (dtype == "c64") {
    m.complex = true;
    return m;
  }
  m.dtype = parse_dtype(dtype);
  return m;
}

namespace {

// The exporter writes +-inf as 1e999 / -1e999 (valid JSON), which nlohmann
// rejects as "number overflow": rewrite every number literal outside strings
// that overflows a double into the strings "inf" / "-inf", which float Args
// accept.
std::string quote_overflowing_numbers(const std::string& text) {
  std::string out;
  bool in_string = false;
  for (size_t i = 0; i < text.size();) {
    char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (ch == '"')
        in_string = false;
      ++i;
    } else if (ch == '"') {
      in_string = true;
      out += ch;
      ++i;
    } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
      size_t j = i + 1;
      while (j < text.size() &&
             (std::isdigit(static_cast<unsigned char>(text[j])) || text[j] == '.' ||
              text[j] == 'e' || text[j] == 'E' || text[j] == '+' || text[j] == '-'))
        ++j;
      std::string tok = text.substr(i, j - i);
      bool exp = tok.find_first_of("eE") != std::string::npos;
      double v = exp ? std::strtod(tok.c_str(), nullptr) : 0;
      out += exp && std::isinf(v) ? (v > 0 ? "\"inf\"" : "\"-inf\"") : tok;
      i = j;
    } else {
      out += ch;
      ++i;
    }
  }
  return out;
}

}  // namespace

Document parse(const std::string& text, const std::string& source) {
  json doc;
  try {
    check_json_depth(text, source);
    doc = json::parse(
        text.find_first_of("eE") == std::string::npos ? text : quote_overflowing_numbers(text));
  } catch (const json::exception& e) {
    throw make_error(source, ": invalid JSON: ", e.what());
  }
  Document d;
  std::string where = "top level";
  try {
    RLX_CHECK(doc.is_object() && doc.value("format", "") == "rlx-torch-ir",
              "not a torch-ir document (\"format\" must be \"rlx-torch-ir\")");
    // Not doc.value("version", 0): get<int> of 1e44 is undefined behavior
    // (found by fuzz_torch_ir).
    const json version = doc.value("version", json(0));
    RLX_CHECK(version.is_number_integer() && version == 1, "unsupported torch-ir version ",
              version.dump());
    d.model_name = doc.value("model_name", "");
    d.producer = doc.value("producer", "");
    d.decomposition = doc.value("decomposition", "");
    // Inputs, weights and nodes share one namespace of ids: a second
    // definition would silently shadow the first.
    std::set<std::string> ids;
    auto define = [&](const json& j) {
      std::string id = j.at("id").get<std::string>();
      RLX_CHECK(ids.insert(id).second, "id '", id, "' is defined twice");
      return id;
    };
    auto label = [](const json& j) {
      return j.is_object() && j.contains("id") && j["id"].is_string() ? j["id"].get<std::string>()
                                                                      : std::string("?");
    };
    for (const auto& j : array_of(doc.at("inputs"), "\"inputs\"")) {
      where = "input " + label(j);
      Input in;
      in.id = define(j);
      TensorMeta m = meta_from(j);
      RLX_CHECK(!m.complex, "complex inputs are not supported");
      in.shape = m.shape;
      in.dtype = m.dtype;
      in.dynamic = j.contains("dynamic") ? dynamic_of(j["dynamic"])
                                         : std::vector<std::string>(in.shape.size());
      RLX_CHECK(in.dynamic.size() == in.shape.size(), "\"dynamic\" has ", in.dynamic.size(),
                " entries for a rank-", in.shape.size(), " input");
      d.inputs.push_back(std::move(in));
    }
    // value() returns a copy: bind it, or the loop would walk a dead temporary.
    const json weights = doc.value("weights", json::array());
    for (const auto& j : array_of(weights, "\"weights\"")) {
      where = "weight " + label(j);
      Weight w;
      w.id = define(j);
      w.key = j.value("key", w.id);
      w.kind = j.value("kind", "param");
      TensorMeta m = meta_from(j);
      RLX_CHECK(!m.complex, "complex weights are not supported");
      w.shape = m.shape;
      w.dtype = m.dtype;
      d.weights.push_back(std::move(w));
    }
    const json& nodes = array_of(doc.at("nodes"), "\"nodes\"");
    RLX_CHECK(nodes.size() <= kMaxNodes, "the graph has ", nodes.size(),
              " nodes, more than the limit of ", kMaxNodes);
    for (const auto& j : nodes) {
      where = "node " + label(j);
      Node n;
      n.id = define(j);
      n.op = j.at("op").get<std::string>();
      const json args = j.value("args", json::array());
      for (const auto& a : array_of(args, "\"args\"")) n.args.push_back(parse_arg(a));
      // Bind the kwargs object first: items() of a temporary dangles. An
      // array's items() would yield "0", "1", ... as keyword names.
      const json kwargs = j.value("kwargs", json::object());
      RLX_CHECK(kwargs.is_object(), "\"kwargs\" must be an object, got ", kwargs.type_name());
      for (const auto& [k, v] : kwargs.items()) n.kwargs.emplace(k, parse_arg(v));
      n.out = parse_out(j.value("out", json()));
      d.nodes.push_back(std::move(n));
    }
    where = "outputs";
    for (const auto& j : array_of(doc.at("outputs"), "\"outputs\"")) {
      OutputRef o;
      if (j.contains("ref")) o.ref = j["ref"].get<std::string>();
      if (j.contains("name")) o.name = j["name"].get<std::string>();
      if (j.contains("const")) o.constant = parse_arg(j["const"]);
      RLX_CHECK(o.ref || o.constant, "an output needs \"ref\" or \"const\"");
      d.outputs.push_back(std::move(o));
    }
  } catch (const json::exception& e) {
    throw make_error(source, ": ", where, ": malformed torch-ir: ", e.what());
  } catch (const Error& e) {
    throw e.with_context(source + ": " + where);
  }
  return d;
}

}  // namespace rlx::torch_ir
