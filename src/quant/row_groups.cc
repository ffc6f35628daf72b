// Regrouping of rows for decode GEMVs, the per-call activation data, the
// portable q4_0 / q8_0 group kernel (the reference the SIMD ones equal bit for
// bit) and the choice of kernel. See row_groups.h for the layout.
#include "quant/row_groups.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/huge_pages.h"
#include "quant/quant_impl.h"
#include "quant/vec_dot.h"
#include "rlx/cpu_isa.h"
#include "rlx/dtype.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::quant {
namespace {

bool regrouped(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::Q6_K;
}

// Quant vectors per block: q4_0's 16 nibble bytes or q8_0's 32 bytes, as
// 4-byte pieces of 16 rows.
int64_t vectors_per_block(GgmlType t) { return t == GgmlType::Q4_0 ? 4 : 8; }

// One row's block b: the integer sum of q * a over its 32 elements, with q
// as the file stores it (q4_0: the nibble minus 8).
int32_t block_sum(GgmlType t, const uint8_t* qs, const int8_t* a) {
  int32_t s = 0;
  if (t == GgmlType::Q4_0) {
    for (int i = 0; i < 16; ++i) {
      s += (int32_t(qs[i] & 0x0F) - 8) * a[i];
      s += (int32_t(qs[i] >> 4) - 8) * a[i + 16];
    }
  } else {
    for (int i = 0; i < 32; ++i) s += int32_t(int8_t(qs[i])) * a[i];
  }
  return s;
}

// The portable kernel: the quants read back out of the group layout.
void group_dot_portable(GgmlType t, const uint8_t* g, size_t scale_bytes, int64_t nb,
                        const GroupActivation& a, float* out) {
  const int64_t V = vectors_per_block(t);
  const uint8_t* quants = g + scale_bytes;
  for (int64_t r = 0; r < kGroupRows; ++r) {
    float acc = 0.f;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t qs[32];
      for (int64_t j = 0; j < V; ++j)
        std::memcpy(qs + 4 * j, quants + ((b * V + j) * kGroupRows + r) * 4, 4);
      const int8_t* ab = reinterpret_cast<const int8_t*>(q8_0_quants(a, b));
      const float dw = detail::fp16(g + (b * kGroupRows + r) * 2);
      acc = std::fma(float(block_sum(t, qs, ab)), dw * a.d[b], acc);
    }
    out[r] = acc;
  }
}

}  // namespace

GroupKernel group_kernel(GgmlType t) {
  if (!regrouped(t)) return GroupKernel::none;
  if (!detail::vec_dot_uses_avx2()) return GroupKernel::none;
  if (cpu_isa() >= Isa::avx512 && detail::cpu_has_avx512_vnni()) return GroupKernel::avx512_vnni;
  return GroupKernel::avx2;
}

const char* group_kernel_name(GroupKernel k) {
  switch (k) {
    case GroupKernel::none:
      return "none";
    case GroupKernel::portable:
      return "portable";
    case GroupKernel::avx2:
      return "avx2";
    case GroupKernel::avx512_vnni:
      return "avx512_vnni";
  }
  return "?";
}

RowGroups make_row_groups(GgmlType t, const uint8_t* w, size_t row_bytes, int64_t N, int64_t K) {
  RLX_CHECK(regrouped(t), "row groups: ", traits(t).name, " has no regrouped GEMV");
  const bool k_quant = traits(t).block_size == 256;
  const int64_t bs = traits(t).block_size;
  RLX_CHECK(K % bs == 0 && row_bytes == row_size(t, K), "row groups: rows of ", row_bytes,
            " bytes do not hold k = ", K, " ", traits(t).name);
  RowGroups rg;
  rg.type = t;
  rg.rows = N;
  rg.k = K;
  rg.source = w;
  const int64_t nb = K / bs, V = k_quant ? 0 : vectors_per_block(t);
  if (k_quant) {
    rg.group_bytes = size_t(nb) * detail::k_group_bytes(t);
  } else {
    rg.scale_bytes = (size_t(nb * kGroupRows) * 2 + 63) / 64 * 64;
    rg.group_bytes = rg.scale_bytes + size_t(nb * V) * 64;
  }
  const size_t total = size_t(rg.groups()) * rg.group_bytes;
  rg.storage = alloc_huge(total);  // a decode step streams all of it
  rg.data = rg.storage.get();
  // Not zeroed up front (that touched every page twice): only the last
  // group, whose rows past N must read as zeros.
  if (total) std::memset(rg.data + total - rg.group_bytes, 0, rg.group_bytes);
  const size_t bb = traits(t).type_size;  // q4_0 / q8_0 file block: d, then quants
  // Rows over the pool (a 1B model's weights take ~0.3 s on one thread).
  parallel_for(N, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(int64_t(row_bytes), 1)),
               [&](int64_t n0, int64_t n1) {
                 for (int64_t n = n0; n < n1; ++n) {
                   uint8_t* g = rg.data + size_t(n / kGroupRows) * rg.group_bytes;
                   const int64_t r = n % kGroupRows;
                   const uint8_t* row = w + size_t(n) * row_bytes;
                   if (k_quant) {
                     detail::regroup_k_row(t, row, nb, r, g);
                     continue;
                   }
                   for (int64_t b = 0; b < nb; ++b) {
                     const uint8_t* blk = row + size_t(b) * bb;
                     std::memcpy(g + (b * kGroupRows + r) * 2, blk, 2);
                     for (int64_t j = 0; j < V; ++j)
                       std::memcpy(g + rg.scale_bytes + size_t((b * V + j) * kGroupRows + r) * 4,
                                   blk + 2 + 4 * j, 4);
                   }
                 }
               });
  return rg;
}

