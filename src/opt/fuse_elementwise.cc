// The elementwise pass: maximal regions of f32 element-wise nodes (unary,
// binary, compare, where; broadcasting and scalar operands included) become
// one fused_elementwise node, whose kernel makes one pass over memory instead
// of one per node (src/backends/cpu/fused_elementwise.cc).
//
// A region grows backwards from its last node (the root) through producers
// that have the root's shape and whose every reader is already in the region,
// so no value is computed twice and no intermediate leaves it. The cost
// rule: a region pays when it removes at least one intermediate tensor (two
// or more nodes), since each one saves a write and a read of the whole
// tensor and its kernel dispatch, while the fused kernel computes every
// element with the same span functions as the separate kernels. It stops at
// kMaxRegionInputs distinct inputs and kMaxRegionCode nodes.
#include <algorithm>
#include <queue>
#include <set>

#include "ir/elementwise_program.h"
#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {

// A node a region may hold: an f32 element-wise op (a compare gives a mask
// from f32 operands; where reads a mask and two f32 operands).
bool fusable(const Graph& g, const Node& n) {
  if (!is_region_op(n.op)) return false;
  const bool compare = op_family(n.op) == OpFamily::Compare;
  if (n.shape.dtype != (compare ? DType::Bool : DType::F32)) return false;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const DType t = g.node(n.inputs[i]).shape.dtype;
    if (t != (n.op == Op::Where && i == 0 ? DType::Bool : DType::F32)) return false;
  }
  return true;
}

struct Region {
  std::vector<NodeId> members;  // ascending ids: a valid evaluation order
  std::vector<NodeId> inputs;   // distinct non-member operands, in order of first use
};

class RegionFinder {
 public:
  explicit RegionFinder(const Graph& g)
      : g_(g), uses_(use_counts(g)), region_(g.size(), -1), reads_in_(g.size(), 0) {}

  std::vector<Region> run() {
    for (NodeId id = NodeId(g_.size()) - 1; id >= 0; --id) {
      const Node& n = g_.node(id);
      if (region_[size_t(id)] >= 0 || uses_[size_t(id)] == 0 || !fusable(g_, n) ||
          n.shape.dtype != DType::F32)
        continue;
      grow(n);
    }
    return std::move(regions_);
  }

 private:
  void grow(const Node& root) {
    const int r = int(regions_.size());
    std::vector<NodeId> members;
    std::set<NodeId> outside;          // operands of members that are not members
    std::priority_queue<NodeId> todo;  // highest id first: every reader is decided before it
    auto add = [&](const Node& n) {
      members.push_back(n.id);
      region_[size_t(n.id)] = r;
      outside.erase(n.id);
      for (NodeId in : n.inputs) {
        ++reads_in_[size_t(in)];
        if (region_[size_t(in)] != r) outside.insert(in);
        todo.push(in);
      }
    };
    add(root);
    while (!todo.empty() && members.size() < size_t(kMaxRegionCode)) {
      const NodeId p = todo.top();
      todo.pop();
      const Node& n = g_.node(p);
      if (region_[size_t(p)] >= 0 || !fusable(g_, n) || reads_in_[size_t(p)] != uses_[size_t(p)] ||
          n.shape.dims != root.shape.dims)
        continue;
      std::set<NodeId> more;  // operands n would add to the region's inputs
      for (NodeId in : n.inputs)
        if (!outside.count(in) && region_[size_t(in)] != r) more.insert(in);
      if (outside.size() - 1 + more.size() > size_t(kMaxRegionInputs)) continue;
      add(n);
    }
    for (NodeId m : members)
      for (NodeId in : g_.node(m).inputs) --reads_in_[size_t(in)];
    if (members.size() < 2) {  // (add() kept the inputs within kMaxRegionInputs)
      for (NodeId m : members) region_[size_t(m)] = -1;
      return;
    }
    Region reg;
    reg.members = members;
    std::sort(reg.members.begin(), reg.members.end());
    for (NodeId m : reg.members)
      for (NodeId in : g_.node(m).inputs)
        if (region_[size_t(in)] != r &&
            std::find(reg.inputs.begin(), reg.inputs.end(), in) == reg.inputs.end())
          reg.inputs.push_back(in);
    regions_.push_back(std::move(reg));
  }

  const Graph& g_;
  std::vector<int> uses_;
  std::vector<int> region_;    // per node: its region, or -1
  std::vector<int> reads_in_;  // per node: reads by members of the region being grown
  std::vector<Region> regions_;
};

std::string program_of(const Graph& g, const Region& reg) {
  EwProgram p;
  p.inputs = int(reg.inputs.size());
  auto value = [&](NodeId id) {
    auto at = std::find(reg.inputs.begin(), reg.inputs.end(), id);
    if (at != reg.inputs.end()) return int(at - reg.inputs.begin());
    return p.inputs +
           int(std::find(reg.members.begin(), reg.members.end(), id) - reg.members.begin());
  };
  for (NodeId m : reg.members) {
    const Node& n = g.node(m);
    EwInstr in{n.op, n.attrs, {}};
    for (NodeId a : n.inputs) in.args.push_back(value(a));
    p.code.push_back(std::move(in));
  }
  return format_program(p);
}

class ElementwisePass final : public Pass {
 public:
  std::string_view name() const override { return "elementwise"; }
  std::string_view description() const override {
    return "regions of f32 element-wise ops (unary, binary, compare, where; broadcasting) -> one "
           "fused_elementwise node evaluated in one pass over memory";
  }
  Graph run(const Graph& g, const PassContext&) const override { return fuse_elementwise(g); }
};

}  // namespace

Graph fuse_elementwise(const Graph& g) {
  const std::vector<Region> regions = RegionFinder(g).run();
  std::vector<const Region*> root_of(g.size(), nullptr);
  std::vector<bool> absorbed(g.size(), false);
  for (const Region& r : regions) {
    root_of[size_t(r.members.back())] = &r;
    for (NodeId m : r.members) absorbed[size_t(m)] = true;
  }
  Rewriter rw(g);
  for (const Node& n : g.nodes()) {
    if (const Region* r = root_of[size_t(n.id)]) {
      std::vector<NodeId> in;
      std::string origin;
      for (NodeId x : r->inputs) in.push_back(rw.mapped(x));
      for (NodeId m : r->members) origin = join_origins(origin, g.node(m).origin);
      rw.map(n.id, rw.out().add(Op::FusedElementwise, std::move(in),
                                FusedElementwiseAttrs{program_of(g, *r)}, n.name, origin));
    } else if (!absorbed[size_t(n.id)] &&
               std::all_of(n.inputs.begin(), n.inputs.end(),
                           [&](NodeId in) { return rw.mapped(in) >= 0; })) {
      rw.copy(n.id);  // (a node reading an absorbed one is dead: it goes)
    }
  }
  return rw.finish();
}

std::unique_ptr<Pass> make_elementwise_pass() { return std::make_unique<ElementwisePass>(); }

}  // namespace rlx::opt
