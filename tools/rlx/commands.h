// Each subcommand registers itself on the app; one file per subcommand.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "rlx/rlx.h"
#include "rlx/train.h"

namespace rlx::cli {

// The default CPU backend's options as the environment sets them (main.cc):
// RLX_DEQUANT_CACHE_BYTES, RLX_GGML_NUMERICS, RLX_REGROUP_WEIGHTS, RLX_MATMUL_PRECISION.
CpuOptions cpu_options_from_env();

void add_run_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_version_command(CLI::App& app);
void add_verify_command(CLI::App& app);
void add_compile_command(CLI::App& app);     // compile + coreml-check
void add_gguf_tool_commands(CLI::App& app);  // convert + quantize
void add_generate_command(CLI::App& app);
void add_bench_llm_command(CLI::App& app);
void add_tokenize_command(CLI::App& app);
void add_coreml_run_command(CLI::App& app);
void add_grad_command(CLI::App& app);
void add_train_command(CLI::App& app);

void add_chat_command(CLI::App& app);
void add_serve_command(CLI::App& app);

// --temp, --top-k, --top-p, --min-p, --repeat-penalty, --repeat-last-n,
// --seed (llm_flags.cc), for generate and chat.
void add_sampling_flags(CLI::App* cmd, llm::SamplerOptions& s);
// The model compiled for a context of ctx tokens (0: the default), with the
// template in template_file (if given) replacing its own; throws rlx::Error
// naming the file.
llm::ChatModel load_chat_model(const std::string& path, bool dequantize,
                               const std::string& template_file, bool batched,
                               const std::string& kv_type, int64_t ctx);
// --kv-type f16|f32 (generate, chat, serve, bench-llm), and its DType.
void add_kv_type_flag(CLI::App* cmd, std::string& kv_type);
DType kv_dtype(const std::string& kv_type);
// The requested context, or by default the model's training context up to 4096.
int64_t context_size(const llm::Config& c, int64_t requested);
// For LongRoPE models, a line saying which rope factors a context of n_ctx
// (0: the default) takes; "" for the others.
std::string rope_factors_line(const llm::Config& c, int64_t n_ctx);

// Optimization-pipeline flags shared by run and inspect (pass_flags.cc).
struct PassFlags {
  int opt_level = 1;
  std::vector<std::string> disabled;
  bool verify_each = false, print_after_all = false;
  std::string qat;  // "", int8, int4, int2: the qat pass (CompileOptions::qat_bits)
  bool qat_activations = false;
  std::vector<std::string> remat;  // op names for the remat pass (CompileOptions::rematerialize)
};
void add_pass_flags(CLI::App* cmd, PassFlags& f);
// Options for these flags; with --print-after-all or RLX_PRINT_AFTER_ALL=1 in
// the environment, every pass's graph goes to `dump`. Throws for unknown pass
// names, listing the valid ones.
CompileOptions compile_options(const PassFlags& f, std::FILE* dump);

// Optimizer flags shared by train and compile --train (optimizer_flags.cc).
struct OptimizerFlags {
  std::string optimizer = "adamw";
  double momentum = 0, dampening = 0, weight_decay = 0;
  std::vector<double> betas;
  bool nesterov = false;
};
void add_optimizer_flags(CLI::App* cmd, OptimizerFlags& f);
// Throws rlx::Error for an unknown optimizer or a --betas of other than two values.
train::OptimizerOptions optimizer_options(const OptimizerFlags& f);

// --freeze for ONNX import (import_flags.cc); --input-shape is each command's own.
struct ImportFlags {
  std::vector<std::string> freeze;  // NAME=V0,V1,... or (rlx run) NAME: its value in --inputs
};
void add_import_flags(CLI::App* cmd, ImportFlags& f, bool values_from_inputs);
// "x=32,2" -> {"x", {32, 2}}; "s=" is a scalar.
std::pair<std::string, Dims> parse_input_shape(const std::string& spec);
// LoadOptions::input_shapes from NAME=D0,D1,... specs and frozen_inputs from
// the flags; `inputs` gives the values of bare --freeze NAME.
LoadOptions load_options(const ImportFlags& f, const std::vector<std::string>& input_shapes,
                         const TensorMap* inputs);

// rlx run --profile (profile.cc): time per op kind and the `top` slowest nodes
// per run (0: every node, in run order); the last profiled run as a Chrome trace JSON.
std::string profile_report(const Graph& g, const std::vector<NodeTime>& profile, size_t top);
void write_chrome_trace(const std::string& path, const Graph& g,
                        const std::vector<NodeTime>& profile);

// "logits  [1,10] f32  min -1.2 max 3.4 mean 0.1  [0.12, -0.5, ...]"
std::string tensor_summary(const std::string& name, const Tensor& t);
// GGUF files are inspected from the file itself (no graph is built).
bool is_gguf_path(const std::string& path);
void inspect_gguf(const std::string& path, const std::string& format);
// GGUF language models (run_gguf.cc).
std::vector<int32_t> parse_token_list(const std::string& text);
void run_gguf_tokens(const std::string& path, const std::string& tokens, const std::string& out,
                     bool dequantize, const CompileOptions& options);
// rlx inspect --backend NAME: every node of m the backend cannot take.
void print_backend_support(const Model& m, const std::string& backend);
std::string join_backend_names();  // "cpu, coreml"
// 1234567 -> "1.18 MiB"
std::string human_bytes(double bytes);
llm::Weights weight_mode(bool dequantize);

}  // namespace rlx::cli
