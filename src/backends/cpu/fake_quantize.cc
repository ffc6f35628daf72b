// fake_quantize and its straight-through backward fake_quantize_grad (ops.def, "quantization-aware
// training"): y = (clamp(round(x * (1/s)) + z, qmin, qmax) - z) * s, round half to even.
//
// x is seen as [outer, C, inner] around the channel axis (C = 1, inner = numel per tensor), so a
// channel is `outer` contiguous runs of `inner` elements: one run for a weight [N, K] quantized
// per output row, N runs of H*W for NCHW activations per channel. The per-channel reductions
// (max|x| for scale=batch, the lsq scale gradient) run in parallel over channels, or over blocks
// of a per-tensor tensor, and combine partial results in a fixed order, so results do not depend
// on the thread count. The element work runs 8 lanes at a time (AVX2) for f32; the scalar loop
// is the same formula, and is what the AVX2 path is tested against.
//
// x * (1/s) rather than x / s, and the clipping mask on the rounded value, follow PyTorch's
// fake_quantize kernels, so imported models match torch bit for bit in f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/error.h"
#include "rlx/fake_quant.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kBlock = 16384;  // elements per parallel chunk

// The channel layout and per-channel constants of one call.
template <typename T>
struct FqPlan {
  int64_t outer = 1, channels = 1, inner = 1;
  T qmin = 0, qmax = 0;
  std::vector<T> scale, zero;  // per channel (a [1] scale is repeated)
};

template <typename T>
FqPlan<T> plan_of(const KernelCall& c, const Tensor& x, size_t scale_input) {
  const auto& a = c.node.attrs_as<FakeQuantAttrs>();
  const FakeQuantRange r = fake_quant_range(a);
  FqPlan<T> p;
  p.qmin = T(r.qmin);
  p.qmax = T(r.qmax);
  if (a.axis) {
    const int ax = normalize_axis(*a.axis, x.rank());
    for (int i = 0; i < ax; ++i) p.outer *= x.dim(i);
    p.channels = x.dim(ax);
    for (int i = ax + 1; i < x.rank(); ++i) p.inner *= x.dim(i);
  } else {
    p.inner = x.numel();
  }
  p.zero.assign(size_t(p.channels), T(0));
  if (a.scale == FakeQuantScale::input) {
    const Tensor& s = c.in[scale_input];
    RLX_CHECK(s.numel() == 1 || s.numel() == p.channels, c.node.label(), ": scale of ", s.numel(),
              " elements for ", p.channels, " channels");
    p.scale.resize(size_t(p.channels));
    for (int64_t ch = 0; ch < p.channels; ++ch)
      p.scale[size_t(ch)] = T(s.item_as_double(s.numel() == 1 ? 0 : ch));
    if (c.in.size() > scale_input + 1) {
      const Tensor& z = c.in[scale_input + 1];
      RLX_CHECK(z.numel() == s.numel(), c.node.label(), ": zero_point of ", z.numel(),
                " elements for a scale of ", s.numel());
      for (int64_t ch = 0; ch < p.channels; ++ch)
        p.zero[size_t(ch)] = T(z.item_as_double(z.numel() == 1 ? 0 : ch));
    }
  }
  return p;
}

// Per-channel reduction: f(channel, begin, end) over contiguous element ranges of that channel,
// partial results combined with `join` in a fixed order.
template <typename Acc, typename F, typename J>
std::vector<Acc> reduce_channels(int64_t outer, int64_t channels, int64_t inner, Acc init, F f,
                                 J join) {
  std::vector<Acc> out(size_t(channels), init);
  if (channels == 1 && outer == 1) {
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    std::vector<Acc> part(size_t(blocks), init);
    parallel_for(blocks, 1, [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k)
        part[size_t(k)] = f(0, k * kBlock, std::min(inner, (k + 1) * kBlock));
    });
    for (const Acc& v : part) out[0] = join(out[0], v);
    return out;
  }
  const int64_t per_channel = std::max<int64_t>(1, outer * inner);
  parallel_for(channels, std::max<int64_t>(1, kBlock / per_channel), [&](int64_t b, int64_t e) {
    for (int64_t ch = b; ch < e; ++ch) {
      Acc acc = init;
      for (int64_t o = 0; o < outer; ++o) {
        const int64_t base = (o * channels + ch) * inner;
        acc = join(acc, f(ch, base, base + inner));
      }
      out[size_t(ch)] = acc;
    }
  });
  return out;
}

// ---- f32 on 8 lanes

RLX_AVX2 float max_abs_avx2(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  // max_ps returns its second operand when either is NaN: m second, so NaN lanes are skipped.
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)), m);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float r = 0;
  for (float v : lanes) r = v > r ? v : r;
  for (; i < n; ++i) r = std::fabs(x[i]) > r ? std::fabs(x[i]) : r;
  return r;
}

