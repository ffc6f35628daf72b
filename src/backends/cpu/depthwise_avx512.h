// The AVX-512 stride-1 depthwise plane (conv.cc threads planes over the pool
// and runs the epilogue; the caller checks cpu_isa() >= Isa::avx512).
#pragma once
#include <cstdint>

namespace rlx::cpu {

// y[oh * OW + ow] = b + sum_{kh, kw} w[kh * KW + kw] * x[(oh + kh - pt) * W + ow + kw - pl]
// for oh < OH, ow < OW, taps outside the H x W input reading as zero: a
// stride-1, dilation-1 conv of one channel plane, read straight from the
// input (masked loads stand in for the padding, so nothing is copied).
void dw_plane_s1_avx512(const float* x, int64_t H, int64_t W, const float* w, int64_t KH,
                        int64_t KW, int64_t pt, int64_t pl, float b, float* y, int64_t OH,
                        int64_t OW);

}  // namespace rlx::cpu
