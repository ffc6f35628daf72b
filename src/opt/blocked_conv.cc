// The blocked_conv pass: chains of pointwise and depthwise convs (mobilenets)
// run on channel-blocked activations ([N, ceil(C/16), H, W, 16]) as
// conv_blocked nodes, their weights packed here once. Layout moves (pad,
// reshape, transpose) are inserted only where a value enters or leaves the
// chain, so a whole mobilenet body pays one at its end.
#include <algorithm>
#include <numeric>
#include <optional>

#include "opt/autodiff/primitives.h"
#include "opt/pass.h"
#include "opt/rewrite.h"
#include "rlx/cpu_isa.h"

namespace rlx::opt {
namespace {

constexpr int64_t kBlock = kConvChannelBlock;
// Fewer convs than this in a chain would not pay for the layout moves at its ends.
constexpr size_t kMinChain = 3;

struct Candidate {
  bool in_blocked = true, depthwise = false;
};

// Whether conv node n has a blocked kernel: f32, 2-d, static, constant
// weight and bias, no dilation, a relu / relu6 / no activation, and either
// pointwise (unpadded), depthwise, or dense on a few NCHW input channels (a
// stem, which then reads its NCHW input in place).
std::optional<Candidate> candidate(const Graph& g, const Node& n) {
  if (n.op != Op::Conv || n.shape.dtype != DType::F32 || n.shape.rank() != 4 ||
      !n.shape.is_static())
    return std::nullopt;
  const auto& a = n.attrs_as<ConvAttrs>();
  const Node &x = g.node(n.inputs[0]), &w = g.node(n.inputs[1]);
  if (!x.shape.is_static() || w.op != Op::Constant || w.value.dtype() != DType::F32)
    return std::nullopt;
  if (conv_has_bias(a.residual, n.inputs.size()) && g.node(n.inputs[2]).op != Op::Constant)
    return std::nullopt;
  if (a.activation != Epilogue::none && a.activation != Epilogue::relu &&
      a.activation != Epilogue::relu6)
    return std::nullopt;
  for (int64_t d : a.dilation)
    if (d != 1) return std::nullopt;
  const int64_t C = x.shape.dims[1].value, O = n.shape.dims[1].value;
  const Dims wd = w.value.dims();
  const bool unpadded = std::all_of(a.pads.begin(), a.pads.end(), [](int64_t p) { return p == 0; });
  if (a.groups == 1 && wd[2] == 1 && wd[3] == 1 && unpadded) return Candidate{};
  if (a.groups == C && C == O && wd[1] == 1) return Candidate{.depthwise = true};
  if (a.groups == 1 && C <= 4) return Candidate{.in_blocked = false};
  return std::nullopt;
}

int64_t find_root(std::vector<int64_t>& parent, int64_t i) {
  while (parent[size_t(i)] != i) i = parent[size_t(i)] = parent[size_t(parent[size_t(i)])];
  return i;
}

// OIHW weights in conv_blocked's packed layout (ops.def), padded channels zero.
Tensor packed_weight(const Candidate& k, const Tensor& w, int64_t C) {
  const Dims wd = w.dims();
  const int64_t O = wd[0], KH = wd[2], KW = wd[3], taps = KH * KW;
  if (k.depthwise) {
    Tensor p(Dims{conv_channel_blocks(C), KH, KW, kBlock}, DType::F32);
    std::fill_n(p.data<float>(), p.numel(), 0.f);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        p.data<float>()[(c / kBlock * taps + t) * kBlock + c % kBlock] =
            w.data<float>()[c * taps + t];
    return p;
  }
  const int64_t L = k.in_blocked ? kBlock : 1, G = k.in_blocked ? conv_channel_blocks(C) : C;
  Tensor p(Dims{conv_channel_blocks(O), G, KH, KW, L, kBlock}, DType::F32);
  std::fill_n(p.data<float>(), p.numel(), 0.f);
  for (int64_t o = 0; o < O; ++o)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t)
        p.data<float>()[(((o / kBlock * G + c / L) * taps + t) * L + c % L) * kBlock + o % kBlock] =
            w.data<float>()[(o * C + c) * taps + t];
  return p;
}

Graph block_convs(const Graph& g) {
  const size_t n_nodes = g.size();
  std::vector<std::optional<Candidate>> cand(n_nodes);
  for (const Node& n : g.nodes()) cand[size_t(n.id)] = candidate(g, n);
  // Chains: candidates joined through the values they pass each other (the
  // input a blocked conv reads, or a residual).
  std::vector<int64_t> parent(n_nodes);
  std::iota(parent.begin(), parent.end(), 0);
  auto joins = [&](const Node& n) {
    std::vector<NodeId> v;
    const auto& a = n.attrs_as<ConvAttrs>();
    if (cand[size_t(n.id)]->in_blocked) v.push_back(n.inputs[0]);
    if (a.residual) v.push_back(n.inputs.back());
    return v;
  };
  for (const Node& n : g.nodes())
    if (cand[size_t(n.id)])
      for (NodeId p : joins(n))
        if (cand[size_t(p)]) parent[size_t(find_root(parent, p))] = find_root(parent, n.id);
  std::vector<size_t> chain(n_nodes, 0);
  for (const Node& n : g.nodes())
    if (cand[size_t(n.id)]) ++chain[size_t(find_root(parent, n.id))];
  std::vector<bool> blocked(n_nodes, false);
  bool any = false;
  for (const Node& n : g.nodes())
    any |= blocked[size_t(n.id)] =
        cand[size_t(n.id)] && chain[size_t(find_root(parent, n.id))] >= kMinChain;
  if (!any) return g;

  // Inverted residual blocks: a pointwise conv read only by a depthwise conv read only by a
  // pointwise conv become one conv_blocked_chain, whose hidden maps stay in cache.
  // Readers are counted among live nodes only: the passes before leave the nodes they
  // replaced for dce.
  std::vector<bool> live(n_nodes, false);
  std::vector<int64_t> uses(n_nodes, 0);
  for (const auto& o : g.outputs()) {
    live[size_t(o.node)] = true;
    ++uses[size_t(o.node)];
  }
  for (size_t i = n_nodes; i-- > 0;)
    if (live[i])
      for (NodeId in : g.node(NodeId(i)).inputs) {
        live[size_t(in)] = true;
        ++uses[size_t(in)];
      }
  auto pointwise = [&](NodeId v) {
    return blocked[size_t(v)] && !cand[size_t(v)]->depthwise && cand[size_t(v)]->in_blocked;
  };
  std::vector<NodeId> chain_expand(n_nodes, -1);  // a chain's project conv -> its expand conv
  std::vector<bool> in_chain(n_nodes, false);     // an expand or depthwise conv of a chain
  for (const Node& n : g.nodes()) {
    if (!pointwise(n.id)) continue;
    const NodeId dw = n.inputs[0];
    if (!blocked[size_t(dw)] || !cand[size_t(dw)]->depthwise || uses[size_t(dw)] != 1) continue;
    const Node& ex = g.node(g.node(dw).inputs[0]);
    if (!pointwise(ex.id) || uses[size_t(ex.id)] != 1 || ex.attrs_as<ConvAttrs>().residual)
      continue;
    chain_expand[size_t(n.id)] = ex.id;
    in_chain[size_t(ex.id)] = in_chain[size_t(dw)] = true;
  }

  Rewriter rw(g);
  ad::Emit e(rw.out());
  std::vector<NodeId> as_blocks(n_nodes, -1);   // a value's blocked form in the new graph
  std::vector<bool> nchw_ready(n_nodes, true);  // a blocked conv's NCHW form made yet
  auto blocked_form = [&](NodeId v) {
    if (as_blocks[size_t(v)] < 0) {
      e.set_origin(g.node(v).origin);
      as_blocks[size_t(v)] = ad::to_channel_blocks(e, rw.mapped(v));
    }
    return as_blocks[size_t(v)];
  };
  auto nchw_form = [&](NodeId v) {
    if (!nchw_ready[size_t(v)]) {
      e.set_origin(g.node(v).origin);
      rw.map(v, ad::from_channel_blocks(e, as_blocks[size_t(v)], g.node(v).shape.dims[1].value));
      nchw_ready[size_t(v)] = true;
    }
  };
  // Conv n's packed weight and its bias padded to whole blocks, as constants of the new graph.
  auto add_weights = [&](const Node& n, std::vector<NodeId>& in) {
    const auto& a = n.attrs_as<ConvAttrs>();
    const int64_t C = g.node(n.inputs[0]).shape.dims[1].value, O = n.shape.dims[1].value;
    Tensor bias(Dims{conv_channel_blocks(O) * kBlock}, DType::F32);
    std::fill_n(bias.data<float>(), bias.numel(), 0.f);
    if (conv_has_bias(a.residual, n.inputs.size()))
      std::copy_n(g.node(n.inputs[2]).value.data<float>(), O, bias.data<float>());
    in.push_back(rw.out().constant(packed_weight(*cand[size_t(n.id)], g.node(n.inputs[1]).value, C),
                                   g.node(n.inputs[1]).name));
    in.push_back(rw.out().constant(std::move(bias)));
  };
  for (const Node& n : g.nodes()) {
    // Dead nodes are left out: one may read a chain's hidden map, which has no value here.
    if (!live[size_t(n.id)] && !is_leaf(n.op)) continue;
    if (!blocked[size_t(n.id)]) {
      for (NodeId in : n.inputs) nchw_form(in);
      rw.copy(n.id);
      continue;
    }
    if (in_chain[size_t(n.id)]) continue;  // emitted with its chain's project conv
    const Candidate k = *cand[size_t(n.id)];
    const auto& a = n.attrs_as<ConvAttrs>();
    const int64_t C = g.node(n.inputs[0]).shape.dims[1].value, O = n.shape.dims[1].value;
    if (const NodeId ex = chain_expand[size_t(n.id)]; ex >= 0) {
      const Node &e_n = g.node(ex), &d_n = g.node(n.inputs[0]);
      const auto& da = d_n.attrs_as<ConvAttrs>();
      std::vector<NodeId> in{blocked_form(e_n.inputs[0])};
      add_weights(e_n, in);
      add_weights(d_n, in);
      add_weights(n, in);
      if (a.residual) in.push_back(blocked_form(n.inputs.back()));
      const ConvBlockedChainAttrs ca{.stride = list_or(da.stride, 2, 1),
                                     .pads = list_or(da.pads, 4, 0),
                                     .channels = g.node(e_n.inputs[0]).shape.dims[1].value,
                                     .hidden = C,
                                     .out_channels = O,
                                     .expand_activation = e_n.attrs_as<ConvAttrs>().activation,
                                     .depthwise_activation = da.activation,
                                     .activation = a.activation,
                                     .residual = a.residual};
      as_blocks[size_t(n.id)] =
          rw.out().add_typed(Op::ConvBlockedChain, std::move(in), ca, n.name, n.origin);
      nchw_ready[size_t(n.id)] = false;
      continue;
    }
    if (!k.in_blocked) nchw_form(n.inputs[0]);
    std::vector<NodeId> in{k.in_blocked ? blocked_form(n.inputs[0]) : rw.mapped(n.inputs[0])};
    add_weights(n, in);
    if (a.residual) in.push_back(blocked_form(n.inputs.back()));
    const ConvBlockedAttrs ba{.stride = list_or(a.stride, 2, 1),
                              .pads = list_or(a.pads, 4, 0),
                              .channels = C,
                              .out_channels = O,
                              .depthwise = k.depthwise,
                              .in_blocked = k.in_blocked,
                              .activation = a.activation,
                              .residual = a.residual};
    as_blocks[size_t(n.id)] =
        rw.out().add_typed(Op::ConvBlocked, std::move(in), ba, n.name, n.origin);
    nchw_ready[size_t(n.id)] = false;
  }
  for (const auto& o : g.outputs()) nchw_form(o.node);
  return rw.finish();
}

class BlockedConvPass final : public Pass {
 public:
  std::string_view name() const override { return "blocked_conv"; }
  std::string_view description() const override {
    return "run chains of pointwise and depthwise convs (and a stem conv before them) on "
           "channel-blocked activations (conv_blocked), each inverted residual block as one "
           "conv_blocked_chain, weights packed once";
  }
  unsigned needs() const override { return kParamsBound; }
  std::string skip_reason(const CompileOptions&) const override {
    // The AVX2 tiles exist (a blocked graph runs anywhere) but do not pay yet: mobilenet_v2 at
    // 2 threads on the Zen 5 VM's AVX2 path, 4.43-4.55 ms blocked against 4.55-4.56 not, its
    // 24-channel convs 1.3-1.5x slower once padded to 32 (MLAS blocks 8 channels on AVX2).
    return cpu_isa() >= Isa::avx512 ? "" : "pays on AVX-512 only (RLX_ISA / this CPU)";
  }
  Graph run(const Graph& g, const PassContext&) const override { return block_convs(g); }
};

}  // namespace

Graph block_pointwise_depthwise_convs(const Graph& g) { return block_convs(g); }
std::unique_ptr<Pass> make_blocked_conv_pass() { return std::make_unique<BlockedConvPass>(); }

}  // namespace rlx::opt
