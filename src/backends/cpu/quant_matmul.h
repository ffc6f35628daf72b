// The matrix product on ggml-quantized weight rows that dequant_matmul and
// moe_ffn share (paths in dequant_matmul.cc).
#pragma once
#include <cstdint>
#include <memory>

#include "backends/cpu/kernel.h"
#include "quant/row_groups.h"
#include "rlx/quant.h"

namespace rlx::cpu {

// N weight rows of K elements of `type`, `rb` bytes each, at w.
struct QuantRows {
  quant::GgmlType type = quant::GgmlType::F32;
  const uint8_t* w = nullptr;
  size_t rb = 0;
  int64_t N = 0, K = 0;
  // These rows regrouped for the decode GEMV: groups [first_group, first_group
  // + N / 16) of `groups`; null keeps the file's layout.
  const quant::RowGroups* groups = nullptr;
  int64_t first_group = 0;
  std::shared_ptr<Buffer> owner;  // w's buffer, which the dequant cache keeps alive
};

// Activation rows from which the integer GEMM (or dequantize-a-tile + sgemm)
// beats one dot per (activation row, weight row) pair: the repacking or
// dequantization is paid once per tile, while per-pair dots redo the block
// scales M times (measured on q4_K / q6_K, K = N = 4096: ~2x at M = 64).
constexpr int64_t kGemmMinRows = 16;

// y[M, N] = x[M, K] . W^T (+ bias[N]).
void quant_matmul(const Context& ctx, const QuantRows& w, const float* x, int64_t M,
                  const float* bias, float* y);

// The rows of `w` regrouped on first use into `pack`'s slot (null when the
// type or CPU has no group kernel, or regrouping is off).
const quant::RowGroups* regrouped(WeightPack* pack, int slot, quant::GgmlType type,
                                  const uint8_t* w, size_t rb, int64_t N, int64_t K);

// `bytes` of constant weight `w` copied into huge pages on first use (into
// `pack`'s slot); `w` itself when small or without a pack.
const uint8_t* resident_rows(WeightPack* pack, const uint8_t* w, size_t bytes);

}  // namespace rlx::cpu
