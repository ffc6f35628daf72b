// The optimization-pipeline flags shared by `rlx run`, `inspect`, `compile`, `grad` and `train`.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "commands.h"

namespace rlx::cli {

void add_pass_flags(CLI::App* cmd, PassFlags& f) {
  cmd->add_option("-O,--opt-level", f.opt_level,
                  "Optimization level: -O0 runs no pass, -O1 (default) runs the whole pipeline")
      ->check(CLI::Range(0, 1));
  cmd->add_option("--disable-pass", f.disabled,
                  "Skip this pass (repeatable; `rlx inspect MODEL --passes` lists them)");
  cmd->add_flag("--verify-each", f.verify_each, "Verify the graph after every pass");
  cmd->add_option("--qat", f.qat,
                  "Fake-quantize the weight of every matmul/conv per output channel (the qat "
                  "pass): quantization-aware training with `rlx train`, simulated quantized "
                  "inference elsewhere")
      ->check(CLI::IsMember({"int8", "int4", "int2"}));
  cmd->add_flag("--qat-activations", f.qat_activations,
                "With --qat: also fake-quantize the inputs of every matmul/conv (8 bits, per "
                "tensor, the batch's max|x|)");
  cmd->add_option("--remat", f.remat,
                  "Recompute nodes of these ops (e.g. relu,gelu) right before a use far from the "
                  "previous one instead of holding them (the remat pass: activation checkpointing "
                  "in a training step; less peak memory, more compute)")
      ->delimiter(',');
  cmd->add_flag("--print-after-all", f.print_after_all,
                "Print the graph after every pass, with a node-count delta line "
                "(also env RLX_PRINT_AFTER_ALL=1)");
}

CompileOptions compile_options(const PassFlags& f, std::FILE* dump) {
  CompileOptions o;
  o.opt_level = f.opt_level;
  o.disabled_passes = f.disabled;
  o.verify_each = f.verify_each;
  o.qat_bits = f.qat.empty() ? 0 : std::stoi(f.qat.substr(3));
  o.qat_activations = f.qat_activations;
  o.rematerialize = f.remat;
  for (const std::string& op : f.remat) parse_op(op);  // unknown names fail here
  if (o.qat_activations && !o.qat_bits)
    throw make_error("--qat-activations needs --qat int8|int4|int2");
  const char* env = std::getenv("RLX_PRINT_AFTER_ALL");
  const bool print = f.print_after_all || (env && *env && std::strcmp(env, "0") != 0);
  if (print)
    o.after_pass = [dump](std::string_view pass, size_t before, const Graph& g) {
      long delta = long(g.size()) - long(before);
      std::fprintf(dump, "after %.*s: %zu -> %zu nodes (%s%ld)\n%s\n", int(pass.size()),
                   pass.data(), before, g.size(), delta > 0 ? "+" : "", delta, to_text(g).c_str());
    };
  describe_pipeline(o);  // unknown pass names fail here, listing the valid ones
  return o;
}

}  // namespace rlx::cli
