// Graph -> Graph passes. Each returns a new graph (the IR is append-only) and
// keeps names, origins and outputs.
#pragma once
#include <functional>
#include <map>
#include <set>
#include <span>
#include <vector>

#include "rlx/graph.h"

namespace rlx::opt {

// Computes a node's outputs (one per output) from its input values (the
// backend's kernels).
using Evaluator = std::function<std::vector<Tensor>(const Node&, std::span<const Tensor>)>;

// Replaces every non-leaf node whose inputs are all constants by a constant,
// unless the result would exceed `max_bytes`.
Graph fold_constants(const Graph& g, const Evaluator& eval, size_t max_bytes);
// Merges nodes with the same op, inputs and attributes (and small constants
// with equal bytes).
Graph eliminate_common_subexpressions(const Graph& g);
// Algebraic identities (x*1, x+0, transpose/reshape/cast chains, no-op
// reshape/cast/expand/slice). Graph outputs keep their node, name and origin.
Graph simplify_algebra(const Graph& g);
// Replaces symbolic dims by the values the given input dims bind, and
// re-infers every shape. Throws for missing or contradicting input dims.
Graph specialize_shapes(const Graph& g, const std::map<std::string, Dims>& input_dims);
// conv/matmul + bias add + activation (each read only by the next) -> one
// conv/matmul node with the activation (and matmul bias) fused.
Graph fuse_epilogues(const Graph& g);
// conv -> batch_norm with constant weights and statistics -> one conv with
// rescaled weights and a bias.
Graph fold_batchnorm_into_conv(const Graph& g);
// Quantization-aware training: fake_quantize (scale=batch, `bits`, ste clipped) on the weight of
// every matmul (per output column N) and conv (per output channel) whose weight is a param or
// constant, seen through transposes, placed on the param itself so the exporters find it; with
// `activations`, an 8-bit per-tensor one on their first input. Idempotent: an operand that is
// already a fake_quantize output is left alone.
Graph insert_fake_quant(const Graph& g, int bits, bool activations);
// BatchNorm's training-form decomposition (batch mean, biased variance,
// normalize over every axis but 1) -> one batch_norm_train node, whose
// outputs replace the mean, the variance and the normalized value. Run it
// before autodiff, so the backward is one batch_norm_train_grad.
Graph fuse_batch_norm_training(const Graph& g);
// softmax(mask(scale * Q K^T)) V written out as ops -> one attention node
// (fuse_attention.cc); needs the mask folded to a constant.
Graph fuse_attention(const Graph& g);
// Regions of f32 element-wise nodes -> one fused_elementwise node each
// (fuse_elementwise.cc).
Graph fuse_elementwise(const Graph& g);
// Chains of pointwise / depthwise convs (and a stem conv on a few NCHW channels) -> conv_blocked
// nodes on channel-blocked activations, layout moves where values enter or leave a chain
// (blocked_conv.cc).
Graph block_pointwise_depthwise_convs(const Graph& g);
// Drops nodes no output depends on. Inputs stay (they are the signature).
Graph eliminate_dead_code(const Graph& g);
// Recomputes nodes of `ops` right before a use far from the previous one,
// where their inputs are alive anyway (remat.cc); run after CSE.
Graph rematerialize(const Graph& g, const std::set<Op>& ops);

}  // namespace rlx::opt
