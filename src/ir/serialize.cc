// Graph <-> JSON. Constants are stored inline as base64 of their raw bytes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/json_depth.h"
#include "core/json_int.h"
#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {
namespace {
using json = nlohmann::json;

constexpr const char* kFormat = "rlx-graph";
// Version 3: multi-output nodes list their outputs' shapes under "results" and
// are followed by their `result` nodes. Version 2 (plain attribute values)
// and 1 (tagged {"i": 1} values, div rounding "") still load: their topk and
// norm-grad nodes picked one output with an `output` attribute.
constexpr int kVersion = 3;

const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const unsigned char* p, size_t n) {
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = uint32_t(p[i]) << 16;
    if (i + 1 < n) v |= uint32_t(p[i + 1]) << 8;
    if (i + 2 < n) v |= p[i + 2];
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < n ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < n ? kB64[v & 63] : '=';
  }
  return out;
}

std::vector<unsigned char> base64_decode(const std::string& s) {
  RLX_CHECK(s.size() % 4 == 0, "bad base64 length ", s.size());
  auto val = [](char c) -> int {
    const char* p = std::strchr(kB64, c);
    return c && p ? int(p - kB64) : -1;
  };
  std::vector<unsigned char> out;
  out.reserve(s.size() / 4 * 3);
  for (size_t i = 0; i < s.size(); i += 4) {
    int v[4];
    // '=' only pads the last group: "xx==" or "xxx=".
    const bool last = i + 4 == s.size();
    RLX_CHECK(s[i] != '=' && s[i + 1] != '=' && (s[i + 2] != '=' || s[i + 3] == '=') &&
                  (last || s[i + 3] != '='),
              "bad base64 padding");
    for (int k = 0; k < 4; ++k) {
      v[k] = s[i + k] == '=' ? 0 : val(s[i + k]);
      RLX_CHECK(v[k] >= 0, "bad base64 character");
    }
    uint32_t w = uint32_t(v[0]) << 18 | uint32_t(v[1]) << 12 | uint32_t(v[2]) << 6 | uint32_t(v[3]);
    out.push_back(uint8_t(w >> 16));
    if (s[i + 2] != '=') out.push_back(uint8_t(w >> 8));
    if (s[i + 3] != '=') out.push_back(uint8_t(w));
  }
  return out;
}

json dims_json(const std::vector<Dim>& dims) {
  json a = json::array();
  for (const Dim& d : dims) a.push_back(d.is_static() ? json(d.value) : json(d.sym));
  return a;
}

std::vector<int64_t> ints_of(const json& v, const char* what) {
  RLX_CHECK(v.is_array(), what, " must be an array of integers, got ", v.dump());
  std::vector<int64_t> out;
  out.reserve(v.size());
  for (const auto& e : v) out.push_back(json_int(e, what));
  return out;
}

std::vector<Dim> dims_from(const json& a) {
  RLX_CHECK(a.is_array(), "shape must be an array");
  std::vector<Dim> dims;
  for (const auto& d : a) {
    if (d.is_number_integer()) {
      const int64_t v = json_int(d, "a dim");
      RLX_CHECK(v >= 0, "negative dim ", v);
      dims.emplace_back(v);
    } else if (d.is_string()) {
      dims.push_back(Dim::symbol(d.get<std::string>()));
    } else {
      throw make_error("dim must be an integer or a symbol name");
    }
  }
  return dims;
}

