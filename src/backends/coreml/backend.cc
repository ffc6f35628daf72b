// The CoreML exporter as a Backend: it answers supports() (what lowers to
// MIL) so "which ops does CoreML take" is the same query as for the CPU; it
// exports packages rather than running graphs, so compile and run refuse.
#include "rlx/backend.h"
#include "rlx/coreml.h"
#include "rlx/error.h"

namespace rlx::coreml {
namespace {

[[noreturn]] void export_only() {
  throw make_error(
      "the coreml backend exports .mlpackage files (rlx compile --target coreml); it does not "
      "run graphs in-process");
}

class CoreMLBackend final : public Backend {
 public:
  std::string name() const override { return "coreml"; }
  Support supports(const Node& n) const override { return coreml::supports(n); }
  std::unique_ptr<CompiledGraph> compile(const Graph&) const override { export_only(); }
  void run_node(const Node&, std::span<const Tensor>, std::span<Tensor>) const override {
    export_only();
  }
};

}  // namespace
}  // namespace rlx::coreml

namespace rlx {
std::shared_ptr<const Backend> make_coreml_backend() {
  return std::make_shared<coreml::CoreMLBackend>();
}
}  // namespace rlx
