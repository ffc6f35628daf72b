// activation_grad(x, dy) kind: dx = dy * f'(x) for every unary float activation of the op table,
// in closed form, reading the activation's own attributes (softplus beta/threshold, elu alpha,
// leaky_relu slope, hard_sigmoid alpha/beta, clamp min/max).
//
// Non-differentiable points follow PyTorch's autograd: relu'(0) = 0, abs'(0) = 0, clamp passes
// the gradient on the closed interval [min, max], hard_sigmoid/hard_swish use its masks. round is
// straight-through (dx = dy, the usual quantization-aware-training choice); floor, ceil and sign
// are piecewise constant and give 0, as in PyTorch.
//
// f32 relu/sigmoid/silu/tanh/gelu run 8 lanes at a time on vmath.h; everything is threaded.
#include <cmath>

#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kSqrtHalf = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;  // 1/sqrt(2 pi)
constexpr double kTwoOverSqrtPi = 1.12837916709551257390;

template <typename T, typename F>
void map2(const KernelCall& c, int64_t grain, F f) {
  const T *x = c.in[0].data<T>(), *dy = c.in[1].data<T>();
  T* dx = c.out.data<T>();
  parallel_for(c.out.numel(), grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dx[i] = dy[i] * f(x[i]);
  });
}

// dx = dy * D(x) on 8 lanes; the tail through masked loads so all elements share one code path.
template <__m256 (*D)(__m256)>
RLX_AVX2 void map2_avx2(const float* x, const float* dy, float* dx, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dy + i), D(_mm256_loadu_ps(x + i))));
  if (i < n) {
    const __m256i mask = vm::first_lanes(n - i);
    _mm256_maskstore_ps(
        dx + i, mask,
        _mm256_mul_ps(_mm256_maskload_ps(dy + i, mask), D(_mm256_maskload_ps(x + i, mask))));
  }
}
template <__m256 (*D)(__m256)>
void map2_f32(const KernelCall& c, int64_t grain) {
  const float *x = c.in[0].data<float>(), *dy = c.in[1].data<float>();
  float* dx = c.out.data<float>();
  parallel_for(c.out.numel(), grain,
               [&](int64_t b, int64_t e) { map2_avx2<D>(x + b, dy + b, dx + b, e - b); });
}

RLX_AVX2 __m256 d_relu8(__m256 x) {
  return _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GT_OQ), _mm256_set1_ps(1.0f));
}
RLX_AVX2 __m256 d_sigmoid8(__m256 x) {
  const __m256 s = vm::sigmoid(x);
  return _mm256_mul_ps(s, _mm256_sub_ps(_mm256_set1_ps(1.0f), s));
}
RLX_AVX2 __m256 d_silu8(__m256 x) {  // s (1 + x (1 - s))
  const __m256 s = vm::sigmoid(x), one = _mm256_set1_ps(1.0f);
  return _mm256_mul_ps(s, _mm256_fmadd_ps(x, _mm256_sub_ps(one, s), one));
}
RLX_AVX2 __m256 d_tanh8(__m256 x) {
  const __m256 t = vm::tanh(x);
  return _mm256_fnmadd_ps(t, t, _mm256_set1_ps(1.0f));
}
RLX_AVX2 __m256 d_gelu8(__m256 x) {  // Phi(x) + x phi(x)
  const __m256 half = _mm256_set1_ps(0.5f);
  const __m256 cdf =
      _mm256_fmadd_ps(half, vm::erf(_mm256_mul_ps(x, _mm256_set1_ps(float(kSqrtHalf)))), half);
  const __m256 pdf =
      _mm256_mul_ps(_mm256_set1_ps(float(kInvSqrt2Pi)),
                    vm::exp(_mm256_mul_ps(_mm256_mul_ps(x, x), _mm256_set1_ps(-0.5f))));
  return _mm256_fmadd_ps(x, pdf, cdf);
}

template <typename T>
T sigmoid(T x) {
  return T(1) / (T(1) + std::exp(-x));
}

