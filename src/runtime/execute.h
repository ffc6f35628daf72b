// Runs one node on the CPU backend, including the f16/bf16 -> f32 upcast path
// for kernels that compute in f32 only.
#pragma once
#include <span>

#include "rlx/graph.h"

namespace rlx::runtime {

// `out` is preallocated with the node's concrete dims and dtype.
void execute_node(const Node& n, std::span<const Tensor> in, Tensor& out);
// Allocates the output; used by constant folding.
Tensor evaluate_node(const Node& n, std::span<const Tensor> in, const Dims& out_dims);
// Every op in `g` the CPU backend cannot run, as one message; empty if none.
std::string unsupported_ops(const Graph& g);

}  // namespace rlx::runtime
