// Backward ops spelt as primitive ops, for a backend that has no kernel of its
// own for them (the CoreML lowering builds these on the node's inputs).
#pragma once
#include <vector>

#include "opt/autodiff/emit.h"

namespace rlx::opt::ad {

// max_pool2d_grad(x, dy) from pad, a grouped one-hot conv that extracts every
// window's taps, compares with max_pool2d, an exclusive cumsum that keeps the
// first maximum, and a conv_transpose that puts the taps back. A window whose
// maximum is NaN passes no gradient here (the CPU kernel gives it to the NaN).
NodeId max_pool_grad_primitives(Emit& e, NodeId x, NodeId dy, MaxPoolAttrs a);

// batch_norm_train(x[, gamma, beta]) as (y, mean, var): reduce_mean over
// every axis but 1, the mean of squared deviations, xhat = (x - mean) *
// rsqrt(var + eps), y = xhat or xhat * gamma + beta (gamma < 0: no affine).
std::vector<NodeId> batch_norm_train_primitives(Emit& e, NodeId x, NodeId gamma, NodeId beta,
                                                double eps);
// batch_norm_train_grad(x, dy[, gamma]) as (dx, dgamma, dbeta): dbeta = sum(dy),
// dgamma = sum(dy * xhat) (of gamma's shape, or [1, C, 1, ...]), and
// dx = gamma * rstd * (dy - mean(dy) - xhat * mean(dy * xhat)).
std::vector<NodeId> batch_norm_train_grad_primitives(Emit& e, NodeId x, NodeId dy, NodeId gamma,
                                                     double eps);

// attention_grad(q, k, v, dout[, bias]) as matmuls over the recomputed
// probabilities ([B, Hk, G, Sq, Sk] scores); with want_dbias also the bias's
// gradient (summed to its shape). bias < 0: none.
struct AttentionGradNodes {
  NodeId dq = -1, dk = -1, dv = -1, dbias = -1;
};
AttentionGradNodes attention_grad_primitives(Emit& e, NodeId q, NodeId k, NodeId v, NodeId bias,
                                             NodeId dout, AttentionAttrs a, bool want_dbias);

// lstm / gru / rnn / gated_delta_net / selective_scan node `n` on inputs `in`
// (nodes of e's graph shaped like n's), unrolled over its static sequence as
// primitive ops; returns its outputs (expand_sequence.cc). Throws naming the
// op when a dim is dynamic.
std::vector<NodeId> sequence_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in);

// fused_elementwise node `n` on inputs `in`: its program's instructions as nodes, the last one
// expanded to n's dims (expand_elementwise.cc).
NodeId elementwise_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in);

// Channel-blocked activations ([N, ceil(C/16), H, W, 16], conv_blocked's layout) from NCHW x of
// C channels (zero-padded to whole blocks), and back (the first C channels).
NodeId to_channel_blocks(Emit& e, NodeId x);
NodeId from_channel_blocks(Emit& e, NodeId x, int64_t channels);

// conv_blocked node `n` on inputs `in`: its input moved to NCHW, a conv with the weight and bias
// unpacked, the output moved back (expand_conv_blocked.cc).
NodeId conv_blocked_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in);
// conv_blocked_chain node `n`: its three stages as conv_blocked_primitives, one after another.
NodeId conv_blocked_chain_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in);

}  // namespace rlx::opt::ad
