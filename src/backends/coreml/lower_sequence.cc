// lstm / gru / rnn / gated_delta_net / selective_scan: MIL has no sequence
// ops, so each lowers through autodiff's spelling of it unrolled over its
// static sequence (opt/autodiff/expand_sequence.cc), the one its gradient
// differentiates too. Dynamic batch or sequence dims throw, naming the op.
#include "lower.h"
#include "opt/autodiff/primitives.h"

namespace rlx::coreml {

void register_sequence(LowerTable& t) {
  auto lower = [](Lowering& L, const Node& n) {
    return lower_results_via_primitives(L, n, [&](opt::ad::Emit& e, const std::vector<NodeId>& in) {
      return opt::ad::sequence_primitives(e, n, in);
    });
  };
  for (Op op : {Op::Lstm, Op::Gru, Op::Rnn, Op::GatedDeltaNet, Op::SelectiveScan})
    t.many[size_t(op)] = lower;
}

}  // namespace rlx::coreml
