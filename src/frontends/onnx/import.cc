#include "frontends/onnx/import.h"

#include <set>

#include "frontends/import_eval.h"
#include "frontends/onnx/context.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx {
namespace {

bool default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The registry's name of a node's op: the op type, prefixed by its domain outside ai.onnx
// ("ai.onnx.preview.training.Adam").
std::string op_key(const onnx::Node& n) {
  return (default_domain(n.domain) ? "" : n.domain + ".") + n.op_type;
}

void count_missing(const onnx::Graph& g, std::map<std::string, int>& missing) {
  for (const auto& n : g.nodes) {
    if (!onnx::registry().find(op_key(n))) ++missing[op_key(n)];
    for (const auto& a : n.attributes)
      if (a.kind == onnx::Attribute::GraphK && a.g) count_missing(*a.g, missing);
  }
}

// Every node whose op has no lowering, If branches included, in one message
// (the torch importer's format).
void check_onnx_coverage(const onnx::Model& m) {
  std::map<std::string, int> missing;
  count_missing(m.graph, missing);
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
std::string onnx_provenance(const onnx::Node& n, size_t index, onnx::Ctx& c) {
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

DType declared_dtype(const onnx::ValueInfo& v, const std::string& what) {
  RLX_CHECK(v.elem_type != 0, what, " '", v.name, "' has no tensor type");
  auto t = onnx::dtype_of(v.elem_type);
  RLX_CHECK(t, what, " '", v.name, "' has dtype ", onnx::onnx_type_name(v.elem_type),
            ", which rlx does not support");
  return *t;
}

// A frozen input's value as the declared dtype and dims: a value of another
// dtype converts when every element survives the round trip (a command line's
// "sr=16000" into int64), and one of another rank when the element count and
// the declared static dims allow only one reading.
Tensor frozen_value(const Tensor& given, const Shape& declared) {
  Tensor t = given.contiguous();
  if (t.dtype() != declared.dtype) {
    Tensor c = t.to(declared.dtype);
    for (int64_t k = 0; k < t.numel(); ++k)
      RLX_CHECK(c.item_as_double(k) == t.item_as_double(k), "frozen value ", t.item_as_double(k),
                " is not exact as ", dtype_name(declared.dtype));
    t = c.contiguous();
  }
  if (t.rank() != declared.rank() && declared.is_static() && declared.numel() == t.numel())
    t = t.reshape(declared.concrete());
  bool fits = t.rank() == declared.rank();
  for (int d = 0; fits && d < t.rank(); ++d)
    fits = !declared.dims[size_t(d)].is_static() ||
           declared.dims[size_t(d)].value == t.dims()[size_t(d)];
  RLX_CHECK(fits, "frozen value ", given.shape().str(), " does not fit the declared ",
            declared.str());
  return t;
}

// Nodes whose values are data, not functions of the inputs: never folded.
bool random_op(const std::string& op) {
  return op.starts_with("Random") || op == "Bernoulli" || op == "Multinomial";
}

// Whether every input of `n` is known at import and small, float
// initializers excepted (weights stay params, so they stay trainable and
// are not copied).
bool inputs_foldable(onnx::Ctx& c, const onnx::Node& n) {
  size_t known = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!c.has(i)) continue;
    const Tensor* t = c.known(i);
    if (!t || t->numel() > onnx::kMaxFoldElements) return false;
    if (!c.val(i).param.empty() && !is_integer(t->dtype()) && t->dtype() != DType::Bool)
      return false;
    ++known;
  }
  return known > 0 && n.op_type != "If" && !random_op(n.op_type);
}

// An ONNX node whose inputs are all known folds: the nodes its lowering
// appended (ids from `first` on) run on the import evaluator, its outputs
// become known values, and the graph drops those nodes again. This is what
// lets shape code that the element-wise tracking does not cover (a pads
// tensor reshaped, transposed and reversed, as torch exports Pad) reach the
// ops that need it at import.
void fold_known(onnx::ImportState& s, size_t first, std::vector<onnx::Val>& outs) {
  const NodeEvaluator& eval = import_evaluator();
  rlx::Graph& g = s.b.graph();
  if (!eval || g.size() == first) return;
  std::map<NodeId, std::vector<Tensor>> computed;
  for (size_t i = first; i < g.size(); ++i) {
    const rlx::Node& node = g.node(NodeId(i));
    if (node.op == rlx::Op::Result) {
      const auto& parent = computed.at(node.inputs[0]);
      computed[node.id] = {parent.at(size_t(node.attrs_as<rlx::ResultAttrs>().index))};
      continue;
    }
    std::vector<Tensor> args;
    for (NodeId in : node.inputs) {
      const rlx::Node& src = g.node(in);
      if (in >= NodeId(first)) {
        args.push_back(computed.at(in).at(0));
      } else if (src.op == rlx::Op::Constant) {
        args.push_back(src.value);
      } else if (auto w = s.weights.find(src.name);
                 src.op == rlx::Op::Param && w != s.weights.end()) {
        args.push_back(w->second);
      } else {
        return;  // reads a graph input
      }
    }
    try {
      // The shapes on these values (a data-dependent count at its bound), which a node after a
      // NonZero has only now.
      for (const Shape& sh : node.op == rlx::Op::Constant || node.op == rlx::Op::Param
                                 ? std::vector<Shape>{}
                                 : shapes_for_run(node, args))
        if (!sh.is_static() || sh.numel() > onnx::kMaxFoldElements) return;
      computed[node.id] = node.op == rlx::Op::Constant ? std::vector<Tensor>{node.value}
                          : node.op == rlx::Op::Param ? std::vector<Tensor>{s.weights.at(node.name)}
                                                      : eval(node, args);
    } catch (const Error&) {
      return;  // left to the run, which reports it with its context
    }
  }
  for (onnx::Val& v : outs) {
    if (v.id < NodeId(first)) continue;
    v.konst = computed.at(v.id).at(0);
    v.id = -1;
  }
  // Values this lowering materialized (a known input as a constant node) lose
  // their node, which is dropped, and keep their value.
  for (onnx::ImportState* scope = &s; scope; scope = scope->region ? nullptr : scope->parent)
    for (auto& [name, v] : scope->env)
      if (v.id >= NodeId(first)) v.id = -1;
  g.truncate(first);
}

}  // namespace

