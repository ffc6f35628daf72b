// Scalar activations shared by the unary kernels and the conv/matmul
// epilogues (their AVX2 forms are in vmath.h), so a fused activation gives
// exactly what the separate op gives.
#pragma once
#include <algorithm>
#include <cmath>

namespace rlx::cpu {

// Clamp with NaN passing through (std::min/max would keep a bound instead).
template <typename T>
T clamp_nan(T x, T lo, T hi) {
  if (x != x) return x;
  return std::min(std::max(x, lo), hi);
}
template <typename T>
T relu_ref(T x) {
  return x < T(0) ? T(0) : x;
}
template <typename T>
T sigmoid_ref(T x) {
  return T(1) / (T(1) + std::exp(-x));
}
template <typename T>
T silu_ref(T x) {
  return x * sigmoid_ref(x);
}
template <typename T>
T gelu_ref(T x) {
  return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
}
template <typename T>
T gelu_tanh_ref(T x) {
  return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * (x + T(0.044715) * x * x * x)));
}

// GELU-tanh as ggml's CPU backend computes it (GGML_GELU_FP16): x rounded to
// f16 and looked up in a table of f16 results, exact x for x >= 10 and 0 for
// x <= -10. Used under CpuOptions::ggml_numerics so gemma's FFN rounds like
// llama.cpp's (the table alone moves its logits by ~3e-3).
float gelu_tanh_ggml(float x);

}  // namespace rlx::cpu
