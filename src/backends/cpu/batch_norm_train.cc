// batch_norm_train and its gradient over x [N, C, S...]: per channel, the
// batch statistics over N and S as the decomposition they replace computes
// them (the mean, then the mean of squared deviations from it, rounded to the
// element type), in one task per channel. Sums run over 8 independent lanes
// in blocks of 256 elements, each block's total added in double.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

struct BnLayout {
  int64_t N, C, S;
};

BnLayout bn_layout_of(const KernelCall& c) {
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() >= 2, c.node.label(), ": batch_norm_train needs [N,C,...], got ",
            dims_str(x.dims()));
  const int64_t N = x.dim(0), C = x.dim(1);
  return {N, C, N * C == 0 ? 0 : x.numel() / (N * C)};
}

// sum f(i) for i < n, f returning T.
template <typename T, typename F>
double lane_sum(int64_t n, F f) {
  double total = 0;
  for (int64_t b = 0; b < n; b += 256) {
    const int64_t e = std::min(n, b + 256);
    T acc[8] = {};
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int j = 0; j < 8; ++j) acc[j] += f(i + j);
    for (; i < e; ++i) acc[0] += f(i);
    total +=
        double(((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7])));
  }
  return total;
}

template <typename T>
struct Stats {
  T mean, var, rstd;
};

template <typename T>
Stats<T> channel_stats(const T* x, const BnLayout& L, int64_t c, double eps) {
  const double count = double(L.N * L.S);
  double s = 0;
  for (int64_t n = 0; n < L.N; ++n) {
    const T* r = x + (n * L.C + c) * L.S;
    s += lane_sum<T>(L.S, [r](int64_t i) { return r[i]; });
  }
  const T mean = T(s / count);
  double q = 0;
  for (int64_t n = 0; n < L.N; ++n) {
    const T* r = x + (n * L.C + c) * L.S;
    q += lane_sum<T>(L.S, [r, mean](int64_t i) { return (r[i] - mean) * (r[i] - mean); });
  }
  const T var = T(q / count);
  return {mean, var, T(1) / std::sqrt(var + T(eps))};
}

// y = xhat, or xhat * gamma + beta with the affine (gamma and beta, or nulls).
template <typename T>
void forward_channel(const T* x, const BnLayout& L, int64_t ch, double eps, const T* gamma,
                     const T* beta, T* y, T* mean, T* var) {
  const Stats<T> st = channel_stats(x, L, ch, eps);
  mean[ch] = st.mean;
  var[ch] = st.var;
  const T g = gamma ? gamma[ch] : T(1), b = beta ? beta[ch] : T(0);
  for (int64_t n = 0; n < L.N; ++n) {
    const T* xr = x + (n * L.C + ch) * L.S;
    T* yr = y + (n * L.C + ch) * L.S;
    if (gamma)
      for (int64_t i = 0; i < L.S; ++i) yr[i] = (xr[i] - st.mean) * st.rstd * g + b;
    else
      for (int64_t i = 0; i < L.S; ++i) yr[i] = (xr[i] - st.mean) * st.rstd;
  }
}

// Over one channel, with dbeta = sum(g) and dgamma = sum(g * xhat):
// dx = gamma * rstd * (g - dbeta / n - xhat * dgamma / n).
template <typename T>
void backward_channel(const T* x, const T* g, const BnLayout& L, int64_t ch, double eps,
                      const T* gamma, T* dx, T* dgamma, T* dbeta) {
  const double count = double(L.N * L.S);
  const Stats<T> st = channel_stats(x, L, ch, eps);
  double sg = 0, sgx = 0;
  for (int64_t n = 0; n < L.N; ++n) {
    const T *xr = x + (n * L.C + ch) * L.S, *gr = g + (n * L.C + ch) * L.S;
    sg += lane_sum<T>(L.S, [gr](int64_t i) { return gr[i]; });
    sgx += lane_sum<T>(L.S, [&](int64_t i) { return gr[i] * ((xr[i] - st.mean) * st.rstd); });
  }
  dgamma[ch] = T(sgx);
  dbeta[ch] = T(sg);
  const T mg = T(sg / count), mgx = T(sgx / count);
  const T scale = gamma ? gamma[ch] * st.rstd : st.rstd;
  for (int64_t n = 0; n < L.N; ++n) {
    const T *xr = x + (n * L.C + ch) * L.S, *gr = g + (n * L.C + ch) * L.S;
    T* dr = dx + (n * L.C + ch) * L.S;
    for (int64_t i = 0; i < L.S; ++i)
      dr[i] = scale * (gr[i] - mg - (xr[i] - st.mean) * st.rstd * mgx);
  }
}