void onnx::lower_nodes(ImportState& s, const onnx::Graph& graph, int64_t opset) {
  const std::string& path = s.model.path;
  for (size_t k = 0; k < graph.nodes.size(); ++k) {
    const onnx::Node& n = graph.nodes[k];
    Ctx c(s, n, opset);
    try {
      s.b.set_origin(onnx_provenance(n, k, c));
      const size_t first = s.b.graph().size();
      std::vector<Val> outs = (*registry().find(op_key(n)))(c);
      if (inputs_foldable(c, n)) fold_known(s, first, outs);
      RLX_CHECK(outs.size() >= n.outputs.size() ||
                    (n.op_type == "Dropout" || n.op_type == "BatchNormalization" ||
                     n.op_type == "LayerNormalization" || n.op_type == "MaxPool"),
                "gives ", n.outputs.size(), " outputs, rlx computes ", outs.size());
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        if (n.outputs[o].empty()) continue;
        RLX_CHECK(o < outs.size(), "output ", o, " '", n.outputs[o],
                  "' (an optional output rlx does not compute) is used");
        s.env[n.outputs[o]] = std::move(outs[o]);
      }
    } catch (const ImportInternalError&) {
      throw;
    } catch (const Error& e) {
      // A branch's nodes are named inside the If's own context.
      throw e.with_context(s.parent ? "while lowering " + n.label(k)
                                    : path + ": while lowering " + n.label(k) + " at opset " +
                                          std::to_string(opset));
    } catch (const std::exception& e) {
      const Error wrapped =
          make_error(path, ": while lowering ", n.label(k), ": internal error: ", e.what());
      throw ImportInternalError(wrapped.what());
    }
  }
}

bool looks_like_onnx_bytes(std::string_view head) {
  // Field 1 (ir_version), wire type varint, then a version of 1..63 (IR 10 is current).
  return head.size() >= 2 && head[0] == 0x08 && head[1] >= 1 && head[1] < 64;
}

rlx::Model import_onnx(const std::string& path, const LoadOptions& options) {
  return import_onnx(onnx::read_model(path), options);
}

rlx::Model import_onnx(const onnx::Model& om) { return import_onnx(om, LoadOptions{}); }

rlx::Model import_onnx(const onnx::Model& om, const LoadOptions& options) {
  const std::string& path = om.path;
  const TensorMap& frozen = options.frozen_inputs;
  {
    std::string names;
    std::set<std::string> inputs;
    for (const auto& in : om.graph.inputs) {
      inputs.insert(in.name);
      names += (names.empty() ? "" : ", ") + in.name;
    }
    for (const auto& [name, t] : frozen)
      RLX_CHECK(inputs.count(name), path, ": cannot freeze '", name,
                "': no such graph input (inputs: ", names, ")");
    for (const auto& [name, d] : options.input_shapes)
      RLX_CHECK(inputs.count(name), path, ": input shape for '", name,
                "': no such graph input (inputs: ", names, ")");
  }
  check_onnx_coverage(om);
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
  std::map<std::string, onnx::Val> env;
  onnx::ImportState state{b, om, m.weights, env};

  std::set<std::string> init_names;
  for (const auto& [name, t] : om.graph.initializers) {
    onnx::Val v;
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
      Shape declared(in.dims, declared_dtype(in, "input"));
      if (auto s = options.input_shapes.find(in.name); s != options.input_shapes.end()) {
        bool fits = s->second.size() == declared.dims.size();
        for (size_t d = 0; fits && d < s->second.size(); ++d)
          fits = s->second[d] >= 0 &&
                 (!declared.dims[d].is_static() || declared.dims[d].value == s->second[d]);
        RLX_CHECK(fits, "the given dims ", short_dims_str(s->second), " do not fit the declared ",
                  declared.str());
        declared = Shape(s->second, declared.dtype);
      }
      if (auto f = frozen.find(in.name); f != frozen.end()) {
        env[in.name] = onnx::tensor_val(frozen_value(f->second, declared));
        continue;
      }
      env[in.name] = onnx::node_val(g.input(in.name, declared));
    } catch (const Error& e) {
      throw e.with_context(path + ": graph input '" + in.name + "'");
    }
  }

  const int64_t opset = om.opset();
  lower_nodes(state, om.graph, opset);

  for (const auto& out : om.graph.outputs) {
    auto it = env.find(out.name);
    RLX_CHECK(it != env.end(), path, ": graph output '", out.name, "' is not computed by any node");
    onnx::Node fake;
    fake.inputs = {out.name};
    fake.op_type = "output";
    onnx::Ctx c(state, fake, opset);
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