// `act` holds the activation's own attributes (activation_attrs): the struct of `kind`'s set.
template <typename T>
void activation_grad_typed(const KernelCall& c, UnaryOp kind, const OpAttrs& act) {
  const bool avx = std::is_same_v<T, float> && has_avx2_fma();
  constexpr int64_t cheap = kGrainCheap, heavy = kGrainHeavy;
  switch (kind) {
    case UnaryOp::Relu:
      if (avx) return map2_f32<d_relu8>(c, cheap);
      return map2<T>(c, cheap, [](T x) { return x > T(0) ? T(1) : T(0); });
    case UnaryOp::Gelu:
      if (avx) return map2_f32<d_gelu8>(c, heavy);
      return map2<T>(c, heavy, [](T x) {
        return T(0.5) * (T(1) + std::erf(x * T(kSqrtHalf))) +
               x * T(kInvSqrt2Pi) * std::exp(T(-0.5) * x * x);
      });
    case UnaryOp::GeluTanh:
      return map2<T>(c, heavy, [](T x) {
        const T k = T(kSqrt2OverPi), c3 = T(0.044715);
        const T t = std::tanh(k * (x + c3 * x * x * x));
        return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c3 * x * x);
      });
    case UnaryOp::Silu:
      if (avx) return map2_f32<d_silu8>(c, heavy);
      return map2<T>(c, heavy, [](T x) {
        const T s = sigmoid(x);
        return s * (T(1) + x * (T(1) - s));
      });
    case UnaryOp::Sigmoid:
      if (avx) return map2_f32<d_sigmoid8>(c, heavy);
      return map2<T>(c, heavy, [](T x) {
        const T s = sigmoid(x);
        return s * (T(1) - s);
      });
    case UnaryOp::Tanh:
      if (avx) return map2_f32<d_tanh8>(c, heavy);
      return map2<T>(c, heavy, [](T x) {
        const T t = std::tanh(x);
        return T(1) - t * t;
      });
    case UnaryOp::Exp:
      return map2<T>(c, heavy, [](T x) { return std::exp(x); });
    case UnaryOp::Log:
      return map2<T>(c, cheap, [](T x) { return T(1) / x; });
    case UnaryOp::Sqrt:
      return map2<T>(c, cheap, [](T x) { return T(0.5) / std::sqrt(x); });
    case UnaryOp::Rsqrt:
      return map2<T>(c, cheap, [](T x) { return T(-0.5) / (x * std::sqrt(x)); });
    case UnaryOp::Neg:
      return map2<T>(c, cheap, [](T) { return T(-1); });
    case UnaryOp::Abs:
    case UnaryOp::Sign:
      if (kind == UnaryOp::Sign) return map2<T>(c, cheap, [](T) { return T(0); });
      return map2<T>(c, cheap, [](T x) { return T((x > T(0)) - (x < T(0))); });
    case UnaryOp::Sin:
      return map2<T>(c, heavy, [](T x) { return std::cos(x); });
    case UnaryOp::Cos:
      return map2<T>(c, heavy, [](T x) { return -std::sin(x); });
    case UnaryOp::Tan:
      return map2<T>(c, heavy, [](T x) {
        const T t = std::tan(x);
        return T(1) + t * t;
      });
    case UnaryOp::Atan:
      return map2<T>(c, cheap, [](T x) { return T(1) / (T(1) + x * x); });
    case UnaryOp::Erf:
      return map2<T>(c, heavy, [](T x) { return T(kTwoOverSqrtPi) * std::exp(-x * x); });
    case UnaryOp::Reciprocal:
      return map2<T>(c, cheap, [](T x) { return T(-1) / (x * x); });
    case UnaryOp::Round:  // straight-through
      return map2<T>(c, cheap, [](T) { return T(1); });
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
      return map2<T>(c, cheap, [](T) { return T(0); });
    case UnaryOp::Softplus: {
      const auto& a = std::get<SoftplusAttrs>(act);
      const T beta = T(a.beta), threshold = T(a.threshold);
      RLX_CHECK(beta != T(0), c.node.label(), ": softplus beta must be non-zero");
      return map2<T>(c, heavy,
                     [=](T x) { return x * beta > threshold ? T(1) : sigmoid(x * beta); });
    }
    case UnaryOp::Elu: {
      const T alpha = T(std::get<EluAttrs>(act).alpha);
      return map2<T>(c, heavy, [=](T x) { return x > T(0) ? T(1) : alpha * std::exp(x); });
    }
    case UnaryOp::LeakyRelu: {
      const T slope = T(std::get<LeakyReluAttrs>(act).slope);
      return map2<T>(c, cheap, [=](T x) { return x > T(0) ? T(1) : slope; });
    }
    case UnaryOp::HardSigmoid: {
      const auto& a = std::get<HardSigmoidAttrs>(act);
      const T alpha = T(a.alpha), beta = T(a.beta);
      return map2<T>(c, cheap, [=](T x) {
        const T v = alpha * x + beta;
        return v > T(0) && v < T(1) ? alpha : T(0);
      });
    }
    case UnaryOp::HardSwish:  // PyTorch: 0 below -3, x/3 + 1/2 on [-3, 3], 1 above
      return map2<T>(c, cheap, [](T x) {
        return x < T(-3) ? T(0) : x <= T(3) ? x / T(3) + T(0.5) : T(1);
      });
    case UnaryOp::Mish:  // tanh(sp) + x sigmoid(x) (1 - tanh(sp)^2), sp = softplus(x)
      return map2<T>(c, heavy, [](T x) {
        const T t = std::tanh(std::log1p(std::exp(x)));
        return t + x * sigmoid(x) * (T(1) - t * t);
      });
    case UnaryOp::Clamp: {
      const auto& a = std::get<ClampAttrs>(act);
      const T lo = T(a.min), hi = T(a.max);
      return map2<T>(c, cheap, [=](T x) { return x >= lo && x <= hi ? T(1) : T(0); });
    }
  }
}

}  // namespace

void activation_grad(const KernelCall& c) {
  const auto& g = c.node.attrs_as<ActivationGradAttrs>();
  const OpAttrs act = activation_attrs(g);  // checks that kind is a unary activation
  const UnaryOp kind = family_op<UnaryOp>(g.kind);
  RLX_CHECK(c.in[0].dims() == c.in[1].dims() && c.out.dims() == c.in[0].dims(), c.node.label(),
            ": x ", dims_str(c.in[0].dims()), " and dy ", dims_str(c.in[1].dims()), " differ");
  if (c.out.numel() == 0) return;
  switch (c.in[0].dtype()) {
    case DType::F32:
      return activation_grad_typed<float>(c, kind, act);
    case DType::F64:
      return activation_grad_typed<double>(c, kind, act);
    default:
      throw make_error(c.node.label(), ": activation_grad needs floating-point x, got ",
                       dtype_name(c.in[0].dtype()));
  }
}

}  // namespace rlx::cpu
