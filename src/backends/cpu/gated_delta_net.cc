// gated_delta_net's CPU forms (gated_delta_net.h), one task per (b, h) sequence, its N x N state
// kept row-major in the output state tensor.
//
// Step form: a step is two passes over the state: kS = k S (read), then S = exp(g) S + k^T u
// fused with o += (q / sqrt N)_i S_i (read + write). Both are row-wise axpys, so the compiler
// vectorizes them without reassociating any sum; the body is compiled for the baseline and under
// target("avx2,fma"), picked from cpu_isa().
//
// Chunked (WY) form, per chunk of c steps from the state S0, with gam_r the cumulative log-decay
// inside the chunk (r = 0..c-1) and every decay ratio exp(gam_r - gam_s), r >= s, at most 1:
//   U = R - beta_s sum_{j<s} exp(gam_s - gam_j) (k_s . k_j) U_j   (R = beta (V - exp(gam) K S0);
//       forward substitution, U's rows are the steps' u)
//   O = (exp(gam) Q S0 + (mask(exp(gam_r - gam_s)) * Q K^T) U) / sqrt(N)
//   S = exp(gam_last) S0 + (exp(gam_last - gam) K)^T U
// which is the step form's recurrence unrolled over the chunk; the products are GEMMs. gam is
// summed in double so that close steps' ratios keep their precision after strong decays; an
// infinite g would make gam_r - gam_s NaN, so the kernel keeps such calls on the step form.
#include "backends/cpu/gated_delta_net.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kGdnGrainWork = 1 << 15;  // multiply-adds per parallel_for chunk, at least

// Where sequence bh = b * H + h starts: q / k / v / o rows are H * N apart, g / beta H apart.
struct Sequence {
  int64_t base, gbase, row, grow;
};
template <typename T>
Sequence sequence(const GdnView<T>& a, int64_t bh) {
  const int64_t b = bh / a.H, h = bh % a.H;
  return {(b * a.S * a.H + h) * a.N, b * a.S * a.H + h, a.H * a.N, a.H};
}

// ---- step form

template <typename T>
__attribute__((always_inline)) inline void step_sequence(const GdnView<T>& a, int64_t bh,
                                                         T* __restrict u) {
  const Sequence sq = sequence(a, bh);
  const int64_t N = a.N;
  const T scale = T(1 / std::sqrt(double(N)));
  T* __restrict St = a.state + bh * N * N;
  for (int64_t t = 0; t < a.S; ++t) {
    const T* __restrict qt = a.q + sq.base + t * sq.row;
    const T* __restrict kt = a.k + sq.base + t * sq.row;
    const T* __restrict vt = a.v + sq.base + t * sq.row;
    T* __restrict ot = a.o + sq.base + t * sq.row;
    const T decay = std::exp(a.g[sq.gbase + t * sq.grow]), beta = a.beta[sq.gbase + t * sq.grow];
    // u = beta (v - k (decay S)) = beta (v - decay (k S))
    std::fill(u, u + N, T(0));
    for (int64_t i = 0; i < N; ++i) {
      const T ki = kt[i];
      const T* __restrict Si = St + i * N;
      for (int64_t j = 0; j < N; ++j) u[j] += ki * Si[j];
    }
    for (int64_t j = 0; j < N; ++j) u[j] = beta * (vt[j] - decay * u[j]);
    // S = decay S + k^T u, and o = (q / sqrt N) S on the updated rows
    std::fill(ot, ot + N, T(0));
    for (int64_t i = 0; i < N; ++i) {
      const T ki = kt[i], qi = qt[i] * scale;
      T* __restrict Si = St + i * N;
      for (int64_t j = 0; j < N; ++j) {
        const T s = decay * Si[j] + ki * u[j];
        Si[j] = s;
        ot[j] += qi * s;
      }
    }
  }
}

template <typename T>
__attribute__((always_inline)) inline void step_sequences(const GdnView<T>& a, int64_t begin,
                                                          int64_t end) {
  std::vector<T> u(size_t(a.N));
  for (int64_t bh = begin; bh < end; ++bh) step_sequence(a, bh, u.data());
}
template <typename T>
void step_range(const GdnView<T>& a, int64_t begin, int64_t end) {
  step_sequences(a, begin, end);
}
template <typename T>
RLX_AVX2 void step_range_avx2(const GdnView<T>& a, int64_t begin, int64_t end) {
  step_sequences(a, begin, end);
}

// ---- chunked form

template <typename T>
struct ChunkScratch {
  std::vector<T> kk, qk, decay, u, kd;
  std::vector<double> gam;  // in double: its differences are the decay ratios' exponents
  explicit ChunkScratch(int64_t N)
      : kk(size_t(kGdnChunk * kGdnChunk)),
        qk(kk.size()),
        decay(kk.size()),
        u(size_t(kGdnChunk * N)),
        kd(u.size()),
        gam(size_t(kGdnChunk)) {}
};

