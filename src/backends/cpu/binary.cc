// Binary arithmetic (add sub mul div max min pow mod fmod) and comparisons
// with NumPy broadcasting. Inputs share a dtype (shape inference checks it).
//
// Semantics, following PyTorch where the dtype allows:
//  - div: rounding none is true division for floats; for integers the output
//    keeps the integer dtype, so none truncates like trunc (PyTorch would
//    promote to float). floor rounds toward -inf. Integer division (and
//    mod/fmod) by zero throws rlx::Error.
//  - mod: Python remainder (result has the divisor's sign); fmod: C fmod.
//  - max/min propagate NaN (torch.maximum/minimum).
//  - integer add/sub/mul/pow wrap around; pow with a negative integer
//    exponent gives 1 / base truncated (0 unless base is +-1), like PyTorch.
//  - bool supports add/max (or) and mul/min (and).
#include <cmath>
#include <type_traits>

#include "backends/cpu/elementwise_span.h"
#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"

namespace rlx::cpu {

bool binary_is_heavy(Op op, const OpAttrs& attrs) {
  return op == Op::Pow || op == Op::Mod || op == Op::Fmod ||
         (op == Op::Div && std::get<DivAttrs>(attrs).rounding == DivRounding::floor);
}

namespace {

// o[i] = f(a[i], b[i]) for i < n, where an operand that does not advance
// (sa / sb false) is read at [0].
template <typename T, typename R, typename F>
void span_loop(const T* a, bool sa, const T* b, bool sb, R* o, int64_t n, F f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const T vb = *b;
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], vb);
  } else if (sb) {
    const T va = *a;
    for (int64_t i = 0; i < n; ++i) o[i] = f(va, b[i]);
  } else {
    const R v = f(*a, *b);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// Calls span(a, sa, b, sb, o, n) (span_loop's arguments) for every run of
// c's broadcast, split across the thread pool.
template <typename T, typename R, typename S>
void for_spans(const KernelCall& c, int64_t grain, S span) {
  const Broadcast<2> bc(c.out.dims(), {&c.in[0].dims(), &c.in[1].dims()}, c.node);
  const T* a = c.in[0].data<T>();
  const T* b = c.in[1].data<T>();
  R* o = c.out.data<R>();
  const bool sa = bc.inner_stride(0) != 0, sb = bc.inner_stride(1) != 0;
  bc.parallel_runs(grain, [&](const std::array<int64_t, 2>& off, int64_t pos, int64_t len) {
    span(a + off[0], sa, b + off[1], sb, o + pos, len);
  });
}

// Runs out[i] = f(a[..], b[..]) over a broadcast.
template <typename T, typename R, typename F>
void run_binary(const KernelCall& c, int64_t grain, F f) {
  for_spans<T, R>(c, grain, [&](const T* a, bool sa, const T* b, bool sb, R* o, int64_t n) {
    span_loop(a, sa, b, sb, o, n, f);
  });
}

// ---- f32 AVX2 paths for the hot arithmetic ops. `s` is the scalar twin of
// `v`, bit-identical, used for the tail of each run.
struct AddOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
  static float s(float a, float b) { return a + b; }
};
struct SubOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
  static float s(float a, float b) { return a - b; }
};
struct MulOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
  static float s(float a, float b) { return a * b; }
};
struct DivOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
  static float s(float a, float b) { return a / b; }
};
// NaN-propagating max/min: the SSE instructions return the second operand
// when either is NaN, so NaN lanes are patched with a + b (a NaN).
struct MaxOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_max_ps(a, b), _mm256_add_ps(a, b),
                            _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  static float s(float a, float b) { return a != a || b != b ? a + b : (a < b ? b : a); }
};
struct MinOp {
  RLX_AVX2_INLINE static __m256 v(__m256 a, __m256 b) {
    return _mm256_blendv_ps(_mm256_min_ps(a, b), _mm256_add_ps(a, b),
                            _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
  }
  static float s(float a, float b) { return a != a || b != b ? a + b : (b < a ? b : a); }
};

template <typename V>
RLX_AVX2 void run_avx2(const float* a, bool sa, const float* b, bool sb, float* o, int64_t n) {
  int64_t i = 0;
  if (sa && sb) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(o + i, V::v(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) o[i] = V::s(a[i], b[i]);
  } else if (sa) {
    const __m256 vb = _mm256_set1_ps(*b);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, V::v(_mm256_loadu_ps(a + i), vb));
    for (; i < n; ++i) o[i] = V::s(a[i], *b);
  } else if (sb) {
    const __m256 va = _mm256_set1_ps(*a);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(o + i, V::v(va, _mm256_loadu_ps(b + i)));
    for (; i < n; ++i) o[i] = V::s(*a, b[i]);
  } else {
    const float v = V::s(*a, *b);
    for (; i < n; ++i) o[i] = v;
  }
}

