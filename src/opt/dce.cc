#include <vector>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {

Graph eliminate_dead_code(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (const auto& o : g.outputs()) live[size_t(o.node)] = true;
  for (size_t i = g.size(); i-- > 0;) {
    const Node& n = g.node(NodeId(i));
    if (n.op == Op::Input) live[i] = true;  // inputs are the signature
    if (!live[i]) continue;
    for (NodeId in : n.inputs) live[size_t(in)] = true;
    // A multi-output node that runs writes all its outputs: its results stay.
    for (size_t r = 0; r < n.results.size(); ++r) live[i + 1 + r] = true;
  }
  Rewriter rw(g);
  for (const Node& n : g.nodes())
    if (live[size_t(n.id)]) rw.copy(n.id);
  return rw.finish();
}

namespace {
class DcePass final : public Pass {
 public:
  std::string_view name() const override { return "dce"; }
  std::string_view description() const override {
    return "drop nodes no output depends on (inputs stay: they are the signature)";
  }
  Graph run(const Graph& g, const PassContext&) const override { return eliminate_dead_code(g); }
};
}  // namespace

std::unique_ptr<Pass> make_dce_pass() { return std::make_unique<DcePass>(); }

}  // namespace rlx::opt
