// Decode GEMVs (dequant_matmul with a few activation rows) on q4_0 / q8_0 /
// q4_K / q5_K / q6_K weights regrouped 16 rows at a time, as llama.cpp's CPU
// backend repacks them.
//
// In the file's layout each weight row is a run of blocks, so a GEMV holds one
// row's partial sums per register and pays, per row and block, a scale
// conversion, a broadcast and a horizontal reduction: the four-row vec_dot
// kernels ran q4_0 at ~21 GB/s on one Zen 5 core, compute-bound. Regrouped,
// one 512-bit vpdpbusd advances 16 rows by 4 elements each (lane r = row r),
// the 16 rows' scales convert as one vector, and a group is one sequential
// stream. A "vector" below is 64 bytes whose dword r holds 4 bytes of row r.
// A group of `kGroupRows` rows holds, for q4_0 / q8_0 (32-element blocks,
// Q8_0 activations):
//   scales  nb x 16 f16 (block b, row r at [b * 16 + r]), padded to 64 bytes
//   quants  nb x V vectors; vector (b, j) holds bytes 4j..4j+3 of block b's
//           quants (q4_0: V = 4, 16 nibble bytes: low nibbles elements 4j..,
//           high nibbles 16+4j..; q8_0: V = 8)
// and for the K-quants (256-element super-blocks, Q8_K activations), per
// super-block, k_group_bytes(type) in all:
//   q4_K, q5_K  d, dmin (16 f16 each); the 6-bit scales and mins unpacked
//               (8 sub-blocks x 16 rows of u8 each); 32 vectors of qs (vector v:
//               bytes 4v.., low nibbles sub-block 2p, high 2p+1 for v = 8p + j);
//               q5_K then 8 vectors of qh (bytes 4j..: bit 2p / 2p+1 is the
//               fifth bit of sub-block 2p / 2p+1)
//   q6_K        d (16 f16, padded to 64); the 16 signed scales (16 sub-blocks of
//               16 x 16 rows of i8); 32 vectors of ql (bytes 4v..), 16 of qh
//               (bytes 4v.. of qh), as ggml's block orders them
// Rows past N pad the last group with zeros. The sums are exact integers per
// block (K-quants: per super-block, the sub-block sums times their integer
// scales); each adds float(sum) times the product of the float scales to the
// row's total, so every kernel (portable, AVX2, AVX-512 VNNI) gives the same bits.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/huge_pages.h"
#include "rlx/quant.h"

namespace rlx::quant {

constexpr int64_t kGroupRows = 16;
// Where the parts of a regrouped K-quant super-block start (table above):
// dmin (q4_K / q5_K), the scales, the mins (q4_K / q5_K) and the quant vectors.
constexpr size_t kKDmin = 32, kKScales = 64, kKMins = 192, kKQuants = 320;
constexpr size_t kQ4KGroupBytes = kKQuants + 32 * 64;
constexpr size_t kQ5KGroupBytes = kQ4KGroupBytes + 8 * 64;
constexpr size_t kQ6KQhAt = kKQuants + 32 * 64;  // where a q6_K super-block's qh vectors start
constexpr size_t kQ6KGroupBytes = kQ6KQhAt + 16 * 64;

struct RowGroups {
  GgmlType type = GgmlType::F32;
  int64_t rows = 0, k = 0;       // N weight rows of K elements
  const void* source = nullptr;  // the rows it was made from
  size_t scale_bytes = 0;        // per group, padded to 64 (K-quants: 0)
  size_t group_bytes = 0;        // scales + quants
  HugeBuffer storage;            // core/huge_pages.h
  uint8_t* data = nullptr;       // = storage
  int64_t groups() const { return (rows + kGroupRows - 1) / kGroupRows; }
};

enum class GroupKernel { none, portable, avx2, avx512_vnni };

// The kernel that runs regrouped `t` on this CPU under the current ISA limit;
// none for other types and on the portable path (which keeps the file layout).
GroupKernel group_kernel(GgmlType t);
const char* group_kernel_name(GroupKernel k);

// N rows of `row_bytes` each (K elements of a regrouped type) regrouped.
RowGroups make_row_groups(GgmlType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K);

// One activation row in the weight type's vec_dot_type (Q8_0 / Q8_K, as
// quantize_activations writes it) with what every group reads: each block's
// scale as f32 and the sums of its quants, per 32 elements (Q8_0) or per 16
// (Q8_K, as its bsums).
struct GroupActivation {
  const uint8_t* q8 = nullptr;
  const float* d = nullptr;
  const int32_t* sum = nullptr;
};
// The int8 quants of an activation block: Q8_0 block b {f16 d; i8 qs[32]},
// Q8_K super-block s {f32 d; i8 qs[256]; i16 bsums[16]}.
inline const uint8_t* q8_0_quants(const GroupActivation& a, int64_t b) { return a.q8 + b * 34 + 2; }
inline const uint8_t* q8_K_quants(const GroupActivation& a, int64_t s) {
  return a.q8 + s * 292 + 4;
}
// Entries d and sum need for K elements (at most).
inline int64_t group_activation_entries(int64_t K) { return K / 16; }
// Fills d and sum for the row q8 of `weight`'s vec_dot_type.
void prepare_group_activation(GgmlType weight, const uint8_t* q8, int64_t K, float* d,
                              int32_t* sum);

// y[n - 16 g0] = row n . activation for the rows n of groups [g0, g1) (rows >=
// N are not written), on kernel k (not none).
void gemv_row_groups(GroupKernel k, const RowGroups& w, const GroupActivation& a, int64_t g0,
                     int64_t g1, float* y);

// gemv_row_groups for `rows` activation rows at once, y[m * ldy + n - 16 g0], reading each group
// once for up to kGroupRowsAtOnce of them; false (nothing done) where k has no such kernel
// (so far only AVX-512 VNNI has them). Same bits as one row at a time.
constexpr int kGroupRowsAtOnce = 4;
bool gemv_row_groups_rows(GroupKernel k, const RowGroups& w, const GroupActivation* a, int64_t rows,
                          int64_t g0, int64_t g1, float* y, int64_t ldy);

namespace detail {
// rows (1..kGroupRowsAtOnce) activations against one group: out[r * ldo + 0..15].
using GroupDotRowsFn = void (*)(const uint8_t* g, size_t scale_bytes, int64_t nb,
                                const GroupActivation* a, int rows, float* out, int64_t ldo);
GroupDotRowsFn group_dot_rows_vnni(GgmlType type);
// One group: out[16] = its rows . a, over nb blocks (K-quants: super-blocks).
using GroupDotFn = void (*)(const uint8_t* g, size_t scale_bytes, int64_t nb,
                            const GroupActivation& a, float* out);
// type's SIMD group kernel (row_groups_simd.cc); null for other types.
GroupDotFn group_dot_avx2(GgmlType type);
GroupDotFn group_dot_vnni(GgmlType type);
// The K-quants' layout and portable kernel (row_groups_kquants.cc).
size_t k_group_bytes(GgmlType t);
// Row r (< 16) of a group at g: its nsb super-blocks from the file's row.
void regroup_k_row(GgmlType t, const uint8_t* row, int64_t nsb, int64_t r, uint8_t* g);
void group_dot_k_portable(GgmlType t, const uint8_t* g, int64_t nsb, const GroupActivation& a,
                          float* out);
}  // namespace detail

}  // namespace rlx::quant
