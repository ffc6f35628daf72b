// Scaled dot-product attention.
//
//   attention(q [B,Hq,Sq,D], k [B,Hk,Sk,D], v [B,Hk,Sk,Dv][, bias]) -> [B,Hq,Sq,Dv]
//   out[b,h,i] = sum_j softmax_j(scale * q[b,h,i].k[b,g,j] + bias[b,h,i,j]) v[b,g,j]
//
// - GQA / MQA: Hq must be a multiple of Hk; query head h reads key/value head g = h / (Hq / Hk).
// - scale: default 1 / sqrt(D).
// - softcap > 0: each scaled score s becomes softcap * tanh(s / softcap) (gemma2's logit
//   soft-capping), before the bias is added; 0 leaves scores as they are.
// - mask (visibility of key j from query i; off = Sk - Sq aligns the LAST query with the LAST key,
//   which is what decoding with a KV cache needs: Sq = 1 sees every key):
//     none:    all keys
//     causal:  j <= i + off
//     sliding: i + off - window < j <= i + off   (window >= 1 keys, including the diagonal)
//     bias:    all keys, plus an additive bias broadcastable to [B,Hq,Sq,Sk] (same float dtype as
//              q; -inf masks a key). A bool bias is also accepted: true = attend, false = masked,
//              as in torch's scaled_dot_product_attention.
// - A query row that sees no key (every key masked, e.g. Sk = 0, or a bias row of -inf) yields
//   zeros rather than NaN. NaN in the inputs propagates.
//
// Computation: flash-attention style. Each task takes one (b, h) and a block of queries, walks the
// visible keys in tiles and keeps per row a running max, a running sum of exp and an unnormalized
// output accumulator, rescaled when the max grows. Per tile, the block's scores and its P V
// update are two small GEMMs (gemm_serial) rather than a dot and an axpy per (query, key);
// a block of one query (decoding) takes dots eight keys at a time and axpys with the output
// row in registers (AVX-512 or AVX2), which read the cache in place. Memory
// is O(block) and Sq x Sk scores are never materialized; keys outside the causal/sliding band are
// skipped tile by tile. Unbanded masks take 64-query blocks and 128-key tiles, banded ones 32 and
// 64 (more tiles skipped). A row's max is reduce_row_max; its exp + sum runs on 8 lanes
// (AVX2/FMA) when floats.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/attention_impl.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/half_rows.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

// GCC 12's AVX-512 headers build _mm512_setzero_ps & co. from a deliberately
// uninitialized value, which -Wuninitialized flags in every caller (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push  // popped at the end of the file (unity builds)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define RLX_AVX2F __attribute__((target("avx2,fma,f16c")))
#define RLX_AVX2F_INLINE __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define RLX_ATTN_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c")))
#define RLX_ATTN_AVX512_INLINE \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,f16c"), always_inline)) inline

namespace rlx::cpu {
namespace {

// Banded masks skip key tiles outside the band, so they keep small tiles; unbanded ones take
// bigger tiles, fewer GEMM calls and (for Sk <= 128) no running-max rescale at all.
constexpr int64_t kQBlockBanded = 32, kKBlockBanded = 64;
constexpr int64_t kQBlock = 64, kKBlock = 128;  // a 128 x 128 f32 tile of K is 64 KiB (L2)

// One query row (decoding with a KV cache): the scores and the P V update as
// direct dots and axpys over the cache's rows. Two GEMM calls for one row
// would pack the key tile (transposed) and the value tile first, a copy of
// the whole cache per step and head.
// Eight lanes' sums of y[0..7] in one vector: lane i = sum of y[i].
RLX_AVX2_INLINE __m256 sum_lanes8(const __m256* y) {
  const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(y[0], y[1]), _mm256_hadd_ps(y[2], y[3]));
  const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(y[4], y[5]), _mm256_hadd_ps(y[6], y[7]));
  // h0 = [keys 0-3 of the low 128 bits | keys 0-3 of the high 128 bits], h1 likewise.
  return _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31));
}

// Eight keys' or values' elements from p on, widened from f16 (KT =
// uint16_t, an f16 KV cache) or as they are; n < 8 reads only n (zeros past).
template <typename KT>
RLX_AVX2F_INLINE __m256 load8(const KT* p, int64_t n) {
  if constexpr (std::is_same_v<KT, float>) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, vm::first_lanes(n));
  } else {
    alignas(16) uint16_t tail[8] = {};
    if (n < 8) std::copy_n(p, std::max<int64_t>(n, 0), tail);
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(n >= 8 ? p : tail)));
  }
}

