// lstm / gru / rnn and the state-space scans (gated_delta_net, selective_scan)
// spelt as primitive ops, unrolled over their static sequence: what the CoreML
// lowering emits (MIL has no such ops) and what their vjp rules differentiate
// (backpropagation through time, rules_sequence.cc). The math is the CPU
// kernels' (recurrent-and-qat.md): per layer and direction one matmul projects
// the whole sequence, then each step is a matmul with w_hh and the gate math on
// [B, h] slices; sequence lengths become per-step masks (a row whose step t >=
// len[b] keeps its state and writes zeros, which in the reverse direction also
// starts each row at its own last step).
#include <cmath>
#include <optional>

#include "opt/autodiff/primitives.h"
#include "rlx/error.h"
#include "rlx/recurrent.h"
#include "rlx/state_space.h"

namespace rlx::opt::ad {
namespace {

Dims static_dims(Emit& e, const Node& n, NodeId x) {
  const Shape s = e.shape(x);
  RLX_CHECK(s.is_static(), op_name(n.op), " unrolls over a static sequence: ", s.str(),
            " has dynamic dims (specialize the graph to input shapes first)");
  return s.concrete();
}

std::vector<Dim> dims_of(const std::vector<int64_t>& d) { return {d.begin(), d.end()}; }

// Elements [off, off + count) of x flattened, as `dims`.
NodeId flat_block(Emit& e, NodeId x, int64_t off, int64_t count, const std::vector<int64_t>& dims) {
  const NodeId flat = e.reshape(x, {Dim(e.shape(x).numel())});
  return e.reshape(e.slice(flat, 0, off, off + count), dims_of(dims));
}

// Step t of a [B, S, ...] value, reshaped to `dims`.
NodeId step(Emit& e, NodeId x, int64_t t, const std::vector<int64_t>& dims) {
  return e.reshape(e.slice(x, 1, t, t + 1), dims_of(dims));
}

NodeId activation(Emit& e, RnnActivation a, NodeId x) {
  switch (a) {
    case RnnActivation::sigmoid:
      return e.op(Op::Sigmoid, {x});
    case RnnActivation::tanh:
      return e.op(Op::Tanh, {x});
    case RnnActivation::relu:
      return e.op(Op::Relu, {x});
  }
  throw make_error("bad recurrent activation");
}

}  // namespace

std::vector<NodeId> recurrent_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in) {
  const RecurrentSpec s = recurrent_spec(n);
  const Dims xd = static_dims(e, n, in[0]);
  const DType dt = e.dtype(in[0]);
  const int64_t H = s.hidden, W = s.width(), GH = s.gate_rows(), LD = s.layers * s.dirs;
  const int64_t B = s.batch_first ? xd[0] : xd[1], S = s.batch_first ? xd[1] : xd[0];
  const int64_t in0 = xd[2];
  NodeId x = s.batch_first ? in[0] : e.transpose(in[0], {1, 0, 2});  // [B, S, in]
  const NodeId w_ih = in[1], w_hh = in[2], bias = in[3];
  const bool split_bias = e.shape(bias).numel() == LD * 2 * GH;
  auto clip = [&](NodeId v) {
    if (!s.clip) return v;
    return e.op(Op::Clamp, {v}, ClampAttrs{.min = -*s.clip, .max = *s.clip});
  };
  auto cols = [&](NodeId v, int64_t block) { return e.slice(v, 1, block * H, (block + 1) * H); };
  // Masks per step: [B, 1], 1 while t < len[b].
  std::vector<NodeId> mask;
  if (s.len >= 0) {
    const NodeId len = in[size_t(s.len)];
    for (int64_t t = 0; t < S; ++t) {
      const NodeId active = e.compare(Op::Lt, e.scalar(double(t), e.dtype(len)), len);
      mask.push_back(e.reshape(e.cast(active, dt), {Dim(B), Dim(1)}));
    }
  }
  // m * a + (1 - m) * b, as b + m * (a - b).
  auto select = [&](int64_t t, NodeId a, NodeId b) {
    return mask.empty() ? a : e.add(b, e.mul(mask[size_t(t)], e.sub(a, b)));
  };
  std::vector<NodeId> hn, cn;
  for (int64_t l = 0; l < s.layers; ++l) {
    const int64_t in_l = s.layer_in(l, in0);
    std::vector<std::vector<NodeId>> ys(size_t(s.dirs), std::vector<NodeId>(size_t(S)));
    for (int64_t d = 0; d < s.dirs; ++d) {
      const int64_t ld = l * s.dirs + d;
      const NodeId wi = flat_block(e, w_ih, s.w_ih_offset(l, d, in0), GH * in_l, {GH, in_l});
      const NodeId wh = flat_block(e, w_hh, s.w_hh_offset(l, d), GH * W, {GH, W});
      const int64_t bstride = split_bias ? 2 * GH : GH;
      const NodeId b_ih = flat_block(e, bias, ld * bstride, GH, {GH});
      std::optional<NodeId> b_hh;
      if (split_bias) b_hh = flat_block(e, bias, ld * bstride + GH, GH, {GH});
      const NodeId gx = e.add(e.matmul(x, wi, false, true), b_ih);  // [B, S, GH]
      auto initial = [&](int idx, int64_t width) {
        if (idx < 0) return e.zeros(Shape(Dims{B, width}, dt));
        return e.reshape(e.slice(in[size_t(idx)], 0, ld, ld + 1), {Dim(B), Dim(width)});
      };
      NodeId hs = initial(s.h0, W), cs = s.op == Op::Lstm ? initial(s.c0, H) : hs;
      std::optional<NodeId> peep, w_hr;
      if (s.peep >= 0) peep = flat_block(e, in[size_t(s.peep)], ld * 3 * H, 3 * H, {1, 3 * H});
      if (s.w_hr >= 0) w_hr = flat_block(e, in[size_t(s.w_hr)], ld * W * H, W * H, {W, H});
      const bool rev = s.reverse || d == 1;
      for (int64_t k = 0; k < S; ++k) {
        const int64_t t = rev ? S - 1 - k : k;
        const NodeId xt = step(e, gx, t, {B, GH});
        NodeId ght = e.matmul(hs, wh, false, true);  // [B, GH]
        if (b_hh) ght = e.add(ght, *b_hh);
        NodeId hnew = hs, cnew = cs;
        if (s.op == Op::Lstm) {
          auto pre = [&](int gate) {
            return e.add(cols(xt, s.block[size_t(gate)]), cols(ght, s.block[size_t(gate)]));
          };
          NodeId zi = pre(0), zf = pre(1), zg = pre(2), zo = pre(3);
          if (peep) {
            zi = e.add(zi, e.mul(cols(*peep, 0), cs));
            zf = e.add(zf, e.mul(cols(*peep, 2), cs));
          }
          const NodeId i = activation(e, s.f, clip(zi)), f = activation(e, s.f, clip(zf));
          const NodeId g = activation(e, s.g, clip(zg));
          cnew = e.add(e.mul(f, cs), e.mul(i, g));
          if (peep) zo = e.add(zo, e.mul(cols(*peep, 1), cnew));
          hnew = e.mul(activation(e, s.f, clip(zo)), activation(e, s.h, cnew));
          if (w_hr) hnew = e.matmul(hnew, *w_hr, false, true);  // projected to proj_size
        } else if (s.op == Op::Gru) {
          const NodeId zr =
              activation(e, s.f, clip(e.add(cols(xt, s.block[0]), cols(ght, s.block[0]))));
          const NodeId zz =
              activation(e, s.f, clip(e.add(cols(xt, s.block[1]), cols(ght, s.block[1]))));
          NodeId nin;
          if (s.linear_before_reset) {
            nin = e.add(cols(xt, s.block[2]), e.mul(zr, cols(ght, s.block[2])));
          } else {  // (r * h) W_hn^T + b_hn
            const NodeId w_hn = e.slice(wh, 0, s.block[2] * H, (s.block[2] + 1) * H);
            NodeId rec = e.matmul(e.mul(zr, hs), w_hn, false, true);
            if (b_hh) rec = e.add(rec, e.slice(*b_hh, 0, s.block[2] * H, (s.block[2] + 1) * H));
            nin = e.add(cols(xt, s.block[2]), rec);
          }
          const NodeId nn = activation(e, s.g, clip(nin));
          hnew = e.add(nn, e.mul(zz, e.sub(hs, nn)));  // (1 - z) n + z h
        } else {
          hnew = activation(e, s.f, clip(e.add(xt, ght)));
        }
        ys[size_t(d)][size_t(t)] = mask.empty() ? hnew : e.mul(mask[size_t(t)], hnew);
        hs = select(t, hnew, hs);
        if (s.op == Op::Lstm) cs = select(t, cnew, cs);
      }
      hn.push_back(e.reshape(hs, {Dim(1), Dim(B), Dim(W)}));
      if (s.op == Op::Lstm) cn.push_back(e.reshape(cs, {Dim(1), Dim(B), Dim(H)}));
    }
    std::vector<NodeId> steps;  // this layer's y: [B, S, dirs * h]
    for (int64_t t = 0; t < S; ++t) {
      const NodeId yt =
          s.dirs == 1 ? ys[0][size_t(t)] : e.concat({ys[0][size_t(t)], ys[1][size_t(t)]}, 1);
      steps.push_back(e.reshape(yt, {Dim(B), Dim(1), Dim(s.dirs * W)}));
    }
    x = e.concat(steps, 1);
  }
  std::vector<NodeId> out{s.batch_first ? x : e.transpose(x, {1, 0, 2}), e.concat(hn, 0)};
  if (s.op == Op::Lstm) out.push_back(e.concat(cn, 0));
  return out;
}

