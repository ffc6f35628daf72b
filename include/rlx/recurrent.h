// lstm / gru / rnn: one reading of a node's attributes and input layout, shared by shape
// inference, the CPU kernels, the importers and the CoreML lowering, so they agree on where each
// optional input sits and where each (layer, direction)'s weights start. The packing is
// /work/shared/ref/recurrent-and-qat.md's (ops.def's comment above the ops says it in short).
#pragma once
#include <array>
#include <cstdint>

#include "rlx/error.h"
#include "rlx/graph.h"

namespace rlx {

struct RecurrentSpec {
  Op op = Op::Lstm;
  int64_t gates = 4;  // G: 4 lstm, 3 gru, 1 rnn
  int64_t hidden = 0, layers = 1, dirs = 1;
  int64_t proj = 0;      // lstm proj_size: h and each direction's y are proj wide (0: hidden)
  bool reverse = false;  // direction=reverse (dirs == 1, run backwards)
  bool batch_first = true, carry = false, lengths = false, peephole = false;
  bool linear_before_reset = true;  // gru
  std::optional<double> clip;
  RnnActivation f = RnnActivation::sigmoid, g = RnnActivation::tanh, h = RnnActivation::tanh;
  // Row block of each gate in canonical order (lstm i, f, g, o; gru r, z, n; rnn 0).
  std::array<int, 4> block{0, 1, 2, 3};
  // Input positions; -1 when absent.
  int h0 = -1, c0 = -1, len = -1, peep = -1, w_hr = -1;
  int num_inputs = 4;
  int num_outputs = 3;

  int64_t gate_rows() const { return gates * hidden; }
  // Features of h, the recurrent state, and of each direction's output.
  int64_t width() const { return proj ? proj : hidden; }
  // Input features of layer l (in for layer 0).
  int64_t layer_in(int64_t l, int64_t in) const { return l == 0 ? in : dirs * width(); }
  // Element offset of (l, d)'s [G*h, in_l] block in w_ih.
  int64_t w_ih_offset(int64_t l, int64_t d, int64_t in) const {
    int64_t off = 0;
    for (int64_t k = 0; k < l; ++k) off += dirs * gate_rows() * layer_in(k, in);
    return off + d * gate_rows() * layer_in(l, in);
  }
  int64_t w_ih_numel(int64_t in) const { return w_ih_offset(layers, 0, in); }
  int64_t w_hh_offset(int64_t l, int64_t d) const { return (l * dirs + d) * gate_rows() * width(); }
};

inline RecurrentSpec recurrent_spec(const Node& n) {
  RecurrentSpec s;
  s.op = n.op;
  auto common = [&](const auto& a) {
    s.hidden = a.hidden;
    s.layers = a.num_layers;
    s.dirs = a.direction == RnnDirection::bidirectional ? 2 : 1;
    s.reverse = a.direction == RnnDirection::reverse;
    s.batch_first = a.batch_first;
    s.carry = a.carry;
    s.lengths = a.lengths;
    s.clip = a.clip;
    s.f = a.act_f;
  };
  const char* name = op_name(n.op);
  if (n.op == Op::Lstm) {
    const auto& a = n.attrs_as<LstmAttrs>();
    common(a);
    s.gates = 4;
    s.g = a.act_g;
    s.h = a.act_h;
    s.peephole = a.peephole;
    s.proj = a.proj_size;
    RLX_CHECK(s.proj >= 0 && s.proj < a.hidden, name,
              ": proj_size must be in [0, hidden=", a.hidden, "), got ", s.proj);
    if (a.gates == GateOrder::onnx) s.block = {0, 2, 3, 1};  // i o f c
    s.num_outputs = 3;
  } else if (n.op == Op::Gru) {
    const auto& a = n.attrs_as<GruAttrs>();
    common(a);
    s.gates = 3;
    s.g = a.act_g;
    s.linear_before_reset = a.linear_before_reset;
    if (a.gates == GateOrder::onnx) s.block = {1, 0, 2, 3};  // z r h
    s.num_outputs = 2;
  } else {
    RLX_CHECK(n.op == Op::Rnn, name, " is not a recurrent op");
    const auto& a = n.attrs_as<RnnAttrs>();
    common(a);
    s.gates = 1;
    s.num_outputs = 2;
  }
  RLX_CHECK(s.hidden >= 1, name, ": hidden must be >= 1, got ", s.hidden);
  RLX_CHECK(s.layers >= 1, name, ": num_layers must be >= 1, got ", s.layers);
  if (s.clip)
    RLX_CHECK(*s.clip > 0 && !std::isnan(*s.clip), name, ": clip must be > 0, got ", *s.clip);
  int next = 4;
  if (s.carry) {
    s.h0 = next++;
    if (n.op == Op::Lstm) s.c0 = next++;
  }
  if (s.lengths) s.len = next++;
  if (s.peephole) s.peep = next++;
  if (s.proj) s.w_hr = next++;
  s.num_inputs = next;
  return s;
}

}  // namespace rlx
