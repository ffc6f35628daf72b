#include <cstring>
#include <map>
#include <tuple>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {
// Constants up to this size are compared by content; bigger ones (weights) by identity.
constexpr size_t kSmallConstantBytes = 256;
}  // namespace

Graph eliminate_common_subexpressions(const Graph& g) {
  Rewriter rw(g);
  using Key = std::tuple<int, std::vector<NodeId>, Attrs, std::string, std::string>;
  std::map<Key, NodeId> seen;
  for (const Node& n : g.nodes()) {
    std::string payload;
    if (n.op == Op::Input || n.op == Op::Param) {
      rw.copy(n.id);
      continue;
    }
    if (n.op == Op::Constant) {
      if (n.value.nbytes() > kSmallConstantBytes) {
        rw.copy(n.id);
        continue;
      }
      payload.assign(static_cast<const char*>(n.value.raw()), n.value.nbytes());
    }
    std::vector<NodeId> ins;
    for (NodeId in : n.inputs) ins.push_back(rw.mapped(in));
    Key key{int(n.op), ins, attrs_to_map(n.attrs), n.shape.str(), payload};
    auto it = seen.find(key);
    if (it != seen.end()) {
      rw.map(n.id, it->second);
    } else {
      seen.emplace(std::move(key), rw.copy(n.id));
    }
  }
  return rw.finish();
}

namespace {
class CsePass final : public Pass {
 public:
  std::string_view name() const override { return "cse"; }
  std::string_view description() const override {
    return "merge nodes with the same op, inputs and attributes (and equal small constants)";
  }
  Graph run(const Graph& g, const PassContext&) const override {
    return eliminate_common_subexpressions(g);
  }
};
}  // namespace

std::unique_ptr<Pass> make_cse_pass() { return std::make_unique<CsePass>(); }

}  // namespace rlx::opt
