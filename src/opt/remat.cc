// Rematerialization (activation checkpointing by op kind): a node of a
// chosen op is computed again right before a use that comes long after its
// previous one, so its value need not stay in the arena across the gap. A
// training graph's forward activations are the case it is for: relu(x) read
// by the next layer and, much later, by that layer's weight gradient, while
// x stays alive anyway for relu's own gradient. A copy is made only where
// every input of the node is alive there anyway (a leaf, or read at or after
// that use), so recomputing never holds another value longer: peak memory
// can only fall, at the price of the recomputation. It runs after CSE, which
// would merge the copies back.
#include <algorithm>
#include <map>
#include <set>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"
#include "rlx/error.h"

namespace rlx::opt {
namespace {

// Uses this many nodes or more apart have a gap worth a recomputation.
constexpr NodeId kMinGap = 4;

}  // namespace

Graph rematerialize(const Graph& g, const std::set<Op>& ops) {
  if (ops.empty()) return g;
  std::vector<std::vector<NodeId>> users(g.size());
  for (const Node& n : g.nodes())
    for (NodeId in : n.inputs)
      if (users[size_t(in)].empty() || users[size_t(in)].back() != n.id)
        users[size_t(in)].push_back(n.id);
  std::vector<bool> output(g.size(), false);
  for (const auto& o : g.outputs()) output[size_t(o.node)] = true;
  // Whether value v is held at node u anyway: a leaf (never in the arena), an
  // output, or read at or after u.
  auto alive_at = [&](NodeId v, NodeId u) {
    const Node& n = g.node(v);
    return is_leaf(n.op) || output[size_t(v)] ||
           (!users[size_t(v)].empty() && users[size_t(v)].back() >= u);
  };
  // Where a copy of a node goes: before the first use of each late run of uses.
  std::map<NodeId, std::vector<NodeId>> copies_before;  // use -> the nodes copied before it
  for (const Node& n : g.nodes()) {
    if (!ops.count(n.op) || has_results(n.op) || output[size_t(n.id)]) continue;
    const auto& u = users[size_t(n.id)];
    for (size_t i = 1; i < u.size(); ++i) {
      if (u[i] - u[i - 1] < kMinGap) continue;
      const bool free = std::all_of(n.inputs.begin(), n.inputs.end(),
                                    [&](NodeId in) { return alive_at(in, u[i]); });
      if (free) copies_before[u[i]].push_back(n.id);
    }
  }
  if (copies_before.empty()) return g;
  Rewriter rw(g);
  for (const Node& n : g.nodes()) {
    if (auto it = copies_before.find(n.id); it != copies_before.end())
      for (NodeId v : it->second) {
        // The copy reads the inputs' current versions; later readers of v read the copy.
        Node c = g.node(v);
        for (NodeId& in : c.inputs) in = rw.mapped(in);
        c.name.clear();  // the original keeps the name
        c.origin = join_origins(c.origin, "rematerialized");
        rw.map(v, rw.out().append_raw(std::move(c)));
      }
    rw.copy(n.id);
  }
  return rw.finish();
}

namespace {
class RematPass final : public Pass {
 public:
  std::string_view name() const override { return "remat"; }
  std::string_view description() const override {
    return "recompute nodes of the chosen ops right before a use long after the previous one "
           "(activation checkpointing), where their inputs are alive anyway";
  }
  std::string skip_reason(const CompileOptions& o) const override {
    return o.rematerialize.empty()
               ? "off (CompileOptions::rematerialize empty; rlx train --remat relu)"
               : "";
  }
  Graph run(const Graph& g, const PassContext& ctx) const override {
    std::set<Op> ops;
    for (const std::string& name : ctx.options.rematerialize) {
      const Op op = parse_op(name);
      RLX_CHECK(!is_leaf(op) && !has_results(op), "remat: '", name,
                "' cannot be recomputed (a leaf or a multi-output op)");
      ops.insert(op);
    }
    return rematerialize(g, ops);
  }
};
}  // namespace

std::unique_ptr<Pass> make_remat_pass() { return std::make_unique<RematPass>(); }

}  // namespace rlx::opt
