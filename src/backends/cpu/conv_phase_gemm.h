// Dense 2-d convs with any stride as GEMMs whose B operand is packed straight
// from the input, with no im2col buffer (see conv_phase_gemm.cc).
#pragma once
#include <cstdint>

#include "backends/cpu/sgemm.h"
#include "rlx/op_attrs.h"

namespace rlx::cpu {

class WeightPack;

// A 2-d conv with a [O, C, KH, KW] weight, one group, no dilation.
struct ConvPlanar {
  int64_t N, C, O, H, W, KH, KW, SH, SW, pad_top, pad_left, OH, OW;
};

// y[N, O, OH, OW] = act(conv(x, w) + bias (+ residual, laid out as y)), the
// weight packed once in `pack`. Returns false, touching nothing, where this
// path does not pay or cannot run (no own sgemm kernel, fewer than 64
// products per output, a map too small to give every thread a band of rows,
// a packing of another path in `pack`). `kernel`: the sgemm kernel to run
// on (null: none on this CPU), as conv3x3_winograd's.
bool conv_phase_gemm(const ConvPlanar& s, const float* x, const float* w, const float* bias,
                     Epilogue act, const float* residual, float* y, WeightPack& pack,
                     const SgemmKernel* kernel);

}  // namespace rlx::cpu