void prepare_group_activation(GgmlType weight, const uint8_t* q8, int64_t K, float* d,
                              int32_t* sum) {
  // Q8_0 {f16 d; i8 qs[32]}, sums per 32; Q8_K {f32 d; i8 qs[256]; i16 bsums[16]}, per 16.
  const bool k_quant = traits(weight).vec_dot_type == GgmlType::Q8_K;
  const int64_t bs = k_quant ? 256 : 32, bytes = k_quant ? 292 : 34, head = k_quant ? 4 : 2;
  const int64_t per = k_quant ? 16 : 32;
  for (int64_t b = 0; b < K / bs; ++b) {
    const uint8_t* blk = q8 + b * bytes;
    if (k_quant)
      std::memcpy(&d[b], blk, 4);
    else
      d[b] = detail::fp16(blk);
    for (int64_t j = 0; j < bs / per; ++j) {
      int32_t s = 0;
      for (int64_t i = 0; i < per; ++i) s += int8_t(blk[head + j * per + i]);
      sum[b * (bs / per) + j] = s;
    }
  }
}

void gemv_row_groups(GroupKernel k, const RowGroups& w, const GroupActivation& a, int64_t g0,
                     int64_t g1, float* y) {
  RLX_CHECK(k != GroupKernel::none, "row groups: no kernel");
  const GgmlType t = w.type;
  const detail::GroupDotFn fn = k == GroupKernel::avx2          ? detail::group_dot_avx2(t)
                                : k == GroupKernel::avx512_vnni ? detail::group_dot_vnni(t)
                                                                : nullptr;  // portable
  const int64_t nb = w.k / traits(t).block_size;
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* grp = w.data + size_t(g) * w.group_bytes;
    const int64_t n0 = g * kGroupRows, live = std::min(kGroupRows, w.rows - n0);
    float tail[kGroupRows];
    float* yg = y + (g - g0) * kGroupRows;
    float* out = live == kGroupRows ? yg : tail;
    if (fn)
      fn(grp, w.scale_bytes, nb, a, out);
    else if (traits(t).block_size == 256)
      detail::group_dot_k_portable(t, grp, nb, a, out);
    else
      group_dot_portable(t, grp, w.scale_bytes, nb, a, out);
    if (out == tail) std::copy_n(tail, live, yg);
  }
}

bool gemv_row_groups_rows(GroupKernel k, const RowGroups& w, const GroupActivation* a, int64_t rows,
                          int64_t g0, int64_t g1, float* y, int64_t ldy) {
  const detail::GroupDotRowsFn fn =
      k == GroupKernel::avx512_vnni ? detail::group_dot_rows_vnni(w.type) : nullptr;
  if (!fn) return false;
  const int64_t nb = w.k / traits(w.type).block_size;
  float tail[kGroupRowsAtOnce * kGroupRows];
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* grp = w.data + size_t(g) * w.group_bytes;
    const int64_t n0 = g * kGroupRows, live = std::min(kGroupRows, w.rows - n0);
    for (int64_t m = 0; m < rows; m += kGroupRowsAtOnce) {
      const int r = int(std::min<int64_t>(kGroupRowsAtOnce, rows - m));
      float* yg = y + m * ldy + (g - g0) * kGroupRows;
      if (live == kGroupRows) {
        fn(grp, w.scale_bytes, nb, a + m, r, yg, ldy);
        continue;
      }
      fn(grp, w.scale_bytes, nb, a + m, r, tail,
         kGroupRows);  // a short last group: rows >= N not written
      for (int i = 0; i < r; ++i) std::copy_n(tail + i * kGroupRows, live, yg + i * ldy);
    }
  }
  return true;
}

}  // namespace rlx::quant
