#include "backends/cpu/epilogue.h"

#include <type_traits>

#include "backends/cpu/activation.h"
#include "backends/cpu/vmath.h"
#include "backends/cpu/vmath512.h"
#include "rlx/cpu_isa.h"

namespace rlx::cpu {
namespace {

template <typename T>
T epilogue_activate(Epilogue act, T x) {
  switch (act) {
    case Epilogue::none:
      return x;
    case Epilogue::relu:
      return relu_ref(x);
    case Epilogue::relu6:
      return clamp_nan(x, T(0), T(6));
    case Epilogue::gelu:
      return gelu_ref(x);
    case Epilogue::gelu_tanh:
      return gelu_tanh_ref(x);
    case Epilogue::silu:
      return silu_ref(x);
    case Epilogue::sigmoid:
      return sigmoid_ref(x);
    case Epilogue::tanh:
      return std::tanh(x);
    case Epilogue::hard_swish:  // as the hard_swish kernel: the same rounding
      return x * clamp_nan(x + T(3), T(0), T(6)) / T(6);
  }
  return x;
}

template <typename T>
void row_scalar(Epilogue act, T* y, int64_t n, const T* col_bias, const T* row_bias, const T* res) {
  for (int64_t j = 0; j < n; ++j) {
    T v = y[j];
    if (row_bias) v += *row_bias;
    if (col_bias) v += col_bias[j];
    if (res) v += res[j];
    y[j] = epilogue_activate(act, v);
  }
}

RLX_AVX2_INLINE __m256 relu6(__m256 x) {
  // NaN lanes pass through both (the second operand is returned for NaN).
  return _mm256_min_ps(_mm256_set1_ps(6.0f), _mm256_max_ps(_mm256_setzero_ps(), x));
}
RLX_AVX2_INLINE __m256 identity_lanes(__m256 x) { return x; }
RLX_AVX2_INLINE __m256 hard_swish(__m256 x) {
  const __m256 c = relu6(_mm256_add_ps(x, _mm256_set1_ps(3.0f)));
  return _mm256_div_ps(_mm256_mul_ps(x, c), _mm256_set1_ps(6.0f));
}

// Where a row's bias comes from: nowhere (no add, so -0.0 stays -0.0 as in
// the separate activation), one value per row, or one per column.
enum class Bias { none, row, column };

// One row: y[j] = F(y[j] + b (+ res[j])), in that order, as the unfused ops round.
template <__m256 (*F)(__m256), Bias B>
RLX_AVX2 void row_avx2(float* y, int64_t n, const float* col_bias, float row_bias,
                       const float* res) {
  const __m256 rb = _mm256_set1_ps(row_bias);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    __m256 v = _mm256_loadu_ps(y + j);
    if constexpr (B == Bias::row) v = _mm256_add_ps(v, rb);
    if constexpr (B == Bias::column) v = _mm256_add_ps(v, _mm256_loadu_ps(col_bias + j));
    if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + j));
    _mm256_storeu_ps(y + j, F(v));
  }
  if (j < n) {
    const __m256i mask = vm::first_lanes(n - j);
    __m256 v = _mm256_maskload_ps(y + j, mask);
    if constexpr (B == Bias::row) v = _mm256_add_ps(v, rb);
    if constexpr (B == Bias::column) v = _mm256_add_ps(v, _mm256_maskload_ps(col_bias + j, mask));
    if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + j, mask));
    _mm256_maskstore_ps(y + j, mask, F(v));
  }
}

using RowFn = void (*)(float*, int64_t, const float*, float, const float*);
template <__m256 (*F)(__m256)>
RowFn with_bias(Bias b) {
  switch (b) {
    case Bias::none:
      return row_avx2<F, Bias::none>;
    case Bias::row:
      return row_avx2<F, Bias::row>;
    case Bias::column:
      return row_avx2<F, Bias::column>;
  }
  return row_avx2<F, Bias::none>;
}
RowFn avx2_row(Epilogue act, Bias b) {
  switch (act) {
    case Epilogue::none:
      return with_bias<identity_lanes>(b);
    case Epilogue::relu:
      return with_bias<vm::relu>(b);
    case Epilogue::relu6:
      return with_bias<relu6>(b);
    case Epilogue::gelu:
      return with_bias<vm::gelu>(b);
    case Epilogue::gelu_tanh:
      return with_bias<vm::gelu_tanh>(b);
    case Epilogue::silu:
      return with_bias<vm::silu>(b);
    case Epilogue::sigmoid:
      return with_bias<vm::sigmoid>(b);
    case Epilogue::tanh:
      return with_bias<vm::tanh>(b);
    case Epilogue::hard_swish:
      return with_bias<hard_swish>(b);
  }
  return with_bias<identity_lanes>(b);
}

