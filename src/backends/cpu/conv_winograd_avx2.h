// AVX2 transforms of Winograd F(4x4, 3x3) (conv_winograd.cc), eight tiles of a
// tile row per vector: the input tiles are deinterleaved from a zero-padded
// copy of the rows they read, the outputs interleaved back, so every tile of
// a row is vectorized and V / M are read and written 8 tiles at a time.
// Only called where rlx's own sgemm runs, i.e. on AVX2 CPUs.
#pragma once
#include <cstdint>
#include <vector>

namespace rlx::cpu {

// v[(i * 6 + j) * stride + t] = (B^T d B)[i][j] of tile t = (ty - ty0) * tw + tx
// of input plane xc [H, W], tile rows [ty0, ty1); `padded` is scratch.
void winograd43_input_avx2(const float* xc, int64_t H, int64_t W, int64_t pad_top, int64_t pad_left,
                           int64_t ty0, int64_t ty1, int64_t tw, float* v, int64_t stride,
                           std::vector<float>& padded);

// yo[OH, OW] rows of tile rows [ty0, ty1) = A^T M A, M[i][j] of tile t at
// m[(i * 6 + j) * stride + t]; m may be read up to 7 floats past its last tile.
void winograd43_output_avx2(const float* m, int64_t stride, int64_t ty0, int64_t ty1, int64_t tw,
                            int64_t OH, int64_t OW, float* yo);

}  // namespace rlx::cpu
