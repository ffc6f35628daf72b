#include <cstdio>

#include "commands.h"

namespace rlx::cli {

void add_version_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("version", "Print the rlx version and build facts");
  cmd->callback([] {
    std::printf("rlx %s\n", kVersion);
    std::printf("ops: %d   threads: %d   avx2+fma: %s\n", num_ops(), num_threads(),
                __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "yes" : "no");
  });
}

}  // namespace rlx::cli
