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
    if (rw.mapped(n.id) >= 0) continue;  // a result of a folded multi-output node
    const std::span<const Shape> outs = n.output_shapes();
    size_t bytes = 0;
    bool fits = true;
    for (const Shape& s : outs) {
      fits = fits && s.is_static();
      if (fits) bytes += size_t(s.numel()) * dtype_size(s.dtype);
    }
    fits = fits && bytes <= max_bytes;
    bool foldable = live[size_t(n.id)] && !is_leaf(n.op) && fits;
    for (NodeId in : n.inputs) {
      const NodeId m = rw.mapped(in);
      foldable = foldable && m >= 0 && rw.out().node(m).op == Op::Constant;
    }
    if (n.op == Op::Full || n.op == Op::Arange) foldable = live[size_t(n.id)] && fits;
    if (!foldable) {
      rw.copy(n.id);
      continue;
    }
    std::vector<Tensor> args;
    for (NodeId in : n.inputs) args.push_back(rw.out().node(rw.mapped(in)).value);
    std::vector<Tensor> values;
    try {
      values = eval(n, args);
    } catch (const Error& e) {
      throw e.with_context("constant folding " + node_context(g, n));
    }
    // A multi-output node folds into one constant per result.
    for (size_t i = 0; i < values.size(); ++i) {
      const NodeId id = has_results(n.op) ? g.result(n.id, int(i)) : n.id;
      const NodeId c = rw.out().constant(values[i], g.node(id).name);
      rw.out().node(c).origin = n.origin;
      rw.map(id, c);
    }
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
