// Copying a graph node by node with remapped inputs: the building block of
// every pass, since graphs are append-only.
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx::opt {

class Rewriter {
 public:
  explicit Rewriter(const Graph& src) : src_(src), map_(src.size(), -1) {}
  // Copies node `id` (inputs must already be mapped) and records the mapping.
  NodeId copy(NodeId id) {
    Node n = src_.node(id);
    for (NodeId& in : n.inputs) in = map_[size_t(in)];
    return map_[size_t(id)] = out_.append_raw(std::move(n));
  }
  void map(NodeId old_id, NodeId new_id) { map_[size_t(old_id)] = new_id; }
  NodeId mapped(NodeId old_id) const { return map_[size_t(old_id)]; }
  Graph& out() { return out_; }
  // Re-attaches the source graph's outputs and returns the result.
  Graph finish() {
    for (const auto& o : src_.outputs()) out_.add_output(o.name, map_[size_t(o.node)]);
    return std::move(out_);
  }

 private:
  const Graph& src_;
  Graph out_;
  std::vector<NodeId> map_;
};

// The provenance of a node fused from `a` and `b` ("conv ... + relu ...").
inline std::string join_origins(const std::string& a, const std::string& b) {
  if (a.empty() || a == b) return b;
  return b.empty() ? a : a + " + " + b;
}

// How many times each node is read: by the inputs of nodes some output
// depends on, and as a graph output (a fusion may only absorb a node nobody
// else reads). Dead readers do not count: a rewrite earlier in the pipeline
// (simplify's hard_swish) leaves them for dce, and they must not block a fusion.
inline std::vector<int> use_counts(const Graph& g) {
  std::vector<bool> live(g.size(), false);
  for (const auto& o : g.outputs()) live[size_t(o.node)] = true;
  for (size_t i = g.size(); i-- > 0;)
    if (live[i])
      for (NodeId in : g.node(NodeId(i)).inputs) live[size_t(in)] = true;
  std::vector<int> uses(g.size(), 0);
  for (const Node& n : g.nodes())
    if (live[size_t(n.id)])
      for (NodeId in : n.inputs) ++uses[size_t(in)];
  for (const auto& o : g.outputs()) ++uses[size_t(o.node)];
  return uses;
}

}  // namespace rlx::opt
