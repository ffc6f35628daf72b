// gated_delta_net / selective_scan, unrolled over a static sequence length. Everything that does
// not depend on the state is computed for the whole sequence first (the decays exp(g) and
// exp(delta A), q / sqrt(N), selective_scan's (delta x) B^T input term); each step then slices
// its piece and updates the state with a few matmuls and element-wise ops. Without an initial
// state the first step starts from zeros algebraically (no zeros constant). Dynamic dims throw
// (the export names the node).
#include <cmath>
#include <optional>

#include "lower.h"
#include "rlx/error.h"
#include "rlx/state_space.h"
#include "unroll.h"

namespace rlx::coreml {

namespace {

void check_static(const Node& n, const Val& x, int64_t steps) {
  RLX_CHECK(x.type.is_static(), op_name(n.op),
            " unrolls over a static sequence: ", type_str(x.type),
            " has dynamic dims (specialize the graph to input shapes first)");
  RLX_CHECK(steps >= 1, op_name(n.op), " unrolls over a static sequence: ", type_str(x.type),
            " has no steps");
}

// Per step, with the state S [B, H, N, N] and row vectors [B, H, 1, N]:
// S = exp(g) S; u = beta (v - k S); S += k^T u; o = (q / sqrt N) S.
std::vector<Val> lower_gated_delta_net(Lowering& L, const Node& n) {
  const GatedDeltaNetSpec s = gated_delta_net_spec(n);
  const Val &q = L.in(n, 0), &k = L.in(n, 1), &v = L.in(n, 2);
  const int64_t B = q.type.dims[0], S = q.type.dims[1], H = q.type.dims[2], N = s.state_size;
  check_static(n, q, S);
  Unroll u{L, L.hint(n)};
  const Val qs = u.bin("mul", q, L.scalar_like(1 / std::sqrt(double(N)), q, u.name("scale")));
  const Val decay = u.un("exp", L.in(n, 3));
  const Val& beta = L.in(n, 4);
  std::optional<Val> state;
  if (s.state >= 0) state = L.in(n, size_t(s.state));
  const std::vector<int64_t> row{B, H, 1, N}, per_head{B, H, 1, 1};
  std::vector<Val> outs;
  for (int64_t t = 0; t < S; ++t) {
    const Val kt = u.step(k, t, row), vt = u.step(v, t, row), bt = u.step(beta, t, per_head);
    Val ut = vt;  // u = beta (v - k S), S = 0 at the first step without a state
    if (state) {
      state = u.bin("mul", *state, u.step(decay, t, per_head));
      ut = u.bin("sub", vt, u.matmul(kt, *state, false, false));
    }
    ut = u.bin("mul", bt, ut);
    const Val update = u.matmul(kt, ut, true, false);  // k^T u: [B, H, N, N]
    state = state ? u.bin("add", *state, update) : update;
    const Val ot = u.matmul(u.step(qs, t, row), *state, false, false);
    outs.push_back(L.reshape(ot, {B, 1, H, N}, u.name("o")));
  }
  return {u.concat(outs, 1), *state};
}

// Per step, with the state h [B, D, N]: h = exp(delta A) h + (delta x) B^T; y = h C (+ D x).
std::vector<Val> lower_selective_scan(Lowering& L, const Node& n) {
  const SelectiveScanSpec s = selective_scan_spec(n);
  const Val &x = L.in(n, 0), &delta = L.in(n, 1), &A = L.in(n, 2), &Bm = L.in(n, 3),
            &C = L.in(n, 4);
  const int64_t B = x.type.dims[0], Len = x.type.dims[1], D = x.type.dims[2], N = A.type.dims[1];
  check_static(n, x, Len);
  Unroll u{L, L.hint(n)};
  // The whole sequence's decay [B, L, D, N] and input term [B, L, D, N].
  const Val delta4 = L.reshape(delta, {B, Len, D, 1}, u.name("delta"));
  const Val decay = u.un("exp", u.bin("mul", delta4, A));
  const Val dx = L.reshape(u.bin("mul", delta, x), {B, Len, D, 1}, u.name("dx"));
  const Val input = u.bin("mul", dx, L.reshape(Bm, {B, Len, 1, N}, u.name("b")));
  std::optional<Val> h;
  if (s.h0 >= 0) h = L.in(n, size_t(s.h0));
  const std::vector<int64_t> state{B, D, N};
  std::vector<Val> ys;
  for (int64_t t = 0; t < Len; ++t) {
    const Val it = u.step(input, t, state);
    h = h ? u.bin("add", u.bin("mul", u.step(decay, t, state), *h), it) : it;
    const Val yt = u.matmul(*h, u.step(C, t, {B, N, 1}), false, false);  // [B, D, 1]
    ys.push_back(L.reshape(yt, {B, 1, D}, u.name("y")));
  }
  Val y = u.concat(ys, 1);
  if (s.d_skip >= 0) y = u.bin("add", y, u.bin("mul", x, L.in(n, size_t(s.d_skip))));
  return {y, *h};
}

}  // namespace

void register_state_space(LowerTable& t) {
  t.many[size_t(Op::GatedDeltaNet)] = lower_gated_delta_net;
  t.many[size_t(Op::SelectiveScan)] = lower_selective_scan;
}

}  // namespace rlx::coreml