// JSON has no inf/NaN (nlohmann writes null), but attributes use them (clamp
// bounds, pad values), so non-finite floats are written as strings.
json float_json(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

double float_from(const json& j) {
  if (j.is_number()) return j.get<double>();
  RLX_CHECK(j.is_string(), "float attribute must be a number, \"inf\", \"-inf\" or \"nan\"");
  const std::string& s = j.get_ref<const std::string&>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw make_error("bad float attribute '", s, "'");
}

json attr_json(const AttrValue& v) {
  struct V {
    json operator()(int64_t x) const { return x; }
    json operator()(double x) const { return float_json(x); }
    json operator()(bool x) const { return x; }
    json operator()(const std::string& x) const { return x; }
    json operator()(const std::vector<int64_t>& x) const { return x; }
    json operator()(const std::vector<double>& x) const {
      json a = json::array();
      for (double d : x) a.push_back(float_json(d));
      return a;
    }
  };
  return std::visit(V{}, v);
}

// A version-2 value; the schema decides what it means (a float field takes
// an int, a float list an int list, "inf" a float).
AttrValue attr_from(const json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return json_int(v, "an integer attribute");
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  RLX_CHECK(v.is_array(), "attribute must be a number, bool, string or list, got ", v.dump());
  bool ints = true;
  for (const auto& e : v) ints = ints && e.is_number_integer();
  if (ints) return ints_of(v, "an integer list attribute");
  std::vector<double> out;
  for (const auto& e : v) out.push_back(float_from(e));
  return out;
}

// A version-1 value: tagged so that 1 (int) and 1.0 (float) were told apart.
AttrValue attr_from_v1(const json& j) {
  RLX_CHECK(j.is_object() && j.size() == 1, "attribute must be a one-key object");
  // Not `*j.items().begin()`: that binds to a proxy of a dead temporary.
  const auto it = j.begin();
  const std::string& k = it.key();
  const json& v = it.value();
  if (k == "i") return json_int(v, "an integer attribute");
  if (k == "f") return float_from(v);
  if (k == "s") return v.get<std::string>();
  if (k == "ints") return ints_of(v, "an integer list attribute");
  if (k == "floats") {
    RLX_CHECK(v.is_array(), "float list attribute must be an array");
    std::vector<double> out;
    for (const auto& e : v) out.push_back(float_from(e));
    return out;
  }
  throw make_error("unknown attribute kind '", k, "'");
}

Attrs read_attrs(const json& j, Op op, int version) {
  Attrs a;
  if (!j.contains("attrs")) return a;
  RLX_CHECK(j.at("attrs").is_object(), "attrs must be an object");
  for (const auto& [k, v] : j.at("attrs").items())
    a.set(k, version == 1 ? attr_from_v1(v) : attr_from(v));
  // Version 1 spelt true division as rounding "".
  if (version == 1 && op == Op::Div && a.has("rounding") && a.s("rounding").empty())
    a.set("rounding", std::string("none"));
  return a;
}

json graph_doc(const Graph& g);
Graph graph_from_doc(const json& doc, const std::string& source);

}  // namespace

std::string to_json(const Graph& g) { return graph_doc(g).dump(1); }

Graph from_json(std::string_view text, const std::string& source) {
  check_json_depth(text, source);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    throw make_error(source, ": invalid JSON: ", e.what());
  }
  return graph_from_doc(doc, source);
}