// ---- floating point
template <typename T>
T div_floor(T a, T b) {  // PyTorch's div_floor_floating: exact via fmod
  if (b == T(0)) return a / b;
  const T mod = std::fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
  if (div == T(0)) return std::copysign(T(0), a / b);
  T fl = std::floor(div);
  if (div - fl > T(0.5)) fl += T(1);
  return fl;
}

template <typename T>
T py_mod(T a, T b) {
  T m = std::fmod(a, b);
  if (m != T(0) && (b < T(0)) != (m < T(0))) m += b;
  return m;
}

// The AVX2 form of an f32 op where the CPU has it; false: use the scalar one.
template <typename V, typename T>
bool try_binary_avx2(const T* a, bool sa, const T* b, bool sb, T* o, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx2_fma()) {
      run_avx2<V>(a, sa, b, sb, o, n);
      return true;
    }
  }
  return false;
}

template <typename T>
void binary_span(Op op, const OpAttrs& attrs, const T* a, bool sa, const T* b, bool sb, T* o,
                 int64_t n) {
  auto loop = [&](auto f) { span_loop(a, sa, b, sb, o, n, f); };
  switch (family_op<BinaryOp>(op)) {
    case BinaryOp::Add:
      if (try_binary_avx2<AddOp>(a, sa, b, sb, o, n)) return;
      return loop([](T a, T b) { return a + b; });
    case BinaryOp::Sub:
      if (try_binary_avx2<SubOp>(a, sa, b, sb, o, n)) return;
      return loop([](T a, T b) { return a - b; });
    case BinaryOp::Mul:
      if (try_binary_avx2<MulOp>(a, sa, b, sb, o, n)) return;
      return loop([](T a, T b) { return a * b; });
    case BinaryOp::Div:
      switch (std::get<DivAttrs>(attrs).rounding) {
        case DivRounding::trunc:
          return loop([](T a, T b) { return std::trunc(a / b); });
        case DivRounding::floor:
          return loop(div_floor<T>);
        case DivRounding::none:
          if (try_binary_avx2<DivOp>(a, sa, b, sb, o, n)) return;
          return loop([](T a, T b) { return a / b; });
      }
      break;
    case BinaryOp::Max:
      if (try_binary_avx2<MaxOp>(a, sa, b, sb, o, n)) return;
      return loop([](T a, T b) { return a != a || b != b ? a + b : std::max(a, b); });
    case BinaryOp::Min:
      if (try_binary_avx2<MinOp>(a, sa, b, sb, o, n)) return;
      return loop([](T a, T b) { return a != a || b != b ? a + b : std::min(a, b); });
    case BinaryOp::Pow:
      return loop([](T a, T b) { return std::pow(a, b); });
    case BinaryOp::Mod:
      return loop(py_mod<T>);
    case BinaryOp::Fmod:
      return loop([](T a, T b) { return std::fmod(a, b); });
  }
}

template <typename T>
void binary_float(const KernelCall& c) {
  for_spans<T, T>(c, binary_is_heavy(c.node.op, c.node.attrs) ? kGrainHeavy : kGrainCheap,
                  [&](const T* a, bool sa, const T* b, bool sb, T* o, int64_t n) {
                    binary_span(c.node.op, c.node.attrs, a, sa, b, sb, o, n);
                  });
}

// ---- integers: wrap-around arithmetic through uint64_t (no signed overflow UB)
template <typename T>
T wrap(uint64_t v) {
  return T(v);  // modular since C++20
}

template <typename T>
T int_pow(T base, T e) {
  if constexpr (std::is_signed_v<T>) {
    if (e < 0) return base == 1 ? T(1) : base == -1 ? T(e % 2 ? -1 : 1) : T(0);
  }
  uint64_t r = 1, b = uint64_t(base);
  for (uint64_t k = uint64_t(e); k; k >>= 1, b *= b)
    if (k & 1) r *= b;
  return wrap<T>(r);
}

