// Integer GEMM driver (see qgemm.h): weight decoding into int8 groups, the
// activation and weight-tile layouts of qgemm_impl.h, and the thread split.
#include "quant/qgemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "core/scratch.h"
#include "quant/qgemm_impl.h"
#include "quant/quant_impl.h"
#include "quant/vec_dot.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::quant::qgemm {
namespace {

using detail::group_bytes;
using quant::detail::fp16;
using quant::detail::scale_min_k4;

float f32at(const uint8_t* p) {
  float f;
  std::memcpy(&f, p, 4);
  return f;
}

// q4_0 / q4_1 / q5_0 / q5_1: 32 elements, j < 16 from the low nibble of
// qs[j], j >= 16 from the high nibble of qs[j - 16]; the fifth bit of element
// j is bit j of qh.
template <bool kFive, bool kMin>
void decode_q4q5(const uint8_t* x, int64_t nb, int8_t* v, float* s, float* o) {
  const size_t bytes = 2 + (kMin ? 2 : 0) + (kFive ? 4 : 0) + 16;
  const int off = kMin ? 0 : (kFive ? 16 : 8);
  for (int64_t b = 0; b < nb; ++b, x += bytes, v += 32) {
    s[b] = fp16(x);
    if (kMin) o[b] = fp16(x + 2);
    const uint8_t* p = x + (kMin ? 4 : 2);
    const uint32_t qh = kFive ? quant::detail::u32le(p) : 0;
    const uint8_t* qs = p + (kFive ? 4 : 0);
    for (int j = 0; j < 16; ++j) {
      const int q0 = (qs[j] & 15) | int((qh >> j) & 1) << 4;
      const int q1 = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
      v[j] = int8_t(q0 - off);
      v[j + 16] = int8_t(q1 - off);
    }
  }
}

// q4_K / q5_K: 8 sub-blocks of 32, y = d * sc * q - dmin * m.
template <bool kFive>
void decode_q45_K(const uint8_t* x, int64_t nb, int8_t* v, float* s, float* o) {
  const size_t bytes = kFive ? 176 : 144;
  for (int64_t b = 0; b < nb; ++b, x += bytes, v += 256, s += 8, o += 8) {
    const float d = fp16(x), dmin = fp16(x + 2);
    const uint8_t* sc = x + 4;
    const uint8_t* qh = x + 16;
    const uint8_t* ql = x + (kFive ? 48 : 16);
    for (int c = 0; c < 4; ++c, ql += 32) {
      for (int h = 0; h < 2; ++h) {
        const int j = 2 * c + h;
        uint8_t scale, min;
        scale_min_k4(j, sc, scale, min);
        s[j] = d * float(scale);
        o[j] = -(dmin * float(min));
        for (int l = 0; l < 32; ++l) {
          int q = h ? ql[l] >> 4 : ql[l] & 15;
          if (kFive) q |= ((qh[l] >> j) & 1) << 4;
          v[32 * j + l] = int8_t(q);
        }
      }
    }
  }
}

// q6_K: 16 groups of 16, y = d * sc[g] * (q - 32).
void decode_q6_K(const uint8_t* x, int64_t nb, int8_t* v, float* s) {
  for (int64_t b = 0; b < nb; ++b, x += 210, v += 256, s += 16) {
    const float d = fp16(x + 208);
    const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
    for (int g = 0; g < 16; ++g) s[g] = d * float(sc[g]);
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = x + 64 * h;
      const uint8_t* qh = x + 128 + 32 * h;
      int8_t* y = v + 128 * h;
      for (int l = 0; l < 32; ++l) {
        y[l] = int8_t(((ql[l] & 15) | ((qh[l] & 3) << 4)) - 32);
        y[l + 32] = int8_t(((ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4)) - 32);
        y[l + 64] = int8_t(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        y[l + 96] = int8_t(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
    }
  }
}

// One activation row in vec_dot_type bytes -> the packed layout.
void pack_activations(GgmlType vdt, int G, bool offset, const uint8_t* row, int64_t K, uint8_t* q,
                      float* da, float* mt) {
  const uint8_t flip = offset ? 0x80 : 0;
  switch (vdt) {
    case GgmlType::Q8_0:
    case GgmlType::Q8_1: {
      const bool one = vdt == GgmlType::Q8_1;
      const size_t bytes = one ? 36 : 34;
      for (int64_t b = 0; b < K / 32; ++b, row += bytes) {
        const uint8_t* qs = row + (one ? 4 : 2);
        for (int j = 0; j < 32; ++j) q[32 * b + j] = qs[j] ^ flip;
        da[b] = fp16(row);
        mt[b] = one ? fp16(row + 2) : 0.f;
      }
      return;
    }
    case GgmlType::Q8_K: {
      const int per = 256 / G;
      for (int64_t b = 0; b < K / 256; ++b, row += 292) {
        const float d = f32at(row);
        for (int j = 0; j < 256; ++j) q[256 * b + j] = row[4 + j] ^ flip;
        int16_t bs[16];
        std::memcpy(bs, row + 260, 32);
        for (int g = 0; g < per; ++g) {
          const int sum = G == 32 ? bs[2 * g] + bs[2 * g + 1] : bs[g];
          da[b * per + g] = d;
          mt[b * per + g] = float(sum);
        }
      }
      return;
    }
    default:
      throw make_error("qgemm: no activation layout for ", traits(vdt).name);
  }
}

struct Scratch {
  std::vector<int8_t> v;
  std::vector<float> s, o;
};

// Rows [n0, n0 + nvalid) of w into one tile of NR rows: decoded row by row
// into scratch ([NR][K], padding rows zero), then interleaved by SIMD.
void pack_tile(GgmlType t, const Format& f, const uint8_t* w, size_t rb, int nvalid, int64_t K,
               Path path, uint8_t* dst, Scratch& sc) {
  const int NR = path == Path::avx512_vnni ? 32 : 8;
  const int64_t ng = K / f.group;
  sc.v.resize(size_t(NR) * size_t(K));
  sc.s.resize(size_t(NR) * size_t(ng));
  sc.o.resize(size_t(NR) * size_t(ng));
  for (int n = 0; n < nvalid; ++n)
    decode_row(t, w + size_t(n) * rb, K, sc.v.data() + size_t(n) * size_t(K),
               sc.s.data() + size_t(n) * size_t(ng), sc.o.data() + size_t(n) * size_t(ng));
  if (nvalid < NR) {
    std::memset(sc.v.data() + size_t(nvalid) * size_t(K), 0, size_t(NR - nvalid) * size_t(K));
    std::fill(sc.s.begin() + ptrdiff_t(nvalid) * ng, sc.s.end(), 0.f);
    std::fill(sc.o.begin() + ptrdiff_t(nvalid) * ng, sc.o.end(), 0.f);
  }
  if (path == Path::avx512_vnni)
    detail::interleave_avx512(sc.v.data(), sc.s.data(), sc.o.data(), K, f.group, f.has_min, dst);
  else
    detail::interleave_avx2(sc.v.data(), sc.s.data(), sc.o.data(), K, f.group, f.has_min, dst);
}

std::atomic<uint64_t> g_call{0};

}  // namespace

Format format(GgmlType t) {
  switch (t) {
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return {32, false};
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
      return {32, true};
    case GgmlType::Q6_K:
      return {16, false};
    default:
      return {};
  }
}

void decode_row(GgmlType t, const uint8_t* x, int64_t n, int8_t* v, float* s, float* o) {
  switch (t) {
    case GgmlType::Q8_0:
      for (int64_t b = 0; b < n / 32; ++b, x += 34) {
        s[b] = fp16(x);
        std::memcpy(v + 32 * b, x + 2, 32);
      }
      return;
    case GgmlType::Q4_0:
      return decode_q4q5<false, false>(x, n / 32, v, s, o);
    case GgmlType::Q4_1:
      return decode_q4q5<false, true>(x, n / 32, v, s, o);
    case GgmlType::Q5_0:
      return decode_q4q5<true, false>(x, n / 32, v, s, o);
    case GgmlType::Q5_1:
      return decode_q4q5<true, true>(x, n / 32, v, s, o);
    case GgmlType::Q4_K:
      return decode_q45_K<false>(x, n / 256, v, s, o);
    case GgmlType::Q5_K:
      return decode_q45_K<true>(x, n / 256, v, s, o);
    case GgmlType::Q6_K:
      return decode_q6_K(x, n / 256, v, s);
    default:
      throw make_error("qgemm: no integer GEMM for ", traits(t).name);
  }
}

void pack_activation_row(GgmlType vdt, int G, bool offset, const float* x, int64_t K, uint8_t* q,
                         float* da, float* mt, bool simd) {
  if (simd) return detail::quantize_row_avx2(vdt, G, offset, x, K, q, da, mt);
  std::vector<uint8_t> row(row_size(vdt, K));
  quantize_activations(vdt, x, row.data(), K);
  pack_activations(vdt, G, offset, row.data(), K, q, da, mt);
}

Path path_for(GgmlType t) {
  if (format(t).group == 0 || !quant::detail::vec_dot_uses_avx2()) return Path::none;
  if (cpu_isa() >= Isa::avx512 && quant::detail::cpu_has_avx512_vnni()) return Path::avx512_vnni;
  return Path::avx2;
}

const char* path_name(Path p) {
  switch (p) {
    case Path::avx2:
      return "avx2";
    case Path::avx512_vnni:
      return "avx512_vnni";
    default:
      return "none";
  }
}

void matmul(GgmlType t, const float* x, int64_t M, int64_t K, const uint8_t* w, size_t rb,
            int64_t N, const float* bias, float* y) {
  const Path path = path_for(t);
  RLX_CHECK(path != Path::none, "qgemm: no integer GEMM for ", traits(t).name, " on this CPU");
  const Format f = format(t);
  const TypeTraits& tr = traits(t);
  RLX_CHECK(K > 0 && K % tr.block_size == 0, "qgemm: k = ", K, " is not a multiple of ",
            tr.block_size);
  if (M <= 0 || N <= 0) return;
  const GgmlType vdt = tr.vec_dot_type;
  const int G = f.group;
  const int64_t ng = K / G;
  const bool signed_act = path == Path::avx2 && t == GgmlType::Q8_0;
  const bool superblock = vdt == GgmlType::Q8_K;
  const int NR = path == Path::avx512_vnni ? 32 : 8;

  // Activations, once per call, into the calling thread's buffer (grows only).
  static thread_local rlx::ScratchBuffer<float> abuf;
  const size_t qfloats = (size_t(M) * size_t(K) + 63) / 4 & ~size_t(15);
  float* abase = abuf.get(qfloats + 2 * size_t(M) * size_t(ng));
  uint8_t* aq = reinterpret_cast<uint8_t*>(abase);
  float* ada = abase + qfloats;
  float* amt = ada + size_t(M) * size_t(ng);
  parallel_for(M, std::max<int64_t>(1, (1 << 15) / K), [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m)
      detail::quantize_row_avx2(vdt, G, !signed_act, x + m * K, K, aq + size_t(m) * size_t(K),
                                ada + size_t(m) * size_t(ng), amt + size_t(m) * size_t(ng));
  });

  // Tiles of NR weight rows; all M rows per task when there are enough tiles
  // for the pool, else M split into blocks (each task repacks its tile, unless
  // the previous task of the same thread had the same one).
  const int64_t ntiles = (N + NR - 1) / NR;
  const int64_t want = 4 * int64_t(num_threads());
  int64_t MB = M;
  if (ntiles < want) MB = std::max<int64_t>(8, (M * ntiles + want - 1) / want);
  const int64_t nmb = (M + MB - 1) / MB;
  const size_t tile_bytes = size_t(ng) * group_bytes(G, NR, f.has_min);
  const uint64_t call = ++g_call;
  parallel_for(ntiles * nmb, 1, [&](int64_t b, int64_t e) {
    thread_local std::vector<uint64_t> pack;
    thread_local Scratch sc;
    thread_local uint64_t packed_call = 0;
    thread_local int64_t packed_tile = -1;
    if (pack.size() * 8 < tile_bytes) pack.resize((tile_bytes + 7) / 8);
    uint8_t* pk = reinterpret_cast<uint8_t*>(pack.data());
    for (int64_t task = b; task < e; ++task) {
      const int64_t tile = task / nmb, m0 = (task % nmb) * MB, m1 = std::min(M, m0 + MB);
      const int64_t n0 = tile * NR;
      const int nvalid = int(std::min<int64_t>(NR, N - n0));
      if (packed_call != call || packed_tile != tile) {
        pack_tile(t, f, w + size_t(n0) * rb, rb, nvalid, K, path, pk, sc);
        packed_call = call;
        packed_tile = tile;
      }
      detail::TileArgs a{pk,
                         ng,
                         aq + size_t(m0) * size_t(K),
                         K,
                         ada + size_t(m0) * size_t(ng),
                         amt + size_t(m0) * size_t(ng),
                         ng,
                         y + m0 * N + n0,
                         N,
                         bias ? bias + n0 : nullptr,
                         nvalid,
                         m1 - m0};
      if (path == Path::avx512_vnni)
        detail::run_avx512(G, f.has_min, superblock, a);
      else
        detail::run_avx2(t, signed_act, a);
    }
  });
}

}  // namespace rlx::quant::qgemm
