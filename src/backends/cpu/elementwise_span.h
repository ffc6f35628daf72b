// Element-wise f32 math on one run of elements, shared by the per-op kernels
// (unary.cc, binary.cc) and fused_elementwise, so a fused region rounds
// exactly like its ops run one by one.
#pragma once
#include <cstdint>

#include "rlx/graph.h"

namespace rlx::cpu {

// y[i] = op(x[i]) for i < n; op is a unary op, attrs its attributes.
void unary_span_f32(Op op, const OpAttrs& attrs, bool ggml_numerics, const float* x, float* y,
                    int64_t n);
// o[i] = op(a[i], b[i]) for i < n; an operand that does not advance is read at [0].
void binary_span_f32(Op op, const OpAttrs& attrs, const float* a, bool a_advances, const float* b,
                     bool b_advances, float* o, int64_t n);

// Ops that cost tens of cycles per element (transcendentals, pow, mod): their
// parallel chunks are smaller.
bool unary_is_heavy(Op op);
bool binary_is_heavy(Op op, const OpAttrs& attrs);

}  // namespace rlx::cpu
