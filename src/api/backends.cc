// The `rlx` library's wiring: which backends exist by name, and the CPU
// backend as the process default. This object is linked into every user of
// `rlx` directly (not pulled from an archive), so the wiring always runs.
#include "frontends/import_eval.h"
#include "rlx/backend.h"
#include "rlx/error.h"

namespace rlx {

std::vector<std::string> backend_names() { return {"cpu", "coreml"}; }

std::shared_ptr<const Backend> make_backend(const std::string& name) {
  if (name == "cpu") return make_cpu_backend();
  if (name == "coreml") return make_coreml_backend();
  std::string known;
  for (const auto& n : backend_names()) known += (known.empty() ? "" : ", ") + n;
  throw make_error("unknown backend '", name, "' (known: ", known, ")");
}

namespace {
std::shared_ptr<const Backend> make_default() { return make_cpu_backend(); }
[[maybe_unused]] const bool wired = (set_default_backend_factory(&make_default), true);
// Import-time folding runs on a CPU backend of its own (the default one may be
// replaced or configured later).
[[maybe_unused]] const bool wired_import =
    (set_import_evaluator([](const Node& n, std::span<const Tensor> in) {
       static const auto cpu = make_cpu_backend();
       return evaluate(*cpu, n, in);
     }),
     true);
}  // namespace

}  // namespace rlx