std::vector<NodeId> gated_delta_net_primitives(Emit& e, const Node& n,
                                               const std::vector<NodeId>& in) {
  // Per step, with the state S [B, H, N, N] and row vectors [B, H, 1, N]:
  // S = exp(g) S; u = beta (v - k S); S += k^T u; o = (q / sqrt N) S.
  const GatedDeltaNetSpec s = gated_delta_net_spec(n);
  const Dims qd = static_dims(e, n, in[0]);
  const int64_t B = qd[0], S = qd[1], H = qd[2], N = s.state_size;
  RLX_CHECK(S >= 1, op_name(n.op), " unrolls over a static sequence: q has no steps");
  const NodeId q = e.mul(in[0], 1 / std::sqrt(double(N))), k = in[1], v = in[2];
  const NodeId decay = e.op(Op::Exp, {in[3]}), beta = in[4];
  std::optional<NodeId> state;
  if (s.state >= 0) state = in[size_t(s.state)];
  const std::vector<int64_t> row{B, H, 1, N}, per_head{B, H, 1, 1};
  std::vector<NodeId> outs;
  for (int64_t t = 0; t < S; ++t) {
    const NodeId kt = step(e, k, t, row), bt = step(e, beta, t, per_head);
    NodeId ut = step(e, v, t, row);  // u = beta (v - k S); S = 0 at the first step without a state
    if (state) {
      state = e.mul(*state, step(e, decay, t, per_head));
      ut = e.sub(ut, e.matmul(kt, *state));
    }
    const NodeId update = e.matmul(kt, e.mul(bt, ut), true, false);  // k^T u: [B, H, N, N]
    state = state ? e.add(*state, update) : update;
    outs.push_back(e.reshape(e.matmul(step(e, q, t, row), *state), dims_of({B, 1, H, N})));
  }
  return {e.concat(outs, 1), *state};
}

