// Lowering aten ops to rlx IR: the value model, the per-node context with
// typed argument access, and the registry the op files fill in.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "frontends/torch/torch_ir.h"
#include "rlx/builder.h"

namespace rlx::torch_ir {

// What an Arg or a node output evaluates to during lowering.
struct Value {
  enum Kind { None, Tensor, Tuple, Int, Float, Bool, Str, DTypeV, List } kind = None;
  NodeId id = -1;            // Tensor
  std::vector<Value> items;  // Tuple, List
  int64_t i = 0;             // Int, Bool
  double f = 0;              // Float
  std::string s;             // Str, DTypeV
  static Value tensor(NodeId id) {
    Value v;
    v.kind = Tensor;
    v.id = id;
    return v;
  }
  static Value integer(int64_t x) {
    Value v;
    v.kind = Int;
    v.i = x;
    return v;
  }
  static Value real(double x) {
    Value v;
    v.kind = Float;
    v.f = x;
    return v;
  }
  // A tuple of tensors; a negative id is a None item.
  static Value tuple(const std::vector<NodeId>& ids) {
    Value v;
    v.kind = Tuple;
    for (NodeId id : ids) v.items.push_back(id >= 0 ? Value::tensor(id) : Value{});
    return v;
  }
  bool is_number() const { return kind == Int || kind == Float || kind == Bool; }
  double number() const { return kind == Float ? f : double(i); }
};

class LowerCtx {
 public:
  // The model's symbolic dims: their sizes in the export's example inputs and
  // the graph input (and axis) each first appears on.
  struct Symbol {
    int64_t example = 0;
    NodeId input = -1;
    int axis = 0;
  };
  using Symbols = std::map<std::string, Symbol>;

  LowerCtx(Builder& b, const Node& node, std::vector<Value> args, std::map<std::string, Value> kw,
           const Symbols& symbols)
      : b(b), node(node), symbols(symbols), args_(std::move(args)), kwargs_(std::move(kw)) {}

  Builder& b;
  const Node& node;
  const Symbols& symbols;

  // Argument `pos` (or keyword `name`); nullptr when absent or None.
  const Value* arg(size_t pos, const char* name = nullptr) const;
  bool has(size_t pos, const char* name = nullptr) const { return arg(pos, name) != nullptr; }
  NodeId tensor(size_t pos, const char* name = nullptr) const;
  std::vector<NodeId> tensors(size_t pos, const char* name = nullptr) const;
  int64_t i(size_t pos, const char* name = nullptr) const;
  int64_t i(size_t pos, const char* name, int64_t def) const;
  double f(size_t pos, const char* name = nullptr) const;
  double f(size_t pos, const char* name, double def) const;
  bool flag(size_t pos, const char* name, bool def) const;
  std::string str(size_t pos, const char* name, const std::string& def) const;
  std::vector<int64_t> ints(size_t pos, const char* name = nullptr) const;
  std::vector<int64_t> ints(size_t pos, const char* name, std::vector<int64_t> def) const;
  std::optional<DType> dtype(size_t pos, const char* name) const;

  const Shape& shape(NodeId id) const { return b.graph().node(id).shape; }
  int rank(NodeId id) const { return shape(id).rank(); }
  Dims dims(NodeId id) const { return shape(id).concrete(); }
  // One dim that must be static (a channel count), where the others may be symbolic.
  int64_t static_dim(NodeId id, int axis) const;
  // x reshaped to this node's recorded output shape; with a symbolic dim in
  // x, that dim's place in the recorded shape becomes -1 (see lowering.cc).
  NodeId reshape_to_out(NodeId x);
  // The shape as a reshape target: static dims as they are, one symbolic dim
  // as -1 (shape inference gives the result that dim back); more is an error.
  Dims reshape_dims(NodeId id) const;
  // The node's declared single-tensor output (shape/dtype as PyTorch saw it).
  const TensorMeta& out() const;
  DType out_dtype() const { return out().dtype; }

  // A tensor for a tensor-or-number argument, in dtype `t` (numbers become constants).
  NodeId as_tensor(const Value& v, DType t) const;
  NodeId cast(NodeId x, DType t) const;
  NodeId scalar(double v, DType t) const;

 private:
  std::vector<Value> args_;
  std::map<std::string, Value> kwargs_;
};

using LowerFn = std::function<Value(LowerCtx&)>;

class Registry {
 public:
  // `name` is "aten.addmm" (every overload) or "aten.add.Scalar" (one overload).
  void add(const std::string& name, LowerFn fn);
  void alias(const std::string& name, const std::string& existing);
  const LowerFn* find(const std::string& op) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, LowerFn> fns_;
};

// The one registry of every supported aten/prims op.
const Registry& registry();

// Op family registrations (one file each).
void register_elementwise(Registry& r);
void register_shape_ops(Registry& r);
void register_reductions(Registry& r);
void register_nn(Registry& r);
void register_indexing(Registry& r);
void register_creation(Registry& r);
void register_quant(Registry& r);         // fake quantization (ops_quant.cc)
void register_recurrent(Registry& r);     // lstm / gru / rnn (ops_recurrent.cc)
void register_math(Registry& r);          // composed element-wise math (ops_math.cc)
void register_linalg(Registry& r);        // matmul family, distances, diagonals (ops_linalg.cc)
void register_nn_pointwise(Registry& r);  // glu, shrinkage, huber (ops_nn_pointwise.cc)
void register_order(Registry& r);         // median, kthvalue, cummax, logcumsumexp (ops_order.cc)
void register_pool(Registry& r);  // adaptive max and 3-d pooling, 3-d upsampling (ops_pool.cc)
void register_linalg_decompositions(Registry& r);  // cholesky, lu, solves, qr, svd, eigh
void register_histogram(Registry& r);              // histogram, histogramdd (ops_histogram.cc)
void register_segment(Registry& r);  // segment_reduce, embedding_bag, class losses (ops_segment.cc)
void register_special(Registry& r);  // lgamma, polygamma, bessel, polynomials (ops_special.cc)
// nonzero, masked_select, unique (ops_data_dependent.cc)
void register_data_dependent(Registry& r);

// The indices of x's nonzero elements, [count, rank] i64, count a data-dependent dim.
NodeId nonzero_of(LowerCtx& c, NodeId x);

// PyTorch's loss reduction (argument `pos`: 0 none, 1 mean, 2 sum) of an element-wise loss;
// mean divides the sum by `mean_by` when given (nll_loss's total weight), else by the count
// (ops_nn_pointwise.cc).
NodeId reduce_loss(LowerCtx& c, NodeId loss, size_t pos, NodeId mean_by = -1);

// x with its last two dims swapped, PyTorch's .mT (ops_linalg.cc).
NodeId mT(const LowerCtx& c, NodeId x);

// log1p(x) composed so that small x keep their digits (ops_math.cc).
NodeId log1p_of(const LowerCtx& c, NodeId x);
// The ord-norm of x over axes (all when empty), as linalg_vector_norm (ops_reduce.cc).
NodeId vector_norm(LowerCtx& c, NodeId x, double ord, std::vector<int64_t> axes, bool keep);

// PyTorch's type promotion for two operands (tensors rank >= 1 beat 0-d
// tensors, which beat Python numbers, within the same category).
DType promote(const LowerCtx& c, const Value& a, const Value& b);

}  // namespace rlx::torch_ir
