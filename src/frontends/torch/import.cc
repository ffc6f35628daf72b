#include "frontends/torch/import.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "frontends/torch/lowering.h"
#include "rlx/error.h"

namespace rlx {
namespace fs = std::filesystem;
using torch_ir::Arg;
using torch_ir::Document;
using torch_ir::LowerCtx;
using torch_ir::Out;
using torch_ir::TensorMeta;
using torch_ir::Value;

namespace {

std::string read_ir_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  RLX_CHECK(f, p.string(), ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void check_torch_coverage(const Document& doc, const std::string& source) {
  std::map<std::string, int> missing;
  for (const auto& n : doc.nodes)
    if (n.op != "_getitem" && !torch_ir::registry().find(n.op)) ++missing[n.op];
  if (missing.empty()) return;
  std::string msg = source + ": " + std::to_string(missing.size()) + " unsupported op kind(s): ";
  bool first = true;
  for (const auto& [op, count] : missing) {
    msg += (first ? "" : ", ") + op + " (x" + std::to_string(count) + ")";
    first = false;
  }
  throw Error(msg);
}

// The weights must hold every tensor the document declares, with its shape
// and dtype; `file` names them in the message.
void check_weights(const Document& doc, const TensorMap& all, const std::string& file) {
  std::string problems;
  for (const auto& w : doc.weights) {
    auto it = all.find(w.key);
    if (it == all.end()) {
      problems += "\n  '" + w.key + "' is missing";
    } else if (it->second.dims() != w.shape || it->second.dtype() != w.dtype) {
      problems += "\n  '" + w.key + "' is " + it->second.shape().str() + ", the graph declares " +
                  Shape(w.shape, w.dtype).str();
    }
  }
  RLX_CHECK(problems.empty(), file, ": weights do not match torch-ir.json:", problems);
}

TensorMap load_weights(const Document& doc, const fs::path& dir) {
  if (doc.weights.empty()) return {};
  fs::path file = dir / "weights.safetensors";
  RLX_CHECK(fs::exists(file), file.string(), ": missing (the export lists ", doc.weights.size(),
            " weights)");
  TensorMap all = read_safetensors(file.string());
  check_weights(doc, all, file.string());
  return all;
}

Value resolve(const Arg& a, const std::map<std::string, Value>& env, const std::string& node) {
  switch (a.kind) {
    case Arg::Ref: {
      auto it = env.find(a.text);
      RLX_CHECK(it != env.end(), "node '", node, "' refers to unknown id '", a.text, "'");
      return it->second;
    }
    case Arg::Int:
      return Value::integer(a.i);
    case Arg::Float:
      return Value::real(a.f);
    case Arg::Bool: {
      Value v;
      v.kind = Value::Bool;
      v.i = a.i;
      return v;
    }
    case Arg::Str:
    case Arg::DTypeArg: {
      Value v;
      v.kind = a.kind == Arg::Str ? Value::Str : Value::DTypeV;
      v.s = a.text;
      return v;
    }
    case Arg::None:
      return Value{};
    case Arg::List: {
      Value v;
      v.kind = Value::List;
      for (const auto& e : a.list) v.items.push_back(resolve(e, env, node));
      return v;
    }
  }
  return Value{};
}

// "aten.addmm.default  (x[2,3], w[3,4]) -> [2,4] f32"
std::string torch_provenance(const torch_ir::Node& n, const std::vector<Value>& args,
                             const Graph& g) {
  std::string s = n.op + "  (";
  bool first = true;
  for (const auto& a : args) {
    if (a.kind != Value::Tensor) continue;
    s += (first ? "" : ", ") + g.node(a.id).shape.str();
    first = false;
  }
  s += ")";
  if (n.out.kind == Out::Tensor) s += " -> " + Shape(n.out.tensor.shape, n.out.tensor.dtype).str();
  return s + "  [" + n.id + "]";
}

// Checks a lowered tensor against PyTorch's recorded output; a dtype
// difference is cast away, a shape difference is a lowering bug.
NodeId conform(Builder& b, NodeId id, const TensorMeta& meta) {
  const Shape& s = b.graph().node(id).shape;
  if (s.is_static())
    RLX_CHECK(s.concrete() == meta.shape, "lowered to ", s.str(), " but PyTorch recorded ",
              Shape(meta.shape, meta.dtype).str());
  return s.dtype == meta.dtype ? id : b.cast(id, meta.dtype);
}

// Lowers a parsed, coverage-checked document whose weights are checked.
Model import_document(const Document& doc, TensorMap weights, const std::string& json_name) {
  Model m;
  m.format = "torch-ir";
  m.weights = std::move(weights);
  Graph& g = m.graph;
  Builder b(g);
  std::map<std::string, Value> env;
  LowerCtx::Symbols symbols;
  for (const auto& in : doc.inputs) {
    std::vector<Dim> dims;
    for (size_t i = 0; i < in.shape.size(); ++i)
      dims.push_back(in.dynamic[i].empty() ? Dim(in.shape[i]) : Dim::symbol(in.dynamic[i]));
    const NodeId id = g.input(in.id, Shape(dims, in.dtype));
    for (size_t i = 0; i < in.shape.size(); ++i)
      if (!in.dynamic[i].empty())
        symbols.emplace(in.dynamic[i], LowerCtx::Symbol{in.shape[i], id, int(i)});
    env[in.id] = Value::tensor(id);
  }
  for (const auto& w : doc.weights) {
    env[w.id] = Value::tensor(g.param(w.key, Shape(w.shape, w.dtype)));
    if (w.kind != "param") m.non_trainable.insert(w.key);  // buffers and constants
  }

  for (const auto& n : doc.nodes) {
    try {
      std::vector<Value> args;
      for (const auto& a : n.args) args.push_back(resolve(a, env, n.id));
      if (n.op == "_getitem") {
        RLX_CHECK(args.size() == 2 && args[1].kind == Value::Int, "_getitem takes (ref, index)");
        const Value& t = args[0];
        RLX_CHECK(t.kind == Value::Tuple || t.kind == Value::List, "_getitem of a non-tuple");
        RLX_CHECK(args[1].i >= 0 && size_t(args[1].i) < t.items.size(), "_getitem index ",
                  args[1].i, " out of range for a tuple of ", t.items.size());
        const Value& v = t.items[size_t(args[1].i)];
        RLX_CHECK(v.kind != Value::None, "element ", args[1].i,
                  " of this tuple is not computed by rlx (e.g. max_pool2d indices)");
        env[n.id] = v;
        continue;
      }
      std::map<std::string, Value> kwargs;
      for (const auto& [k, a] : n.kwargs) kwargs[k] = resolve(a, env, n.id);
      b.set_origin(torch_provenance(n, args, g));
      LowerCtx ctx(b, n, std::move(args), std::move(kwargs), symbols);
      Value v = (*torch_ir::registry().find(n.op))(ctx);
      if (v.kind == Value::Tensor && n.out.kind == Out::Tensor && !n.out.tensor.complex)
        v.id = conform(b, v.id, n.out.tensor);
      if (v.kind == Value::Tuple && n.out.kind == Out::Tuple)
        for (size_t i = 0; i < v.items.size() && i < n.out.tuple.size(); ++i)
          if (v.items[i].kind == Value::Tensor && n.out.tuple[i])
            v.items[i].id = conform(b, v.items[i].id, *n.out.tuple[i]);
      env[n.id] = std::move(v);
    } catch (const Error& e) {
      throw e.with_context(json_name + ": while lowering node '" + n.id + "' (" + n.op + ")");
    } catch (const std::exception& e) {
      // A library exception here is an rlx bug; still name the node.
      const Error wrapped = make_error(json_name, ": while lowering node '", n.id, "' (", n.op,
                                       "): internal error: ", e.what());
      throw ImportInternalError(wrapped.what());
    }
  }
  for (size_t i = 0; i < doc.outputs.size(); ++i) {
    const auto& o = doc.outputs[i];
    // Training exports name theirs (loss, logits, update::<buffer>); see rlx_torch train=True.
    std::string name = o.name.empty() ? "out::" + std::to_string(i) : o.name;
    if (o.ref) {
      auto it = env.find(*o.ref);
      RLX_CHECK(it != env.end() && it->second.kind == Value::Tensor, json_name, ": output ", i,
                " refers to '", *o.ref, "', which is not a tensor");
      g.add_output(name, it->second.id);
    } else {
      Value v = resolve(*o.constant, env, "outputs");
      RLX_CHECK(v.is_number(), json_name, ": output ", i, " is a non-numeric constant");
      Tensor t({}, v.kind == Value::Float ? DType::F32 : DType::I64);
      cast_elements(&v.f, DType::F64, t.raw(), t.dtype(), 1);
      if (v.kind != Value::Float) *t.data<int64_t>() = v.i;
      g.add_output(name, g.constant(t));
    }
  }
  try {
    g.verify();  // every loaded graph passes the verifier, whatever its frontend
  } catch (const Error& e) {
    throw e.with_context(json_name);
  }
  return m;
}

}  // namespace

Model import_torch_export(const std::string& dir_path) {
  fs::path dir(dir_path);
  fs::path json_file = dir / "torch-ir.json";
  Document doc = torch_ir::parse(read_ir_text(json_file), json_file.string());
  check_torch_coverage(doc, json_file.string());
  Model m = import_document(doc, load_weights(doc, dir), json_file.string());
  m.source = dir_path;
  return m;
}

Model import_torch_ir(const std::string& json_text, const std::string& json_name,
                      TensorMap weights) {
  Document doc = torch_ir::parse(json_text, json_name);
  check_torch_coverage(doc, json_name);
  check_weights(doc, weights, json_name);
  Model m = import_document(doc, std::move(weights), json_name);
  m.source = json_name;
  return m;
}

}  // namespace rlx
