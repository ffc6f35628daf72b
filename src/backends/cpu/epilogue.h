// The work fused after a conv or matmul (the epilogue pass): add a bias and
// apply an activation to a block of the output right after it is computed,
// while it is still in cache, instead of two more passes over memory.
#pragma once
#include <cstdint>
#include <limits>
#include <optional>

#include "rlx/op_attrs.h"

namespace rlx::cpu {

template <typename T>
struct GemmEpilogue {
  Epilogue act = Epilogue::none;
  const T* bias = nullptr;    // null: no bias
  bool bias_per_row = false;  // conv: one value per output channel (row); matmul: per column
  // Added after the bias, before the activation (a conv's fused residual):
  // element (i, j) of the whole output is residual[i * residual_ld + j].
  const T* residual = nullptr;
  int64_t residual_ld = 0;
  bool active() const { return act != Epilogue::none || bias || residual; }
};

// relu and relu6 as min(top, max(0, x)), the form the kernels apply in
// registers as they store (x second in max / min, so NaN comes through as in
// vmath.h's relu): the top bound, or nullopt for the other activations.
inline std::optional<float> clamp_top(Epilogue act) {
  if (act == Epilogue::relu) return std::numeric_limits<float>::infinity();
  if (act == Epilogue::relu6) return 6.f;
  return std::nullopt;
}

// C[i][j] = act(C[i][j] + bias (+ residual)) for a rows x cols block at `C`
// (leading dim ldc) that starts at (row0, col0) of the whole output, which
// indexes bias and residual.
void apply_epilogue(const GemmEpilogue<float>& e, float* C, int64_t ldc, int64_t rows, int64_t cols,
                    int64_t row0, int64_t col0);
void apply_epilogue(const GemmEpilogue<double>& e, double* C, int64_t ldc, int64_t rows,
                    int64_t cols, int64_t row0, int64_t col0);

}  // namespace rlx::cpu