// The f32 channels compiled whole for AVX2 (flatten inlines the loops above),
// so the 8-lane sums and the element passes run one vector each.
RLX_AVX2 __attribute__((flatten)) void forward_channel_avx2(const float* x, const BnLayout& L,
                                                            int64_t ch, double eps,
                                                            const float* gamma, const float* beta,
                                                            float* y, float* mean, float* var) {
  forward_channel(x, L, ch, eps, gamma, beta, y, mean, var);
}
RLX_AVX2 __attribute__((flatten)) void backward_channel_avx2(const float* x, const float* g,
                                                             const BnLayout& L, int64_t ch,
                                                             double eps, const float* gamma,
                                                             float* dx, float* dgamma,
                                                             float* dbeta) {
  backward_channel(x, g, L, ch, eps, gamma, dx, dgamma, dbeta);
}

template <typename T>
void bn_forward(const KernelCall& c, const BnLayout& L, double eps) {
  const T* x = c.in[0].data<T>();
  const bool affine = c.in.size() == 3;
  const T* gamma = affine ? c.in[1].data<T>() : nullptr;
  const T* beta = affine ? c.in[2].data<T>() : nullptr;
  T *y = c.outs[0].data<T>(), *mean = c.outs[1].data<T>(), *var = c.outs[2].data<T>();
  const bool simd = has_avx2_fma();
  parallel_for(L.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      if constexpr (std::is_same_v<T, float>)
        if (simd) {
          forward_channel_avx2(x, L, ch, eps, gamma, beta, y, mean, var);
          continue;
        }
      forward_channel(x, L, ch, eps, gamma, beta, y, mean, var);
    }
  });
}

template <typename T>
void bn_backward(const KernelCall& c, const BnLayout& L, double eps) {
  const T *x = c.in[0].data<T>(), *g = c.in[1].data<T>();
  const T* gamma = c.in.size() > 2 ? c.in[2].data<T>() : nullptr;
  T *dx = c.outs[0].data<T>(), *dgamma = c.outs[1].data<T>(), *dbeta = c.outs[2].data<T>();
  const bool simd = has_avx2_fma();
  parallel_for(L.C, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      if constexpr (std::is_same_v<T, float>)
        if (simd) {
          backward_channel_avx2(x, g, L, ch, eps, gamma, dx, dgamma, dbeta);
          continue;
        }
      backward_channel(x, g, L, ch, eps, gamma, dx, dgamma, dbeta);
    }
  });
}

}  // namespace

void batch_norm_train(const KernelCall& c) {
  const BnLayout L = bn_layout_of(c);
  const double eps = c.node.attrs_as<EpsAttrs>().eps;
  if (c.in[0].dtype() == DType::F32) return bn_forward<float>(c, L, eps);
  if (c.in[0].dtype() == DType::F64) return bn_forward<double>(c, L, eps);
  throw make_error(c.node.label(), ": batch_norm_train supports f32/f64, not ",
                   dtype_name(c.in[0].dtype()));
}

void batch_norm_train_grad(const KernelCall& c) {
  const BnLayout L = bn_layout_of(c);
  const double eps = c.node.attrs_as<EpsAttrs>().eps;
  if (c.in[0].dtype() == DType::F32) return bn_backward<float>(c, L, eps);
  if (c.in[0].dtype() == DType::F64) return bn_backward<double>(c, L, eps);
  throw make_error(c.node.label(), ": batch_norm_train_grad supports f32/f64, not ",
                   dtype_name(c.in[0].dtype()));
}

}  // namespace rlx::cpu
