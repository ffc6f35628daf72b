// Backward kernels of the normalizations: rms_norm_grad, layer_norm_grad, group_norm_grad.
//
// Every op is "rows of `inner` elements": layer/rms rows are the trailing `naxes` dims; a
// group_norm row is one (n, group) block of (C/G)*S elements whose gamma is constant over runs of
// S. Per row one pass accumulates, in double, with d = x - mean (mean = 0 for rms) and sy = dy*g:
//   s1 = sum(sy), s2 = sum(sy * d), s3 = sum(d^2)
// and then, with inv = rsqrt(s3/n + eps) (s3/n is the variance, or mean(x^2) for rms),
//   dx = inv*(sy - mean(sy) - x_hat*mean(sy*x_hat))  = p*sy + q*d + r
// with p = inv, q = -inv^3 * s2/n, r = -inv*s1/n (r = 0 for rms). dgamma/dbeta sum dy*x_hat and
// dy over the rows, one parameter element per task, reusing the rows' statistics of the dx pass:
// one call computes every output (dx, dgamma[, dbeta]).
#include <immintrin.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kNormGradGrain = 16384;

struct Sums {
  double s1 = 0, s2 = 0, s3 = 0;
};

// Sums over one run of n elements whose gamma is g[i] (g != null) or the scalar gs.
template <typename T>
Sums run_sums_scalar(const T* x, const T* dy, const T* g, double gs, int64_t n, double mean) {
  Sums s;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(x[i]) - mean, sy = double(dy[i]) * (g ? double(g[i]) : gs);
    s.s1 += sy;
    s.s2 += sy * d;
    s.s3 += d * d;
  }
  return s;
}

RLX_AVX2 double hsum(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// f32 inputs widened to double lanes, 4 at a time.
RLX_AVX2 Sums run_sums_avx2(const float* x, const float* dy, const float* g, double gs, int64_t n,
                            double mean) {
  __m256d a1 = _mm256_setzero_pd(), a2 = a1, a3 = a1;
  const __m256d vm = _mm256_set1_pd(mean), vg = _mm256_set1_pd(gs);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d d = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), vm);
    __m256d sy = _mm256_cvtps_pd(_mm_loadu_ps(dy + i));
    sy = _mm256_mul_pd(sy, g ? _mm256_cvtps_pd(_mm_loadu_ps(g + i)) : vg);
    a1 = _mm256_add_pd(a1, sy);
    a2 = _mm256_fmadd_pd(sy, d, a2);
    a3 = _mm256_fmadd_pd(d, d, a3);
  }
  Sums t = run_sums_scalar(x + i, dy + i, g ? g + i : nullptr, gs, n - i, mean);
  return {hsum(a1) + t.s1, hsum(a2) + t.s2, hsum(a3) + t.s3};
}

template <typename T>
Sums run_sums(const T* x, const T* dy, const T* g, double gs, int64_t n, double mean) {
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return run_sums_avx2(x, dy, g, gs, n, mean);
  return run_sums_scalar(x, dy, g, gs, n, mean);
}

template <typename T>
double run_sum(const T* x, int64_t n) {
  double s = 0;
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) {
      // Sums of x alone: reuse the fused pass with dy = x, gamma = 1 (s1 = sum x).
      return run_sums_avx2(x, x, nullptr, 1.0, n, 0.0).s1;
    }
  for (int64_t i = 0; i < n; ++i) s += double(x[i]);
  return s;
}

// dx = p*dy*g + q*(x - mean) + r over one run (g null: the scalar gs).
template <typename T>
[[gnu::always_inline]] inline void dx_body(const T* x, const T* dy, const T* g, T gs, T* dx,
                                           int64_t n, T mean_hi, T mean_lo, T p, T q, T r) {
  if (g)
    for (int64_t i = 0; i < n; ++i) dx[i] = p * dy[i] * g[i] + q * ((x[i] - mean_hi) - mean_lo) + r;
  else
    for (int64_t i = 0; i < n; ++i) dx[i] = (p * gs) * dy[i] + q * ((x[i] - mean_hi) - mean_lo) + r;
}
RLX_AVX2 void dx_avx2(const float* x, const float* dy, const float* g, float gs, float* dx,
                      int64_t n, float mh, float ml, float p, float q, float r) {
  dx_body(x, dy, g, gs, dx, n, mh, ml, p, q, r);
}
template <typename T>
void dx_run(const T* x, const T* dy, const T* g, T gs, T* dx, int64_t n, double mean, double p,
            double q, double r) {
  // mean as hi + lo: x - hi is exact near the mean, so centering keeps double accuracy.
  const T mh = T(mean), ml = T(mean - double(mh));
  if constexpr (std::is_same_v<T, float>)
    if (has_avx2_fma()) return dx_avx2(x, dy, g, gs, dx, n, mh, ml, T(p), T(q), T(r));
  dx_body(x, dy, g, gs, dx, n, mh, ml, T(p), T(q), T(r));
}

