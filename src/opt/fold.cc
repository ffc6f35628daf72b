#include <vector>

#include "opt/passes.h"
#include "opt/rewrite.h"
#include "rlx/error.h"

namespace rlx::opt {

Graph fold_constants(const Graph& g, const Evaluator& eval, size_t max_bytes) {
  Rewriter rw(g);
  for (const Node& n : g.nodes()) {
    bool foldable = !is_leaf(n.op) && n.shape.is_static() &&
                    size_t(n.shape.numel()) * dtype_size(n.shape.dtype) <= max_bytes;
    for (NodeId in : n.inputs)
      foldable = foldable && rw.out().node(rw.mapped(in)).op == Op::Constant;
    if (n.op == Op::Full || n.op == Op::Arange)
      foldable = size_t(n.shape.numel()) * dtype_size(n.shape.dtype) <= max_bytes;
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

}  // namespace rlx::opt
