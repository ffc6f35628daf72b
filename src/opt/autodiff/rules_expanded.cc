// vjp rules by expansion: the rule spells the forward again as primitive ops
// and differentiates that spelling with vjp itself, so the gradient comes
// from the primitives' own rules.
//
// The sequence ops (lstm / gru / rnn, gated_delta_net, selective_scan) get
// backpropagation through time this way: the forward is unrolled over the
// sequence, recomputed once, and the graph grows with the sequence length
// (about 30 nodes per lstm step and direction), which suits training lengths,
// not long-context ones. A fused_elementwise region is spelt back into its
// instructions.
#include <algorithm>

#include "opt/autodiff/primitives.h"
#include "opt/autodiff/rules.h"
#include "rlx/autodiff.h"

namespace rlx::opt::ad {
namespace {

// Seeds the expansion's outputs `outs` with c's cotangents and writes the
// gradients of the inputs c needs.
void vjp_through(VjpCall& c, const std::vector<NodeId>& in, const std::vector<NodeId>& outs) {
  std::vector<NodeId> seeds, cotangents, wrt;
  for (size_t k = 0; k < outs.size() && k < c.dy.size(); ++k)
    if (c.dy[k] >= 0) {
      seeds.push_back(outs[k]);
      cotangents.push_back(c.dy[k]);
    }
  // A value read at two positions (a conv_blocked_chain's input that is also its residual)
  // gets its whole gradient, which vjp_partial gives, once: at its first position.
  std::vector<size_t> at;
  for (size_t i = 0; i < in.size(); ++i)
    if (c.needs(i) && std::find(wrt.begin(), wrt.end(), in[i]) == wrt.end()) {
      wrt.push_back(in[i]);
      at.push_back(i);
    }
  const std::vector<NodeId> grads = vjp_partial(c.e.graph(), seeds, cotangents, wrt);
  for (size_t j = 0; j < at.size(); ++j) c.dx[at[j]] = grads[j];
}

}  // namespace

void vjp_sequence(VjpCall& c) {
  const std::vector<NodeId> in(c.n.inputs.begin(), c.n.inputs.end());
  vjp_through(c, in, sequence_primitives(c.e, c.n, in));
}

void vjp_fused_elementwise(VjpCall& c) {
  const std::vector<NodeId> in(c.n.inputs.begin(), c.n.inputs.end());
  vjp_through(c, in, {elementwise_primitives(c.e, c.n, in)});
}

void vjp_conv_blocked(VjpCall& c) {
  const std::vector<NodeId> in(c.n.inputs.begin(), c.n.inputs.end());
  vjp_through(c, in, {conv_blocked_primitives(c.e, c.n, in)});
}

void vjp_conv_blocked_chain(VjpCall& c) {
  const std::vector<NodeId> in(c.n.inputs.begin(), c.n.inputs.end());
  vjp_through(c, in, {conv_blocked_chain_primitives(c.e, c.n, in)});
}

}  // namespace rlx::opt::ad