RLX_AVX2_INLINE __m256 fq8(__m256 x, __m256 inv, __m256 s, __m256 z, __m256 lo, __m256 hi) {
  __m256 q = _mm256_round_ps(_mm256_mul_ps(x, inv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  q = _mm256_min_ps(_mm256_max_ps(_mm256_add_ps(q, z), lo), hi);
  return vm::keep_nan(_mm256_mul_ps(_mm256_sub_ps(q, z), s), x);
}

RLX_AVX2 void apply_avx2(const float* x, float* y, int64_t n, float s, float z, float lo,
                         float hi) {
  const __m256 vinv = _mm256_set1_ps(1.0f / s), vs = _mm256_set1_ps(s), vz = _mm256_set1_ps(z);
  const __m256 vlo = _mm256_set1_ps(lo), vhi = _mm256_set1_ps(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, fq8(_mm256_loadu_ps(x + i), vinv, vs, vz, vlo, vhi));
  if (i < n) {
    const __m256i mask = vm::first_lanes(n - i);
    _mm256_maskstore_ps(y + i, mask, fq8(_mm256_maskload_ps(x + i, mask), vinv, vs, vz, vlo, vhi));
  }
}

// ---- any float type, one element at a time (f64, and f32 without AVX2)

template <typename T>
T max_abs_scalar(const T* x, int64_t n) {
  T r = 0;
  for (int64_t i = 0; i < n; ++i) r = std::fabs(x[i]) > r ? std::fabs(x[i]) : r;
  return r;
}

template <typename T>
void apply_scalar(const T* x, T* y, int64_t n, T s, T z, T lo, T hi) {
  const T inv = T(1) / s;
  for (int64_t i = 0; i < n; ++i) {
    const T q = std::min(std::max(std::nearbyint(x[i] * inv) + z, lo), hi);
    y[i] = std::isnan(x[i]) ? x[i] : (q - z) * s;
  }
}

template <typename T>
void floor_scales(std::vector<T>& s) {
  for (T& v : s) v = std::max(v, T(kFakeQuantMinScale));
}

template <typename T>
void fq_forward(const KernelCall& c) {
  const Tensor& xt = c.in[0];
  const T* x = xt.data<T>();
  T* y = c.out.data<T>();
  FqPlan<T> p = plan_of<T>(c, xt, 1);
  const bool avx = std::is_same_v<T, float> && has_avx2_fma();
  if (p.scale.empty()) {  // scale=batch: max|x| per channel / qmax
    p.scale = reduce_channels<T>(
        p.outer, p.channels, p.inner, T(0),
        [&](int64_t, int64_t b, int64_t e) -> T {
          if constexpr (std::is_same_v<T, float>)
            if (avx) return max_abs_avx2(x + b, e - b);
          return max_abs_scalar(x + b, e - b);
        },
        [](T u, T v) { return std::max(u, v); });
    for (T& v : p.scale) v /= p.qmax;
  }
  floor_scales(p.scale);
  parallel_for(xt.numel(), kBlock, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e;) {  // one run (a piece of one channel) at a time
      const int64_t run = i / p.inner, end = std::min(e, (run + 1) * p.inner);
      const size_t ch = size_t(run % p.channels);
      const T s = p.scale[ch], z = p.zero[ch];
      if constexpr (std::is_same_v<T, float>)
        if (avx) {
          apply_avx2(x + i, y + i, end - i, s, z, p.qmin, p.qmax);
          i = end;
          continue;
        }
      apply_scalar(x + i, y + i, end - i, s, z, p.qmin, p.qmax);
      i = end;
    }
  });
}

// ---- backward: dx (identity or clipped) and the lsq scale gradient

template <typename T>
void fq_backward(const KernelCall& c) {
  const auto& a = c.node.attrs_as<FakeQuantAttrs>();
  const Tensor& xt = c.in[0];
  const T *x = xt.data<T>(), *dy = c.in[1].data<T>();
  T* dx = c.outs[0].data<T>();
  Tensor& dscale = c.outs[1];
  FqPlan<T> p = plan_of<T>(c, xt, 2);
  if (p.scale.empty()) {  // scale=batch: the same scale as the forward computed
    p.scale = reduce_channels<T>(
        p.outer, p.channels, p.inner, T(0),
        [&](int64_t, int64_t b, int64_t e) { return max_abs_scalar(x + b, e - b); },
        [](T u, T v) { return std::max(u, v); });
    for (T& v : p.scale) v /= p.qmax;
  }
  floor_scales(p.scale);
  const bool clip = a.ste != FakeQuantSte::identity, lsq = a.ste == FakeQuantSte::lsq;
  // One pass over every element: dx, and (lsq) the per-channel sum of dy * d(y)/d(s) with
  // round() passed straight through: (q - z) - x/s inside the grid, qmin - z / qmax - z outside.
  const std::vector<double> ds = reduce_channels<double>(
      p.outer, p.channels, p.inner, 0.0,
      [&](int64_t ch, int64_t b, int64_t e) {
        const T s = p.scale[size_t(ch)], z = p.zero[size_t(ch)], inv = T(1) / s;
        double acc = 0;
        for (int64_t i = b; i < e; ++i) {
          const T v = x[i] * inv, q = std::nearbyint(v) + z;
          const bool below = q<p.qmin, above = q> p.qmax;
          dx[i] = clip && (below || above) ? T(0) : dy[i];
          if (lsq)
            acc += double(dy[i]) * double(below ? p.qmin - z : above ? p.qmax - z : (q - z) - v);
        }
        return acc;
      },
      [](double u, double v) { return u + v; });
  T* out = dscale.data<T>();
  const int64_t m = dscale.numel();
  for (int64_t k = 0; k < m; ++k) out[k] = T(0);
  if (!lsq) return;
  for (int64_t ch = 0; ch < p.channels; ++ch)
    out[m == 1 ? 0 : ch] += T(ds[size_t(ch)] * a.grad_factor);
}

}  // namespace

void fake_quantize(const KernelCall& c) {
  switch (c.out.dtype()) {
    case DType::F32:
      return fq_forward<float>(c);
    case DType::F64:
      return fq_forward<double>(c);
    default:
      throw make_error(c.node.label(), ": fake_quantize needs f32 or f64, got ",
                       dtype_name(c.out.dtype()));
  }
}

void fake_quantize_grad(const KernelCall& c) {
  switch (c.out.dtype()) {
    case DType::F32:
      return fq_backward<float>(c);
    case DType::F64:
      return fq_backward<double>(c);
    default:
      throw make_error(c.node.label(), ": fake_quantize_grad needs f32 or f64, got ",
                       dtype_name(c.out.dtype()));
  }
}

}  // namespace rlx::cpu
