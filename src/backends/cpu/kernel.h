// The CPU kernel interface. Inputs arrive contiguous; outputs are contiguous
// and preallocated with the planned dims and dtype. Kernels read dtypes from
// the tensors (a f16 graph may run an f32 kernel through the upcast path).
#pragma once
#include <span>

#include "rlx/graph.h"
#include "rlx/tensor.h"

namespace rlx::quant {
class DequantCache;
}

namespace rlx::cpu {

class WeightPack;

// What one CPU backend instance carries into its kernels (its options and
// caches): nothing here is process-wide.
struct Context {
  quant::DequantCache* dequant_cache = nullptr;  // null: no caching
  bool ggml_numerics = false;                    // CpuOptions::ggml_numerics
  bool regroup_weights = true;                   // CpuOptions::regroup_weights
  bool bf16_matmul = false;                      // CpuOptions::matmul_precision is bf16
};

struct KernelCall {
  const Node& node;
  std::span<const Tensor> in;
  Tensor& out;  // outs[0]
  const Context& ctx;
  std::span<Tensor> outs;  // every output: a multi-output node's in result order
  // matmul / conv with a constant weight in a compiled graph: where that
  // weight's packed form is kept (weight_pack.h); null otherwise.
  WeightPack* pack = nullptr;
};

using KernelFn = void (*)(const KernelCall&);

struct KernelEntry {
  KernelFn fn = nullptr;  // nullptr: the CPU backend cannot run this op (a listed gap)
  // True when the kernel handles every dtype itself (movement, indexing,
  // cast); false when f16/bf16 are computed by upcasting to f32.
  bool all_dtypes = false;
  // Inputs (bit i: input i) the kernel reads in f16 itself, never widened
  // first: attention's keys and values, an f16 KV cache read tile by tile.
  uint32_t f16_inputs = 0;
};

KernelEntry kernel_for(Op op);

}  // namespace rlx::cpu
