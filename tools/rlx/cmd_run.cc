// rlx run MODEL --inputs IN.safetensors|IN.npy [--out OUT.safetensors] [--cast-inputs]
//         [--threads N] [--bench N] [-O0|-O1] [--disable-pass NAME]... [--print-after-all]
//         [--specialize] [--profile [--profile-nodes N]] [--trace T.json]
// rlx run MODEL.gguf --tokens "1 2 3" [--out logits.safetensors]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "commands.h"
#include "rlx/cpu_isa.h"

namespace rlx::cli {
namespace {

struct RunOptions {
  std::string model, inputs, out, tokens;
  bool dequantize = false;
  bool cast_inputs = false;
  int threads = 0;
  int bench = 0;
  PassFlags passes;
  bool specialize = false;
  bool profile = false;
  size_t profile_nodes = 15;
  std::string trace;
  std::string matmul_precision;  // empty: the default backend's (RLX_MATMUL_PRECISION)
  ImportFlags import;
};

std::string signature(const Graph& g) {
  std::string s;
  for (NodeId id : g.inputs())
    s += (s.empty() ? "" : ", ") + g.node(id).name + " " + g.node(id).shape.str();
  return s.empty() ? "(none)" : s;
}

// Inputs by name from a safetensors file, or one .npy file for a model that
// takes one input.
TensorMap read_inputs(const std::string& path, const Graph& g) {
  if (path.ends_with(".npy")) {
    const std::vector<NodeId> ins = g.inputs();
    RLX_CHECK(ins.size() == 1, path, ": an .npy file holds one tensor but the model takes ",
              ins.size(), " inputs; pass a safetensors file with one tensor per input");
    return {{g.node(ins[0]).name, read_npy(path)}};
  }
  return read_safetensors(path);
}

// Loads the model and reads --inputs. An ONNX model is imported for the dims
// of the inputs (and with the --freeze ones as constants), so its shape code
// and If conditions fold at import whatever dims it declares.
Model load_for_inputs(const RunOptions& o, TensorMap& inputs) {
  if (!is_onnx_model(o.model) || o.inputs.empty()) {
    RLX_CHECK(o.import.freeze.empty(), "--freeze applies to ONNX models, with --inputs");
    Model m = load_model(o.model);
    if (!o.inputs.empty()) inputs = read_inputs(o.inputs, m.graph);
    return m;
  }
  // An .npy file holds one unnamed tensor: the name comes from the declared inputs.
  inputs = o.inputs.ends_with(".npy") ? read_inputs(o.inputs, load_model(o.model).graph)
                                      : read_safetensors(o.inputs);
  LoadOptions lo = load_options(o.import, {}, &inputs);
  for (const auto& [name, t] : inputs)
    if (!lo.frozen_inputs.count(name)) lo.input_shapes[name] = t.dims();
  for (const auto& [name, t] : lo.frozen_inputs) inputs.erase(name);
  return load_model(o.model, lo);
}

void run(const RunOptions& o) {
  set_num_threads(o.threads);
  CompileOptions copts = compile_options(o.passes, stderr);
  if (!o.matmul_precision.empty()) {
    CpuOptions cpu = cpu_options_from_env();
    cpu.matmul_precision = parse_matmul_precision(o.matmul_precision);
    set_default_backend(make_cpu_backend(cpu));
    if (cpu.matmul_precision == MatmulPrecision::bf16 &&
        (cpu_isa() != Isa::avx512 || !has_avx512_bf16()))
      std::fprintf(stderr, "rlx: note: no AVX-512 BF16 on the %s path; bf16 matmuls run in f32\n",
                   isa_name(cpu_isa()));
  }
  if (is_gguf_path(o.model)) {
    RLX_CHECK(!o.tokens.empty(), o.model,
              ": a GGUF model runs on token ids; pass --tokens \"1 2 3\"");
    return run_gguf_tokens(o.model, o.tokens, o.out, o.dequantize, copts);
  }
  RLX_CHECK(o.tokens.empty(), "--tokens applies to GGUF language models only");
  TensorMap inputs;
  Model m = load_for_inputs(o, inputs);
  for (NodeId id : m.graph.inputs())
    RLX_CHECK(inputs.count(m.graph.node(id).name), o.model, " takes inputs ", signature(m.graph),
              "; '", m.graph.node(id).name, "' is missing",
              o.inputs.empty() ? " (pass --inputs FILE.safetensors)" : " from " + o.inputs);
  if (o.specialize)
    for (const auto& [name, t] : inputs) copts.input_shapes[name] = t.dims();
  auto exe = Executable::compile(std::move(m.graph), m.weights, copts);
  Session session(exe, {.cast_inputs = o.cast_inputs});
  TensorMap outputs = session.run(inputs);
  for (const auto& [name, t] : outputs) std::printf("%s\n", tensor_summary(name, t).c_str());
  std::printf("peak activation memory: %s\n",
              human_bytes(double(session.last_arena_bytes())).c_str());
  if (!o.out.empty()) {
    write_safetensors(o.out, outputs);
    std::printf("wrote %zu output(s) to %s\n", outputs.size(), o.out.c_str());
  }
  if (o.bench > 0) {
    session.run(inputs);  // warm-up
    std::vector<double> ms;
    for (int i = 0; i < o.bench; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      session.run(inputs);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::printf("latency over %d runs (%d threads): median %.3f ms, min %.3f ms, max %.3f ms\n",
                o.bench, num_threads(), ms[ms.size() / 2], ms.front(), ms.back());
  }
  if (o.profile || !o.trace.empty()) {
    // Separate from --bench: the clock reads around each node cost a little.
    session.set_profiling(true);
    for (int i = 0; i < std::max(o.bench, 10); ++i) session.run(inputs);
    std::printf("%s", profile_report(exe->graph(), session.profile(), o.profile_nodes).c_str());
    if (!o.trace.empty()) {
      write_chrome_trace(o.trace, exe->graph(), session.profile());
      std::printf("wrote a Chrome trace of the last run to %s\n", o.trace.c_str());
    }
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunOptions>();
  auto* cmd = app.add_subcommand("run", "Run a model on inputs from a safetensors file");
  cmd->add_option(
         "model", o->model,
         "Model: a directory with model.rlx.json or torch-ir.json, a graph JSON, an ONNX model "
         "(imported for the dims of --inputs) or a GGUF language model")
      ->required();
  cmd->add_option("-i,--inputs", o->inputs,
                  "Inputs by name (safetensors), or one .npy file for a model with one input");
  cmd->add_option("--tokens", o->tokens,
                  "GGUF language models: token ids (\"1 15043 3186\"); writes logits "
                  "[n_tokens, n_vocab]");
  cmd->add_flag("--dequantize", o->dequantize,
                "GGUF: dequantize every weight to f32 up front instead of running on quant blocks");
  cmd->add_option("-o,--out", o->out, "Write outputs by name to this safetensors file");
  cmd->add_flag("--cast-inputs", o->cast_inputs,
                "Convert inputs whose dtype differs from the declared one (default: an error)");
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--bench", o->bench, "Time N runs after a warm-up; print median, min and max")
      ->check(CLI::NonNegativeNumber);
  add_pass_flags(cmd, o->passes);
  cmd->add_option("--matmul-precision", o->matmul_precision,
                  "f32 (default) or bf16: matmuls and GEMM convs with a constant weight round both "
                  "operands to bf16 and sum in f32, as PyTorch's float32 matmul precision "
                  "'medium' (on CPUs with AVX-512 BF16; `rlx version` says whether this one has "
                  "it)")
      ->check(CLI::IsMember({"f32", "bf16"}));
  cmd->add_flag("--profile", o->profile,
                "Time every node over max(--bench, 10) runs; print time per op kind and the "
                "slowest nodes");
  cmd->add_option(
      "--profile-nodes", o->profile_nodes,
      "With --profile: list the N slowest nodes (default 15); 0 lists every node in run order");
  cmd->add_option("--trace", o->trace,
                  "With profiling: write the last run as a Chrome trace JSON (chrome://tracing)");
  add_import_flags(cmd, o->import, true);
  cmd->add_flag("--specialize", o->specialize,
                "Compile for the dims of --inputs: symbolic dims become static before the other "
                "passes run");
  cmd->callback([o] { run(*o); });
}

}  // namespace rlx::cli
