// attention_grad(q, k, v, dout[, bias]) -> (dq, dk, dv): attention's
// backward, flash-attention style: no [Sq, Sk] score or probability tensor.
// One task per (batch, key head) owns that head's dk and dv; for each of its
// query heads and each block of queries it
//   1. walks the visible key tiles as the forward kernel does (running max m,
//      running sum l, unnormalized output) to get each row's m and l and its
//      output O, then D = rowsum(dout * O);
//   2. walks them again: S (scores as attention defines them), P = exp(S - m) / l,
//        dv += P^T dout,   dP = dout v^T,   dS = P * (dP - D) (* (1 - tanh^2) under a soft cap),
//        dq += scale dS k, dk += scale dS^T q,
//      each product one GEMM over the tile (gemm_serial).
// Rows that see no key have P = 0 and pass no gradient, as the forward gives
// them zeros. The bias only shifts or masks scores: its gradient (dS itself)
// is autodiff's composed rule's, used when the bias needs one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention_impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kGradQBlock = 64, kGradKBlock = 128;

template <typename T>
void attention_grad_t(const KernelCall& c, const AttentionGeometry& g) {
  const T *q = c.in[0].data<T>(), *k = c.in[1].data<T>(), *v = c.in[2].data<T>();
  const T* dout = c.in[3].data<T>();
  const AttentionBias<T> bias = attention_bias<T>(c, 4);
  T *dq = c.outs[0].data<T>(), *dk = c.outs[1].data<T>(), *dv = c.outs[2].data<T>();
  const int64_t group = g.Hq / g.Hk, nqb = (g.Sq + kGradQBlock - 1) / kGradQBlock;
  const T scale = T(g.scale);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  parallel_for(g.B * g.Hk, 1, [&](int64_t t0, int64_t t1) {
    const auto R = size_t(kGradQBlock), KB = size_t(kGradKBlock);
    std::vector<T> m(R), l(R), o(R * size_t(g.Dv)), drow(R), s(R * KB), th(R * KB), dp(R * KB);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / g.Hk, kh = t % g.Hk;
      const T* K = k + g.k.at(b, kh, 0);
      const T* V = v + g.v.at(b, kh, 0);
      T* dK = dk + g.k.at(b, kh, 0);
      T* dV = dv + g.v.at(b, kh, 0);
      for (int64_t j = 0; j < g.Sk; ++j) {
        std::fill(dK + j * g.k.row, dK + j * g.k.row + g.D, T(0));
        std::fill(dV + j * g.v.row, dV + j * g.v.row + g.Dv, T(0));
      }
      for (int64_t h = kh * group; h < (kh + 1) * group; ++h)
        for (int64_t qb = 0; qb < nqb; ++qb) {
          const int64_t i0 = qb * kGradQBlock, rows = std::min(kGradQBlock, g.Sq - i0);
          const T* Q = q + g.q.at(b, h, i0);
          const T* dO = dout + g.o.at(b, h, i0);
          T* dQ = dq + g.q.at(b, h, i0);
          for (int64_t r = 0; r < rows; ++r)
            std::fill(dQ + r * g.q.row, dQ + r * g.q.row + g.D, T(0));
          int64_t jlo, jhi;
          g.block_keys(i0, rows, jlo, jhi);
          // Scores of key tile [j0, j1) as attention defines them, and the
          // visible range of each row; masked keys are -inf.
          auto scores = [&](int64_t j0, int64_t j1, T* tanh_out) {
            const int64_t tn = j1 - j0;
            gemm_serial(false, true, rows, tn, g.D, scale, Q, g.q.row, K + j0 * g.k.row, g.k.row,
                        T(0), s.data(), tn);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t lo, hi;
              g.visible(i0 + r, j0, j1, lo, hi);
              T* sr = s.data() + r * tn;
              finish_scores(g, bias, b, h, i0 + r, j0, lo, hi, sr,
                            tanh_out ? tanh_out + r * tn : nullptr);
              std::fill(sr, sr + std::clamp<int64_t>(lo - j0, 0, tn), kNegInf);
              std::fill(sr + std::clamp<int64_t>(hi - j0, 0, tn), sr + tn, kNegInf);
            }
          };
          // 1. Each row's running max and sum, and its output.
          std::fill(m.begin(), m.end(), kNegInf);
          std::fill(l.begin(), l.end(), T(0));
          std::fill(o.begin(), o.end(), T(0));
          for (int64_t j0 = jlo; j0 < jhi; j0 += kGradKBlock) {
            const int64_t j1 = std::min(jhi, j0 + kGradKBlock), tn = j1 - j0;
            scores(j0, j1, nullptr);
            for (int64_t r = 0; r < rows; ++r) {
              T* sr = s.data() + r * tn;
              const T mx = reduce_row_max(sr, tn);
              if (mx == kNegInf) {  // nothing visible in this tile
                std::fill(sr, sr + tn, T(0));
                continue;
              }
              const T m_new = std::isnan(mx) ? mx : std::max(m[size_t(r)], mx);
              const T corr = std::exp(m[size_t(r)] - m_new);
              const T sum = exp_sum(sr, tn, m_new);
              if (corr != T(1))
                for (T *a = o.data() + r * g.Dv, *e = a + g.Dv; a < e; ++a) *a *= corr;
              l[size_t(r)] = l[size_t(r)] * corr + sum;
              m[size_t(r)] = m_new;
            }
            gemm_serial(false, false, rows, g.Dv, tn, T(1), s.data(), tn, V + j0 * g.v.row, g.v.row,
                        T(1), o.data(), g.Dv);
          }
          for (int64_t r = 0; r < rows; ++r) {
            const T inv = l[size_t(r)] > 0 ? T(1) / l[size_t(r)] : T(0);
            T d = 0;
            for (int64_t e = 0; e < g.Dv; ++e) d += dO[r * g.o.row + e] * o[size_t(r * g.Dv + e)];
            drow[size_t(r)] = d * inv;
            l[size_t(r)] = inv;  // from here on: 1 / l
          }
          // 2. The gradients, tile by tile.
          for (int64_t j0 = jlo; j0 < jhi; j0 += kGradKBlock) {
            const int64_t j1 = std::min(jhi, j0 + kGradKBlock), tn = j1 - j0;
            scores(j0, j1, g.softcap > 0 ? th.data() : nullptr);
            for (int64_t r = 0; r < rows; ++r) {  // s becomes P (masked keys: exp(-inf) = 0)
              T* sr = s.data() + r * tn;
              if (m[size_t(r)] == kNegInf) {
                std::fill(sr, sr + tn, T(0));
                continue;
              }
              exp_sum(sr, tn, m[size_t(r)]);
              for (int64_t j = 0; j < tn; ++j) sr[j] *= l[size_t(r)];
            }
            gemm_serial(true, false, tn, g.Dv, rows, T(1), s.data(), tn, dO, g.o.row, T(1),
                        dV + j0 * g.v.row, g.v.row);
            gemm_serial(false, true, rows, tn, g.Dv, T(1), dO, g.o.row, V + j0 * g.v.row, g.v.row,
                        T(0), dp.data(), tn);
            for (int64_t r = 0; r < rows; ++r) {  // dp becomes dS
              const T* pr = s.data() + r * tn;
              T* dr = dp.data() + r * tn;
              for (int64_t j = 0; j < tn; ++j) dr[j] = pr[j] * (dr[j] - drow[size_t(r)]);
              if (g.softcap > 0)
                for (int64_t j = 0; j < tn; ++j) {
                  const T tj = th[size_t(r * tn + j)];
                  if (pr[j] != T(0)) dr[j] *= T(1) - tj * tj;
                }
            }
            gemm_serial(false, false, rows, g.D, tn, scale, dp.data(), tn, K + j0 * g.k.row,
                        g.k.row, T(1), dQ, g.q.row);
            gemm_serial(true, false, tn, g.D, rows, scale, dp.data(), tn, Q, g.q.row, T(1),
                        dK + j0 * g.k.row, g.k.row);
          }
        }
    }
  });
}

}  // namespace

void attention_grad(const KernelCall& c) {
  const AttentionGeometry g =
      attention_geometry(c, c.in[0], c.in[1], c.in[2], c.in.size() == 5 ? &c.in[4] : nullptr);
  const Tensor& dout = c.in[3];
  const bool bshd = c.node.attrs_as<AttentionAttrs>().layout == AttentionLayout::bshd;
  const Dims want = bshd ? Dims{g.B, g.Sq, g.Hq, g.Dv} : Dims{g.B, g.Hq, g.Sq, g.Dv};
  RLX_CHECK(dout.dtype() == c.in[0].dtype() && dout.dims() == want, c.node.label(), ": dout ",
            dout.shape().str(), " does not match attention's output ", dims_str(want));
  if (g.Hk == 0) return;  // no heads: every output is empty
  if (c.in[0].dtype() == DType::F32)
    attention_grad_t<float>(c, g);
  else
    attention_grad_t<double>(c, g);
}

}  // namespace rlx::cpu
