// A thin, typed front door to Graph::add for hand-written graphs and
// frontends: b.matmul(x, w), b.relu(h), ... Every call runs shape inference
// and throws rlx::Error with node context on misuse.
#pragma once
#include <string>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }

  // Provenance recorded on every node added until changed.
  void set_origin(std::string origin) { origin_ = std::move(origin); }

  NodeId input(const std::string& name, Shape s) { return g_.input(name, std::move(s)); }
  NodeId param(const std::string& name, Shape s) { return g_.param(name, std::move(s)); }
  NodeId constant(Tensor t) { return g_.constant(std::move(t)); }
  NodeId scalar(float v, DType t = DType::F32);
  NodeId full(const Dims& dims, double value, DType t = DType::F32);
  NodeId arange(int64_t count, double start = 0, double step = 1, DType t = DType::I64);

  NodeId op(Op op, std::vector<NodeId> in, Attrs a = {}, std::string name = {}) {
    return g_.add(op, std::move(in), std::move(a), std::move(name), origin_);
  }
  // A multi-output op (topk, split, ...): its result nodes, one per output.
  std::vector<NodeId> results(Op op, std::vector<NodeId> in, Attrs a = {}) {
    const NodeId id = this->op(op, std::move(in), std::move(a));
    std::vector<NodeId> r;
    for (size_t i = 0; i < g_.node(id).results.size(); ++i) r.push_back(g_.result(id, int(i)));
    return r;
  }
  NodeId unary(Op op, NodeId x, Attrs a = {}) { return this->op(op, {x}, std::move(a)); }
  NodeId binary(Op op, NodeId a, NodeId b) { return this->op(op, {a, b}); }

  NodeId relu(NodeId x) { return unary(Op::Relu, x); }
  NodeId add(NodeId a, NodeId b) { return binary(Op::Add, a, b); }
  NodeId sub(NodeId a, NodeId b) { return binary(Op::Sub, a, b); }
  NodeId mul(NodeId a, NodeId b) { return binary(Op::Mul, a, b); }
  NodeId div(NodeId a, NodeId b) { return binary(Op::Div, a, b); }
  NodeId matmul(NodeId a, NodeId b) { return binary(Op::MatMul, a, b); }
  NodeId cast(NodeId x, DType t) {
    return op(Op::Cast, {x}, {{"dtype", std::string(dtype_name(t))}});
  }
  NodeId reshape(NodeId x, const std::vector<int64_t>& shape) {
    return op(Op::Reshape, {x}, {{"shape", shape}});
  }
  NodeId transpose(NodeId x, const std::vector<int64_t>& perm) {
    return op(Op::Transpose, {x}, {{"perm", perm}});
  }
  NodeId reduce(Op op, NodeId x, const std::vector<int64_t>& axes, bool keepdims = false) {
    return this->op(op, {x}, {{"axes", axes}, {"keepdims", int64_t(keepdims)}});
  }
  NodeId softmax(NodeId x, int64_t axis = -1) { return op(Op::Softmax, {x}, {{"axis", axis}}); }
  NodeId concat(std::vector<NodeId> xs, int64_t axis) {
    return op(Op::Concat, std::move(xs), {{"axis", axis}});
  }
  // A name for a data-dependent dim (a nonzero's count) no other node of the graph uses.
  std::string count_symbol(const std::string& stem) const {
    return stem + "_" + std::to_string(g_.size());
  }
  // x @ w^T + b with w [out, in] (PyTorch's Linear layout).
  NodeId linear(NodeId x, NodeId w, NodeId b = -1);

 private:
  Graph& g_;
  std::string origin_;
};

}  // namespace rlx
