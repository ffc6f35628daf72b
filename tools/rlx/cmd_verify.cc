// rlx verify DIR: runs an export's reference inputs and compares every output
// with PyTorch's eager result (reference.safetensors).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "commands.h"

namespace rlx::cli {
namespace {

struct VerifyOptions {
  std::string model;
  double min_cosine = 0.999;  // the torch-ir spec's parity thresholds
  double max_abs = 1e-2;
  int threads = 0;
};

struct Diff {
  double max_abs = 0, cosine = 1;
};

Diff compare(const Tensor& got, const Tensor& want) {
  Diff d;
  double dot = 0, ng = 0, nw = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    double a = got.item_as_double(i), b = want.item_as_double(i);
    if (std::isnan(a) && std::isnan(b)) continue;
    d.max_abs = std::isnan(a - b) ? INFINITY : std::max(d.max_abs, std::abs(a - b));
    dot += a * b;
    ng += a * a;
    nw += b * b;
  }
  // Two all-zero tensors agree perfectly.
  d.cosine = ng == 0 && nw == 0 ? 1 : dot / std::sqrt(ng * nw);
  if (std::isnan(d.cosine)) d.cosine = 0;
  return d;
}

int verify(const VerifyOptions& o) {
  set_num_threads(o.threads);
  Model m = load_model(o.model);
  std::string ref_path = (std::filesystem::path(o.model) / "reference.safetensors").string();
  RLX_CHECK(std::filesystem::exists(ref_path), ref_path,
            ": missing; export with rlx_torch to get PyTorch's reference outputs");
  TensorMap ref = read_safetensors(ref_path);
  TensorMap inputs;
  for (NodeId id : m.graph.inputs()) {
    const std::string& name = m.graph.node(id).name;
    auto it = ref.find("in::" + name);
    RLX_CHECK(it != ref.end(), ref_path, ": no reference input 'in::", name, "'");
    inputs[name] = it->second;
  }
  auto exe = Executable::compile(m.graph, m.weights);
  Session session(exe);
  TensorMap outputs = session.run(inputs);
  bool ok = true;
  std::printf("%-10s %-20s %12s %12s  %s\n", "output", "shape", "max|err|", "cosine", "result");
  for (const auto& [name, got] : outputs) {
    // Unnamed outputs are out::<i> already; named ones (train=True: loss, logits,
    // update::<buffer>) are stored as out::<name>.
    auto it = ref.find(name.rfind("out::", 0) == 0 ? name : "out::" + name);
    RLX_CHECK(it != ref.end(), ref_path, ": no reference for output ", name);
    const Tensor& want = it->second;
    bool pass = got.dims() == want.dims();
    Diff d;
    if (pass) {
      d = compare(got, want);
      pass = d.cosine >= o.min_cosine && d.max_abs <= o.max_abs;
    }
    ok &= pass;
    std::printf("%-10s %-20s %12.3e %12.8f  %s\n", name.c_str(), got.shape().str().c_str(),
                d.max_abs, d.cosine,
                pass ? "pass"
                : got.dims() != want.dims()
                    ? ("FAIL (reference is " + want.shape().str() + ")").c_str()
                    : "FAIL");
  }
  std::printf("%s: %s (cosine >= %g, max|err| <= %g)\n", o.model.c_str(), ok ? "PASS" : "FAIL",
              o.min_cosine, o.max_abs);
  return ok ? 0 : 1;
}

}  // namespace

void add_verify_command(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  auto* cmd = app.add_subcommand("verify", "Check an export against PyTorch's reference outputs");
  cmd->add_option("model", o->model, "Export directory (torch-ir.json + reference.safetensors)")
      ->required();
  cmd->add_option("--min-cosine", o->min_cosine, "Smallest cosine similarity that passes");
  cmd->add_option("--max-abs", o->max_abs, "Largest max |error| that passes");
  cmd->add_option("-t,--threads", o->threads, "Worker threads (default: all cores)");
  cmd->callback([o] {
    if (verify(*o) != 0) throw CLI::RuntimeError(1);
  });
}

}  // namespace rlx::cli
