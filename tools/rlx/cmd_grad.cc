// rlx grad MODEL --inputs IN.safetensors [--cotangents CT.safetensors] --out G.safetensors
// Runs forward and backward (the model graph extended by autodiff) and writes
// the gradient of every trained param and every float input as grad::<name>.
#include <cstdio>
#include <memory>

#include "commands.h"
#include "rlx/train.h"

namespace rlx::cli {
namespace {

struct GradOptions {
  std::string model, inputs, cotangents, out;
  int threads = 0;
  PassFlags passes;
};

void grad(const GradOptions& o) {
  set_num_threads(o.threads);
  const TensorMap cts = o.cotangents.empty() ? TensorMap{} : read_safetensors(o.cotangents);
  const train::Gradients g = train::compute_gradients(
      load_model(o.model), read_safetensors(o.inputs), o.cotangents.empty() ? nullptr : &cts,
      compile_options(o.passes, stderr),
      {o.model, o.inputs, o.cotangents,
       "(pass --cotangents CT.safetensors, one tensor per output name)"});
  for (const auto& [name, t] : g.outputs) std::printf("%s\n", tensor_summary(name, t).c_str());
  for (const auto& [name, t] : g.grads) std::printf("%s\n", tensor_summary(name, t).c_str());
  write_safetensors(o.out, g.grads);
  std::printf("wrote %zu gradient(s) to %s\n", g.grads.size(), o.out.c_str());
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
