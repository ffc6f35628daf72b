// lstm / gru / rnn (ops.def, rlx/recurrent.h). Per layer and direction, the input projection of
// the whole sequence is one GEMM (x @ w_ih^T -> [rows, G*h], the summable biases added once);
// only h @ w_hh^T stays in the time loop, one [B, G*h] GEMM per step, followed by the gate math
// on contiguous runs of h values (vmath's AVX2 sigmoid / tanh).
//
// Sequence lengths: batch row b runs len[b] steps (forward t = 0 .. len-1, reverse t = len-1 ..
// 0); its state stops changing after them and y is zero at t >= len[b] (ONNX's semantics).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/recurrent.h"

namespace rlx::cpu {

namespace {

void rnn_activate(RnnActivation a, float* v, int64_t n) {
  switch (a) {
    case RnnActivation::sigmoid:
      vsigmoid(v, v, n);
      return;
    case RnnActivation::tanh:
      vtanh(v, v, n);
      return;
    case RnnActivation::relu:
      for (int64_t i = 0; i < n; ++i) v[i] = v[i] > 0 ? v[i] : 0;
      return;
  }
}

void clip_to(float* v, int64_t n, const std::optional<double>& clip) {
  if (!clip) return;
  const float c = float(*clip);
  for (int64_t i = 0; i < n; ++i) v[i] = std::min(std::max(v[i], -c), c);
}

struct Geometry {
  int64_t B = 0, S = 0, in = 0;
  bool batch_first = true;
  // Row of (b, t) in x / y / the projected gates.
  int64_t row(int64_t b, int64_t t) const { return batch_first ? b * S + t : t * B + b; }
};

// One direction of one layer: reads X [rows, in_l], writes its W columns of Y [rows, D*W] and the
// final state into h [B, W] / c [B, h] (c only for lstm; W = s.width(), h projected to it by
// w_hr [W, h] when lstm has proj_size). h / c hold the initial state on entry.
void run_direction(const RecurrentSpec& s, const Geometry& g, int64_t in_l, const float* X,
                   const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                   const float* peep, const float* w_hr, const std::vector<int64_t>& len, float* Y,
                   int64_t d, float* h, float* c) {
  const int64_t H = s.hidden, W = s.width(), GH = s.gate_rows(), B = g.B, S = g.S, rows = B * S;
  const int64_t ldy = s.dirs * W;
  const bool gru = s.op == Op::Gru, lstm = s.op == Op::Lstm;
  // gx = X @ w_ih^T + b_ih (+ b_hh, except gru's n block, which sits inside r * (...)).
  std::vector<float> gx(size_t(rows * GH));
  gemm(false, true, rows, GH, in_l, 1.0f, X, in_l, w_ih, in_l, 0.0f, gx.data(), GH);
  std::vector<float> bias(size_t(GH), 0.0f), rec_bias(size_t(GH), 0.0f);
  for (int64_t k = 0; k < GH; ++k) {
    bias[size_t(k)] = b_ih[k];
    const bool inner =
        gru && k >= s.block[2] * H && k < (s.block[2] + 1) * H && s.linear_before_reset;
    if (b_hh) (inner ? rec_bias : bias)[size_t(k)] += b_hh[k];
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* p = gx.data() + r * GH;
    for (int64_t k = 0; k < GH; ++k) p[k] += bias[size_t(k)];
  }
  std::vector<float> gh(size_t(B * GH)), tmp(size_t(B * H)), rh(size_t(B * H));
  const int64_t nb = s.block[2] * H;  // gru: the n block's first row
  for (int64_t k = 0; k < S; ++k) {
    // The recurrent product for every row (rows already finished are not read).
    if (gru && !s.linear_before_reset) {
      // r and z blocks first (rows [0, 2h) in both gate orders), then (r * h) @ W_hn^T.
      gemm(false, true, B, 2 * H, H, 1.0f, h, H, w_hh, H, 0.0f, gh.data(), GH);
    } else {
      gemm(false, true, B, GH, W, 1.0f, h, W, w_hh, W, 0.0f, gh.data(), GH);
    }
    for (int64_t b = 0; b < B; ++b) {
      if (k >= len[size_t(b)]) continue;
      const int64_t t = (s.reverse || d == 1) ? len[size_t(b)] - 1 - k : k;
      const float* x = gx.data() + g.row(b, t) * GH;
      float* z = gh.data() + b * GH;
      float* hb = h + b * W;
      float* y = Y + g.row(b, t) * ldy + d * W;
      if (lstm) {
        float* cb = c + b * H;
        float *zi = z + s.block[0] * H, *zf = z + s.block[1] * H, *zg = z + s.block[2] * H,
              *zo = z + s.block[3] * H;
        const float *xi = x + s.block[0] * H, *xf = x + s.block[1] * H, *xg = x + s.block[2] * H,
                    *xo = x + s.block[3] * H;
        for (int64_t j = 0; j < H; ++j) {
          zi[j] += xi[j];
          zf[j] += xf[j];
          zg[j] += xg[j];
          zo[j] += xo[j];
        }
        if (peep) {  // ONNX's P: i, o, f
          for (int64_t j = 0; j < H; ++j) {
            zi[j] += peep[j] * cb[j];
            zf[j] += peep[2 * H + j] * cb[j];
          }
        }
        clip_to(zi, H, s.clip);
        clip_to(zf, H, s.clip);
        clip_to(zg, H, s.clip);
        rnn_activate(s.f, zi, H);
        rnn_activate(s.f, zf, H);
        rnn_activate(s.g, zg, H);
        for (int64_t j = 0; j < H; ++j) cb[j] = zf[j] * cb[j] + zi[j] * zg[j];
        if (peep)
          for (int64_t j = 0; j < H; ++j) zo[j] += peep[H + j] * cb[j];
        clip_to(zo, H, s.clip);
        rnn_activate(s.f, zo, H);
        float* th = tmp.data() + b * H;
        std::memcpy(th, cb, size_t(H) * sizeof(float));
        rnn_activate(s.h, th, H);
        for (int64_t j = 0; j < H; ++j) th[j] *= zo[j];
        if (w_hr)  // h = (o * act_h(c)) W_hr^T
          gemm_serial(false, true, 1, W, H, 1.0f, th, H, w_hr, H, 0.0f, hb, W);
        else
          std::memcpy(hb, th, size_t(H) * sizeof(float));
        std::memcpy(y, hb, size_t(W) * sizeof(float));
      } else if (gru) {
        float *zr = z + s.block[0] * H, *zz = z + s.block[1] * H, *zn = z + nb;
        const float *xr = x + s.block[0] * H, *xz = x + s.block[1] * H, *xn = x + nb;
        for (int64_t j = 0; j < H; ++j) {
          zr[j] += xr[j];
          zz[j] += xz[j];
        }
        clip_to(zr, H, s.clip);
        clip_to(zz, H, s.clip);
        rnn_activate(s.f, zr, H);
        rnn_activate(s.f, zz, H);
        if (s.linear_before_reset) {
          for (int64_t j = 0; j < H; ++j)
            zn[j] = xn[j] + zr[j] * (zn[j] + rec_bias[size_t(nb + j)]);
        } else {
          float* r = rh.data() + b * H;
          for (int64_t j = 0; j < H; ++j) r[j] = zr[j] * hb[j];
          gemm_serial(false, true, 1, H, H, 1.0f, r, H, w_hh + nb * H, H, 0.0f, zn, GH);
          for (int64_t j = 0; j < H; ++j) zn[j] += xn[j];
        }
        clip_to(zn, H, s.clip);
        rnn_activate(s.g, zn, H);
        for (int64_t j = 0; j < H; ++j) y[j] = hb[j] = (1 - zz[j]) * zn[j] + zz[j] * hb[j];
      } else {
        for (int64_t j = 0; j < GH; ++j) z[j] += x[j];
        clip_to(z, H, s.clip);
        rnn_activate(s.f, z, H);
        for (int64_t j = 0; j < H; ++j) y[j] = hb[j] = z[j];
      }
    }
  }
}

}  // namespace

void recurrent(const KernelCall& c) {
  const RecurrentSpec s = recurrent_spec(c.node);
  const Tensor& xt = c.in[0];
  RLX_CHECK(xt.dtype() == DType::F32 && xt.rank() == 3, c.node.label(), ": wants f32 x, got ",
            xt.shape().str());
  Geometry g;
  g.batch_first = s.batch_first;
  g.B = s.batch_first ? xt.dims()[0] : xt.dims()[1];
  g.S = s.batch_first ? xt.dims()[1] : xt.dims()[0];
  g.in = xt.dims()[2];
  const int64_t H = s.hidden, W = s.width(), GH = s.gate_rows(), B = g.B, S = g.S, rows = B * S;
  const int64_t LD = s.layers * s.dirs;
  RLX_CHECK(c.in[1].numel() == s.w_ih_numel(g.in) && c.in[2].numel() == LD * GH * W, c.node.label(),
            ": weights ", c.in[1].shape().str(), ", ", c.in[2].shape().str(), " do not fit x ",
            xt.shape().str(), " and hidden=", H);
  const int64_t nbias = c.in[3].numel();
  const bool split_bias = nbias == LD * 2 * GH;
  RLX_CHECK(split_bias || nbias == LD * GH, c.node.label(), ": bias ", c.in[3].shape().str(),
            " does not fit hidden=", H);
  std::vector<int64_t> len(size_t(B), S);
  if (s.len >= 0) {
    const Tensor& l = c.in[size_t(s.len)];
    for (int64_t b = 0; b < B; ++b) {
      const int64_t v = l.dtype() == DType::I32 ? int64_t(static_cast<const int32_t*>(l.raw())[b])
                                                : static_cast<const int64_t*>(l.raw())[b];
      RLX_CHECK(v >= 0 && v <= S, c.node.label(), ": lengths[", b, "] = ", v, " is outside [0, ", S,
                "] (x ", xt.shape().str(), ")");
      len[size_t(b)] = v;
    }
  }
  const float* w_ih = static_cast<const float*>(c.in[1].raw());
  const float* w_hh = static_cast<const float*>(c.in[2].raw());
  const float* bias = static_cast<const float*>(c.in[3].raw());
  const float* peep = s.peep >= 0 ? static_cast<const float*>(c.in[size_t(s.peep)].raw()) : nullptr;
  const float* w_hr = s.w_hr >= 0 ? static_cast<const float*>(c.in[size_t(s.w_hr)].raw()) : nullptr;
  float* hn = static_cast<float*>(c.outs[1].raw());
  float* cn = s.op == Op::Lstm ? static_cast<float*>(c.outs[2].raw()) : nullptr;
  const size_t state = size_t(LD * B * W), cell = size_t(LD * B * H);
  if (s.h0 >= 0)
    std::memcpy(hn, c.in[size_t(s.h0)].raw(), state * sizeof(float));
  else
    std::fill(hn, hn + state, 0.0f);
  if (cn) {
    if (s.c0 >= 0)
      std::memcpy(cn, c.in[size_t(s.c0)].raw(), cell * sizeof(float));
    else
      std::fill(cn, cn + cell, 0.0f);
  }
  float* y = static_cast<float*>(c.outs[0].raw());
  std::vector<float> buf[2];
  const float* X = static_cast<const float*>(xt.raw());
  for (int64_t l = 0; l < s.layers; ++l) {
    const int64_t in_l = s.layer_in(l, g.in);
    float* Y = y;
    if (l + 1 < s.layers) {
      buf[l % 2].assign(size_t(rows * s.dirs * W), 0.0f);
      Y = buf[l % 2].data();
    } else {
      std::fill(y, y + rows * s.dirs * W, 0.0f);  // steps past a length stay zero
    }
    for (int64_t d = 0; d < s.dirs; ++d) {
      const int64_t ld = l * s.dirs + d;
      const float* b_ih = bias + ld * (split_bias ? 2 * GH : GH);
      const float* b_hh = split_bias ? b_ih + GH : nullptr;
      run_direction(s, g, in_l, X, w_ih + s.w_ih_offset(l, d, g.in), w_hh + s.w_hh_offset(l, d),
                    b_ih, b_hh, peep ? peep + ld * 3 * H : nullptr,
                    w_hr ? w_hr + ld * W * H : nullptr, len, Y, d, hn + ld * B * W,
                    cn ? cn + ld * B * H : nullptr);
    }
    X = Y;
  }
}

}  // namespace rlx::cpu
