// Unary element-wise kernels (relu ... clamp). f32 and f64 for every op;
// integer dtypes for the ops PyTorch computes without promoting to float
// (neg abs sign relu clamp round floor ceil). f32 relu/exp/sigmoid/silu/tanh/
// gelu/gelu_tanh have AVX2 paths built on vmath.h, all but relu AVX-512 ones
// on vmath512.h.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/activation.h"
#include "backends/cpu/elementwise_span.h"
#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"
#include "rlx/dtype.h"

namespace rlx::cpu {
namespace {

template <typename T, typename F>
void map_span(const T* x, T* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

}  // namespace

float gelu_tanh_ggml(float x) {
  // ggml_table_gelu_f16: every f16 input, through ggml_gelu_f32's float math.
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (size_t i = 0; i < t.size(); ++i) {
      const float v = f16_to_f32(uint16_t(i));
      t[i] = f32_to_f16(
          0.5f * v *
          (1.0f + std::tanh(0.79788456080286535587989211986876f * v * (1.0f + 0.044715f * v * v))));
    }
    return t;
  }();
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  return f16_to_f32(table[f32_to_f16(x)]);
}

namespace {

// The AVX2 form of an f32 map where the CPU has it; false: use the scalar one.
template <__m256 (*F)(__m256), typename T>
bool try_unary_avx2(const T* x, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx2_fma()) {
      vm::map_avx2<F>(x, y, n);
      return true;
    }
  }
  return false;
}

// The same for an arithmetic-bound map: its AVX-512 form (vmath512.h, the
// same bits as the AVX2 one) where the CPU has it, else try_avx2.
template <__m256 (*F8)(__m256), __m512 (*F16)(__m512), typename T>
bool try_simd(const T* x, T* y, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_isa() >= Isa::avx512) {
      vm16::map<F16>(x, y, n);
      return true;
    }
  }
  return try_unary_avx2<F8>(x, y, n);
}

}  // namespace

bool unary_is_heavy(Op op) {
  switch (family_op<UnaryOp>(op)) {
    case UnaryOp::Gelu:
    case UnaryOp::GeluTanh:
    case UnaryOp::Silu:
    case UnaryOp::Sigmoid:
    case UnaryOp::Tanh:
    case UnaryOp::Exp:
    case UnaryOp::Log:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Tan:
    case UnaryOp::Atan:
    case UnaryOp::Erf:
    case UnaryOp::Softplus:
    case UnaryOp::Elu:
    case UnaryOp::Mish:
      return true;
    default:
      return false;
  }
}

