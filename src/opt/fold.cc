#include <vector>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"
#include "rlx/error.h"

namespace rlx::opt {

Graph fold_constants(const Graph& g, const Evaluator& eval, size_t max_bytes) {
  // Nodes no output depends on (left behind by simplify) are copied, not
  // evaluated: folding a dead weight transpose would only cost load time.
  std::vector<bool> live(g.size(), false);
  for (const auto& o : g.outputs()) live[size_t(o.node)] = true;
  for (size_t i = g.size(); i-- > 0;)
    if (live[i])
      for (NodeId in : g.node(NodeId(i)).inputs) live[size_t(in)] = true;
  Rewriter rw(g);
  for (const Node& n : g.nodes()) {
    bool foldable = live[size_t(n.id)] && !is_leaf(n.op) && n.shape.is_static() &&
                    size_t(n.shape.numel()) * dtype_size(n.shape.dtype) <= max_bytes;
    for (NodeId in : n.inputs)
      foldable = foldable && rw.out().node(rw.mapped(in)).op == Op::Constant;
    if (n.op == Op::Full || n.op == Op::Arange)
      foldable =
          live[size_t(n.id)] && size_t(n.shape.numel()) * dtype_size(n.shape.dtype) <= max_bytes;
    if (!foldable) {
      rw.copy(n.id);
      continue;
    }
    std::vector<Tensor> args;
    for (NodeId in : n.inputs) args.push_back(rw.out().node(rw.mapped(in)).value);
    Tensor v;
    try {
      v = eval(n, args);
    } catch (const Error& e) {
      throw e.with_context("constant folding " + node_context(g, n));
    }
    NodeId c = rw.out().constant(v, n.name);
    rw.out().node(c).origin = n.origin;
    rw.map(n.id, c);
  }
  return rw.finish();
}

namespace {
class FoldPass final : public Pass {
 public:
  std::string_view name() const override { return "fold"; }
  std::string_view description() const override {
    return "evaluate nodes whose inputs are all constants (weights included), up to "
           "max_folded_bytes per result";
  }
  unsigned needs() const override { return kParamsBound; }
  Graph run(const Graph& g, const PassContext& ctx) const override {
    return fold_constants(g, ctx.eval, ctx.options.max_folded_bytes);
  }
};
}  // namespace

std::unique_ptr<Pass> make_fold_pass() { return std::make_unique<FoldPass>(); }

}  // namespace rlx::opt
