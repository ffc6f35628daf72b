// The IR: an append-only SSA graph. Nodes are created in topological order; a
// NodeId is the node's index. A node has one output, except nodes of
// multi-output ops (topk, split, norm grads): those hold a shape per output and
// are followed by one `result` node per output, which are what everything else
// reads. Ops, their families and typed attributes come from ops.def (op_attrs.h).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/op_attrs.h"
#include "rlx/shape.h"
#include "rlx/tensor.h"

namespace rlx {

struct OpInfo {
  Op op;
  const char* name;
  OpFamily family;
  const char* attr_set;  // "Rope" for RopeAttrs
  int min_inputs;
  int max_inputs;  // -1 = any
  int outputs;     // 1, a fixed count, or -1: set by the attributes
};

const OpInfo& op_info(Op op);
inline const char* op_name(Op op) { return op_info(op).name; }
int num_ops();
// Looks an op up by its table name; throws rlx::Error for unknown names.
Op parse_op(std::string_view name);
bool is_leaf(Op op);
// Whether `op` makes multi-output nodes (its outputs column is not 1).
bool has_results(Op op);
// Checks that `kind` is a unary float activation (activation_grad's kind);
// throws rlx::Error listing the valid kinds otherwise.
Op activation_kind(Op kind);
Op activation_kind(std::string_view kind);

using NodeId = int32_t;
class Graph;

struct Node {
  NodeId id = -1;
  Op op = Op::Input;
  std::vector<NodeId> inputs;
  OpAttrs attrs;  // the op's attribute struct (ops.def)
  Shape shape;    // the output (a multi-output node has none: see results)
  // A multi-output node: the shape of each output, read through the `result`
  // nodes that follow it. Empty for every other node.
  std::vector<Shape> results;
  // Every output's shape: `results`, or just `shape` for a single-output node.
  std::span<const Shape> output_shapes() const {
    return has_results(op) ? std::span<const Shape>(results) : std::span<const Shape>(&shape, 1);
  }
  std::string name;    // inputs and params: the binding name; others optional
  std::string origin;  // provenance from the source model, shown in errors
  Tensor value;        // Constant data
  // A control node's bodies (if: then, else; loop: body); shared, never changed once built, so
  // copying the node (every pass does) keeps them. Null: a branch that did not lower (IfAttrs).
  std::vector<std::shared_ptr<const Graph>> bodies;
  // "node %12 (matmul 'fc1')"
  std::string label() const;
  // The typed attributes; throws rlx::Error naming the node when the node
  // holds another set (a bug in the caller, not in the input).
  template <AttrStruct T>
  const T& attrs_as() const {
    if (const T* p = std::get_if<T>(&attrs)) return *p;
    throw_wrong_attrs();
  }

 private:
  [[noreturn]] void throw_wrong_attrs() const;
};

struct GraphOutput {
  std::string name;
  NodeId node;
};

class Graph {
 public:
  // Appends a node, parses its attributes against ops.def, runs shape
  // inference and returns its id. Throws rlx::Error naming the node, op,
  // input shapes and origin when an attribute or the inference is wrong.
  NodeId add(Op op, std::vector<NodeId> inputs, const Attrs& attrs = {}, std::string name = {},
             std::string origin = {});
  // The same with typed attributes: g.add(Op::Rope, {x, pos}, RopeAttrs{.theta = 1e6}).
  template <AttrStruct A>
  NodeId add(Op op, std::vector<NodeId> inputs, A attrs, std::string name = {},
             std::string origin = {}) {
    return add_typed(op, std::move(inputs), OpAttrs(std::move(attrs)), std::move(name),
                     std::move(origin));
  }
  NodeId add_typed(Op op, std::vector<NodeId> inputs, OpAttrs attrs, std::string name = {},
                   std::string origin = {});
  // The same with bodies: a control node (if, loop); other ops take none.
  NodeId add_with_bodies(Op op, std::vector<NodeId> inputs, OpAttrs attrs,
                         std::vector<std::shared_ptr<const Graph>> bodies, std::string name = {},
                         std::string origin = {});
  // The `result` node holding output `index` of multi-output node `id`.
  NodeId result(NodeId id, int index) const;
  // Leaves.
  NodeId input(const std::string& name, Shape shape);
  NodeId param(const std::string& name, Shape shape);
  NodeId constant(Tensor value, std::string name = {});

  void add_output(const std::string& name, NodeId id);

  const Node& node(NodeId id) const { return nodes_.at(size_t(id)); }
  Node& node(NodeId id) { return nodes_.at(size_t(id)); }
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t size() const { return nodes_.size(); }
  const std::vector<GraphOutput>& outputs() const { return outputs_; }
  std::vector<GraphOutput>& outputs() { return outputs_; }
  std::vector<NodeId> inputs() const;  // Input nodes in creation order
  std::vector<NodeId> params() const;

  // Re-runs shape inference and structural checks on every node. Throws the
  // first problem with full node context.
  void verify() const;
  // Appends a node without inference (deserialization, passes that copy nodes
  // whose shape is known). Checks arity, input ids and that a multi-output
  // node is read only by its `result` nodes, which come right after it.
  NodeId append_raw(Node n);
  // The shapes node `n`'s inputs carry (a `result` reads one of its input's results).
  std::vector<const Shape*> input_shapes(const Node& n) const;
  // Drops the nodes from id `n` on (an importer undoing nodes it folded);
  // none may be an output.
  void truncate(size_t n);

 private:
  std::vector<Node> nodes_;
  std::vector<GraphOutput> outputs_;
};

// Shape inference for one node given its input shapes (for a `result` node:
// the shape of the output it reads). Public so the runtime can re-specialize
// graphs to concrete shapes. One shape per output: infer_shape is for
// single-output nodes and throws for the others.
std::vector<Shape> infer_shapes(const Node& n, const std::vector<const Shape*>& inputs);
Shape infer_shape(const Node& n, const std::vector<const Shape*>& inputs);
// Ops whose output extents depend on input values (nonzero, unique, non_max_suppression):
// shape inference gives that extent as the symbol data_dependent_dim(n) names (the node's
// `count` attribute), which no graph input binds; the runtime binds it once the node has run.
bool has_data_dependent_dims(Op op);
const std::string& data_dependent_dim(const Node& n);
// The output shapes for running `n` on `in`, inferred from their dims; a data-dependent count at
// its bound (the largest input's element count): buffers the kernel shrinks to the count it finds.
std::vector<Shape> shapes_for_run(const Node& n, std::span<const Tensor> in);
// The count a run found, read from the node's first output as its kernel shrank it.
int64_t data_dependent_count(const Node& n, const Shape& first_output);
// Control flow (if, loop): nodes whose bodies the session runs; their output dims are
// data-dependent too (has_data_dependent_dims), the count being the branch taken or the trips.
bool is_control(Op op);

// Error context for a node: "node %3 (matmul) [2,3] f32, [4,5] f32 (origin)".
std::string node_context(const Graph& g, const Node& n);

// Text printer: one line per node, "%12 = matmul %3, %7 : [2,64] f32   # origin".
std::string to_text(const Graph& g);
std::string to_dot(const Graph& g);

// JSON (de)serialization of a graph, including constants (base64) and attrs.
std::string to_json(const Graph& g);
Graph from_json(std::string_view json, const std::string& source_name = "<json>");

}  // namespace rlx