// Decode's scores, s[j] = scale * q . K[j], eight keys at a time: eight
// independent FMA chains and one shuffle tree for all eight sums (a
// horizontal sum per key cost more than its dot).
template <typename KT>
RLX_AVX2F void row_scores_avx2(const float* q, const KT* K, int64_t ldk, int64_t n, int64_t D,
                               float scale, float* s) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 a[8];
    for (__m256& x : a) x = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) {
      const __m256 qv = load8(q + d, D - d);
      for (int r = 0; r < 8; ++r)
        a[r] = _mm256_fmadd_ps(qv, load8(K + (j + r) * ldk + d, D - d), a[r]);
    }
    _mm256_storeu_ps(s + j, _mm256_mul_ps(sum_lanes8(a), _mm256_set1_ps(scale)));
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8)
      a = _mm256_fmadd_ps(load8(q + d, D - d), load8(K + j * ldk + d, D - d), a);
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, a);
    float sum = 0;
    for (float v : lanes) sum += v;
    s[j] = scale * sum;
  }
}

// Decode's P V update, acc += sum_j p[j] V[j]: 32 columns at a time held in
// registers over every key (not loaded and stored per key), even and odd keys
// on separate accumulators so eight FMA chains are in flight.
template <typename KT>
RLX_AVX2F void row_pv_avx2(const float* p, const KT* V, int64_t ldv, int64_t n, int64_t Dv,
                           float* acc) {
  for (int64_t c = 0; c < Dv; c += 32) {
    __m256 a[4], b[4];
    for (int i = 0; i < 4; ++i) {
      a[i] = load8(acc + c + 8 * i, Dv - c - 8 * i);
      b[i] = _mm256_setzero_ps();
    }
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      const __m256 p0 = _mm256_set1_ps(p[j]), p1 = _mm256_set1_ps(p[j + 1]);
      const KT* v0 = V + j * ldv + c;
      for (int i = 0; i < 4; ++i) {
        a[i] = _mm256_fmadd_ps(p0, load8(v0 + 8 * i, Dv - c - 8 * i), a[i]);
        b[i] = _mm256_fmadd_ps(p1, load8(v0 + ldv + 8 * i, Dv - c - 8 * i), b[i]);
      }
    }
    if (j < n)
      for (int i = 0; i < 4; ++i)
        a[i] = _mm256_fmadd_ps(_mm256_set1_ps(p[j]), load8(V + j * ldv + c + 8 * i, Dv - c - 8 * i),
                               a[i]);
    for (int i = 0; i < 4; ++i)
      _mm256_maskstore_ps(acc + c + 8 * i, vm::first_lanes(Dv - c - 8 * i),
                          _mm256_add_ps(a[i], b[i]));
  }
}

// Sixteen elements under mask m, widened from f16 or as they are.
template <typename KT>
RLX_ATTN_AVX512_INLINE __m512 load16(const KT* p, __mmask16 m) {
  if constexpr (std::is_same_v<KT, float>)
    return _mm512_maskz_loadu_ps(m, p);
  else
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// The AVX-512 forms of the two above: 16 lanes, masked tails, each key's
// 16-lane sum folded to 8 before the shared shuffle tree.
template <typename KT>
RLX_ATTN_AVX512 void row_scores_avx512(const float* q, const KT* K, int64_t ldk, int64_t n,
                                       int64_t D, float scale, float* s) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m512 a[8];
    for (__m512& x : a) x = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d += 16) {
      const __mmask16 m = vm::first_lanes16(D - d);
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + d);
      for (int r = 0; r < 8; ++r)
        a[r] = _mm512_fmadd_ps(qv, load16(K + (j + r) * ldk + d, m), a[r]);
    }
    __m256 y[8];
    for (int r = 0; r < 8; ++r)
      y[r] = _mm256_add_ps(_mm512_castps512_ps256(a[r]),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a[r]), 1)));
    _mm256_storeu_ps(s + j, _mm256_mul_ps(sum_lanes8(y), _mm256_set1_ps(scale)));
  }
  for (; j < n; ++j) {
    __m512 a = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d += 16) {
      const __mmask16 m = vm::first_lanes16(D - d);
      a = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), load16(K + j * ldk + d, m), a);
    }
    s[j] = scale * _mm512_reduce_add_ps(a);
  }
}

