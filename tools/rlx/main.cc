// The rlx command line: one file per subcommand; errors are one line on
// stderr and exit code 1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "commands.h"

namespace rlx::cli {

// The environment is read here, at the CLI edge, and nowhere in the library:
// RLX_DEQUANT_CACHE_BYTES (bytes; 0 disables), RLX_GGML_NUMERICS=1,
// RLX_REGROUP_WEIGHTS=0 and RLX_MATMUL_PRECISION=f32|bf16 become the default
// CPU backend's options.
rlx::CpuOptions cpu_options_from_env() {
  rlx::CpuOptions o;
  if (const char* env = std::getenv("RLX_DEQUANT_CACHE_BYTES"); env && *env) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end && *end == 0) o.dequant_cache_bytes = size_t(v);
  }
  const char* v = std::getenv("RLX_GGML_NUMERICS");
  o.ggml_numerics = v && *v && std::strcmp(v, "0") != 0;
  const char* r = std::getenv("RLX_REGROUP_WEIGHTS");
  o.regroup_weights = !(r && std::strcmp(r, "0") == 0);
  if (const char* p = std::getenv("RLX_MATMUL_PRECISION"); p && *p) try {
      o.matmul_precision = rlx::parse_matmul_precision(p);
    } catch (const rlx::Error& e) {
      throw rlx::make_error("RLX_MATMUL_PRECISION: ", e.what());
    }
  return o;
}

}  // namespace rlx::cli

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
  rlx::cli::add_chat_command(app);
  rlx::cli::add_serve_command(app);
  rlx::cli::add_bench_llm_command(app);
  rlx::cli::add_coreml_run_command(app);
  rlx::cli::add_grad_command(app);
  rlx::cli::add_train_command(app);
  rlx::cli::add_version_command(app);
  try {
    rlx::set_default_backend(rlx::make_cpu_backend(rlx::cli::cpu_options_from_env()));
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const rlx::Error& e) {
    std::fprintf(stderr, "rlx: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "rlx: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    // Library code throws rlx::Error with context; anything else slipped
    // past a check, so say so rather than pass it off as a diagnosis.
    std::fprintf(stderr, "rlx: internal error (please report it): %s\n", e.what());
    return 1;
  }
  return 0;
}
