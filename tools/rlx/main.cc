// The rlx command line: one file per subcommand; errors are one line on
// stderr and exit code 1.
#include <cstdio>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"rlx: import, optimize, run and export ML models"};
  app.require_subcommand(1);
  app.fallthrough();
  rlx::cli::add_run_command(app);
  rlx::cli::add_inspect_command(app);
  rlx::cli::add_verify_command(app);
  rlx::cli::add_compile_command(app);
  rlx::cli::add_gguf_tool_commands(app);
  rlx::cli::add_tokenize_command(app);
  rlx::cli::add_generate_command(app);
  rlx::cli::add_coreml_run_command(app);
  rlx::cli::add_version_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rlx: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
