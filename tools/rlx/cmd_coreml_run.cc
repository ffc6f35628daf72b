// rlx coreml-run X.mlpackage --inputs IN.safetensors [--out OUT.safetensors]
// Executes the package's MIL program with the reference interpreter.
#include <cstdio>
#include <memory>

#include "backends/coreml/interp/interp.h"
#include "commands.h"

namespace rlx::cli {
namespace {

struct CoremlRunOptions {
  std::string package, inputs, out;
  bool no_type_check = false;
};

}  // namespace

void add_coreml_run_command(CLI::App& app) {
  auto o = std::make_shared<CoremlRunOptions>();
  auto* cmd = app.add_subcommand(
      "coreml-run",
      "Run a .mlpackage's MIL program on the CPU with rlx's reference interpreter "
      "(f32 compute; fp16 programs round each op's output to fp16)");
  cmd->add_option("package", o->package, "X.mlpackage")->required();
  cmd->add_option("-i,--inputs", o->inputs, "Inputs by function input name (safetensors)");
  cmd->add_option("-o,--out", o->out, "Write outputs by name to this safetensors file");
  cmd->add_flag("--no-type-check", o->no_type_check,
                "Do not check each op's computed shape against its declared type");
  cmd->callback([o] {
    TensorMap inputs;
    if (!o->inputs.empty()) inputs = read_safetensors(o->inputs);
    coreml::InterpOptions io;
    io.check_types = !o->no_type_check;
    TensorMap outputs = coreml::run_package(o->package, inputs, io);
    for (const auto& [name, t] : outputs) std::printf("%s\n", tensor_summary(name, t).c_str());
    if (!o->out.empty()) {
      write_safetensors(o->out, outputs);
      std::printf("wrote %zu output(s) to %s\n", outputs.size(), o->out.c_str());
    }
  });
}

}  // namespace rlx::cli
