// The vjp rules: one function per op (or per group of ops sharing a rule),
// looked up through the table in table.cc, which switches over every Op.
#pragma once
#include <vector>

#include "opt/autodiff/emit.h"
#include "rlx/autodiff.h"

namespace rlx::opt::ad {

// One application of a rule to a forward node.
struct VjpCall {
  Emit& e;
  const Node& n;                  // the forward node (a copy: the graph grows)
  const std::vector<NodeId>& dy;  // per output: its cotangent, or -1 when none reached it
  const std::vector<bool>& need;  // per input: whether its gradient is wanted
  std::vector<NodeId>& dx;        // per input: the rule's gradient (-1: none)

  NodeId in(size_t i) const { return n.inputs[i]; }
  Shape in_shape(size_t i) const { return e.shape(n.inputs[i]); }
  NodeId grad() const { return dy[0]; }  // the cotangent of a single-output node
  bool needs(size_t i) const { return i < need.size() && need[i]; }
};
using VjpFn = void (*)(VjpCall&);

struct VjpEntry {
  GradSupport support;
  VjpFn fn = nullptr;         // for rule and estimator
  const char* why = nullptr;  // for none, gap and estimator
};
VjpEntry vjp_entry(Op op);

// vjp with each wrt node an independent variable: a gradient reaching one
// wrt node stops there, even when another wrt node is upstream of it (a
// rule's own expansion of a node whose inputs depend on each other).
std::vector<NodeId> vjp_partial(Graph& g, const std::vector<NodeId>& outputs,
                                const std::vector<NodeId>& cotangents,
                                const std::vector<NodeId>& wrt);

// ---- rules_elementwise.cc
void vjp_unary(VjpCall&);  // activation_grad of the op's kind
void vjp_add(VjpCall&);
void vjp_sub(VjpCall&);
void vjp_mul(VjpCall&);
void vjp_div(VjpCall&);
void vjp_max_min(VjpCall&);
void vjp_pow(VjpCall&);
void vjp_mod(VjpCall&);
void vjp_fmod(VjpCall&);
void vjp_where(VjpCall&);
void vjp_cast(VjpCall&);
void vjp_reduce_sum(VjpCall&);
void vjp_reduce_mean(VjpCall&);
void vjp_reduce_max_min(VjpCall&);
void vjp_reduce_prod(VjpCall&);
void vjp_softmax(VjpCall&);
void vjp_log_softmax(VjpCall&);
void vjp_cumsum(VjpCall&);
void vjp_cumprod(VjpCall&);  // inclusive only (PyTorch's), zeros included

// ---- rules_movement.cc
void vjp_reshape(VjpCall&);
void vjp_reshape_like(VjpCall&);
void vjp_transpose(VjpCall&);
void vjp_slice(VjpCall&);
void vjp_concat(VjpCall&);
void vjp_expand(VjpCall&);
void vjp_pad(VjpCall&);
void vjp_tile(VjpCall&);
void vjp_flip(VjpCall&);
void vjp_split(VjpCall&);

// ---- rules_indexing.cc
void vjp_gather(VjpCall&);
void vjp_gather_elements(VjpCall&);
void vjp_gather_nd(VjpCall&);
void vjp_scatter_elements(VjpCall&);
void vjp_scatter_nd(VjpCall&);
void vjp_topk(VjpCall&);
void vjp_embedding(VjpCall&);

// ---- rules_linear.cc
void vjp_matmul(VjpCall&);
void vjp_dequant_matmul(VjpCall&);
void vjp_conv(VjpCall&);
void vjp_conv_transpose(VjpCall&);

// ---- rules_pool.cc
void vjp_max_pool(VjpCall&);       // max_pool2d_grad
void vjp_max_pool_grad(VjpCall&);  // second order: the cotangent gathered at the argmax taps
void vjp_avg_pool(VjpCall&);
void vjp_adaptive_avg_pool(VjpCall&);
void vjp_resize(VjpCall&);
void vjp_grid_sample(VjpCall&);

// ---- rules_nn.cc
void vjp_layer_norm(VjpCall&);
void vjp_rms_norm(VjpCall&);
void vjp_group_norm(VjpCall&);
void vjp_batch_norm(VjpCall&);
void vjp_batch_norm_train(VjpCall&);  // batch_norm_train_grad
// lstm / gru / rnn / gated_delta_net / selective_scan: through their unrolled primitives
void vjp_sequence(VjpCall&);
void vjp_fused_elementwise(VjpCall&);
void vjp_conv_blocked(VjpCall&);
void vjp_conv_blocked_chain(VjpCall&);
void vjp_layer_norm_2d(VjpCall&);
void vjp_attention(VjpCall&);
void vjp_rope(VjpCall&);
void vjp_softmax_cross_entropy(VjpCall&);
void vjp_dropout(VjpCall&);  // the same mask (same seed and step) on the cotangent

// ---- rules_quant.cc
void vjp_fake_quantize(VjpCall&);  // a straight-through estimator (identity, clipped, lsq)

}  // namespace rlx::opt::ad
