// rlx compile MODEL --target coreml -o X.mlpackage [--opset CoreML5..CoreML8] [--fp16] [-O0]
// rlx coreml-check X.mlpackage
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "commands.h"

namespace rlx::cli {
namespace {

struct CompileCommand {
  std::string model, target = "coreml", out, opset = "CoreML6";
  bool fp16 = false;
  int64_t seq_len = 64;
  PassFlags passes;
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
  add_pass_flags(cmd, o->passes);
  cmd->callback([o] {
    Model m = load_model(o->model, {.n_tokens = o->seq_len});
    // The exporter writes the weights itself: every pass but folding runs.
    m.graph = optimize_unbound(std::move(m.graph), compile_options(o->passes, stderr));
    coreml::ExportOptions eo;
    eo.opset = coreml::parse_opset(o->opset);
    eo.fp16 = o->fp16;
    coreml::export_package(m.graph, m.weights, o->out, eo);
    std::printf("wrote %s (%s%s)\n", o->out.c_str(), o->opset.c_str(), o->fp16 ? ", fp16" : "");
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