template <typename KT>
RLX_ATTN_AVX512 void row_pv_avx512(const float* p, const KT* V, int64_t ldv, int64_t n, int64_t Dv,
                                   float* acc) {
  for (int64_t c = 0; c < Dv; c += 64) {
    __mmask16 m[4];
    __m512 a[4], b[4];
    for (int i = 0; i < 4; ++i) {
      m[i] = vm::first_lanes16(Dv - c - 16 * i);
      a[i] = _mm512_maskz_loadu_ps(m[i], acc + c + 16 * i);
      b[i] = _mm512_setzero_ps();
    }
    int64_t j = 0;
    for (; j + 2 <= n; j += 2) {
      const __m512 p0 = _mm512_set1_ps(p[j]), p1 = _mm512_set1_ps(p[j + 1]);
      const KT* v0 = V + j * ldv + c;
      for (int i = 0; i < 4; ++i) {
        a[i] = _mm512_fmadd_ps(p0, load16(v0 + 16 * i, m[i]), a[i]);
        b[i] = _mm512_fmadd_ps(p1, load16(v0 + ldv + 16 * i, m[i]), b[i]);
      }
    }
    if (j < n)
      for (int i = 0; i < 4; ++i)
        a[i] = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), load16(V + j * ldv + c + 16 * i, m[i]), a[i]);
    for (int i = 0; i < 4; ++i)
      _mm512_mask_storeu_ps(acc + c + 16 * i, m[i], _mm512_add_ps(a[i], b[i]));
  }
}

template <typename T>
T widen(T x) {
  return x;
}
float widen(uint16_t x) { return f16_to_f32(x); }

// The row kernels for T = float (keys and values f32, or f16: KT = uint16_t),
// a scalar loop otherwise.
template <typename T, typename KT>
void row_scores(const T* q, const KT* K, int64_t ldk, int64_t n, int64_t D, T scale, T* s) {
  if constexpr (std::is_same_v<T, float>) switch (cpu_isa()) {
      case Isa::avx512:
        return row_scores_avx512(q, K, ldk, n, D, scale, s);
      case Isa::avx2:
        return row_scores_avx2(q, K, ldk, n, D, scale, s);
      default:
        break;
    }
  for (int64_t j = 0; j < n; ++j) {
    T sum = 0;
    for (int64_t d = 0; d < D; ++d) sum += q[d] * T(widen(K[j * ldk + d]));
    s[j] = scale * sum;
  }
}

template <typename T, typename KT>
void row_pv(const T* p, const KT* V, int64_t ldv, int64_t n, int64_t Dv, T* acc) {
  if constexpr (std::is_same_v<T, float>) switch (cpu_isa()) {
      case Isa::avx512:
        return row_pv_avx512(p, V, ldv, n, Dv, acc);
      case Isa::avx2:
        return row_pv_avx2(p, V, ldv, n, Dv, acc);
      default:
        break;
    }
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < Dv; ++d) acc[d] += p[j] * T(widen(V[j * ldv + d]));
}

