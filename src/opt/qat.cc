// The `qat` pass: fake_quantize on the weights (and optionally the activations) of every matmul
// and conv, for quantization-aware training and for simulating quantized inference.
//
// A weight is the matmul's second operand or the conv's filter when it is a param or constant,
// possibly seen through transposes (PyTorch's linear is x @ w.t()). The fake_quantize goes on the
// param itself, right after it, with the axis that becomes the output channel (N of the matmul,
// O of the conv) mapped back through the transposes: every reader of the weight then sees the
// quantized one, simplify can still fold the transpose into the matmul, autodiff passes the
// gradient to the param through the straight-through estimator, and an exporter finds
// fake_quantize(param) and can store the weight as real integers with the per-channel scales.
// Activations get an 8-bit per-tensor fake_quantize of their batch's max|x| (dynamic
// quantization), one per activation value, placed right before its first matmul/conv reader.
#include <map>
#include <optional>

#include "opt/pass.h"
#include "opt/rewrite.h"
#include "rlx/error.h"
#include "rlx/fake_quant.h"

namespace rlx::opt {
namespace {

bool is_leaf_weight(const Node& n) {
  return (n.op == Op::Param || n.op == Op::Constant) && is_float(n.shape.dtype);
}

// The weight operand of a float matmul/conv: its input index and output-channel axis.
std::optional<std::pair<size_t, int64_t>> weight_operand(const Graph& g, const Node& n) {
  if (!is_float(n.shape.dtype)) return std::nullopt;
  if (n.op == Op::Conv) return std::pair<size_t, int64_t>{1, 0};
  if (n.op != Op::MatMul) return std::nullopt;
  const int r = g.node(n.inputs[1]).shape.rank();
  if (r < 2) return std::nullopt;
  return std::pair<size_t, int64_t>{1, n.attrs_as<MatMulAttrs>().transpose_b ? r - 2 : r - 1};
}

FakeQuantAttrs attrs(int bits, std::optional<int64_t> axis) {
  FakeQuantAttrs a;
  a.bits = bits;
  a.axis = axis;
  a.scale = FakeQuantScale::batch;
  a.ste = FakeQuantSte::clipped;
  return a;
}

}  // namespace

Graph insert_fake_quant(const Graph& g, int bits, bool activations) {
  fake_quant_range(attrs(bits, std::nullopt));  // throws for bits other than 8, 4, 2
  // Which leaves to quantize, and along which axis (nullopt: two readers disagree, per tensor).
  std::map<NodeId, std::optional<int64_t>> leaf_axis;
  std::map<NodeId, bool> act_of;  // consumer -> whether its input 0 gets an activation fq
  for (const Node& n : g.nodes()) {
    const auto w = weight_operand(g, n);
    if (!w) continue;
    NodeId id = n.inputs[w->first];
    int64_t axis = w->second;
    bool already = false;
    while (true) {
      const Node& m = g.node(id);
      if (m.op == Op::FakeQuantize) already = true;
      if (m.op != Op::Transpose) break;
      axis = m.attrs_as<TransposeAttrs>().perm[size_t(axis)];
      id = m.inputs[0];
    }
    if (!already && is_leaf_weight(g.node(id))) {
      auto [it, fresh] = leaf_axis.emplace(id, axis);
      if (!fresh && it->second != axis) it->second = std::nullopt;
    }
    const Node& a = g.node(n.inputs[0]);
    if (activations && a.op != Op::FakeQuantize && !is_leaf_weight(a) && is_float(a.shape.dtype))
      act_of[n.id] = true;
  }
  // A leaf already read by a fake_quantize was quantized by an earlier run.
  for (const Node& n : g.nodes())
    if (n.op == Op::FakeQuantize) leaf_axis.erase(n.inputs[0]);

  Rewriter rw(g);
  std::map<NodeId, NodeId> act_fq;  // activation (new id) -> its fake_quantize
  for (const Node& n : g.nodes()) {
    if (act_of.count(n.id)) {
      Node c = n;
      for (NodeId& in : c.inputs) in = rw.mapped(in);
      auto [it, fresh] = act_fq.emplace(c.inputs[0], -1);
      if (fresh)
        it->second = rw.out().add(Op::FakeQuantize, {c.inputs[0]}, attrs(8, std::nullopt), {},
                                  std::string("qat: 8-bit activation into ") + op_name(n.op) +
                                      (n.origin.empty() ? "" : " from " + n.origin));
      c.inputs[0] = it->second;
      rw.map(n.id, rw.out().append_raw(std::move(c)));
    } else {
      rw.copy(n.id);
    }
    auto w = leaf_axis.find(n.id);
    if (w == leaf_axis.end()) continue;
    const std::string what = n.op == Op::Param ? "weight " + n.name : "constant weight";
    rw.map(n.id, rw.out().add(Op::FakeQuantize, {rw.mapped(n.id)}, attrs(bits, w->second), {},
                              "qat: " + std::to_string(bits) + "-bit " + what));
  }
  return rw.finish();
}

namespace {

class QatPass final : public Pass {
 public:
  std::string_view name() const override { return "qat"; }
  std::string_view description() const override {
    return "fake_quantize the weights of every matmul/conv per output channel (and with "
           "qat_activations their inputs per tensor): quantization-aware training";
  }
  int min_level() const override { return 0; }  // asked for explicitly: runs at -O0 too
  std::string skip_reason(const CompileOptions& o) const override {
    return o.qat_bits == 0 ? "off (CompileOptions::qat_bits = 0; rlx run --qat int8)" : "";
  }
  Graph run(const Graph& g, const PassContext& ctx) const override {
    return insert_fake_quant(g, ctx.options.qat_bits, ctx.options.qat_activations);
  }
};

}  // namespace

std::unique_ptr<Pass> make_qat_pass() { return std::make_unique<QatPass>(); }

}  // namespace rlx::opt
