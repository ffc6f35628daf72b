// rlx inspect MODEL [--format text|json|dot] [--backend cpu|coreml]
// rlx inspect MODEL --passes | --after PASS | --optimized | --print-after-all
//                   [-O0|-O1] [--disable-pass NAME]...
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"

namespace rlx::cli {
namespace {

struct InspectOptions {
  std::string model, format = "text", backend;
  std::string after;  // print the graph after this pass
  bool list_passes = false, optimized = false;
  PassFlags passes;
  std::vector<std::string> input_shapes;  // NAME=D0,D1,... (ONNX import)
  ImportFlags import;
};

struct Facts {
  std::map<std::string, int> histogram;
  size_t param_count = 0, param_bytes = 0, const_bytes = 0;
  size_t bodies = 0, body_nodes = 0;  // control nodes' bodies, nested ones included
  std::string peak;                   // planned peak activation bytes, or why it is unknown
  size_t peak_bytes = 0;
};

// Op counts and data sizes of g and of its nodes' bodies.
void tally(const Graph& g, const Model& m, Facts& f) {
  for (const Node& n : g.nodes()) {
    for (const auto& body : n.bodies) {
      if (!body) continue;
      ++f.bodies;
      f.body_nodes += body->size();
      tally(*body, m, f);
    }
    ++f.histogram[op_name(n.op)];
    if (n.op == Op::Param) {
      ++f.param_count;
      auto it = m.weights.find(n.name);
      f.param_bytes += it != m.weights.end() ? it->second.nbytes()
                       : n.shape.is_static() ? size_t(n.shape.numel()) * dtype_size(n.shape.dtype)
                                             : 0;
    }
    if (n.op == Op::Constant) f.const_bytes += n.value.nbytes();
  }
}

Facts gather_facts(const Model& m, const CompileOptions& options) {
  Facts f;
  tally(m.graph, m, f);
  bool static_inputs = true;
  for (NodeId id : m.graph.inputs()) static_inputs &= m.graph.node(id).shape.is_static();
  if (!static_inputs) {
    f.peak = "depends on input shapes (symbolic dims)";
    return f;
  }
  try {
    auto exe = Executable::compile(m.graph, m.weights, options);
    f.peak_bytes = exe->static_plan()->arena_bytes;
    f.peak = human_bytes(double(f.peak_bytes));
  } catch (const Error& e) {
    f.peak = std::string("unknown (") + e.what() + ")";
  }
  return f;
}

void print_text(const Model& m, const Facts& f) {
  const Graph& g = m.graph;
  std::printf("model: %s (%s)\n", m.source.c_str(), m.format.c_str());
  std::string in_bodies;
  if (f.bodies)
    in_bodies = " (+" + std::to_string(f.body_nodes) + " in " + std::to_string(f.bodies) +
                (f.bodies == 1 ? " body" : " bodies") + ", counted below)";
  std::printf("nodes: %zu%s   params: %zu (%s)   constants: %s\n", g.size(), in_bodies.c_str(),
              f.param_count, human_bytes(double(f.param_bytes)).c_str(),
              human_bytes(double(f.const_bytes)).c_str());
  std::printf("planned peak activation memory: %s\n", f.peak.c_str());
  for (NodeId id : g.inputs())
    std::printf("input  %s %s\n", g.node(id).name.c_str(), g.node(id).shape.str().c_str());
  for (const auto& o : g.outputs())
    std::printf("output %s %s\n", o.name.c_str(), g.node(o.node).shape.str().c_str());
  std::vector<std::pair<int, std::string>> hist;
  for (const auto& [op, n] : f.histogram) hist.push_back({-n, op});
  std::sort(hist.begin(), hist.end());
  std::printf("\nop histogram:\n");
  for (const auto& [n, op] : hist) std::printf("  %-22s %d\n", op.c_str(), -n);
  std::printf("\ngraph:\n%s", to_text(g).c_str());
}

void print_json(const Model& m, const Facts& f) {
  nlohmann::json j = {{"model", m.source},
                      {"format", m.format},
                      {"nodes", m.graph.size()},
                      {"body_nodes", f.body_nodes},
                      {"param_count", f.param_count},
                      {"param_bytes", f.param_bytes},
                      {"constant_bytes", f.const_bytes},
                      {"op_histogram", f.histogram},
                      {"graph", nlohmann::json::parse(to_json(m.graph))}};
  if (f.peak_bytes)
    j["peak_activation_bytes"] = f.peak_bytes;
  else
    j["peak_activation_bytes"] = nullptr;
  std::printf("%s\n", j.dump(1).c_str());
}

void print_passes(const CompileOptions& options) {
  const std::string backend = (options.backend ? options.backend : default_backend())->name();
  std::printf("pass pipeline (-O%d, backend %s):\n", options.opt_level, backend.c_str());
  for (const PassInfo& p : describe_pipeline(options)) {
    std::string state = p.enabled ? "runs" : p.why_not;
    std::printf("  %-9s %-10s %s\n", p.name.c_str(), state.c_str(), p.description.c_str());
    std::printf("  %-9s %-10s needs: %s; keeps: %s\n", "", "", p.needs.c_str(), p.keeps.c_str());
  }
}

// Compiles with `options` and prints the graph after pass `after` (when not
// empty) and after the whole pipeline (when `optimized`).
void print_after(Model& m, CompileOptions options, const std::string& after, bool optimized) {
  std::string text;
  if (!after.empty()) {
    std::string valid;
    const PassInfo* found = nullptr;
    auto pipeline = describe_pipeline(options);
    for (const PassInfo& p : pipeline) {
      valid += (valid.empty() ? "" : ", ") + p.name;
      if (p.name == after) found = &p;
    }
    RLX_CHECK(found, "--after: unknown pass '", after, "'; valid passes: ", valid);
    RLX_CHECK(found->enabled, "--after ", after, ": the pass does not run in this pipeline (",
              found->why_not, ")");
    auto hook = options.after_pass;
    options.after_pass = [&, hook](std::string_view pass, size_t before, const Graph& g) {
      if (hook) hook(pass, before, g);
      if (pass == after) text = to_text(g);
    };
  }
  auto exe = Executable::compile(std::move(m.graph), m.weights, options);
  if (optimized) text += to_text(exe->graph());
  std::printf("%s", text.c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto o = std::make_shared<InspectOptions>();
  auto* cmd = app.add_subcommand("inspect", "Show a model's graph, op histogram and memory");
  cmd->add_option("model", o->model,
                  "Model: a directory with model.rlx.json or torch-ir.json, a graph JSON, an ONNX "
                  "model or a .gguf file")
      ->required();
  cmd->add_option("-f,--format", o->format, "Output format")
      ->check(CLI::IsMember({"text", "json", "dot"}));
  cmd->add_flag("--passes", o->list_passes,
                "List the pass pipeline for the given -O/--disable-pass: name, state, description "
                "and contract");
  cmd->add_option("--after", o->after, "Print the graph (text) after this pass has run");
  cmd->add_flag("--optimized", o->optimized, "Print the graph (text) after the whole pipeline");
  add_pass_flags(cmd, o->passes);
  cmd->add_option("--input-shape", o->input_shapes,
                  "ONNX: NAME=D0,D1,...: import for these dims of input NAME (repeatable)")
      ->take_all();
  add_import_flags(cmd, o->import, false);
  cmd->add_option("--backend", o->backend,
                  "List the nodes this backend cannot take (" + join_backend_names() + ")");
  cmd->callback([o] {
    const LoadOptions lo = load_options(o->import, o->input_shapes, nullptr);
    if (!o->backend.empty()) return print_backend_support(load_model(o->model, lo), o->backend);
    const bool debug =
        o->list_passes || !o->after.empty() || o->optimized || o->passes.print_after_all;
    CompileOptions options = compile_options(o->passes, stdout);
    if (o->list_passes) return print_passes(options);
    if (is_gguf_path(o->model)) {
      RLX_CHECK(!debug,
                "--after/--optimized/--print-after-all need a graph; GGUF files have none "
                "yet");
      RLX_CHECK(o->format != "dot", "--format dot needs a graph; GGUF files have none yet");
      inspect_gguf(o->model, o->format);
      return;
    }
    Model m = load_model(o->model, lo);
    if (debug) return print_after(m, options, o->after, o->optimized);
    if (o->format == "dot") {
      std::printf("%s", to_dot(m.graph).c_str());
      return;
    }
    Facts f = gather_facts(m, options);
    o->format == "json" ? print_json(m, f) : print_text(m, f);
  });
}

}  // namespace rlx::cli