namespace {

// A control node's bodies: whole graph documents of their own (null: a branch not lowered).
json bodies_json(const Node& n) {
  json b = json::array();
  for (const auto& body : n.bodies) b.push_back(body ? graph_doc(*body) : json(nullptr));
  return b;
}

std::vector<std::shared_ptr<const Graph>> bodies_from(const json& j, const std::string& source) {
  std::vector<std::shared_ptr<const Graph>> bodies;
  RLX_CHECK(j.is_array(), "\"bodies\" must be an array");
  for (const json& b : j)
    bodies.push_back(b.is_null()
                         ? nullptr
                         : std::make_shared<const Graph>(graph_from_doc(
                               b, source + " (body " + std::to_string(bodies.size()) + ")")));
  return bodies;
}

json graph_doc(const Graph& g) {
  json nodes = json::array();
  for (const Node& n : g.nodes()) {
    json j = {{"op", op_name(n.op)}, {"inputs", n.inputs}};
    if (has_results(n.op)) {
      json r = json::array();
      for (const Shape& s : n.results)
        r.push_back({{"shape", dims_json(s.dims)}, {"dtype", dtype_name(s.dtype)}});
      j["results"] = r;
    } else {
      j["shape"] = dims_json(n.shape.dims);
      j["dtype"] = dtype_name(n.shape.dtype);
    }
    if (!n.name.empty()) j["name"] = n.name;
    if (!n.origin.empty()) j["origin"] = n.origin;
    const Attrs attrs = attrs_to_map(n.attrs);
    if (!attrs.items().empty()) {
      json a = json::object();
      for (const auto& [k, v] : attrs.items()) a[k] = attr_json(v);
      j["attrs"] = a;
    }
    if (n.op == Op::Constant)
      j["data"] = base64_encode(static_cast<const unsigned char*>(n.value.raw()), n.value.nbytes());
    if (!n.bodies.empty()) j["bodies"] = bodies_json(n);
    nodes.push_back(std::move(j));
  }
  json outs = json::array();
  for (const auto& o : g.outputs()) outs.push_back({{"name", o.name}, {"node", o.node}});
  return {{"format", kFormat}, {"version", kVersion}, {"nodes", nodes}, {"outputs", outs}};
}

// No loaded graph has more nodes (README, "Limits"): a bound far above real
// models that stops a file from making the loader build an absurd graph.
constexpr size_t kMaxNodes = 10'000'000;

Graph graph_from_doc(const json& doc, const std::string& source) {
  Graph g;
  size_t index = 0;
  try {
    RLX_CHECK(doc.is_object() && doc.value("format", "") == kFormat,
              "not an rlx graph (missing \"format\": \"", kFormat, "\")");
    const json& ver = doc.value("version", json(0));
    const int version = ver.is_number_integer() ? ver.get<int>() : 0;
    RLX_CHECK(version >= 1 && version <= kVersion, "unsupported graph version ", ver.dump(),
              " (this build reads 1 to ", kVersion, ")");
    // File node index -> graph node: files before version 3 number nodes
    // without the result nodes that migration adds.
    std::vector<NodeId> id_of;
    const json& nodes = doc.at("nodes");
    RLX_CHECK(nodes.is_array(), "\"nodes\" must be an array");
    RLX_CHECK(nodes.size() <= kMaxNodes, "the graph has ", nodes.size(),
              " nodes, more than the limit of ", kMaxNodes);
    for (const auto& j : nodes) {
      Node n;
      n.op = parse_op(j.at("op").get<std::string>());
      for (int64_t in : ints_of(j.value("inputs", json::array()), "\"inputs\"")) {
        // Read wide: a narrowing conversion could turn 2^32 into a valid id 0.
        RLX_CHECK(in >= 0 && in < int64_t(index), "input %", in, " is not an earlier node");
        n.inputs.push_back(id_of[size_t(in)]);
      }
      n.name = j.value("name", "");
      n.origin = j.value("origin", "");
      Attrs attrs = read_attrs(j, n.op, version);
      if (version < 3 && has_results(n.op)) {
        // One output picked by `output`: the node with all its outputs, read through a result.
        const int64_t output = attrs.has("output") ? attrs.i("output") : 0;
        attrs.erase("output");
        const NodeId m = g.add(n.op, n.inputs, attrs, n.name, n.origin);
        id_of.push_back(g.result(m, int(output)));
        ++index;
        continue;
      }
      n.attrs = parse_attrs(n.op, attrs);
      if (j.contains("bodies")) n.bodies = bodies_from(j.at("bodies"), source);
      if (has_results(n.op)) {
        RLX_CHECK(j.at("results").is_array(), "results must be an array");
        for (const auto& r : j.at("results"))
          n.results.emplace_back(dims_from(r.at("shape")),
                                 parse_dtype(r.at("dtype").get<std::string>()));
      } else {
        n.shape = Shape(dims_from(j.at("shape")), parse_dtype(j.at("dtype").get<std::string>()));
      }
      if (n.op == Op::Constant) {
        auto bytes = base64_decode(j.at("data").get<std::string>());
        RLX_CHECK(n.shape.is_static(), "constant with symbolic shape");
        // Size check before allocating: the data, not the (untrusted) shape,
        // bounds the allocation, and a huge shape must not overflow numel.
        const Dims d = n.shape.concrete();
        uint64_t nonzero = 1;  // product of the non-zero dims, kept far from overflow
        bool empty = false;
        for (int64_t v : d) {
          empty = empty || v == 0;
          RLX_CHECK(v == 0 || nonzero <= (uint64_t(1) << 56) / uint64_t(v), "constant shape ",
                    n.shape.str(), " is too large");
          if (v) nonzero *= uint64_t(v);
        }
        const uint64_t need = empty ? 0 : nonzero * dtype_size(n.shape.dtype);
        RLX_CHECK(bytes.size() == need, "constant data has ", bytes.size(), " bytes, shape ",
                  n.shape.str(), " needs ", need);
        Tensor t(d, n.shape.dtype);
        if (!bytes.empty()) std::memcpy(t.raw(), bytes.data(), bytes.size());
        n.value = t;
      }
      id_of.push_back(g.append_raw(std::move(n)));
      ++index;
    }
    for (const auto& o : doc.at("outputs")) {
      int64_t id = json_int(o.at("node"), "an output's \"node\"");
      RLX_CHECK(id >= 0 && id < int64_t(id_of.size()), "output refers to node %", id,
                " but the graph has ", id_of.size(), " nodes");
      g.add_output(o.at("name").get<std::string>(), id_of[size_t(id)]);
    }
  } catch (const json::exception& e) {
    throw make_error(source, ": node ", index, ": malformed graph JSON: ", e.what());
  } catch (const Error& e) {
    throw e.with_context(source + ": node " + std::to_string(index));
  }
  try {
    g.verify();
  } catch (const Error& e) {
    throw e.with_context(source);
  }
  return g;
}

}  // namespace
}  // namespace rlx
