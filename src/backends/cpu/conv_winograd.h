// 3x3 stride-1 convolution by Winograd's minimal filtering (Lavin & Gray,
// "Fast Algorithms for Convolutional Neural Networks"): F(m x m, 3 x 3) turns
// each m x m output tile into (m + 2)^2 independent channel products, so the
// multiply-adds drop 2.25x (F(2,3)) or 4x (F(4,3)) against im2col + GEMM.
// The products are GEMMs on rlx's own sgemm with the transformed weights
// packed once per compiled graph; the transforms are ours.
#pragma once
#include <cstdint>

#include "rlx/op_attrs.h"

namespace rlx::cpu {

class WeightPack;

// A 2-d conv with a [O, C, 3, 3] weight, stride 1, dilation 1, one group.
struct Conv3x3 {
  int64_t N, C, O, H, W, OH, OW, pad_top, pad_left;
};

// Whether conv3x3_winograd takes this conv: an own sgemm kernel on this CPU,
// a weight packed per compiled graph, and channels enough to pay for the
// transforms.
bool winograd_applies(const Conv3x3& s, bool weight_is_constant);

// y[N, O, OH, OW] = act(conv(x, w) + bias (+ residual, laid out as y)). Returns false, touching
// nothing, when `pack` holds a packing this call cannot use (the ISA limit changed since it was
// packed), so the caller takes its im2col path. `bf16` (MatmulPrecision::bf16):
// F(2x2,3x3)'s GEMMs may run on sgemm_kernel_bf16(); F(4x4,3x3)'s stay f32.
bool conv3x3_winograd(const Conv3x3& s, const float* x, const float* w, const float* bias,
                      Epilogue act, const float* residual, float* y, WeightPack& pack, bool bf16);

}  // namespace rlx::cpu
