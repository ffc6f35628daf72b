// IR -> MIL lowering: shared context and the per-family registration hooks.
// The table is indexed by the op enum from ops.def, so coverage reports walk
// the op table itself; an op with no entry is listed, never skipped.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "mil.h"
#include "rlx/graph.h"
#include "rlx/io.h"

namespace rlx::opt::ad {
class Emit;
}

namespace rlx::coreml {

struct Lowering {
  const Graph& g;
  const TensorMap& weights;
  Builder& b;
  bool fp16;
  std::vector<Val> vals;                  // per node id
  std::vector<std::vector<Val>> results;  // per multi-output node id: one per output

  const Val& in(const Node& n, size_t i) const { return vals[size_t(n.inputs[i])]; }
  pb::DataType dtype(DType t) const;
  Type type_of(const Shape& s) const;
  Type type_of(const Node& n) const { return type_of(n.shape); }
  std::string hint(const Node& n) const {
    return std::string(op_name(n.op)) + "_" + std::to_string(n.id);
  }
  int opset() const { return b.opset(); }

  // Helpers for composed lowerings; `h` names the temporaries.
  Val unary(const std::string& type, const Val& x, const std::string& h);
  Val binary(const std::string& type, const Val& x, const Val& y, const std::string& h);
  Val scalar_like(double v, const Val& x, const std::string& h) {
    return b.scalar(v, x.type.dt, h);
  }
  Val reduce(const std::string& type, const Val& x, std::vector<int64_t> axes, bool keep,
             const std::string& h);
  Val reshape(const Val& x, const std::vector<int64_t>& shape, const std::string& h);
  Val cast(const Val& x, pb::DataType dt, const std::string& h);
  // A fused conv/matmul activation as its MIL op, named `h` (identity for none).
  Val activation(Epilogue act, const Val& x, const std::string& h);
  // (x - mean) * rsqrt(var + eps) over `axes` (kept), composed from primitives.
  Val normalize(const Val& x, const std::vector<int64_t>& axes, double eps, const std::string& h);
};

using LowerFn = Val (*)(Lowering&, const Node&);
// A multi-output op: one value per output, in result order.
using LowerResultsFn = std::vector<Val> (*)(Lowering&, const Node&);
inline constexpr size_t kNumOps = 0
#define RLX_OP(e, ...) +1
#include "rlx/ops.def"
#undef RLX_OP
    ;
struct LowerTable {
  std::array<LowerFn, kNumOps> one{};          // single-output ops
  std::array<LowerResultsFn, kNumOps> many{};  // multi-output ops
  bool has(Op op) const { return one[size_t(op)] || many[size_t(op)]; }
};

void register_elementwise(LowerTable& t);  // leaves, unary, binary, compare, where, cast
void register_shape(LowerTable& t);        // reductions, softmax, movement, indexing, split
void register_nn(LowerTable& t);           // matmul, conv, pools, norms, attention
void register_grad(LowerTable& t);  // backward ops, dropout, fused_elementwise (lower_grad.cc)
void register_indexing(LowerTable& t);     // one_hot, gather_nd, scatters, topk, conv_transpose
void register_rope(LowerTable& t);         // rope (lower_rope.cc)
void register_resample(LowerTable& t);     // resize, grid_sample, dequant_matmul/embedding
void register_quant(LowerTable& t);        // fake_quantize(_grad) (lower_quant.cc)
// lstm, gru, rnn, gated_delta_net, selective_scan unrolled (lower_sequence.cc)
void register_sequence(LowerTable& t);
// The outputs of multi-output node `n` lowered through a primitive spelling of
// it (opt/autodiff/primitives.h): `build` makes it as a small rlx graph on
// inputs shaped like n's, whose nodes lower through the table (lower_grad.cc).
using PrimitiveSpelling =
    std::function<std::vector<NodeId>(opt::ad::Emit&, const std::vector<NodeId>&)>;
std::vector<Val> lower_results_via_primitives(Lowering& L, const Node& n,
                                              const PrimitiveSpelling& build);
// True when node `id` feeds only dequant ops as their quantized weight (it then needs no const).
bool only_dequant_uses(const Graph& g, NodeId id);
// True when every reader of param `id` is a fake_quantize the package stores as int8
// (lower_quant.cc): the param then needs no float const.
bool only_int8_weight_uses(const Graph& g, const TensorMap& weights, NodeId id, int opset);
const LowerTable& lower_table();

Type broadcast_type(const Type& a, const Type& b, pb::DataType dt);

}  // namespace rlx::coreml
