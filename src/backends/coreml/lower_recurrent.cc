// lstm / gru / rnn, unrolled over a static sequence length: per layer and direction one matmul
// projects the whole sequence ([B, S, in] x w_ih^T + b_ih), then every step is a matmul with
// w_hh and the gate math on [B, h] slices. Sequence lengths become per-step masks: a row whose
// step t >= len[b] keeps its state and writes zeros, which in the reverse direction (t = S-1 .. 0
// in natural time) also starts each row at its own last step. Dynamic batch or sequence dims
// throw (the export names the node).
#include "lower.h"
#include "rlx/error.h"
#include "rlx/recurrent.h"
#include "unroll.h"

namespace rlx::coreml {

namespace {

struct Rec : Unroll {
  const RecurrentSpec& s;
  pb::DataType dt;

  // Elements [off, off + count) of a flattened tensor, as `dims`.
  Val flat_block(const Val& x, int64_t off, int64_t count, const std::vector<int64_t>& dims) {
    Val f = L.reshape(x, {x.type.numel()}, name("flat"));
    return L.reshape(slice(f, {off}, {off + count}), dims, name("block"));
  }
  // Columns [k*H, (k+1)*H) of a [B, G*H] value.
  Val cols(const Val& x, int64_t block) {
    const int64_t H = s.hidden;
    return slice(x, {0, block * H}, {x.type.dims[0], (block + 1) * H});
  }
  Val act(RnnActivation a, const Val& x) {
    switch (a) {
      case RnnActivation::sigmoid:
        return L.unary("sigmoid", x, name("sigmoid"));
      case RnnActivation::tanh:
        return L.unary("tanh", x, name("tanh"));
      case RnnActivation::relu:
        return L.unary("relu", x, name("relu"));
    }
    throw make_error("bad activation");
  }
  Val clip(const Val& x) {
    if (!s.clip) return x;
    const std::string nm = name("clip");
    return L.b.op("clip",
                  {{"x", x},
                   {"alpha", L.b.scalar(-*s.clip, dt, nm + "_lo")},
                   {"beta", L.b.scalar(*s.clip, dt, nm + "_hi")}},
                  x.type, nm);
  }
  Val matmul_t(const Val& x, const Val& w) { return matmul(x, w, false, true); }  // x @ w^T
};

std::vector<Val> lower_recurrent(Lowering& L, const Node& n) {
  const RecurrentSpec s = recurrent_spec(n);
  const Val& x0 = L.in(n, 0);
  RLX_CHECK(x0.type.is_static(), op_name(n.op), " unrolls over a static sequence: x ",
            type_str(x0.type), " has dynamic dims (specialize the graph to input shapes first)");
  Rec r{{L, L.hint(n)}, s, x0.type.dt};
  const int64_t H = s.hidden, GH = s.gate_rows(), LD = s.layers * s.dirs;
  const int64_t B = s.batch_first ? x0.type.dims[0] : x0.type.dims[1];
  const int64_t S = s.batch_first ? x0.type.dims[1] : x0.type.dims[0];
  const int64_t in0 = x0.type.dims[2];
  Val x = s.batch_first
              ? x0
              : L.b.op("transpose", {{"x", x0}, {"perm", L.b.ints({1, 0, 2}, r.h + "_perm")}},
                       Type{r.dt, {B, S, in0}}, r.h + "_bsi");
  const Val &w_ih = L.in(n, 1), &w_hh = L.in(n, 2), &bias = L.in(n, 3);
  const bool split_bias = bias.type.numel() == LD * 2 * GH;
  // Masks per step: [B, 1], 1 while t < len[b].
  std::vector<Val> mask;
  if (s.len >= 0) {
    const Val& len = L.in(n, size_t(s.len));
    for (int64_t t = 0; t < S; ++t) {
      Val lt = L.b.op("less", {{"x", L.b.int_scalar(t, r.name("t"))}, {"y", len}},
                      Type{pb::BOOL, {B}}, r.name("active"));
      mask.push_back(L.reshape(L.cast(lt, r.dt, r.name("maskf")), {B, 1}, r.name("mask")));
    }
  }
  // m * a + (1 - m) * b, written a + ... as b + m * (a - b)
  auto select = [&](int64_t t, const Val& a, const Val& b) {
    if (mask.empty()) return a;
    return r.bin("add", b, r.bin("mul", mask[size_t(t)], r.bin("sub", a, b)));
  };
  std::vector<Val> hn, cn;
  for (int64_t l = 0; l < s.layers; ++l) {
    const int64_t in_l = s.layer_in(l, in0);
    std::vector<std::vector<Val>> ys(size_t(s.dirs), std::vector<Val>(size_t(S)));
    for (int64_t d = 0; d < s.dirs; ++d) {
      const int64_t ld = l * s.dirs + d;
      Val wi = r.flat_block(w_ih, s.w_ih_offset(l, d, in0), GH * in_l, {GH, in_l});
      Val wh = r.flat_block(w_hh, s.w_hh_offset(l, d), GH * H, {GH, H});
      const int64_t bstride = split_bias ? 2 * GH : GH;
      Val b_ih = r.flat_block(bias, ld * bstride, GH, {GH});
      std::optional<Val> b_hh;
      if (split_bias) b_hh = r.flat_block(bias, ld * bstride + GH, GH, {GH});
      Val gx = r.bin("add", r.matmul_t(x, wi), b_ih);  // [B, S, GH]
      auto initial = [&](int idx) {
        if (idx < 0) return L.b.constant(Tensor(Dims{B, H}, DType::F32), r.dt, r.name("zeros"));
        return L.reshape(r.slice(L.in(n, size_t(idx)), {ld, 0, 0}, {ld + 1, B, H}), {B, H},
                         r.name("state"));
      };
      Val hs = initial(s.h0);
      Val cs = s.op == Op::Lstm ? initial(s.c0) : hs;
      std::optional<Val> peep;
      if (s.peep >= 0) peep = r.flat_block(L.in(n, size_t(s.peep)), ld * 3 * H, 3 * H, {1, 3 * H});
      const bool rev = s.reverse || d == 1;
      for (int64_t k = 0; k < S; ++k) {
        const int64_t t = rev ? S - 1 - k : k;
        Val xt = L.reshape(r.slice(gx, {0, t, 0}, {B, t + 1, GH}), {B, GH}, r.name("gx"));
        const bool gru_nlbr = s.op == Op::Gru && !s.linear_before_reset;
        Val ght = r.matmul_t(hs, wh);  // [B, GH]
        if (b_hh) ght = r.bin("add", ght, *b_hh);
        Val hnew = hs, cnew = cs;
        if (s.op == Op::Lstm) {
          auto pre = [&](int gate) {
            return r.bin("add", r.cols(xt, s.block[size_t(gate)]),
                         r.cols(ght, s.block[size_t(gate)]));
          };
          auto pcol = [&](int k2) { return r.cols(*peep, k2); };
          Val zi = pre(0), zf = pre(1), zg = pre(2), zo = pre(3);
          if (peep) {
            zi = r.bin("add", zi, r.bin("mul", pcol(0), cs));
            zf = r.bin("add", zf, r.bin("mul", pcol(2), cs));
          }
          Val i = r.act(s.f, r.clip(zi)), f = r.act(s.f, r.clip(zf)), g = r.act(s.g, r.clip(zg));
          cnew = r.bin("add", r.bin("mul", f, cs), r.bin("mul", i, g));
          if (peep) zo = r.bin("add", zo, r.bin("mul", pcol(1), cnew));
          Val o = r.act(s.f, r.clip(zo));
          hnew = r.bin("mul", o, r.act(s.h, cnew));
        } else if (s.op == Op::Gru) {
          Val zr =
              r.act(s.f, r.clip(r.bin("add", r.cols(xt, s.block[0]), r.cols(ght, s.block[0]))));
          Val zz =
              r.act(s.f, r.clip(r.bin("add", r.cols(xt, s.block[1]), r.cols(ght, s.block[1]))));
          Val nin;
          if (!gru_nlbr) {
            nin = r.bin("add", r.cols(xt, s.block[2]), r.bin("mul", zr, r.cols(ght, s.block[2])));
          } else {  // (r * h) W_hn^T + b_hn
            Val w_hn = r.slice(wh, {s.block[2] * H, 0}, {(s.block[2] + 1) * H, H});
            Val rec = r.matmul_t(r.bin("mul", zr, hs), w_hn);
            if (b_hh)
              rec = r.bin("add", rec, r.slice(*b_hh, {s.block[2] * H}, {(s.block[2] + 1) * H}));
            nin = r.bin("add", r.cols(xt, s.block[2]), rec);
          }
          Val nn = r.act(s.g, r.clip(nin));
          // (1 - z) * n + z * h = n + z * (h - n)
          hnew = r.bin("add", nn, r.bin("mul", zz, r.bin("sub", hs, nn)));
        } else {
          hnew = r.act(s.f, r.clip(r.bin("add", xt, ght)));
        }
        ys[size_t(d)][size_t(t)] = mask.empty() ? hnew : r.bin("mul", mask[size_t(t)], hnew);
        hs = select(t, hnew, hs);
        if (s.op == Op::Lstm) cs = select(t, cnew, cs);
      }
      hn.push_back(L.reshape(hs, {1, B, H}, r.name("hn")));
      if (s.op == Op::Lstm) cn.push_back(L.reshape(cs, {1, B, H}, r.name("cn")));
    }
    // y of this layer: [B, S, D*h]
    std::vector<Val> steps;
    for (int64_t t = 0; t < S; ++t) {
      Val yt = s.dirs == 1 ? ys[0][size_t(t)] : r.concat({ys[0][size_t(t)], ys[1][size_t(t)]}, 1);
      steps.push_back(L.reshape(yt, {B, 1, s.dirs * H}, r.name("yt")));
    }
    x = r.concat(steps, 1);
  }
  std::vector<Val> out;
  out.push_back(s.batch_first
                    ? x
                    : L.b.op("transpose", {{"x", x}, {"perm", L.b.ints({1, 0, 2}, r.h + "_yperm")}},
                             Type{r.dt, {S, B, s.dirs * H}}, r.h + "_y"));
  out.push_back(r.concat(hn, 0));
  if (s.op == Op::Lstm) out.push_back(r.concat(cn, 0));
  return out;
}

}  // namespace

void register_recurrent(LowerTable& t) {
  t.many[size_t(Op::Lstm)] = lower_recurrent;
  t.many[size_t(Op::Gru)] = lower_recurrent;
  t.many[size_t(Op::Rnn)] = lower_recurrent;
}

}  // namespace rlx::coreml