template <typename T>
void attention_t(const KernelCall& c, const AttentionGeometry& g) {
  const T* q = c.in[0].data<T>();
  // An f16 cache (T = float, one query: decoding) is read by the row kernels
  // as it is; attention() widens it first for more queries.
  const bool half_kv = c.in[1].dtype() == DType::F16;
  RLX_CHECK(!half_kv || g.Sq == 1, c.node.label(), ": f16 keys and values need one query here");
  const auto* k = static_cast<const std::byte*>(c.in[1].raw());
  const auto* v = static_cast<const std::byte*>(c.in[2].raw());
  const size_t kv_size = half_kv ? 2 : sizeof(T);
  const AttentionBias<T> bias = attention_bias<T>(c, 3);
  T* out = c.out.data<T>();
  const bool banded = g.banded();
  const int64_t qblock = banded ? kQBlockBanded : kQBlock;
  const int64_t kblock = banded ? kKBlockBanded : kKBlock;
  const int64_t nqb = (g.Sq + qblock - 1) / qblock;
  const int64_t group = g.Hq / g.Hk;
  const T scale = T(g.scale);
  constexpr T kNegInf = -std::numeric_limits<T>::infinity();
  const int64_t work = qblock * g.Sk * (g.D + g.Dv);
  parallel_for(
      g.B * g.Hq * nqb, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, work)),
      [&](int64_t t0, int64_t t1) {
        const auto rows_max = size_t(qblock);
        std::vector<T> m(rows_max), l(rows_max), acc(rows_max * size_t(g.Dv)),
            s(rows_max * size_t(kblock));
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t bh = t / nqb, b = bh / g.Hq, h = bh % g.Hq;
          const int64_t i0 = (t % nqb) * qblock, rows = std::min(qblock, g.Sq - i0);
          const T* Q = q + g.q.at(b, h, i0);
          const std::byte* K = k + size_t(g.k.at(b, h / group, 0)) * kv_size;
          const std::byte* V = v + size_t(g.v.at(b, h / group, 0)) * kv_size;
          std::fill(m.begin(), m.end(), kNegInf);
          std::fill(l.begin(), l.end(), T(0));
          std::fill(acc.begin(), acc.end(), T(0));
          int64_t jlo, jhi;  // keys any row of this block may see
          g.block_keys(i0, rows, jlo, jhi);
          for (int64_t j0 = jlo; j0 < jhi; j0 += kblock) {
            const int64_t j1 = std::min(jhi, j0 + kblock), tn = j1 - j0;
            // The tile's scores for every row at once: S = scale * Q K^T.
            if (rows == 1)
              half_kv ? row_scores(Q, reinterpret_cast<const uint16_t*>(K) + j0 * g.k.row, g.k.row,
                                   tn, g.D, scale, s.data())
                      : row_scores(Q, reinterpret_cast<const T*>(K) + j0 * g.k.row, g.k.row, tn,
                                   g.D, scale, s.data());
            else
              gemm_serial(false, true, rows, tn, g.D, scale, Q, g.q.row,
                          reinterpret_cast<const T*>(K) + j0 * g.k.row, g.k.row, T(0), s.data(),
                          tn);
            for (int64_t r = 0; r < rows; ++r) {
              int64_t lo, hi;
              g.visible(i0 + r, j0, j1, lo, hi);
              T* sr = s.data() + r * tn;
              finish_scores(g, bias, b, h, i0 + r, j0, lo, hi, sr);
              const T mx = lo < hi ? reduce_row_max(sr + (lo - j0), hi - lo) : kNegInf;
              // Keys this row may not see get probability 0 in the P V product below.
              std::fill(sr, sr + std::max<int64_t>(lo - j0, 0), T(0));
              std::fill(sr + std::clamp<int64_t>(hi - j0, 0, tn), sr + tn, T(0));
              if (lo >= hi || mx == kNegInf) {  // every key of this tile is masked for this row
                std::fill(sr, sr + tn, T(0));
                continue;
              }
              const T m_new = std::isnan(mx) ? mx : std::max(m[size_t(r)], mx);
              const T corr = std::exp(m[size_t(r)] - m_new);  // 0 on the first visible tile
              const T lsum = l[size_t(r)] * corr + exp_sum(sr + (lo - j0), hi - lo, m_new);
              if (corr != T(1))
                for (T *a = acc.data() + r * g.Dv, *e = a + g.Dv; a < e; ++a) *a *= corr;
              l[size_t(r)] = lsum;
              m[size_t(r)] = m_new;
            }
            if (rows == 1)
              half_kv ? row_pv(s.data(), reinterpret_cast<const uint16_t*>(V) + j0 * g.v.row,
                               g.v.row, tn, g.Dv, acc.data())
                      : row_pv(s.data(), reinterpret_cast<const T*>(V) + j0 * g.v.row, g.v.row, tn,
                               g.Dv, acc.data());
            else
              gemm_serial(false, false, rows, g.Dv, tn, T(1), s.data(), tn,
                          reinterpret_cast<const T*>(V) + j0 * g.v.row, g.v.row, T(1), acc.data(),
                          g.Dv);
          }
          T* O = out + g.o.at(b, h, i0);
          for (int64_t r = 0; r < rows; ++r) {
            const T inv = l[size_t(r)] > 0 || std::isnan(l[size_t(r)]) ? T(1) / l[size_t(r)] : T(0);
            const bool seen = m[size_t(r)] != kNegInf;
            for (int64_t d = 0; d < g.Dv; ++d)
              O[r * g.o.row + d] = seen ? acc[size_t(r * g.Dv + d)] * inv : T(0);
          }
        }
      });
}

}  // namespace

