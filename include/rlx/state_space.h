// gated_delta_net / selective_scan: one reading of a node's attributes and optional inputs,
// shared by shape inference, the CPU kernels and the CoreML lowering, so they agree on which
// input sits where. Semantics: ops.def's comments and /work/shared/ref/recurrent-and-qat.md.
#pragma once
#include <cstdint>

#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {

// (q, k, v, g, beta[, state]): the state is carried when it is given.
struct GatedDeltaNetSpec {
  int64_t state_size = 0;  // N
  int state = -1;          // input position of the initial state; -1: zeros
};

inline GatedDeltaNetSpec gated_delta_net_spec(const Node& n) {
  RLX_CHECK(n.op == Op::GatedDeltaNet, op_name(n.op), " is not gated_delta_net");
  GatedDeltaNetSpec s;
  s.state_size = n.attrs_as<GatedDeltaNetAttrs>().state_size;
  RLX_CHECK(s.state_size >= 1, "gated_delta_net: state_size must be >= 1, got ", s.state_size);
  if (n.inputs.size() == 6) s.state = 5;
  return s;
}

// (x, delta, A, B, C[, D_skip][, h0]) as the attributes say.
struct SelectiveScanSpec {
  int d_skip = -1;  // input position of D_skip; -1: absent
  int h0 = -1;      // input position of the initial state; -1: zeros
  int num_inputs = 5;
};

inline SelectiveScanSpec selective_scan_spec(const Node& n) {
  RLX_CHECK(n.op == Op::SelectiveScan, op_name(n.op), " is not selective_scan");
  const auto& a = n.attrs_as<SelectiveScanAttrs>();
  SelectiveScanSpec s;
  int next = 5;
  if (a.d_skip) s.d_skip = next++;
  if (a.carry) s.h0 = next++;
  s.num_inputs = next;
  return s;
}

}  // namespace rlx
