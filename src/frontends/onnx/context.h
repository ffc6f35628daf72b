// Lowering ONNX nodes to rlx IR: the value model (a graph node, a tensor known
// at import, or an integer tensor known element by element whose elements may
// be symbolic dims), the per-node context and the op registry the op files
// fill in.
#pragma once
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "io/onnx/model.h"
#include "rlx/builder.h"
#include "rlx/io.h"

namespace rlx::onnx {

// An integer tensor known at import, element by element: what Shape, and the
// Gather/Concat/Slice/... chains exporters build on it, evaluate to. Elements
// are static or symbolic dims (an input declared [batch, 3, 224, 224]).
struct IntList {
  Dims dims;  // the tensor's own dims (rank 0 or 1 in shape code, any in general)
  DType dtype = DType::I64;
  std::vector<Dim> v;
  bool is_static() const;
  Dims values() const;  // throws naming the first symbolic element
};

struct Val {
  NodeId id = -1;               // the graph node, once there is one
  Tensor konst;                 // defined(): value known at import (initializer, Constant, folded)
  std::optional<IntList> ints;  // known element by element (may hold symbols)
  std::string param;            // an initializer: bound as a param of this name when used as data
  bool absent = false;          // an omitted optional input ("")
};

struct Region;  // a body lowered into a graph of its own (ops_control.cc)

// Everything the importer shares with the op files. A subgraph lowers into
// a child state whose names shadow its parent's, which stay visible (ONNX
// subgraphs read outer values by name). An inlined branch or unrolled body
// shares its parent's builder; a region (a control node's body) has a graph
// of its own, into which the outer values it reads are captured as inputs.
struct ImportState {
  Builder& b;
  const Model& model;
  TensorMap& weights;
  std::map<std::string, Val>& env;
  ImportState* parent = nullptr;
  Region* region = nullptr;            // set on a region's outermost scope
  Val* find(const std::string& name);  // this scope, then the enclosing ones
};
// `name`, found outside region r, as a value of r's body (ops_control.cc); stored in s.env.
Val* capture(Region& r, ImportState& s, const std::string& name);

// Lowers every node of `graph` (the model's, or a branch's) into `s` in order.
void lower_nodes(ImportState& s, const Graph& graph, int64_t opset);

class Ctx {
  ImportState& s_;

 public:
  Ctx(ImportState& s, const Node& n, int64_t opset) : s_(s), node(n), opset(opset) {}

  const Node& node;
  const int64_t opset;
  Builder& b() { return s_.b; }
  rlx::Graph& g() { return s_.b.graph(); }

  size_t num_inputs() const { return node.inputs.size(); }
  bool has(size_t i) const;  // present and not ""
  // Input i as a graph node (an initializer becomes a param, a known value a
  // constant); throws when absent.
  NodeId in(size_t i);
  NodeId in_or(size_t i, NodeId def) { return has(i) ? in(i) : def; }
  // A value as a graph node (what in() does for an input); `what` names it in errors.
  NodeId node_of(Val& v, const std::string& what);
  ImportState& state() { return s_; }
  // Input i's value when known at import (nullptr otherwise).
  const Tensor* known(size_t i);
  std::optional<IntList> ints(size_t i);  // an integer input known element by element
  // Input i's integer values, which must be known and static (a shape, axes, pads...).
  Dims static_ints(size_t i, const char* what);
  std::optional<double> scalar(size_t i);  // a known one-element input as a number
  // A known one-element input as an integer (k, axis, depth); an rlx::Error
  // naming `what` when it is not finite or lies past +-2^62.
  std::optional<int64_t> scalar_int(size_t i, const char* what);
  Shape shape(size_t i);  // input i's shape, whatever it is
  const Shape& shape_of(NodeId id) { return g().node(id).shape; }

  // Attributes, with defaults.
  bool has_attr(const char* name) const { return node.attr(name) != nullptr; }
  int64_t i(const char* name, int64_t def) const;
  int64_t i(const char* name) const;
  double f(const char* name, double def) const;
  std::string s(const char* name, const std::string& def) const;
  std::vector<int64_t> ints_attr(const char* name, std::vector<int64_t> def = {}) const;
  // A window attribute (strides, pads, dilations...): exactly `count` values,
  // each in [lo, 2^31), or `count` copies of `fill` when absent. The bound
  // keeps the output-size arithmetic of hostile files from overflowing.
  std::vector<int64_t> window_attr(const char* name, size_t count, int64_t fill, int64_t lo) const;
  std::vector<double> floats_attr(const char* name) const;
  const Tensor& tensor_attr(const char* name) const;
  // Throws for an attribute this lowering does not implement, naming its value.
  [[noreturn]] void unsupported(const std::string& what) const;

  NodeId constant(Tensor t) { return g().constant(std::move(t)); }
  NodeId scalar_const(double v, DType t);
  NodeId cast(NodeId x, DType t) { return shape_of(x).dtype == t ? x : b().cast(x, t); }

  Val& val(size_t i);
};

inline Val node_val(NodeId id) {
  Val v;
  v.id = id;
  return v;
}
// A lowering's single result.
inline std::vector<Val> one(NodeId id) { return {node_val(id)}; }
inline Val int_val(IntList l) {
  Val v;
  v.ints = std::move(l);
  return v;
}
Val tensor_val(Tensor t);
// An IntList as a tensor (all elements static).
Tensor to_tensor(const IntList& l);
std::optional<IntList> to_int_list(const Tensor& t);  // integer tensors up to kMaxFoldElements
inline constexpr int64_t kMaxFoldElements = 1 << 16;

// One output per ONNX output of the node.
using LowerFn = std::function<std::vector<Val>(Ctx&)>;

class Registry {
 public:
  void add(const std::string& op_type, LowerFn fn) { fns_[op_type] = std::move(fn); }
  const LowerFn* find(const std::string& op_type) const {
    auto it = fns_.find(op_type);
    return it == fns_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> names() const;

 private:
  std::map<std::string, LowerFn> fns_;
};

const Registry& registry();
// Conv of x and w (and bias, or -1) with the node's Conv attributes (ops_nn.cc).
NodeId conv_node(Ctx& c, NodeId x, NodeId w, NodeId bias);

void register_elementwise(Registry& r);
void register_shape(Registry& r);
void register_nn(Registry& r);
void register_reduce(Registry& r);
void register_indexing(Registry& r);
void register_math(Registry& r);
void register_resize(Registry& r);
void register_recurrent(Registry& r);  // LSTM, GRU, RNN (ops_recurrent.cc)
void register_control(Registry& r);    // If, Loop, Scan (ops_control.cc)
void register_einsum(Registry& r);     // Einsum (ops_einsum.cc)
void register_training(Registry& r);   // Adagrad, Momentum, Adam (ops_training.cc)
void register_composed(Registry& r);   // Hardmax, LRN, windows, quantization (ops_composed.cc)
// NonZero, Compress, Unique, NonMaxSuppression (ops_data_dependent.cc)
void register_data_dependent(Registry& r);
// com.microsoft: Gelu, BiasGelu, FastGelu, QuickGelu, SkipLayerNormalization, FusedConv
void register_microsoft(Registry& r);  // ops_microsoft.cc

// Shared helpers.
int64_t norm_axis(int64_t axis, int64_t rank, const char* what);
std::vector<Dim> broadcast(const std::vector<Dim>& a, const std::vector<Dim>& b);

}  // namespace rlx::onnx
