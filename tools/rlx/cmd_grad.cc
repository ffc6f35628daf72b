// rlx grad MODEL --inputs IN.safetensors [--cotangents CT.safetensors] --out G.safetensors
// Runs forward and backward (the model graph extended by autodiff) and writes
// the gradient of every trained param and every float input as grad::<name>.
#include <cstdio>
#include <memory>

#include "commands.h"

namespace rlx::cli {
namespace {

struct GradOptions {
  std::string model, inputs, cotangents, out;
  int threads = 0;
  PassFlags passes;
};

std::string output_list(const Graph& g) {
  std::string s;
  for (const auto& o : g.outputs())
    s += (s.empty() ? "" : ", ") + o.name + " " + g.node(o.node).shape.str();
  return s.empty() ? "(none)" : s;
}

void grad(const GradOptions& o) {
  set_num_threads(o.threads);
  Model m = load_model(o.model);
  const TensorMap inputs = read_safetensors(o.inputs);
  std::map<std::string, Dims> dims;
  for (NodeId id : m.graph.inputs()) {
    const std::string& name = m.graph.node(id).name;
    auto it = inputs.find(name);
    RLX_CHECK(it != inputs.end(), o.model, ": input '", name, "' is missing from ", o.inputs);
    dims[name] = it->second.dims();
  }
  // Autodiff needs static shapes: bind symbolic dims to the inputs' first.
  bool symbolic = false;
  for (const Node& n : m.graph.nodes()) symbolic = symbolic || !n.shape.is_static();
  if (symbolic) {
    CompileOptions only_specialize;
    only_specialize.opt_level = 0;
    only_specialize.input_shapes = dims;
    m.graph = optimize_unbound(std::move(m.graph), only_specialize);
  }

  const bool with_ct = !o.cotangents.empty();
  const std::string outputs = output_list(m.graph);
  GradientGraph gg;
  try {
    GradientGraphOptions go;
    go.non_trainable = m.non_trainable;
    go.cotangents = with_ct;
    gg = gradient_graph(std::move(m.graph), go);
  } catch (const Error& e) {
    if (with_ct) throw;
    throw make_error(o.model, ": ", e.what(),
                     " (pass --cotangents CT.safetensors, one tensor per output name)");
  }

  TensorMap feed = inputs;
  if (with_ct) {
    TensorMap cts = read_safetensors(o.cotangents);
    for (const auto& [out, in] : gg.cotangents) {
      auto it = cts.find(out);
      RLX_CHECK(it != cts.end(), o.cotangents, ": no cotangent for output '", out,
                "'; the model's outputs are ", outputs);
      feed[in] = it->second;
      cts.erase(it);
    }
    RLX_CHECK(cts.empty(), o.cotangents, ": '", cts.begin()->first,
              "' is not a float output of the model; its outputs are ", outputs);
  }

  auto exe = Executable::compile(std::move(gg.graph), m.weights, compile_options(o.passes, stderr));
  Session session(exe);
  TensorMap result = session.run(feed);
  TensorMap grads;
  for (const std::string& name : gg.grads) grads[name] = result.at(name);
  for (const auto& [name, t] : result)
    if (!grads.count(name)) std::printf("%s\n", tensor_summary(name, t).c_str());
  for (const auto& [name, t] : grads) std::printf("%s\n", tensor_summary(name, t).c_str());
  write_safetensors(o.out, grads);
  std::printf("wrote %zu gradient(s) to %s\n", grads.size(), o.out.c_str());
}

}  // namespace

void add_grad_command(CLI::App& app) {
  auto o = std::make_shared<GradOptions>();
  auto* cmd = app.add_subcommand(
      "grad",
      "Gradients of a model: runs forward and backward and writes grad::<name> for every "
      "trained param and every float input");
  cmd->add_option("model", o->model,
                  "Model: a directory with model.rlx.json or torch-ir.json, or a graph JSON")
      ->required();
  cmd->add_option("-i,--inputs", o->inputs, "Inputs by name (safetensors)")->required();
  cmd->add_option("--cotangents", o->cotangents,
                  "Cotangents by output name (safetensors): the gradient of sum_o <ct_o, o>. "
                  "Without it the loss is the output named loss (train=True exports) or the "
                  "model's only scalar output");
  cmd->add_option("-o,--out", o->out, "Write the gradients to this safetensors file")->required();
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  add_pass_flags(cmd, o->passes);
  cmd->callback([o] { grad(*o); });
}

}  // namespace rlx::cli
