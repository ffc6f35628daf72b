// Internal: integer GEMM of quantized weights with 8-bit activations, the
// prefill path of dequant_matmul (many activation rows at once).
//
// Every supported type is read as groups of G weights (G = 32, or 16 for
// q6_K) w = s * v + o with int8 v, float s and (for types with a min) float o;
// activations are quantized once per call to the type's vec_dot_type (the
// same bytes vec_dot consumes) and re-laid out per group as 8-bit values, the
// float scale da and, for types with a min, the group sum. Each
// weight tile (NR rows) is repacked per call into thread-local scratch with
// the rows interleaved 4 bytes at a time, so one vector register holds 4
// consecutive k of NR different rows: a broadcast of 4 activation bytes and
// one integer multiply-add (vpdpbusd on AVX-512 VNNI, maddubs + madd on AVX2)
// update NR outputs. A micro-kernel runs RM activation rows against the tile,
// so each loaded weight vector serves RM rows and each broadcast NR rows.
//
// Per group the integer sum is exact (the same products vec_dot forms), then
// scaled by s * da in float (k-quants: by s, and the super-block by its one
// da); results equal vec_dot's up to float summation order.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rlx/quant.h"

namespace rlx::quant::qgemm {

// Kernel family the next qgemm() call would use; none when the type has no
// integer GEMM or the CPU (or RLX_ISA) allows only the portable path.
enum class Path { none, avx2, avx512_vnni };
Path path_for(GgmlType t);
const char* path_name(Path p);

// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]) for M x K f32 x and N ggml
// rows of `row_bytes` each at w. Requires path_for(t) != none and
// K % 256 == 0 for k-quants, K % 32 == 0 otherwise. Threaded on rlx's pool.
void matmul(GgmlType t, const float* x, int64_t M, int64_t K, const uint8_t* w, size_t row_bytes,
            int64_t N, const float* bias, float* y);

// ---- Exposed for tests.

struct Format {
  int group = 0;  // G; 0: no integer GEMM for this type
  bool has_min = false;
};
Format format(GgmlType t);
// One weight row of n elements as int8 v[n], s[n / G] and o[n / G] (o only
// written for types with a min): dequantize(row)[k] == s[k / G] * v[k] + o[k / G].
void decode_row(GgmlType t, const uint8_t* row, int64_t n, int8_t* v, float* s, float* o);

// One activation row in the packed layout (u8 q[K], da[K / G], mt[K / G];
// offset: q + 128): simd = the AVX2 quantizer qgemm uses (needs AVX2), else
// quantize_activations(vdt) and a scalar re-layout; both give the same bytes.
void pack_activation_row(GgmlType vdt, int G, bool offset, const float* x, int64_t K, uint8_t* q,
                         float* da, float* mt, bool simd);

}  // namespace rlx::quant::qgemm
