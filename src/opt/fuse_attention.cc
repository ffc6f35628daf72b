// The attention pass: attention written out as ops, as torch 1.13 exports
// GPT-style models (no scaled_dot_product_attention yet),
//   P = softmax(masked_fill(scale * (Q @ K^T), mask, -inf))   O = P @ V
// on [B, H, S, D] values (the products often as [B*H, ...] through views),
// becomes one attention node: no [Sq, Sk] scores in memory, the causal band's
// masked tiles skipped. The mask must be a constant: a causal one becomes
// mask=causal, any other a bool bias. A finite fill (-1e9, finfo.min) is
// taken too when no row is masked whole (where softmax would spread its
// weight evenly and attention gives zeros). It runs after fold (the mask is
// then a constant) and simplifies its result, so the head transposes around
// the new node fold into it.
#include <cmath>
#include <optional>

#include "opt/pass.h"
#include "opt/passes.h"
#include "opt/rewrite.h"

namespace rlx::opt {
namespace {

std::optional<double> scalar_constant(const Node& n) {
  if (n.op == Op::Constant && n.value.defined() && n.value.numel() == 1)
    return n.value.item_as_double(0);
  if (n.op == Op::Full && n.shape.is_static() && n.shape.numel() == 1)
    return n.attrs_as<FullAttrs>().value;
  return std::nullopt;
}

// One matched attention: the node it replaces and what the new one takes.
struct AttentionMatch {
  NodeId out;         // the node whose value is O [B, H, Sq, Dv]
  NodeId q, k, v;     // the product operands as they are (any batch layout)
  bool k_transposed;  // k is K^T [.., D, Sk] (else K [.., Sk, D], the matmul transposes it)
  double scale = 1;
  MaskKind mask = MaskKind::none;
  Tensor keep;  // mask=bias: a bool [Sq, Sk] (true: attend)
};

class AttentionFuser {
 public:
  explicit AttentionFuser(const Graph& g) : g_(g), uses_(use_counts(g)) {}

  Graph run() {
    std::vector<AttentionMatch> found;
    std::vector<NodeId> at(g_.size(), -1);  // node -> index into found, for the node it replaces
    for (const Node& n : g_.nodes())
      if (auto m = match(n)) {
        at[size_t(m->out)] = NodeId(found.size());
        found.push_back(std::move(*m));
      }
    if (found.empty()) return g_;
    Rewriter rw(g_);
    Graph& out = rw.out();
    for (const Node& n : g_.nodes()) {
      if (at[size_t(n.id)] < 0) {
        rw.copy(n.id);
        continue;
      }
      const AttentionMatch& m = found[size_t(at[size_t(n.id)])];
      const Dims od = n.shape.concrete();  // [B, H, Sq, Dv]
      const Dims kd = g_.node(m.k).shape.concrete();
      const int64_t B = od[0], H = od[1], Sq = od[2], D = kd[kd.size() - (m.k_transposed ? 2 : 1)];
      const int64_t Sk = kd[kd.size() - (m.k_transposed ? 1 : 2)];
      auto view = [&](NodeId x, Dims d) {
        return out.add(Op::Reshape, {rw.mapped(x)}, ReshapeAttrs{.shape = std::move(d)}, {},
                       n.origin);
      };
      const NodeId q = view(m.q, {B, H, Sq, D}), v = view(m.v, {B, H, Sk, od[3]});
      NodeId k = view(m.k, m.k_transposed ? Dims{B, H, D, Sk} : Dims{B, H, Sk, D});
      if (m.k_transposed)
        k = out.add(Op::Transpose, {k}, TransposeAttrs{{0, 1, 3, 2}}, {}, n.origin);
      std::vector<NodeId> in{q, k, v};
      if (m.mask == MaskKind::bias) in.push_back(out.constant(m.keep));
      AttentionAttrs a;
      a.mask = m.mask;
      a.scale = m.scale;
      rw.map(n.id, out.add(Op::Attention, in, a, n.name, n.origin));
    }
    return simplify_algebra(eliminate_dead_code(rw.finish()));
  }

 private:
  const Node& node(NodeId id) const { return g_.node(id); }
  bool single(NodeId id) const { return uses_[size_t(id)] == 1; }
  // v through one view read by nothing else, or v.
  NodeId through_view(NodeId v) const {
    const Node& n = node(v);
    return n.op == Op::Reshape && single(v) ? n.inputs[0] : v;
  }