namespace {

// y[i] = op(x[i]) for i < n.
template <typename T>
void unary_span(Op op, const OpAttrs& attrs, bool ggml_numerics, const T* x, T* y, int64_t n) {
  auto map = [&](auto f) { map_span<T>(x, y, n, f); };
  switch (family_op<UnaryOp>(op)) {
    case UnaryOp::Relu:
      if (try_unary_avx2<vm::relu>(x, y, n)) return;
      return map([](T x) { return relu_ref(x); });
    case UnaryOp::Gelu:
      if (try_simd<vm::gelu, vm16::gelu>(x, y, n)) return;
      return map([](T x) { return gelu_ref(x); });
    case UnaryOp::GeluTanh:
      if constexpr (std::is_same_v<T, float>)
        if (ggml_numerics) return map(gelu_tanh_ggml);
      if (try_simd<vm::gelu_tanh, vm16::gelu_tanh>(x, y, n)) return;
      return map([](T x) { return gelu_tanh_ref(x); });
    case UnaryOp::Silu:
      if (try_simd<vm::silu, vm16::silu>(x, y, n)) return;
      return map([](T x) { return silu_ref(x); });
    case UnaryOp::Sigmoid:
      if (try_simd<vm::sigmoid, vm16::sigmoid>(x, y, n)) return;
      return map([](T x) { return sigmoid_ref(x); });
    case UnaryOp::Tanh:
      if (try_simd<vm::tanh, vm16::tanh>(x, y, n)) return;
      return map([](T x) { return std::tanh(x); });
    case UnaryOp::Exp:
      if (try_simd<vm::exp, vm16::exp>(x, y, n)) return;
      return map([](T x) { return std::exp(x); });
    case UnaryOp::Log:
      return map([](T x) { return std::log(x); });
    case UnaryOp::Sqrt:
      return map([](T x) { return std::sqrt(x); });
    case UnaryOp::Rsqrt:
      return map([](T x) { return T(1) / std::sqrt(x); });
    case UnaryOp::Neg:
      return map([](T x) { return -x; });
    case UnaryOp::Abs:
      return map([](T x) { return std::abs(x); });
    case UnaryOp::Sin:
      return map([](T x) { return std::sin(x); });
    case UnaryOp::Cos:
      return map([](T x) { return std::cos(x); });
    case UnaryOp::Tan:
      return map([](T x) { return std::tan(x); });
    case UnaryOp::Atan:
      return map([](T x) { return std::atan(x); });
    case UnaryOp::Erf:
      return map([](T x) { return std::erf(x); });
    case UnaryOp::Reciprocal:
      return map([](T x) { return T(1) / x; });
    // nearbyint rounds half to even in the default rounding mode.
    case UnaryOp::Round:
      return map([](T x) { return std::nearbyint(x); });
    case UnaryOp::Floor:
      return map([](T x) { return std::floor(x); });
    case UnaryOp::Ceil:
      return map([](T x) { return std::ceil(x); });
    // NaN gives 0, like torch.sign.
    case UnaryOp::Sign:
      return map([](T x) { return T((x > T(0)) - (x < T(0))); });
    case UnaryOp::Softplus: {
      const auto& a = std::get<SoftplusAttrs>(attrs);
      const T beta = T(a.beta), threshold = T(a.threshold);
      return map(
          [=](T x) { return x * beta > threshold ? x : std::log1p(std::exp(x * beta)) / beta; });
    }
    case UnaryOp::Elu: {
      const T alpha = T(std::get<EluAttrs>(attrs).alpha);
      return map([=](T x) { return x > T(0) ? x : alpha * std::expm1(x); });
    }
    case UnaryOp::LeakyRelu: {
      const T slope = T(std::get<LeakyReluAttrs>(attrs).slope);
      return map([=](T x) { return x > T(0) ? x : x * slope; });
    }
    case UnaryOp::HardSigmoid: {
      const auto& a = std::get<HardSigmoidAttrs>(attrs);
      const T alpha = T(a.alpha), beta = T(a.beta);
      return map([=](T x) { return clamp_nan(alpha * x + beta, T(0), T(1)); });
    }
    case UnaryOp::HardSwish:
      return map([](T x) { return x * clamp_nan(x + T(3), T(0), T(6)) / T(6); });
    case UnaryOp::Mish:
      return map([](T x) { return x * std::tanh(std::log1p(std::exp(x))); });
    case UnaryOp::Clamp: {
      const auto& a = std::get<ClampAttrs>(attrs);
      const T lo = T(a.min), hi = T(a.max);
      return map([=](T x) { return clamp_nan(x, lo, hi); });
    }
  }
}

template <typename T>
void unary_float(const KernelCall& c) {
  const Node& n = c.node;
  if (n.op == Op::Softplus)
    RLX_CHECK(n.attrs_as<SoftplusAttrs>().beta != 0, n.label(), ": softplus beta must be non-zero");
  const T* x = c.in[0].data<T>();
  T* y = c.out.data<T>();
  const int64_t grain = unary_is_heavy(n.op) ? kGrainHeavy : kGrainCheap;
  parallel_for(c.out.numel(), grain, [&](int64_t b, int64_t e) {
    unary_span<T>(n.op, n.attrs, c.ctx.ggml_numerics, x + b, y + b, e - b);
  });
}

// An integral double to T, saturating at the ends of T's range (a plain
// conversion of an out-of-range value is UB).
template <typename T>
T saturate(double v) {
  if (v <= double(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
  // max() of i64 rounds up to 2^63 as a double, so compare with >=.
  if (v >= double(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
  return T(v);
}

// Integer ops wrap on overflow like PyTorch (neg/abs of the minimum value
// give the minimum value); arithmetic goes through uint64_t to avoid UB.
template <typename T, typename F>
void map(const KernelCall& c, int64_t grain, F f) {
  const T* x = c.in[0].data<T>();
  T* y = c.out.data<T>();
  parallel_for(c.out.numel(), grain,
               [&](int64_t b, int64_t e) { map_span(x + b, y + b, e - b, f); });
}

template <typename T>
void unary_int(const KernelCall& c) {
  const Node& n = c.node;
  constexpr int64_t g = kGrainCheap;
  constexpr bool is_signed = std::is_signed_v<T>;
  switch (family_op<UnaryOp>(n.op)) {
    case UnaryOp::Neg:
      return map<T>(c, g, [](T x) { return T(uint64_t(0) - uint64_t(x)); });
    case UnaryOp::Abs:
      return map<T>(c, g, [](T x) { return x < T(0) ? T(uint64_t(0) - uint64_t(x)) : x; });
    case UnaryOp::Sign:
      return map<T>(c, g, [](T x) {
        if constexpr (is_signed) return T((x > T(0)) - (x < T(0)));
        return T(x != T(0));
      });
    case UnaryOp::Relu:
      return map<T>(c, g, [](T x) { return x < T(0) ? T(0) : x; });
    case UnaryOp::Round:
    case UnaryOp::Floor:
    case UnaryOp::Ceil:
      return map<T>(c, g, [](T x) { return x; });
    case UnaryOp::Clamp: {
      // Float bounds become the tightest integer bounds inside the type's
      // range (PyTorch would promote to float; the dtype here is fixed).
      const auto& a = n.attrs_as<ClampAttrs>();
      const double lo_f = a.min, hi_f = a.max;
      RLX_CHECK(!std::isnan(lo_f) && !std::isnan(hi_f), n.label(), ": clamp bound is NaN");
      const T lo = saturate<T>(std::ceil(lo_f)), hi = saturate<T>(std::floor(hi_f));
      return map<T>(c, g, [=](T x) { return std::min(std::max(x, lo), hi); });
    }
    default:
      break;
  }
  throw make_error(n.label(), ": '", op_name(n.op), "' needs a floating-point input, got ",
                   dtype_name(c.in[0].dtype()));
}

}  // namespace

void unary_span_f32(Op op, const OpAttrs& attrs, bool ggml_numerics, const float* x, float* y,
                    int64_t n) {
  unary_span<float>(op, attrs, ggml_numerics, x, y, n);
}

void unary(const KernelCall& c) {
  const DType t = c.in[0].dtype();
  RLX_CHECK(c.out.dtype() == t && c.out.numel() == c.in[0].numel(), c.node.label(), ": output ",
            c.out.shape().str(), " does not match input ", c.in[0].shape().str());
  if (c.out.numel() == 0) return;
  visit_compute_dtype(t, c.node, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T>) {
      unary_float<T>(c);
    } else if constexpr (std::is_same_v<T, bool>) {
      throw make_error(c.node.label(), ": '", op_name(c.node.op), "' does not take bool input");
    } else {
      unary_int<T>(c);
    }
  });
}

}  // namespace rlx::cpu
