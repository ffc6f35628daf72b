// Reverse-mode autodiff as an IR transform: vjp/grad append the backward
// graph to the same Graph as ordinary nodes (activation_grad, layer_norm_grad,
// matmul with transposes, conv_transpose, ...), so every backend and exporter
// runs training graphs with no special case. Each op's rule lives in one
// table keyed by the Op enum (src/opt/autodiff/table.cc); op_gradient says
// what it holds.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

// How an op of ops.def takes part in autodiff.
enum class GradSupport {
  rule,       // a vjp rule: gradients flow to its float inputs
  estimator,  // a vjp rule that is a chosen surrogate, not the derivative (fake_quantize's
              // straight-through estimators: the true derivative is zero almost everywhere)
  none,       // no gradient flows: leaves, integer/bool outputs, piecewise-constant ops
              // (floor, sign, comparisons, ...: zero almost everywhere, as in torch.autograd)
  gap,        // differentiable, but rlx has no rule (yet): differentiating through it throws
};
struct OpGradient {
  GradSupport support;
  std::string why;  // for none, gap and estimator: the reason
};
OpGradient op_gradient(Op op);

// Appends to `g` the vector-Jacobian product of `outputs` with `cotangents`
// (nodes of g, cotangents[i] of outputs[i]'s shape and float dtype) and
// returns, per node of `wrt`, the node holding
//   sum_i cotangents[i] . d outputs[i] / d wrt[j]
// (gradients of values used several times accumulate; gradients of broadcast
// operands are summed back to their shape). A wrt node no output depends on
// through float values gets zeros. Throws rlx::Error naming the node, op and
// shapes when a path needs an op without a rule, a wrt node is not float, or
// a reduction back to a broadcast operand cannot be told from symbolic dims
// (specialize the graph to input dims first).
std::vector<NodeId> vjp(Graph& g, const std::vector<NodeId>& outputs,
                        const std::vector<NodeId>& cotangents, const std::vector<NodeId>& wrt);

// d loss / d wrt[j] for a float `loss` of one element (seeded with 1).
std::vector<NodeId> grad(Graph& g, NodeId loss, const std::vector<NodeId>& wrt);

// A model graph extended with its gradients, as `rlx grad` runs it.
struct GradientGraphOptions {
  // Param names that get no gradient (PyTorch buffers and constants:
  // Model::non_trainable). Every other float param and every float input gets one.
  std::set<std::string> non_trainable;
  // false: the loss is the output named kLossOutput (a train=True torch export:
  // its other outputs, logits and buffer updates, ride along), or else the
  // graph's only float output, of one element. true: the cotangent of each
  // float output is a new input of the output's shape (GradientGraph::cotangents
  // names it).
  bool cotangents = false;
};
inline constexpr const char* kGradPrefix = "grad::";
inline constexpr const char* kLossOutput = "loss";

struct GradientGraph {
  // The model's outputs, then one output kGradPrefix + name per gradient.
  Graph graph;
  std::vector<std::string> grads;  // the gradient outputs' names
  // Cotangent mode: output name -> the input that takes its cotangent
  // ("cotangent_" + the name made an identifier, so exporters accept it).
  std::map<std::string, std::string> cotangents;
};
GradientGraph gradient_graph(Graph g, const GradientGraphOptions& options = {});

}  // namespace rlx
