// Control flow: If. A condition known at import (a constant, a frozen input,
// or shape code on static dims, which is what exporters mostly branch on:
// "squeeze when this dim is 1") lowers only the branch taken, so its shape
// code keeps folding. A condition computed at run time lowers both branches
// and selects each output with `where`; that needs the branches to agree on
// every output's shape and dtype, and costs both branches' work.
#include "frontends/onnx/context.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

const Graph& branch(Ctx& c, const char* name) {
  const Attribute* a = c.node.attr(name);
  RLX_CHECK(a && a->kind == Attribute::GraphK && a->g, "attribute '", name,
            "' (a graph) is required");
  return *a->g;
}

// The branch's outputs, lowered in a scope of its own that reads the
// enclosing ones.
std::vector<Val> lower_branch(Ctx& c, const char* name) {
  const Graph& g = branch(c, name);
  std::map<std::string, Val> env;
  for (const auto& [init, t] : g.initializers) env[init] = tensor_val(t);
  ImportState scope{c.b(), c.state().model, c.state().weights, env, &c.state()};
  std::vector<Val> outs;
  try {
    lower_nodes(scope, g, c.opset);
    for (const auto& o : g.outputs) {
      Val* v = scope.find(o.name);
      RLX_CHECK(v, "output '", o.name, "' is not computed by any node");
      outs.push_back(*v);
    }
  } catch (const Error& e) {
    throw e.with_context(std::string("in ") + name);
  }
  return outs;
}

std::vector<Val> lower_if(Ctx& c) {
  const size_t n_out = c.node.outputs.size();
  for (const char* name : {"then_branch", "else_branch"})
    RLX_CHECK(branch(c, name).outputs.size() == n_out, name, " gives ",
              branch(c, name).outputs.size(), " outputs, the If node has ", n_out);
  if (const Tensor* cond = c.known(0)) {
    RLX_CHECK(cond->numel() == 1, "the condition must hold one element, got ", cond->shape().str());
    return lower_branch(c, cond->item_as_double(0) != 0 ? "then_branch" : "else_branch");
  }
  std::vector<Val> then_v = lower_branch(c, "then_branch");
  std::vector<Val> else_v = lower_branch(c, "else_branch");
  NodeId cond = c.cast(c.in(0), DType::Bool);
  RLX_CHECK(c.shape_of(cond).is_static() && c.shape_of(cond).numel() == 1,
            "the condition must hold one element, got ", c.shape_of(cond).str());
  if (c.shape_of(cond).rank() > 0) cond = c.b().reshape(cond, {});
  std::vector<Val> outs;
  for (size_t k = 0; k < n_out; ++k) {
    const std::string what = "output " + std::to_string(k) + " '" + c.node.outputs[k] + "'";
    NodeId a = c.node_of(then_v[k], what + " of then_branch");
    NodeId b = c.node_of(else_v[k], what + " of else_branch");
    const Shape &sa = c.shape_of(a), &sb = c.shape_of(b);
    RLX_CHECK(sa == sb, "the condition '", c.node.inputs[0],
              "' is not known at import and the branches give ", what, " as ", sa.str(), " and ",
              sb.str(),
              "; rlx selects between branches only when they agree. Freeze the inputs the "
              "condition depends on (rlx run --freeze NAME) or give static input dims");
    outs.push_back(node_val(c.b().op(Op::Where, {cond, a, b})));
  }
  return outs;
}

}  // namespace

void register_control(Registry& r) { r.add("If", lower_if); }

}  // namespace rlx::onnx
