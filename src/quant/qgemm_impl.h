// Internal to qgemm*.cc: the packed layouts shared by the driver (qgemm.cc)
// and the ISA micro-kernels (qgemm_avx2.cc, qgemm_avx512.cc).
//
// Packed weight tile, NR = L * H rows (L lanes per vector, H vectors side by
// side), one record per group g of G weights:
//   int8  v[G / 4][H][L][4]   chunk c of 4 consecutive k, lane l = row h*L + l
//   int32 corr[NR]            -128 * sum(v) of the group (undoes the +128 of
//                             the unsigned activations), 0 for signed ones
//   f32   s[NR]
//   f32   o[NR]               only for types with a min
// Padding rows (past N) are all zero.
//
// Packed activations, row m: u8 q[K] (the quantized value + 128, or the raw
// int8 for the signed AVX2 q8_0 kernel), f32 da[K / G], f32 mt[K / G] (the
// group sum for Q8_K, Q8_1's stored d * sum for q4_1 / q5_1).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "rlx/quant.h"

namespace rlx::quant::qgemm::detail {

constexpr size_t group_bytes(int G, int NR, bool has_min) {
  return size_t(G) * size_t(NR) + 4 * size_t(NR) * (has_min ? 3 : 2);
}

// 4 bytes from p (any alignment) as an int32.
inline int32_t load_i32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

struct TileArgs {
  const uint8_t* pack;  // one tile, ngroups records
  int64_t ngroups;
  const uint8_t* aq;  // activation row m0
  int64_t lda;        // bytes between activation rows (K)
  const float* da;    // da of row m0
  const float* mt;    // mt of row m0
  int64_t ldd;        // floats between rows of da / mt (K / G)
  float* y;           // output row m0, column n0
  int64_t ldy;        // N
  const float* bias;  // bias + n0, or null
  int nvalid;         // columns of the tile inside N (<= NR)
  int64_t rows;       // activation rows to run
};

// Where rows r0 .. r0 + RM - 1 of a tile call read their activation bytes, da and mt.
template <int RM>
struct ActivationRows {
  const uint8_t* a[RM];
  const float* da[RM];
  const float* mt[RM];
  ActivationRows(const TileArgs& t, int64_t r0) {
    for (int r = 0; r < RM; ++r) {
      a[r] = t.aq + (r0 + r) * t.lda;
      da[r] = t.da + (r0 + r) * t.ldd;
      mt[r] = t.mt + (r0 + r) * t.ldd;
    }
  }
};

// NR = 32 (two zmm of 16 lanes). superblock: Q8_K activations (k-quants),
// whose da is one per 256 and whose mt holds the plain group sum (not da *
// sum): a super-block's groups are summed first and scaled by da once.
void run_avx512(int G, bool has_min, bool superblock, const TileArgs& t);
// NR = 8 (one ymm), per type (the weights' range sets how many maddubs sums
// fit i16). signed_act: activations are raw int8 (q8_0, whose weights span
// all of int8: maddubs needs one operand small or unsigned).
void run_avx2(GgmlType type, bool signed_act, const TileArgs& t);

// Weight tile from decoded rows: v [NR][K] int8 (padding rows zero), s and o
// [NR][K / G]; writes the records above (corr from v) for NR = 32 / 8.
void interleave_avx512(const int8_t* v, const float* s, const float* o, int64_t K, int G,
                       bool has_min, uint8_t* dst);
void interleave_avx2(const int8_t* v, const float* s, const float* o, int64_t K, int G,
                     bool has_min, uint8_t* dst);

// One f32 activation row straight into the packed layout: the same bytes as
// quantize_activations(vdt) (Q8_0 / Q8_1 / Q8_K) followed by the scalar
// re-layout in qgemm.cc. offset: q + 128 (unsigned) instead of raw int8.
void quantize_row_avx2(GgmlType vdt, int G, bool offset, const float* x, int64_t K, uint8_t* q,
                       float* da, float* mt);

}  // namespace rlx::quant::qgemm::detail
