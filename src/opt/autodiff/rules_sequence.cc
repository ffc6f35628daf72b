// vjp rules of the sequence ops (lstm / gru / rnn, gated_delta_net,
// selective_scan): backpropagation through time by expansion. The rule spells
// the forward again as primitive ops unrolled over the sequence
// (sequence_primitives) and differentiates that spelling with vjp itself, so
// every step's gradient comes from the primitives' own rules. It recomputes
// the forward once and its graph grows with the sequence length (about 30
// nodes per lstm step and direction), which suits training lengths, not
// long-context ones.
#include "opt/autodiff/primitives.h"
#include "opt/autodiff/rules.h"
#include "rlx/autodiff.h"

namespace rlx::opt::ad {

void vjp_sequence(VjpCall& c) {
  Emit& e = c.e;
  const std::vector<NodeId> in(c.n.inputs.begin(), c.n.inputs.end());
  const std::vector<NodeId> outs = sequence_primitives(e, c.n, in);
  std::vector<NodeId> seeds, cotangents, wrt;
  for (size_t k = 0; k < outs.size() && k < c.dy.size(); ++k)
    if (c.dy[k] >= 0) {
      seeds.push_back(outs[k]);
      cotangents.push_back(c.dy[k]);
    }
  std::vector<size_t> at;
  for (size_t i = 0; i < in.size(); ++i)
    if (c.needs(i)) {
      wrt.push_back(in[i]);
      at.push_back(i);
    }
  const std::vector<NodeId> grads = vjp(e.graph(), seeds, cotangents, wrt);
  for (size_t j = 0; j < at.size(); ++j) c.dx[at[j]] = grads[j];
}

}  // namespace rlx::opt::ad