std::vector<NodeId> selective_scan_primitives(Emit& e, const Node& n,
                                              const std::vector<NodeId>& in) {
  // Per step, with the state h [B, D, N]: h = exp(delta A) h + (delta x) B^T; y = h C (+ D x).
  const SelectiveScanSpec s = selective_scan_spec(n);
  const Dims xd = static_dims(e, n, in[0]);
  const int64_t B = xd[0], Len = xd[1], D = xd[2], N = e.dims(in[2], "selective_scan")[1];
  RLX_CHECK(Len >= 1, op_name(n.op), " unrolls over a static sequence: x has no steps");
  const NodeId x = in[0], delta = in[1], A = in[2], Bm = in[3], C = in[4];
  // The whole sequence's decay and input term, [B, L, D, N].
  const NodeId delta4 = e.reshape(delta, dims_of({B, Len, D, 1}));
  const NodeId decay = e.op(Op::Exp, {e.mul(delta4, A)});
  const NodeId input = e.mul(e.reshape(e.mul(delta, x), dims_of({B, Len, D, 1})),
                             e.reshape(Bm, dims_of({B, Len, 1, N})));
  std::optional<NodeId> h;
  if (s.h0 >= 0) h = in[size_t(s.h0)];
  const std::vector<int64_t> state{B, D, N};
  std::vector<NodeId> ys;
  for (int64_t t = 0; t < Len; ++t) {
    const NodeId it = step(e, input, t, state);
    h = h ? e.add(e.mul(step(e, decay, t, state), *h), it) : it;
    const NodeId yt = e.matmul(*h, step(e, C, t, {B, N, 1}));  // [B, D, 1]
    ys.push_back(e.reshape(yt, dims_of({B, 1, D})));
  }
  NodeId y = e.concat(ys, 1);
  if (s.d_skip >= 0) y = e.add(y, e.mul(x, in[size_t(s.d_skip)]));
  return {y, *h};
}

std::vector<NodeId> sequence_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in) {
  switch (n.op) {
    case Op::Lstm:
    case Op::Gru:
    case Op::Rnn:
      return recurrent_primitives(e, n, in);
    case Op::GatedDeltaNet:
      return gated_delta_net_primitives(e, n, in);
    case Op::SelectiveScan:
      return selective_scan_primitives(e, n, in);
    default:
      throw make_error(op_name(n.op), " is not a sequence op");
  }
}

}  // namespace rlx::opt::ad
