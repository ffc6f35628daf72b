// Every CPU kernel, by family; one .cc file per family implements its block.
#pragma once
#include "backends/cpu/kernel.h"

namespace rlx::cpu {

// leaves.cc
void full(const KernelCall& c);
void arange(const KernelCall& c);

// unary.cc (unary), binary.cc (binary, compare), elementwise.cc (the rest);
// the op is read from c.node.op
void unary(const KernelCall& c);
void binary(const KernelCall& c);
void compare(const KernelCall& c);
void logical(const KernelCall& c);  // logical_and/or/not, bitwise_not
void where(const KernelCall& c);
void cast(const KernelCall& c);
// special.cc: special_unary and special_binary (lgamma, bessel, polygamma, polynomials, ...)
void special(const KernelCall& c);
// linalg.cc: cholesky, lu, det, inverse, solves, qr, svd, eigh (OpenBLAS's LAPACK)
void linalg(const KernelCall& c);
// fused_elementwise.cc
void fused_elementwise(const KernelCall& c);

// reduce.cc
void reduce(const KernelCall& c);  // sum mean max min prod
void arg_reduce(const KernelCall& c);
void softmax(const KernelCall& c);  // softmax and log_softmax
void cumsum(const KernelCall& c);   // cumsum and cumprod
// The max of x[0..n) as reduce computes it: NaN when any element is NaN, -inf when n == 0.
float reduce_row_max(const float* x, int64_t n);
double reduce_row_max(const double* x, int64_t n);

// movement.cc
void reshape(const KernelCall& c);
void transpose(const KernelCall& c);
void slice(const KernelCall& c);
void concat(const KernelCall& c);
void split(const KernelCall& c);  // every piece in one call
void expand(const KernelCall& c);
void pad(const KernelCall& c);
void tile(const KernelCall& c);
void flip(const KernelCall& c);

// indexing.cc
void gather(const KernelCall& c);
void gather_elements(const KernelCall& c);
void gather_nd(const KernelCall& c);
void scatter_elements(const KernelCall& c);
void scatter_nd(const KernelCall& c);
void topk(const KernelCall& c);
void one_hot(const KernelCall& c);
void embedding(const KernelCall& c);
void dequant_embedding(const KernelCall& c);

// data_dependent.cc: outputs shrunk to the extent the values decide
void nonzero(const KernelCall& c);
void unique(const KernelCall& c);
void non_max_suppression(const KernelCall& c);

// matmul.cc
void matmul(const KernelCall& c);

// conv.cc
void conv(const KernelCall& c);
void conv_transpose(const KernelCall& c);
// conv_blocked.cc
void conv_blocked_kernel(const KernelCall& c);
void conv_blocked_chain_kernel(const KernelCall& c);

// pool.cc
void max_pool2d(const KernelCall& c);
void max_pool2d_indices(const KernelCall& c);
void max_pool2d_grad(const KernelCall& c);
void batch_norm_train(const KernelCall& c);
void batch_norm_train_grad(const KernelCall& c);
void avg_pool2d(const KernelCall& c);
void adaptive_avg_pool2d(const KernelCall& c);

// norm.cc
void layer_norm(const KernelCall& c);
void rms_norm(const KernelCall& c);
void group_norm(const KernelCall& c);
void batch_norm(const KernelCall& c);
void layer_norm_2d(const KernelCall& c);

// attention.cc
void attention(const KernelCall& c);
void attention_grad(const KernelCall& c);
// rope.cc
void rope(const KernelCall& c);
// resample.cc
void resize(const KernelCall& c);
void grid_sample(const KernelCall& c);

// dequant_matmul.cc
void dequant_matmul(const KernelCall& c);
// moe_ffn.cc
void moe_ffn(const KernelCall& c);
// grad_norm.cc, grad_activation.cc, grad_loss.cc
void rms_norm_grad(const KernelCall& c);
void layer_norm_grad(const KernelCall& c);
void group_norm_grad(const KernelCall& c);
void activation_grad(const KernelCall& c);
void softmax_cross_entropy(const KernelCall& c);
void softmax_cross_entropy_grad(const KernelCall& c);
// dropout.cc
void dropout(const KernelCall& c);
// fake_quantize.cc
void fake_quantize(const KernelCall& c);
void fake_quantize_grad(const KernelCall& c);

// recurrent.cc: lstm, gru, rnn (every output in one call)
void recurrent(const KernelCall& c);

// state_space.cc: output and final state in one call (f32 and f64)
void gated_delta_net(const KernelCall& c);
void selective_scan(const KernelCall& c);

}  // namespace rlx::cpu
