#include "frontends/torch/torch_ir.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "rlx/error.h"

namespace rlx::torch_ir {
namespace {
using json = nlohmann::json;

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
    a.i = v.get<int64_t>();
  } else if (k == "float") {
    a.kind = Arg::Float;
    // inf/nan arrive as strings or as large numbers depending on the writer.
    if (v.is_string()) {
      std::string s = v.get<std::string>();
      a.f = s == "inf" || s == "Infinity"     ? INFINITY
            : s == "-inf" || s == "-Infinity" ? -INFINITY
                                              : NAN;
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
    for (const auto& e : v) a.list.push_back(parse_arg(e));
  } else {
    throw make_error("unknown Arg kind '", k, "'");
  }
  return a;
}

TensorMeta meta_from(const json& j, const std::string& src) {
  return parse_meta(src, j.at("shape").get<Dims>(), j.at("dtype").get<std::string>());
}

Out parse_out(const json& j, const std::string& src) {
  Out o;
  if (j.is_null()) return o;
  if (j.is_array()) {
    o.kind = Out::Tuple;
    for (const auto& e : j)
      o.tuple.push_back(e.is_object() && e.contains("shape") ? std::optional(meta_from(e, src))
                                                             : std::nullopt);
  } else if (j.is_object() && j.contains("scalar")) {
    o.kind = Out::Scalar;
    o.scalar = parse_arg(j["scalar"]);
  } else if (j.is_object() && j.contains("shape")) {
    o.kind = Out::Tensor;
    o.tensor = meta_from(j, src);
  }
  return o;
}

}  // namespace

std::string symbol_name(int64_t k) {
  static const char* names[] = {"batch", "seq", "rows", "past_seq"};
  return k >= 0 && k < 4 ? names[k] : "s" + std::to_string(k);
}

TensorMeta parse_meta(const std::string& source, const Dims& shape, const std::string& dtype) {
  TensorMeta m;
  m.shape = shape;
  for (int64_t d : shape) RLX_CHECK(d >= 0, source, ": negative dim in ", dims_str(shape));
  if (dtype == "c64") {
    m.complex = true;
    return m;
  }
  m.dtype = parse_dtype(dtype);
  return m;
}

// rlx_torch writes +-inf as the numbers 1e999 / -1e999 (valid JSON), which
// nlohmann rejects as an overflow: turn them into the "inf" / "-inf" strings
// parse_arg accepts, outside string literals only.
std::string quote_infinities(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_str = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (in_str) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (ch == '"')
        in_str = false;
      continue;
    }
    if (ch == '"') in_str = true;
    bool neg = ch == '-';
    size_t k = i + (neg ? 1 : 0);
    bool number_start = out.empty() || !(std::isdigit(static_cast<unsigned char>(out.back())) ||
                                         out.back() == '.' || out.back() == 'e');
    if (number_start && text.compare(k, 5, "1e999") == 0 &&
        (k + 5 == text.size() || !std::isalnum(static_cast<unsigned char>(text[k + 5])))) {
      out += neg ? "\"-inf\"" : "\"inf\"";
      i = k + 4;
      continue;
    }
    out += ch;
  }
  return out;
}

Document parse(const std::string& text, const std::string& source) {
  json doc;
  try {
    doc = json::parse(text.find("1e999") == std::string::npos ? text : quote_infinities(text));
  } catch (const json::exception& e) {
    throw make_error(source, ": invalid JSON: ", e.what());
  }
  Document d;
  std::string where = "top level";
  try {
    RLX_CHECK(doc.is_object() && doc.value("format", "") == "rlx-torch-ir",
              "not a torch-ir document (\"format\" must be \"rlx-torch-ir\")");
    RLX_CHECK(doc.value("version", 0) == 1, "unsupported torch-ir version ",
              doc.value("version", 0));
    d.model_name = doc.value("model_name", "");
    d.producer = doc.value("producer", "");
    d.decomposition = doc.value("decomposition", "");
    for (const auto& j : doc.at("inputs")) {
      where = "input " + j.value("id", "?");
      Input in;
      in.id = j.at("id").get<std::string>();
      TensorMeta m = meta_from(j, source);
      RLX_CHECK(!m.complex, "complex inputs are not supported");
      in.shape = m.shape;
      in.dtype = m.dtype;
      in.dynamic = j.value("dynamic", std::vector<int64_t>(in.shape.size(), -1));
      RLX_CHECK(in.dynamic.size() == in.shape.size(), "\"dynamic\" has ", in.dynamic.size(),
                " entries for a rank-", in.shape.size(), " input");
      d.inputs.push_back(std::move(in));
    }
    for (const auto& j : doc.value("weights", json::array())) {
      where = "weight " + j.value("id", "?");
      Weight w;
      w.id = j.at("id").get<std::string>();
      w.key = j.value("key", w.id);
      w.kind = j.value("kind", "param");
      TensorMeta m = meta_from(j, source);
      RLX_CHECK(!m.complex, "complex weights are not supported");
      w.shape = m.shape;
      w.dtype = m.dtype;
      d.weights.push_back(std::move(w));
    }
    for (const auto& j : doc.at("nodes")) {
      where = "node " + j.value("id", "?");
      Node n;
      n.id = j.at("id").get<std::string>();
      n.op = j.at("op").get<std::string>();
      for (const auto& a : j.value("args", json::array())) n.args.push_back(parse_arg(a));
      // Bind the kwargs object: items() of a temporary dangles in a range-for.
      const json kwargs = j.value("kwargs", json::object());
      for (const auto& [k, v] : kwargs.items()) n.kwargs.emplace(k, parse_arg(v));
      n.out = parse_out(j.value("out", json()), source);
      d.nodes.push_back(std::move(n));
    }
    where = "outputs";
    for (const auto& j : doc.at("outputs")) {
      OutputRef o;
      if (j.contains("ref")) o.ref = j["ref"].get<std::string>();
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
