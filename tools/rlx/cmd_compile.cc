// rlx compile MODEL --target coreml -o X.mlpackage [--opset CoreML5..CoreML8] [--fp16] [-O0]
//             [--train [--optimizer adam ...] [--clip-norm N] [--state S.safetensors]]
// rlx coreml-check X.mlpackage
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "commands.h"

namespace rlx::cli {
namespace {

struct CompileCommand {
  std::string model, target = "coreml", out, opset = "CoreML6", state;
  bool fp16 = false, train = false;
  OptimizerFlags opt;
  double clip_norm = 0;
  std::vector<std::string> input_shapes;  // NAME=D0,D1,...
  int64_t seq_len = 64;
  PassFlags passes;
  ImportFlags import;
};

}  // namespace

void add_compile_command(CLI::App& app) {
  auto o = std::make_shared<CompileCommand>();
  auto* cmd =
      app.add_subcommand("compile", "Export a model for another runtime (CoreML .mlpackage)");
  cmd->add_option(
         "model", o->model,
         "Model: a directory with model.rlx.json or torch-ir.json, a graph JSON, or a GGUF file")
      ->required();
  cmd->add_option("--target", o->target, "Target format")->check(CLI::IsMember({"coreml"}));
  cmd->add_option("-o,--output", o->out, "Output package (X.mlpackage)")->required();
  cmd->add_option("--opset", o->opset, "CoreML5..CoreML8 (default CoreML6)");
  cmd->add_flag("--fp16", o->fp16, "Store weights and compute in fp16 (I/O stays fp32)");
  cmd->add_option("--seq-len", o->seq_len,
                  "GGUF language models: the token count the exported graph takes (CoreML "
                  "needs static lengths; default 64)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--train", o->train,
                "Export one training step of a model with a `loss` output: forward, backward, "
                "clipping and the optimizer update; each state input S (params, optimizer "
                "buffers) comes back as output next__S, to feed to the next call");
  auto* opt = cmd->add_option_group("training step", "With --train");
  add_optimizer_flags(opt, o->opt);
  opt->add_option("--clip-norm", o->clip_norm, "Clip the global gradient norm to this (0: off)")
      ->capture_default_str();
  opt->add_option("--state", o->state,
                  "Where the state inputs' initial values go (default: the package path with "
                  ".state.safetensors for .mlpackage)");
  cmd->add_option("--input-shape", o->input_shapes,
                  "NAME=D0,D1,...: binds the symbolic dims of input NAME (repeatable; give every "
                  "input with symbolic dims), e.g. --input-shape x=32,2 --input-shape target=32; "
                  "ONNX models are imported for these dims")
      ->take_all();
  add_import_flags(cmd, o->import, false);
  add_pass_flags(cmd, o->passes);
  cmd->callback([o] {
    const bool onnx = is_onnx_model(o->model);
    LoadOptions lo =
        load_options(o->import, onnx ? o->input_shapes : std::vector<std::string>{}, nullptr);
    lo.n_tokens = o->seq_len;
    Model m = load_model(o->model, lo);
    if (!onnx && !o->input_shapes.empty()) {
      CompileOptions only_specialize;
      only_specialize.opt_level = 0;
      for (const std::string& spec : o->input_shapes) {
        auto [name, dims] = parse_input_shape(spec);
        only_specialize.input_shapes[name] = dims;
      }
      m.graph = optimize_unbound(std::move(m.graph), only_specialize);
    }
    train::StepGraph step;
    if (o->train) {
      step = train::training_step_graph(m, optimizer_options(o->opt), o->clip_norm);
      m.graph = std::move(step.graph);
      m.weights = step.weights;
    }
    // The exporter writes the weights itself: every pass but folding runs.
    m.graph = optimize_unbound(std::move(m.graph), compile_options(o->passes, stderr));
    coreml::ExportOptions eo;
    eo.opset = coreml::parse_opset(o->opset);
    eo.fp16 = o->fp16;
    coreml::export_package(m.graph, m.weights, o->out, eo);
    std::printf("wrote %s (%s%s)\n", o->out.c_str(), o->opset.c_str(), o->fp16 ? ", fp16" : "");
    if (!o->train) return;
    std::string state = o->state;
    if (state.empty()) {
      state = o->out;
      if (state.size() > 10 && state.ends_with(".mlpackage")) state.resize(state.size() - 10);
      state += ".state.safetensors";
    }
    write_safetensors(state, step.initial, step.holds);  // metadata: what each input holds
    std::printf(
        "one %s step per call: inputs %s and %s, the model's data inputs, and %zu state "
        "tensors (initial values in %s); feed each output next__S back as input S\n",
        o->opt.optimizer.c_str(), train::kLrInput, train::kOptimStepInput, step.initial.size(),
        state.c_str());
  });

  auto path = std::make_shared<std::string>();
  auto* chk = app.add_subcommand("coreml-check", "Check a .mlpackage structurally");
  chk->add_option("package", *path, "X.mlpackage")->required();
  chk->callback([path] {
    auto problems = coreml::check_package(*path);
    for (const auto& p : problems) std::fprintf(stderr, "%s: %s\n", path->c_str(), p.c_str());
    if (!problems.empty()) {
      std::fprintf(stderr, "%zu problem(s)\n", problems.size());
      std::exit(1);
    }
    std::printf("%s: ok\n", path->c_str());
  });
}

}  // namespace rlx::cli