struct NormGradLayout {
  int64_t rows = 0, inner = 0;  // rows of `inner` elements
  int64_t runs = 1, run = 0;    // each row: `runs` runs of `run` elements (group_norm: C/G x S)
  int64_t C = 0, G = 1, N = 0;  // group_norm only
  bool grouped = false, rms = false;
  double eps = 0;  // the op's attributes, read from either set
};

NormGradLayout norm_grad_layout_of(const KernelCall& c) {
  const Node& n = c.node;
  const Tensor& x = c.in[0];
  RLX_CHECK(c.in[1].dims() == x.dims(), n.label(), ": dy ", dims_str(c.in[1].dims()),
            " does not match x ", dims_str(x.dims()));
  NormGradLayout L;
  L.rms = n.op == Op::RmsNormGrad;
  if (n.op == Op::GroupNormGrad) {
    RLX_CHECK(x.rank() >= 2, n.label(), ": x must be [N,C,...], got ", dims_str(x.dims()));
    L.grouped = true;
    L.N = x.dim(0);
    L.C = x.dim(1);
    const auto& a = n.attrs_as<GroupNormGradAttrs>();
    L.G = a.groups;
    L.eps = a.eps;
    RLX_CHECK(L.G >= 1 && L.C % L.G == 0, n.label(), ": groups=", L.G, " does not divide ", L.C,
              " channels");
    L.run = L.C ? x.numel() / std::max<int64_t>(1, L.N * L.C) : 0;
    L.runs = L.C / L.G;
    L.rows = L.N * L.G;
    L.inner = L.runs * L.run;
  } else {
    const auto& a = n.attrs_as<NormGradAttrs>();
    const int64_t naxes = a.naxes;
    L.eps = a.eps;
    RLX_CHECK(naxes >= 1 && naxes <= x.rank(), n.label(), ": naxes=", naxes, " out of range");
    L.inner = 1;
    for (int i = x.rank() - int(naxes); i < x.rank(); ++i) L.inner *= x.dim(i);
    L.rows = L.inner ? x.numel() / L.inner : 0;
    L.run = L.inner;
  }
  if (c.in.size() > 2) {
    const int64_t want = L.grouped ? L.C : L.inner;
    RLX_CHECK(c.in[2].numel() == want, n.label(), ": gamma ", dims_str(c.in[2].dims()),
              " does not match x ", dims_str(x.dims()));
  }
  return L;
}

struct RowStats {
  double mean, inv;
};

