#include "frontends/onnx/import.h"

#include <set>

#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx {
namespace {
using namespace onnx;

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Every node whose op has no lowering, in one message (the torch importer's format).
void check_coverage(const onnx::Model& m) {
  std::map<std::string, int> missing;
  for (const auto& n : m.graph.nodes) {
    if (default_domain(n.domain) && registry().find(n.op_type)) continue;
    ++missing[(default_domain(n.domain) ? "" : n.domain + ".") + n.op_type];
  }
  if (missing.empty()) return;
  std::string msg = m.path + ": " + std::to_string(missing.size()) +
                    " unsupported op kind(s) at opset " + std::to_string(m.opset()) + ": ";
  bool first = true;
  for (const auto& [op, count] : missing) {
    msg += (first ? "" : ", ") + op + " (x" + std::to_string(count) + ")";
    first = false;
  }
  throw Error(msg);
}

// "Conv  (x[1,3,8,8] f32, w[4,3,3,3] f32)  [node 'Conv_0']"
std::string provenance(const onnx::Node& n, size_t index, Ctx& c) {
  std::string s = n.op_type + "  (";
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (k) s += ", ";
    if (!c.has(k)) {
      s += "-";
      continue;
    }
    try {
      s += n.inputs[k] + c.shape(k).str();
    } catch (const Error&) {
      s += n.inputs[k];
    }
  }
  return s + ")  [" + n.label(index) + "]";
}

DType declared_dtype(const ValueInfo& v, const std::string& what) {
  RLX_CHECK(v.elem_type != 0, what, " '", v.name, "' has no tensor type");
  auto t = dtype_of(v.elem_type);
  RLX_CHECK(t, what, " '", v.name, "' has dtype ", onnx_type_name(v.elem_type),
            ", which rlx does not support");
  return *t;
}

}  // namespace

bool looks_like_onnx_bytes(std::string_view head) {
  // Field 1 (ir_version), wire type varint, then a version of 1..63 (IR 10 is current).
  return head.size() >= 2 && head[0] == 0x08 && head[1] >= 1 && head[1] < 64;
}

rlx::Model import_onnx(const std::string& path) { return import_onnx(onnx::read_model(path)); }

rlx::Model import_onnx(const onnx::Model& om) { return import_onnx(om, {}); }

rlx::Model import_onnx(const onnx::Model& om, const TensorMap& frozen) {
  const std::string& path = om.path;
  check_coverage(om);
  for (const auto& [domain, version] : om.opsets)
    if (default_domain(domain))
      RLX_CHECK(version >= 1 && version <= 22, path, ": opset ", version,
                " is outside what rlx knows (7-21)");

  rlx::Model m;
  m.source = path;
  m.format = "onnx";
  m.summary = "ONNX ir_version " + std::to_string(om.ir_version) + ", opset " +
              std::to_string(om.opset()) + (om.producer.empty() ? "" : ", from " + om.producer);
  rlx::Graph& g = m.graph;
  Builder b(g);
  std::map<std::string, Val> env;
  ImportState state{b, om, m.weights, env};

  std::set<std::string> init_names;
  for (const auto& [name, t] : om.graph.initializers) {
    Val v;
    v.konst = t;
    v.param = name;
    env[name] = std::move(v);
    init_names.insert(name);
  }
  for (const auto& in : om.graph.inputs) {
    // Before IR 4 initializers were also listed as inputs: they stay weights.
    if (init_names.count(in.name)) continue;
    try {
      RLX_CHECK(in.has_shape, "has no declared shape");
      const Shape declared(in.dims, declared_dtype(in, "input"));
      if (auto f = frozen.find(in.name); f != frozen.end()) {
        const Tensor& t = f->second;
        bool fits = t.dtype() == declared.dtype && t.rank() == declared.rank();
        for (int d = 0; fits && d < t.rank(); ++d)
          fits = !declared.dims[size_t(d)].is_static() ||
                 declared.dims[size_t(d)].value == t.dims()[size_t(d)];
        RLX_CHECK(fits, "frozen value ", t.shape().str(), " does not fit the declared ",
                  declared.str());
        env[in.name] = tensor_val(t.contiguous());
        continue;
      }
      env[in.name] = node_val(g.input(in.name, declared));
    } catch (const Error& e) {
      throw e.with_context(path + ": graph input '" + in.name + "'");
    }
  }

  const int64_t opset = om.opset();
  for (size_t k = 0; k < om.graph.nodes.size(); ++k) {
    const onnx::Node& n = om.graph.nodes[k];
    Ctx c(state, n, opset);
    try {
      b.set_origin(provenance(n, k, c));
      std::vector<Val> outs = (*registry().find(n.op_type))(c);
      RLX_CHECK(outs.size() >= n.outputs.size() ||
                    (n.op_type == "Dropout" || n.op_type == "BatchNormalization" ||
                     n.op_type == "LayerNormalization" || n.op_type == "MaxPool"),
                "gives ", n.outputs.size(), " outputs, rlx computes ", outs.size());
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        if (n.outputs[o].empty()) continue;
        RLX_CHECK(o < outs.size(), "output ", o, " '", n.outputs[o],
                  "' (an optional output rlx does not compute) is used");
        env[n.outputs[o]] = std::move(outs[o]);
      }
    } catch (const Error& e) {
      throw e.with_context(path + ": while lowering " + n.label(k) + " at opset " +
                           std::to_string(opset));
    } catch (const std::exception& e) {
      const Error wrapped =
          make_error(path, ": while lowering ", n.label(k), ": internal error: ", e.what());
      throw ImportInternalError(wrapped.what());
    }
  }

  for (const auto& out : om.graph.outputs) {
    auto it = env.find(out.name);
    RLX_CHECK(it != env.end(), path, ": graph output '", out.name, "' is not computed by any node");
    onnx::Node fake;
    fake.inputs = {out.name};
    fake.op_type = "output";
    Ctx c(state, fake, opset);
    try {
      NodeId id = c.in(0);
      if (out.elem_type != 0) id = c.cast(id, declared_dtype(out, "output"));
      const Shape& s = g.node(id).shape;
      if (out.has_shape && s.is_static() && int(out.dims.size()) == s.rank())
        for (int d = 0; d < s.rank(); ++d)
          RLX_CHECK(!out.dims[size_t(d)].is_static() ||
                        out.dims[size_t(d)].value == s.dims[size_t(d)].value,
                    "rlx computes ", s.str(), ", the file declares dim ", d, " = ",
                    out.dims[size_t(d)].value);
      g.add_output(out.name, id);
    } catch (const Error& e) {
      throw e.with_context(path + ": graph output '" + out.name + "'");
    }
  }
  try {
    g.verify();
  } catch (const Error& e) {
    throw e.with_context(path);
  }
  return m;
}

}  // namespace rlx