AttentionGeometry attention_geometry(const KernelCall& c, const Tensor& q, const Tensor& k,
                                     const Tensor& v, const Tensor* bias) {
  const std::string& who = c.node.label();
  RLX_CHECK(q.rank() == 4 && k.rank() == 4 && v.rank() == 4, who,
            ": q, k, v must be [B,H,S,D], got ", q.shape().str(), ", ", k.shape().str(), ", ",
            v.shape().str());
  RLX_CHECK(q.dtype() == DType::F32 || q.dtype() == DType::F64, who,
            ": q must be a float tensor, got ", q.shape().str());
  // f16 keys and values with an f32 q: an f16 KV cache, widened tile by tile.
  const bool kv_ok =
      k.dtype() == v.dtype() &&
      (k.dtype() == q.dtype() || (k.dtype() == DType::F16 && q.dtype() == DType::F32));
  RLX_CHECK(kv_ok, who, ": k and v must have q's dtype (or be f16 with an f32 q), got ",
            q.shape().str(), ", ", k.shape().str(), ", ", v.shape().str());
  const auto& a = c.node.attrs_as<AttentionAttrs>();
  const bool bshd = a.layout == AttentionLayout::bshd;
  const int h_axis = bshd ? 2 : 1, s_axis = bshd ? 1 : 2;
  AttentionGeometry g;
  g.B = q.dim(0);
  g.Hq = q.dim(h_axis);
  g.Hk = k.dim(h_axis);
  g.Sq = q.dim(s_axis);
  g.Sk = k.dim(s_axis);
  g.D = q.dim(3);
  g.Dv = v.dim(3);
  RLX_CHECK(k.dim(0) == g.B && v.dim(0) == g.B && v.dim(h_axis) == g.Hk && v.dim(s_axis) == g.Sk &&
                k.dim(3) == g.D,
            who, ": shapes do not match: q ", q.shape().str(), ", k ", k.shape().str(), ", v ",
            v.shape().str());
  g.q = HeadStrides::of(a.layout, g.Hq, g.Sq, g.D);
  g.k = HeadStrides::of(a.layout, g.Hk, g.Sk, g.D);
  g.v = HeadStrides::of(a.layout, g.Hk, g.Sk, g.Dv);
  g.o = HeadStrides::of(a.layout, g.Hq, g.Sq, g.Dv);
  RLX_CHECK((g.Hk > 0 && g.Hq % g.Hk == 0) || (g.Hk == 0 && g.Hq == 0), who, ": ", g.Hq,
            " query heads are not a multiple of ", g.Hk, " key heads");
  g.mask = a.mask;
  if (g.mask == MaskKind::sliding) {
    g.window = a.window;
    RLX_CHECK(g.window >= 1, who, ": sliding window must be >= 1, got ", g.window);
  }
  RLX_CHECK((g.mask == MaskKind::bias) == (bias != nullptr), who,
            ": mask 'bias' needs exactly a bias input (and only it)");
  if (bias) {
    RLX_CHECK(bias->dtype() == q.dtype() || bias->dtype() == DType::Bool, who, ": bias ",
              bias->shape().str(), " must have q's dtype or be bool");
    const Dims full{g.B, g.Hq, g.Sq, g.Sk};
    bool ok = bias->rank() <= 4;
    for (int d = 0; ok && d < bias->rank(); ++d) {
      const int fd = 4 - bias->rank() + d;
      const int64_t bd = bias->dim(d);
      ok = bd == 1 || bd == full[size_t(fd)];
      if (bd != 1) g.bs[fd] = bias->strides()[size_t(d)];
    }
    RLX_CHECK(ok, who, ": bias ", bias->shape().str(), " does not broadcast to ", dims_str(full));
  }
  g.scale = a.scale.value_or(g.D > 0 ? 1.0 / std::sqrt(double(g.D)) : 1.0);
  g.softcap = a.softcap;
  RLX_CHECK(g.softcap >= 0 && std::isfinite(g.softcap), who, ": softcap must be >= 0, got ",
            g.softcap);
  return g;
}

void attention(const KernelCall& c) {
  const AttentionGeometry g =
      attention_geometry(c, c.in[0], c.in[1], c.in[2], c.in.size() == 4 ? &c.in[3] : nullptr);
  if (c.out.numel() == 0) return;
  if (c.in[1].dtype() == DType::F16 && g.Sq > 1) {
    // The row kernels read f16 for one query; more queries (a prefill) run
    // their tiles through GEMMs on f32, so the cache is widened once first.
    std::vector<Tensor> in(c.in.begin(), c.in.end());
    for (size_t i : {size_t(1), size_t(2)}) {
      Tensor wide = Tensor::uninitialized(in[i].dims(), DType::F32);
      const auto* src = in[i].data<uint16_t>();
      parallel_for(wide.numel(), 16384, [&](int64_t b, int64_t e) {
        f16_to_f32_run(src + b, wide.data<float>() + b, e - b);
      });
      in[i] = std::move(wide);
    }
    return attention_t<float>(KernelCall{c.node, in, c.out, c.ctx, c.outs, c.pack}, g);
  }
  if (c.in[0].dtype() == DType::F32)
    attention_t<float>(c, g);
  else
    attention_t<double>(c, g);
}

}  // namespace rlx::cpu

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