// row_avx2 on 16 lanes, for the activations bound by their arithmetic
// (vmath512.h gives the same bits as vmath.h).
template <__m512 (*F)(__m512), Bias B>
RLX_AVX512_MATH void row_avx512(float* y, int64_t n, const float* col_bias, float row_bias,
                                const float* res) {
  const __m512 rb = _mm512_set1_ps(row_bias);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 m = vm::first_lanes16(n - j);
    __m512 v = _mm512_maskz_loadu_ps(m, y + j);
    if constexpr (B == Bias::row) v = _mm512_add_ps(v, rb);
    if constexpr (B == Bias::column) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, col_bias + j));
    if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, res + j));
    _mm512_mask_storeu_ps(y + j, m, F(v));
  }
}

template <__m512 (*F)(__m512)>
RowFn with_bias16(Bias b) {
  switch (b) {
    case Bias::none:
      return row_avx512<F, Bias::none>;
    case Bias::row:
      return row_avx512<F, Bias::row>;
    case Bias::column:
      return row_avx512<F, Bias::column>;
  }
  return row_avx512<F, Bias::none>;
}
// Null for the cheap activations, which the AVX2 rows keep up with memory on.
RowFn avx512_row(Epilogue act, Bias b) {
  switch (act) {
    case Epilogue::gelu:
      return with_bias16<vm16::gelu>(b);
    case Epilogue::gelu_tanh:
      return with_bias16<vm16::gelu_tanh>(b);
    case Epilogue::silu:
      return with_bias16<vm16::silu>(b);
    case Epilogue::sigmoid:
      return with_bias16<vm16::sigmoid>(b);
    case Epilogue::tanh:
      return with_bias16<vm16::tanh>(b);
    default:
      return nullptr;
  }
}

template <typename T>
void epilogue_block(const GemmEpilogue<T>& e, T* C, int64_t ldc, int64_t rows, int64_t cols,
                    int64_t row0, int64_t col0) {
  if (!e.active()) return;
  const Bias b = !e.bias ? Bias::none : e.bias_per_row ? Bias::row : Bias::column;
  // Chosen once per block: the sgemm driver calls this on narrow blocks
  // (a few panels of a 1x1 conv), where a choice per row cost ~5 ns a row.
  // The unary kernels take the same paths, so fused and separate ops agree.
  RowFn vector_row = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_isa() >= Isa::avx512) vector_row = avx512_row(e.act, b);
    if (!vector_row && has_avx2_fma()) vector_row = avx2_row(e.act, b);
  }
  for (int64_t i = 0; i < rows; ++i) {
    T* y = C + i * ldc;
    const T* rb = b == Bias::row ? e.bias + row0 + i : nullptr;
    const T* cb = b == Bias::column ? e.bias + col0 : nullptr;
    const T* res = e.residual ? e.residual + (row0 + i) * e.residual_ld + col0 : nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (vector_row) {
        vector_row(y, cols, cb, rb ? *rb : 0.0f, res);
        continue;
      }
    row_scalar(e.act, y, cols, cb, rb, res);
  }
}

}  // namespace

void apply_epilogue(const GemmEpilogue<float>& e, float* C, int64_t ldc, int64_t rows, int64_t cols,
                    int64_t row0, int64_t col0) {
  epilogue_block(e, C, ldc, rows, cols, row0, col0);
}
void apply_epilogue(const GemmEpilogue<double>& e, double* C, int64_t ldc, int64_t rows,
                    int64_t cols, int64_t row0, int64_t col0) {
  epilogue_block(e, C, ldc, rows, cols, row0, col0);
}

}  // namespace rlx::cpu