template <typename T>
void binary_int(const KernelCall& c) {
  const Node& n = c.node;
  constexpr int64_t g = kGrainCheap;
  const std::string where = n.label() + ": integer division by zero in '" + op_name(n.op) + "'";
  auto check = [&](T b) {
    if (b == T(0)) throw Error(where);
  };
  // a / -1 and a % -1 overflow for the minimum value; both are defined here.
  auto trunc_div = [=](T a, T b) {
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return wrap<T>(uint64_t(0) - uint64_t(a));
    return T(a / b);
  };
  auto trunc_rem = [](T a, T b) {
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return T(0);
    return T(a % b);
  };
  switch (family_op<BinaryOp>(n.op)) {
    case BinaryOp::Add:
      return run_binary<T, T>(c, g, [](T a, T b) { return wrap<T>(uint64_t(a) + uint64_t(b)); });
    case BinaryOp::Sub:
      return run_binary<T, T>(c, g, [](T a, T b) { return wrap<T>(uint64_t(a) - uint64_t(b)); });
    case BinaryOp::Mul:
      return run_binary<T, T>(c, g, [](T a, T b) { return wrap<T>(uint64_t(a) * uint64_t(b)); });
    case BinaryOp::Div:
      switch (n.attrs_as<DivAttrs>().rounding) {
        case DivRounding::floor:
          return run_binary<T, T>(c, g, [=](T a, T b) {
            check(b);
            T q = trunc_div(a, b);
            if (trunc_rem(a, b) != T(0) && ((a < T(0)) != (b < T(0)))) --q;
            return q;
          });
        case DivRounding::none:  // integers keep their dtype: truncates like trunc
        case DivRounding::trunc:
          return run_binary<T, T>(c, g, [=](T a, T b) {
            check(b);
            return trunc_div(a, b);
          });
      }
      break;
    case BinaryOp::Max:
      return run_binary<T, T>(c, g, [](T a, T b) { return std::max(a, b); });
    case BinaryOp::Min:
      return run_binary<T, T>(c, g, [](T a, T b) { return std::min(a, b); });
    case BinaryOp::Pow:
      return run_binary<T, T>(c, g, int_pow<T>);
    case BinaryOp::Mod:
      return run_binary<T, T>(c, g, [=](T a, T b) {
        check(b);
        T r = trunc_rem(a, b);
        if (r != T(0) && ((r < T(0)) != (b < T(0)))) r = T(r + b);
        return r;
      });
    case BinaryOp::Fmod:
      return run_binary<T, T>(c, g, [=](T a, T b) {
        check(b);
        return trunc_rem(a, b);
      });
  }
}

void binary_bool(const KernelCall& c) {
  switch (family_op<BinaryOp>(c.node.op)) {
    case BinaryOp::Add:
    case BinaryOp::Max:
      return run_binary<bool, bool>(c, kGrainCheap, [](bool a, bool b) { return a || b; });
    case BinaryOp::Mul:
    case BinaryOp::Min:
      return run_binary<bool, bool>(c, kGrainCheap, [](bool a, bool b) { return a && b; });
    default:
      break;
  }
  throw make_error(c.node.label(), ": '", op_name(c.node.op), "' does not take bool inputs");
}

void check_inputs(const KernelCall& c) {
  RLX_CHECK(c.in[0].dtype() == c.in[1].dtype(), c.node.label(), ": dtype mismatch ",
            c.in[0].shape().str(), " vs ", c.in[1].shape().str());
}

}  // namespace

void binary_span_f32(Op op, const OpAttrs& attrs, const float* a, bool a_advances, const float* b,
                     bool b_advances, float* o, int64_t n) {
  binary_span<float>(op, attrs, a, a_advances, b, b_advances, o, n);
}

void binary(const KernelCall& c) {
  check_inputs(c);
  visit_compute_dtype(c.in[0].dtype(), c.node, [&]<typename T>() {
    if constexpr (std::is_floating_point_v<T>) {
      binary_float<T>(c);
    } else if constexpr (std::is_same_v<T, bool>) {
      binary_bool(c);
    } else {
      binary_int<T>(c);
    }
  });
}

void compare(const KernelCall& c) {
  check_inputs(c);
  visit_compute_dtype(c.in[0].dtype(), c.node, [&]<typename T>() {
    constexpr int64_t g = kGrainCheap;
    switch (family_op<CompareOp>(c.node.op)) {
      case CompareOp::Eq:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a == b; });
      case CompareOp::Ne:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a != b; });
      case CompareOp::Lt:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a < b; });
      case CompareOp::Le:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a <= b; });
      case CompareOp::Gt:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a > b; });
      case CompareOp::Ge:
        return run_binary<T, bool>(c, g, [](T a, T b) { return a >= b; });
    }
  });
}

}  // namespace rlx::cpu