template <typename T>
__attribute__((always_inline)) inline void chunked_sequence(const GdnView<T>& a, int64_t bh,
                                                            ChunkScratch<T>& w) {
  const Sequence sq = sequence(a, bh);
  const int64_t N = a.N, C = kGdnChunk, ld = sq.row;
  const T scale = T(1 / std::sqrt(double(N)));
  T* St = a.state + bh * N * N;
  T *KK = w.kk.data(), *QK = w.qk.data(), *Dm = w.decay.data(), *U = w.u.data(), *Kd = w.kd.data();
  double* gam = w.gam.data();
  for (int64_t t0 = 0; t0 < a.S; t0 += C) {
    const int64_t c = std::min(C, a.S - t0);
    const T *Q = a.q + sq.base + t0 * ld, *K = a.k + sq.base + t0 * ld,
            *V = a.v + sq.base + t0 * ld;
    const T* beta = a.beta + sq.gbase + t0 * sq.grow;
    T* O = a.o + sq.base + t0 * ld;
    double acc = 0;
    for (int64_t r = 0; r < c; ++r) gam[r] = acc += double(a.g[sq.gbase + (t0 + r) * sq.grow]);
    // Dm[r][s] = exp(gam_r - gam_s) for s <= r, 0 above the diagonal: one exp call per chunk.
    for (int64_t r = 0; r < c; ++r)
      for (int64_t j = 0; j < c; ++j)
        Dm[r * C + j] = j <= r ? T(gam[r] - gam[j]) : -std::numeric_limits<T>::infinity();
    for (int64_t r = 0; r < c; ++r) exp_in_place(Dm + r * C, c);
    gemm_serial(false, true, c, c, N, T(1), K, ld, K, ld, T(0), KK, C);
    gemm_serial(false, true, c, c, N, T(1), Q, ld, K, ld, T(0), QK, C);
    // R = beta (V - exp(gam) K S0), then the forward substitution turns it into U in place.
    gemm_serial(false, false, c, N, N, T(1), K, ld, St, N, T(0), U, N);
    for (int64_t r = 0; r < c; ++r) {
      const T G = T(std::exp(gam[r])), b = beta[r * sq.grow];
      const T* Vr = V + r * ld;
      T* Ur = U + r * N;
      for (int64_t j = 0; j < N; ++j) Ur[j] = b * (Vr[j] - G * Ur[j]);
    }
    for (int64_t s = 1; s < c; ++s) {
      const T b = beta[s * sq.grow];
      T* __restrict Us = U + s * N;
      for (int64_t j = 0; j < s; ++j) {
        const T coef = b * Dm[s * C + j] * KK[s * C + j];
        const T* __restrict Uj = U + j * N;
        for (int64_t e = 0; e < N; ++e) Us[e] -= coef * Uj[e];
      }
    }
    // O = scale (exp(gam) Q S0 + (decay-masked Q K^T) U)
    gemm_serial(false, false, c, N, N, scale, Q, ld, St, N, T(0), O, ld);
    for (int64_t r = 0; r < c; ++r) {
      const T G = T(std::exp(gam[r]));
      T* Or = O + r * ld;
      for (int64_t j = 0; j < N; ++j) Or[j] *= G;
      T* QKr = QK + r * C;
      for (int64_t s = 0; s < c; ++s) QKr[s] *= scale * Dm[r * C + s];
    }
    gemm_serial(false, false, c, N, c, T(1), QK, C, U, N, T(1), O, ld);
    // S = exp(gam_last) S0 + (exp(gam_last - gam) K)^T U
    const double last = gam[c - 1];
    for (int64_t s = 0; s < c; ++s) {
      const T f = T(std::exp(last - gam[s]));
      const T* Ks = K + s * ld;
      for (int64_t j = 0; j < N; ++j) Kd[s * N + j] = f * Ks[j];
    }
    const T G = T(std::exp(last));
    for (int64_t i = 0; i < N * N; ++i) St[i] *= G;
    gemm_serial(true, false, N, N, c, T(1), Kd, N, U, N, T(1), St, N);
  }
}

template <typename T>
__attribute__((always_inline)) inline void chunked_sequences(const GdnView<T>& a, int64_t begin,
                                                             int64_t end) {
  ChunkScratch<T> w(a.N);
  for (int64_t bh = begin; bh < end; ++bh) chunked_sequence(a, bh, w);
}
template <typename T>
void chunked_range(const GdnView<T>& a, int64_t begin, int64_t end) {
  chunked_sequences(a, begin, end);
}
template <typename T>
RLX_AVX2 void chunked_range_avx2(const GdnView<T>& a, int64_t begin, int64_t end) {
  chunked_sequences(a, begin, end);
}

template <typename T>
void gdn_run(const GdnView<T>& a, GdnForm form) {
  const int64_t per_seq = std::max<int64_t>(1, 3 * a.S * a.N * a.N);
  const int64_t grain = std::max<int64_t>(1, kGdnGrainWork / per_seq);
  const bool avx2 = cpu_isa() >= Isa::avx2;
  if (form == GdnForm::chunked) {
    parallel_for(a.B * a.H, grain, [&](int64_t b0, int64_t b1) {
      avx2 ? chunked_range_avx2(a, b0, b1) : chunked_range(a, b0, b1);
    });
    return;
  }
  parallel_for(a.B * a.H, grain, [&](int64_t b0, int64_t b1) {
    avx2 ? step_range_avx2(a, b0, b1) : step_range(a, b0, b1);
  });
}

}  // namespace

void gated_delta_net_run(const GdnView<float>& a, GdnForm form) { gdn_run(a, form); }
void gated_delta_net_run(const GdnView<double>& a, GdnForm form) { gdn_run(a, form); }

}  // namespace rlx::cpu