  // O = P @ V at node `n` (the product, or a view of it): the match, if the
  // rest of the pattern is there.
  std::optional<AttentionMatch> match(const Node& n) const {
    if (n.shape.rank() != 4 || !n.shape.is_static() || !is_float(n.shape.dtype))
      return std::nullopt;
    const NodeId pv_id = n.op == Op::Reshape ? n.inputs[0] : n.id;
    const Node& pv = node(pv_id);
    if (pv.op != Op::MatMul || pv.inputs.size() != 2 || (pv_id != n.id && !single(pv_id)))
      return std::nullopt;
    const auto& pa = pv.attrs_as<MatMulAttrs>();
    if (pa.transpose_a || pa.transpose_b || pa.activation != Epilogue::none) return std::nullopt;
    const NodeId p_id = through_view(pv.inputs[0]);
    const Node& p = node(p_id);
    if (p.op != Op::Softmax || !single(p_id) || p.shape.rank() != 4) return std::nullopt;
    const int axis = int(p.attrs_as<SoftmaxAttrs>().axis);
    if (axis != -1 && axis != 3) return std::nullopt;
    const Dims pd = p.shape.concrete(), od = n.shape.concrete();  // [B, H, Sq, Sk], [B, H, Sq, Dv]
    if (od[0] != pd[0] || od[1] != pd[1] || od[2] != pd[2]) return std::nullopt;
    AttentionMatch m;
    m.out = n.id;
    m.v = pv.inputs[1];
    // The mask: where(mask, fill, x) (masked_fill) or where(keep, x, fill).
    NodeId s_id = p.inputs[0];
    if (node(s_id).op == Op::Where) {
      const auto masked = single(s_id) ? take_mask(node(s_id), pd, m) : std::nullopt;
      if (!masked) return std::nullopt;
      s_id = *masked;
    }
    // The scale: x * c, c * x or x / c.
    const Node& sc = node(s_id);
    NodeId mm_id = s_id;
    if ((sc.op == Op::Mul || sc.op == Op::Div) && single(s_id)) {
      for (int k = 0; k < 2; ++k) {
        if (sc.op == Op::Div && k == 0) continue;  // c / x is no scale
        if (auto c = scalar_constant(node(sc.inputs[size_t(k)]))) {
          m.scale = sc.op == Op::Div ? 1 / *c : *c;
          mm_id = sc.inputs[size_t(1 - k)];
          break;
        }
      }
      if (mm_id == s_id) return std::nullopt;
    }
    mm_id = through_view(mm_id);
    const Node& qk = node(mm_id);
    if (qk.op != Op::MatMul || qk.inputs.size() != 2 || !single(mm_id)) return std::nullopt;
    const auto& qa = qk.attrs_as<MatMulAttrs>();
    if (qa.transpose_a || qa.activation != Epilogue::none) return std::nullopt;
    m.q = qk.inputs[0];
    m.k = qk.inputs[1];
    m.k_transposed = !qa.transpose_b;
    // Operand sizes must be those of [B, H, ...] values.
    const Shape &qs = node(m.q).shape, &ks = node(m.k).shape, &vs = node(m.v).shape;
    if (!qs.is_static() || !ks.is_static() || !vs.is_static() || qs.rank() < 3) return std::nullopt;
    const int64_t BH = pd[0] * pd[1], Sq = pd[2], Sk = pd[3];
    const Dims qd = qs.concrete(), kd = ks.concrete(), vd = vs.concrete();
    const int64_t D = qd.back();
    const Dims want_k = m.k_transposed ? Dims{D, Sk} : Dims{Sk, D};
    if (numel(qd) != BH * Sq * D || qd[qd.size() - 2] != Sq || numel(kd) != BH * Sk * D ||
        kd[kd.size() - 2] != want_k[0] || kd.back() != want_k[1] || numel(vd) != BH * Sk * od[3] ||
        vd[vd.size() - 2] != Sk || vd.back() != od[3])
      return std::nullopt;
    return m;
  }

  // Where node w as a mask over the scores: its masked operand (the scores),
  // with the mask in m; nullopt when it is not a constant mask attention takes.
  std::optional<NodeId> take_mask(const Node& w, const Dims& pd, AttentionMatch& m) const {
    const Node& c = node(w.inputs[0]);
    if (c.op != Op::Constant || c.value.dtype() != DType::Bool) return std::nullopt;
    const bool fill_first = bool(scalar_constant(node(w.inputs[1])));
    const NodeId fill = w.inputs[fill_first ? 1 : 2], x = w.inputs[fill_first ? 2 : 1];
    const auto f = scalar_constant(node(fill));
    if (!f || !(*f <= -1e4) || !(node(x).shape == w.shape)) return std::nullopt;
    // Only a mask that broadcasts over batch and heads: [.., Sq, Sk] with leading 1s.
    const Dims md = c.value.dims();
    const int64_t Sq = pd[2], Sk = pd[3];
    if (md.size() < 2 || md[md.size() - 2] != Sq || md.back() != Sk || numel(md) != Sq * Sk)
      return std::nullopt;
    const Tensor mask = c.value.contiguous();
    Tensor keep({Sq, Sk}, DType::Bool);
    bool causal = true;
    for (int64_t i = 0; i < Sq; ++i) {
      bool any = false;
      for (int64_t j = 0; j < Sk; ++j) {
        const bool attend = mask.data<bool>()[i * Sk + j] != fill_first;
        keep.data<bool>()[i * Sk + j] = attend;
        any = any || attend;
        causal = causal && attend == (j <= i + Sk - Sq);
      }
      // A row masked whole: softmax spreads it (finite fill) or gives NaN (-inf), attention zeros.
      if (!any) return std::nullopt;
    }
    m.mask = causal ? MaskKind::causal : MaskKind::bias;
    if (!causal) m.keep = keep;
    return x;
  }

  const Graph& g_;
  std::vector<int> uses_;
};

class AttentionPass final : public Pass {
 public:
  std::string_view name() const override { return "attention"; }
  std::string_view description() const override {
    return "softmax(mask(scale * Q K^T)) V written out as ops (torch 1.13's GPT exports) -> one "
           "attention node (causal masks as mask=causal)";
  }
  unsigned needs() const override { return kParamsBound; }
  Graph run(const Graph& g, const PassContext&) const override { return fuse_attention(g); }
};

}  // namespace

Graph fuse_attention(const Graph& g) { return AttentionFuser(g).run(); }
std::unique_ptr<Pass> make_attention_pass() { return std::make_unique<AttentionPass>(); }

}  // namespace rlx::opt
