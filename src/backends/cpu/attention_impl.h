// What attention's forward kernel (attention.cc) and its backward
// (attention_grad.cc) share: the checked geometry of a node, which keys a
// query row sees, and a score row finished as the op defines it (soft cap,
// bias, bool mask).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "backends/cpu/kernel.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"
#include "rlx/op_attrs.h"

namespace rlx::cpu {

// Where element (b, h, i) of a [B, H, S, D]-indexed tensor starts, in its layout.
struct HeadStrides {
  int64_t batch = 0, head = 0, row = 0;
  int64_t at(int64_t b, int64_t h, int64_t i) const { return b * batch + h * head + i * row; }
  static HeadStrides of(AttentionLayout layout, int64_t H, int64_t S, int64_t D) {
    return layout == AttentionLayout::bhsd ? HeadStrides{H * S * D, S * D, D}
                                           : HeadStrides{S * H * D, D, H * D};
  }
};

struct AttentionGeometry {
  int64_t B = 0, Hq = 0, Hk = 0, Sq = 0, Sk = 0, D = 0, Dv = 0;
  MaskKind mask = MaskKind::none;
  int64_t window = 0;
  double scale = 1;
  double softcap = 0;
  // Bias element strides for [B,Hq,Sq,Sk] (0 on broadcast dims).
  int64_t bs[4] = {0, 0, 0, 0};
  HeadStrides q, k, v, o;  // q and dq, k and dk, v and dv, the output and dout

  bool banded() const { return mask == MaskKind::causal || mask == MaskKind::sliding; }
  // Keys [lo, hi) of [j0, j1) that query row i may see (empty when lo >= hi).
  void visible(int64_t i, int64_t j0, int64_t j1, int64_t& lo, int64_t& hi) const {
    lo = j0;
    hi = j1;
    if (banded()) hi = std::min(hi, i + Sk - Sq + 1);
    if (mask == MaskKind::sliding) lo = std::max(lo, i + Sk - Sq - window + 1);
  }
  // Keys [jlo, jhi) any of the query rows [i0, i0 + rows) may see.
  void block_keys(int64_t i0, int64_t rows, int64_t& jlo, int64_t& jhi) const {
    jlo = 0;
    jhi = Sk;
    if (banded()) jhi = std::clamp<int64_t>(i0 + rows + Sk - Sq, 0, Sk);
    if (mask == MaskKind::sliding) jlo = std::clamp<int64_t>(i0 + Sk - Sq - window + 1, 0, Sk);
  }
};

// Checks q, k, v and the optional bias of attention node `c` (attention or
// attention_grad: both take attention's attributes) and returns its geometry.
AttentionGeometry attention_geometry(const KernelCall& c, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor* bias);

// The bias (float or bool) of a node, typed, or nulls.
template <typename T>
struct AttentionBias {
  const T* add = nullptr;
  const bool* keep = nullptr;
};

// x[j] = exp(x[j] - m) for j < n; returns their sum.
template <typename T>
inline T exp_sum_scalar(T* x, int64_t n, T m) {
  T sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += x[j] = std::exp(x[j] - m);
  return sum;
}

// The same on 8 lanes (AVX2/FMA), the sum over two partial vectors.
RLX_AVX2 inline float exp_sum_avx2(float* x, int64_t n, float m) {
  const __m256 vm_ = _mm256_set1_ps(m);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 e0 = vm::exp(_mm256_sub_ps(_mm256_loadu_ps(x + j), vm_));
    const __m256 e1 = vm::exp(_mm256_sub_ps(_mm256_loadu_ps(x + j + 8), vm_));
    _mm256_storeu_ps(x + j, e0);
    _mm256_storeu_ps(x + j + 8, e1);
    s0 = _mm256_add_ps(s0, e0);
    s1 = _mm256_add_ps(s1, e1);
  }
  for (; j < n; j += 8) {
    const __m256i mask = vm::first_lanes(n - j);
    const __m256 e = vm::exp(_mm256_sub_ps(_mm256_maskload_ps(x + j, mask), vm_));
    _mm256_maskstore_ps(x + j, mask, e);
    s0 = _mm256_add_ps(s0, _mm256_and_ps(e, _mm256_castsi256_ps(mask)));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(s0, s1));
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum;
}

// The same on 16 lanes (vmath512.h's exp, the same bits as vmath.h's), the
// sum over two partial vectors.
RLX_AVX512_MATH inline float exp_sum_avx512(float* x, int64_t n, float m) {
  const __m512 vm_ = _mm512_set1_ps(m);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 e0 = vm16::exp(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm_));
    const __m512 e1 = vm16::exp(_mm512_sub_ps(_mm512_loadu_ps(x + j + 16), vm_));
    _mm512_storeu_ps(x + j, e0);
    _mm512_storeu_ps(x + j + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; j < n; j += 16) {
    const __mmask16 mask = vm::first_lanes16(n - j);
    const __m512 e = vm16::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, x + j), vm_));
    _mm512_mask_storeu_ps(x + j, mask, e);
    s0 = _mm512_mask_add_ps(s0, mask, s0, e);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}

template <typename T>
inline T exp_sum(T* x, int64_t n, T m) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_isa() >= Isa::avx512) return exp_sum_avx512(x, n, m);
    if (has_avx2_fma()) return exp_sum_avx2(x, n, m);
  }
  return exp_sum_scalar(x, n, m);
}

// Input `at` of node c as attention's bias (none when c has no input there).
template <typename T>
AttentionBias<T> attention_bias(const KernelCall& c, size_t at) {
  if (c.in.size() <= at) return {};
  if (c.in[at].dtype() == DType::Bool) return {nullptr, c.in[at].data<bool>()};
  return {c.in[at].data<T>(), nullptr};
}

// Scores sr[j - j0] of query row i (head h, batch b) for keys [lo, hi), raw
// (scale q.k) on entry, as attention defines them on return: soft-capped,
// then the bias added or the bool mask applied (-inf). With `tanh_out`, the
// cap's tanh of each score is kept there (its derivative is 1 - tanh^2).
template <typename T>
void finish_scores(const AttentionGeometry& g, const AttentionBias<T>& bias, int64_t b, int64_t h,
                   int64_t i, int64_t j0, int64_t lo, int64_t hi, T* sr, T* tanh_out = nullptr) {
  if (g.softcap > 0) {  // as ggml: scale by 1/cap, tanh, scale by cap
    const T cap = T(g.softcap), inv_cap = T(1) / cap;
    for (int64_t j = lo; j < hi; ++j) {
      const T t = std::tanh(sr[j - j0] * inv_cap);
      if (tanh_out) tanh_out[j - j0] = t;
      sr[j - j0] = cap * t;
    }
  }
  const int64_t brow = b * g.bs[0] + h * g.bs[1] + i * g.bs[2];
  if (bias.add)
    for (int64_t j = lo; j < hi; ++j) sr[j - j0] += bias.add[brow + j * g.bs[3]];
  if (bias.keep)
    for (int64_t j = lo; j < hi; ++j)
      if (!bias.keep[brow + j * g.bs[3]]) sr[j - j0] = -std::numeric_limits<T>::infinity();
}

}  // namespace rlx::cpu