template <typename T>
void norm_grad_typed(const KernelCall& c, const NormGradLayout& L) {
  const double eps = L.eps;
  const T *x = c.in[0].data<T>(), *dy = c.in[1].data<T>();
  const T* g = c.in.size() > 2 ? c.in[2].data<T>() : nullptr;
  T* dx = c.outs[0].data<T>();
  T* dgamma = c.outs[1].data<T>();
  T* dbeta = c.outs.size() > 2 ? c.outs[2].data<T>() : nullptr;
  const int64_t row_grain = std::max<int64_t>(1, kNormGradGrain / std::max<int64_t>(1, L.inner));
  // gamma of run k of row r (group_norm: one channel per run) or the row-indexed pointer.
  auto run_gamma = [&](int64_t row, int64_t k, const T** gp, T* gs) {
    *gp = nullptr;
    *gs = T(1);
    if (!g) return;
    if (L.grouped)
      *gs = g[(row % L.G) * L.runs + k];
    else
      *gp = g;
  };
  std::vector<RowStats> stats(size_t(L.rows));
  const double inv_n = L.inner ? 1.0 / double(L.inner) : 0.0;

  // dx, keeping each row's statistics for the parameter gradients.
  parallel_for(L.rows, row_grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const T *xr = x + r * L.inner, *dr = dy + r * L.inner;
      const double mean = L.rms ? 0.0 : run_sum(xr, L.inner) * inv_n;
      Sums s;
      for (int64_t k = 0; k < L.runs; ++k) {
        const T* gp;
        T gs;
        run_gamma(r, k, &gp, &gs);
        Sums t = run_sums(xr + k * L.run, dr + k * L.run, gp, double(gs), L.run, mean);
        s.s1 += t.s1;
        s.s2 += t.s2;
        s.s3 += t.s3;
      }
      const double inv = 1.0 / std::sqrt(s.s3 * inv_n + eps);
      stats[size_t(r)] = {mean, inv};
      const double p = inv, q = -inv * inv * inv * s.s2 * inv_n,
                   rr = L.rms ? 0.0 : -inv * s.s1 * inv_n;
      for (int64_t k = 0; k < L.runs; ++k) {
        const T* gp;
        T gs;
        run_gamma(r, k, &gp, &gs);
        const int64_t o = r * L.inner + k * L.run;
        dx_run(x + o, dy + o, gp, gs, dx + o, L.run, mean, p, q, rr);
      }
    }
  });

  // dgamma = sum(dy * x_hat), dbeta = sum(dy) over the rows.
  if (L.grouped) {
    // channel ch: runs (n, ch) of S elements, statistics of row (n, ch / (C/G)).
    const int64_t grain = std::max<int64_t>(1, kNormGradGrain / std::max<int64_t>(1, L.N * L.run));
    parallel_for(L.C, grain, [&](int64_t b, int64_t e) {
      for (int64_t ch = b; ch < e; ++ch) {
        double acc_g = 0, acc_b = 0;
        for (int64_t bn = 0; bn < L.N; ++bn) {
          const RowStats& st = stats[size_t(bn * L.G + ch / L.runs)];
          const int64_t o = (bn * L.C + ch) * L.run;
          Sums t = run_sums(x + o, dy + o, static_cast<const T*>(nullptr), 1.0, L.run, st.mean);
          acc_g += t.s2 * st.inv;
          acc_b += t.s1;
        }
        dgamma[ch] = T(acc_g);
        if (dbeta) dbeta[ch] = T(acc_b);
      }
    });
    return;
  }
  // layer/rms: column chunks, rows streamed through each chunk's accumulators.
  const int64_t grain = std::max<int64_t>(1, kNormGradGrain / std::max<int64_t>(1, L.rows));
  parallel_for(L.inner, grain, [&](int64_t b, int64_t e) {
    std::vector<double> acc_g(size_t(e - b), 0.0), acc_b(size_t(e - b), 0.0);
    for (int64_t r = 0; r < L.rows; ++r) {
      const T *xr = x + r * L.inner, *dr = dy + r * L.inner;
      const double mean = stats[size_t(r)].mean, inv = stats[size_t(r)].inv;
      for (int64_t i = b; i < e; ++i) {
        acc_g[size_t(i - b)] += double(dr[i]) * (double(xr[i]) - mean) * inv;
        acc_b[size_t(i - b)] += double(dr[i]);
      }
    }
    for (int64_t i = b; i < e; ++i) {
      dgamma[i] = T(acc_g[size_t(i - b)]);
      if (dbeta) dbeta[i] = T(acc_b[size_t(i - b)]);
    }
  });
}

void norm_grad(const KernelCall& c) {
  const NormGradLayout L = norm_grad_layout_of(c);
  RLX_CHECK(c.outs.size() == (c.node.op == Op::RmsNormGrad ? 2u : 3u), c.node.label(), ": wants ",
            c.node.op == Op::RmsNormGrad ? 2 : 3, " output buffers, got ", c.outs.size());
  if (c.in[0].numel() == 0) {  // empty x: zero parameter gradients
    for (Tensor& t : c.outs) std::memset(t.raw(), 0, t.nbytes());
    return;
  }
  switch (c.in[0].dtype()) {
    case DType::F32:
      return norm_grad_typed<float>(c, L);
    case DType::F64:
      return norm_grad_typed<double>(c, L);
    default:
      throw make_error(c.node.label(), ": needs a floating-point x, got ",
                       dtype_name(c.in[0].dtype()));
  }
}

}  // namespace

void rms_norm_grad(const KernelCall& c) { norm_grad(c); }
void layer_norm_grad(const KernelCall& c) { norm_grad(c); }
void group_norm_grad(const KernelCall& c) { norm_grad(c); }

}  // namespace rlx::cpu
