// dequant_matmul(x[..., K] f32, w u8[N, row_bytes][, bias f32[N]]) scheme, k:
// y[m, n] = sum_k x[m, k] * W[n, k] (+ bias[n]), W = the ggml rows of w.
//
// Four paths:
//  * grouped (src/quant/row_groups.h), for M < kGemmMinRows (decode) of a
//    constant q4_0 / q8_0 / q4_K / q5_K / q6_K weight on AVX2 / AVX-512
//    VNNI: the rows regrouped 16 at a time on first use (kept with the
//    compiled graph), so one vpdpbusd advances 16 rows and a group streams
//    from memory sequentially.
//  * qgemm (src/quant/qgemm.h), for M >= kGemmMinRows of the types it covers
//    (q4_0 q4_1 q5_0 q5_1 q8_0 q4_K q5_K q6_K) on AVX2 / AVX-512 VNNI:
//    activations quantized once to the vec_dot_type, weight tiles repacked
//    per call into int8 groups and multiplied by a register-tiled integer
//    micro-kernel (the same integer sums as the direct path).
//  * direct (the type has vec_dot): activations are converted once per call
//    to the type's vec_dot_type (Q8_0 / Q8_K / f32) and each output is one
//    integer-SIMD dot against the raw weight row. Work is split over tiles of
//    weight rows (and over blocks of activation rows when there are few
//    tiles); inside a task every activation row of the block is run against
//    the tile, so a tile is read from memory once and then from cache.
//  * tiled: types without vec_dot are dequantized once to f32 into the
//    backend instance's DequantCache when they fit its budget (then a GEMV over
//    the f32 rows for small M, one sgemm otherwise); for M >= kGemmMinRows
//    the direct types come here too, without the cache. Uncached, each task
//    dequantizes a few rows into thread-local scratch (bounded) and runs a
//    small sgemm on them. Never the whole model up front. Prefill of q2_K /
//    q3_K and of every direct type under RLX_ISA=portable still takes it.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/quant_matmul.h"
#include "backends/cpu/weight_pack.h"
#include "quant/dequant_cache.h"
#include "quant/qgemm.h"
#include "quant/row_groups.h"
#include "quant/vec_dot.h"
#include "rlx/error.h"
#include "rlx/quant.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

using quant::GgmlType;
using quant::TypeTraits;

struct Problem {
  const float* x;
  const uint8_t* w;
  const float* bias;
  float* y;
  int64_t M, N, K;
  size_t rb;  // weight bytes per row
};

// Weight rows per tile: ~32 KiB of weight so a tile stays in L1/L2 while the
// activation rows of a block pass over it.
int64_t tile_rows(size_t row_bytes) {
  return std::clamp<int64_t>(int64_t((32 << 10) / std::max<size_t>(row_bytes, 1)), 1, 64);
}

void direct(const Problem& p, const TypeTraits& tr) {
  const GgmlType vdt = tr.vec_dot_type;
  const size_t ab = quant::row_size(vdt, p.K);
  const uint8_t* act = reinterpret_cast<const uint8_t*>(p.x);
  std::vector<uint8_t> qa;
  if (vdt != GgmlType::F32) {
    qa.resize(size_t(p.M) * ab);
    parallel_for(p.M, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(p.K, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t m = b; m < e; ++m)
                     quant::quantize_activations(vdt, p.x + m * p.K, qa.data() + m * ab, p.K);
                 });
    act = qa.data();
  }
  const int64_t TN = tile_rows(p.rb);
  const int64_t ntiles = (p.N + TN - 1) / TN;
  // Enough tasks for the pool from weight tiles alone: keep all M rows in a
  // task (weights read exactly once); otherwise split M into blocks too.
  const int64_t want = 8 * int64_t(num_threads());
  const int64_t MB = ntiles >= want ? p.M : std::max<int64_t>(1, p.M * ntiles / want);
  const int64_t nmb = (p.M + MB - 1) / MB;
  const auto dot = tr.vec_dot;
  const quant::detail::VecDot4Fn dot4 = quant::detail::vec_dot4(tr.type);
  // Not float rows: the hardware prefetcher follows their plain stream, and a
  // burst of 48+ prefetches per row filled the miss buffers and stalled
  // (2 threads on Zen 5: 100M f32 decode 127 -> 156 tok/s without them; 1B
  // f16 / bf16, rows of 4 KiB, 14.4-16.2 -> 15.9-19.8; 100M f16 / bf16 neutral).
  const bool prefetch = tr.is_quantized;
  // Each task does MB x TN dots of K: a grain of >= ~64K multiply-adds.
  const int64_t grain =
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, MB * TN * std::max<int64_t>(p.K, 1)));
  parallel_for(ntiles * nmb, grain, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t n0 = (t / nmb) * TN, n1 = std::min(p.N, n0 + TN);
      const int64_t m0 = (t % nmb) * MB, m1 = std::min(p.M, m0 + MB);
      for (int64_t m = m0; m < m1; ++m) {
        const uint8_t* a = act + size_t(m) * ab;
        float* yr = p.y + m * p.N;
        int64_t n = n0;
        if (dot4)
          for (; n + 4 <= n1; n += 4) dot4(p.w + size_t(n) * p.rb, p.rb, a, p.K, yr + n);
        for (; n < n1; ++n) {
          // Two rows ahead, as the four-row kernels prefetch their next group:
          // demand misses alone left decode at a third of the memory's speed.
          if (prefetch) {
            const uint8_t* ahead = p.w + size_t(n + 2) * p.rb;
            for (size_t o = 0; o < p.rb; o += 64) __builtin_prefetch(ahead + o);
          }
          yr[n] = dot(p.w + size_t(n) * p.rb, a, p.K);
        }
        if (p.bias)
          for (n = n0; n < n1; ++n) yr[n] += p.bias[n];
      }
    }
  });
}

void add_bias(const Problem& p) {
  if (!p.bias) return;
  for (int64_t m = 0; m < p.M; ++m)
    for (int64_t n = 0; n < p.N; ++n) p.y[m * p.N + n] += p.bias[n];
}

// Decode GEMV on regrouped rows (quant/row_groups.h): each activation row
// quantized to the type's vec_dot_type once, groups of 16 weight rows split
// over the pool, every activation row run against a group while it is in cache.
void grouped(const Problem& p, const TypeTraits& tr, const quant::RowGroups& rg,
             int64_t first_group, quant::GroupKernel kernel) {
  const int64_t nsum = quant::group_activation_entries(p.K);
  const size_t ab = quant::row_size(tr.vec_dot_type, p.K);
  std::vector<uint8_t> qa(size_t(p.M) * ab);
  std::vector<float> d(size_t(p.M * nsum));
  std::vector<int32_t> sums(size_t(p.M * nsum));
  std::vector<quant::GroupActivation> acts(size_t(p.M));
  for (int64_t m = 0; m < p.M; ++m) {
    uint8_t* q = qa.data() + size_t(m) * ab;
    float* dm = d.data() + m * nsum;
    int32_t* sm = sums.data() + m * nsum;
    quant::quantize_activations(tr.vec_dot_type, p.x + m * p.K, q, p.K);
    quant::prepare_group_activation(tr.type, q, p.K, dm, sm);
    acts[size_t(m)] = {q, dm, sm};
  }
  // A task of >= ~64K multiply-adds.
  const int64_t grain =
      std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, quant::kGroupRows * p.K * p.M));
  const int64_t groups = (p.N + quant::kGroupRows - 1) / quant::kGroupRows;
  // Several rows (batched decode) take a task's groups a cache-sized block at a time, every row
  // through a block before the next, so the weights come from memory once, not once a row (a
  // task's share is megabytes): 4 sequences of the 1B q4_K, 2 threads, 105 -> 123 tok/s.
  const int64_t block_groups =
      p.M == 1 ? groups : std::max<int64_t>(1, (96 << 10) / int64_t(quant::kGroupRows * p.rb));
  parallel_for(groups, grain, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; g += block_groups) {
      const int64_t ge = std::min(e, g + block_groups);
      float* yb = p.y + g * quant::kGroupRows;
      if (p.M > 1 && quant::gemv_row_groups_rows(kernel, rg, acts.data(), p.M, first_group + g,
                                                 first_group + ge, yb, p.N))
        continue;
      for (int64_t m = 0; m < p.M; ++m)
        quant::gemv_row_groups(kernel, rg, acts[size_t(m)], first_group + g, first_group + ge,
                               yb + m * p.N);
    }
  });
  add_bias(p);
}

void tiled(const Problem& p, const TypeTraits& tr, const std::shared_ptr<Buffer>& owner,
           quant::DequantCache* cache) {
  auto fill = [&](float* dst) {
    parallel_for(p.N, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(p.K, 1)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t n = b; n < e; ++n)
                     tr.dequantize_row(p.w + size_t(n) * p.rb, dst + n * p.K, p.K);
                 });
  };
  const quant::DequantCache::Key key{p.w, tr.type, p.N, p.K};
  quant::DequantCache::Floats wf;
  if (cache) wf = cache->get_or_fill(key, size_t(p.N) * p.rb, owner, fill);
  if (wf && p.M < kGemmMinRows) {
    // Few rows: bandwidth-bound GEMV over the cached f32 rows.
    Problem q = p;
    q.w = reinterpret_cast<const uint8_t*>(wf->data());
    q.rb = size_t(p.K) * sizeof(float);
    direct(q, quant::traits(GgmlType::F32));
    return;
  }
  if (wf) {
    gemm(false, true, p.M, p.N, p.K, 1.f, p.x, p.K, wf->data(), p.K, 0.f, p.y, p.N);
    add_bias(p);
    return;
  }
  // Not cacheable: tiles of 64 rows dequantized per task into thread-local
  // scratch (64 K floats), two column panels of the AVX-512 kernel. Tiles
  // sized to 256 KiB instead were 11 rows at K = 5632 (1B FFN down), which
  // fell to OpenBLAS's narrow path: half of a 1B f16 prefill was spent there.
  const int64_t TN = 64;
  const int64_t ntiles = (p.N + TN - 1) / TN;
  // The activations packed once for every tile (each tile's product would
  // repack all of them for its 64 rows), 512 rows at a time so the packed
  // copy stays bounded on long prompts.
  for (int64_t m0 = 0; m0 < p.M; m0 += 512) {
    const int64_t M = std::min<int64_t>(512, p.M - m0);
    const float* x = p.x + m0 * p.K;
    float* y = p.y + m0 * p.N;
    std::optional<PackedOperand> pa;
    if (ntiles > 1 && gemm_uses_packed_operands(TN)) pa = pack_a_operand(false, x, p.K, M, p.K);
    const GemmPacked packed{pa ? &*pa : nullptr, nullptr};
    parallel_for(ntiles, 1, [&](int64_t b, int64_t e) {
      thread_local std::vector<float> scratch;
      for (int64_t t = b; t < e; ++t) {
        const int64_t n0 = t * TN, rows = std::min(p.N, n0 + TN) - n0;
        scratch.resize(size_t(rows * p.K));
        for (int64_t r = 0; r < rows; ++r)
          tr.dequantize_row(p.w + size_t(n0 + r) * p.rb, scratch.data() + r * p.K, p.K);
        gemm_serial(false, true, M, rows, p.K, 1.f, x, p.K, scratch.data(), p.K, 0.f, y + n0, p.N,
                    {}, packed);
      }
    });
  }
  add_bias(p);
}

}  // namespace

void dequant_matmul(const KernelCall& c) {
  const Tensor &x = c.in[0], &w = c.in[1];
  const auto& a = c.node.attrs_as<QuantAttrs>();
  const std::string& scheme = a.scheme;
  const GgmlType type = quant::parse_type_name(scheme);
  const TypeTraits& tr = quant::traits(type);
  const int64_t K = a.k;
  RLX_CHECK(x.dtype() == DType::F32 && c.out.dtype() == DType::F32,
            "dequant_matmul: kernel expects f32 x and output");
  RLX_CHECK(w.dtype() == DType::U8 && w.dims().size() == 2, "dequant_matmul: w must be u8 2-d");
  RLX_CHECK(K >= 0 && K % tr.block_size == 0, "dequant_matmul: k = ", K,
            " is not a multiple of the ", scheme, " block size ", tr.block_size);
  const size_t rb = quant::row_size(type, K);
  const int64_t N = w.dims()[0];
  RLX_CHECK(w.dims()[1] == int64_t(rb), "dequant_matmul: w rows are ", w.dims()[1],
            " bytes, expected ", rb, " for k = ", K, " ", scheme);
  RLX_CHECK(!x.dims().empty() && x.dims().back() == K, "dequant_matmul: x last dim != k = ", K);
  const int64_t M = K ? x.numel() / K : c.out.numel() / std::max<int64_t>(N, 1);
  const float* bias = nullptr;
  if (c.in.size() > 2) {
    RLX_CHECK(c.in[2].dtype() == DType::F32 && c.in[2].numel() == N,
              "dequant_matmul: bias must be f32 [", N, "]");
    bias = c.in[2].data<float>();
  }
  QuantRows rows{.type = type,
                 .w = static_cast<const uint8_t*>(w.raw()),
                 .rb = rb,
                 .N = N,
                 .K = K,
                 .owner = w.buffer()};
  if (M < kGemmMinRows) rows.groups = regrouped(c.pack, 0, type, rows.w, rb, N, K);
  // Float rows have no regrouped layout; they are streamed as they are, from huge pages.
  if (!tr.is_quantized) rows.w = resident_rows(c.pack, rows.w, rb * size_t(N));
  quant_matmul(c.ctx, rows, x.data<float>(), M, bias, c.out.data<float>());
}

const quant::RowGroups* regrouped(WeightPack* pack, int slot, GgmlType type, const uint8_t* w,
                                  size_t rb, int64_t N, int64_t K) {
  if (!pack || quant::group_kernel(type) == quant::GroupKernel::none) return nullptr;
  const quant::RowGroups* rg =
      pack->row_groups(slot, w, [&] { return shared_row_groups(type, w, rb, N, K); });
  return rg && rg->rows == N && rg->k == K ? rg : nullptr;
}

namespace {

// One T per weight across compiled graphs: made by the first, kept while any holds it.
template <class T, class Fits, class Make>
std::shared_ptr<const T> shared_by_source(const void* w, Fits fits, Make make) {
  static std::mutex m;
  static std::map<const void*, std::weak_ptr<const T>> made;
  std::lock_guard lock(m);
  std::erase_if(made, [](const auto& e) { return e.second.expired(); });
  std::shared_ptr<const T> g = made[w].lock();
  if (!g || !fits(*g)) {
    g = std::make_shared<const T>(make());
    made[w] = g;
  }
  return g;
}

}  // namespace

SharedRowGroups shared_row_groups(GgmlType type, const uint8_t* w, size_t rb, int64_t N,
                                  int64_t K) {
  return {
      w,
      shared_by_source<quant::RowGroups>(
          w, [&](const quant::RowGroups& g) { return g.type == type && g.rows == N && g.k == K; },
          [&] { return quant::make_row_groups(type, w, rb, N, K); })};
}

SharedRowsCopy shared_rows_copy(const uint8_t* w, size_t bytes) {
  return {w,
          shared_by_source<RowsCopy>(
              w, [&](const RowsCopy& c) { return c.bytes == bytes; },
              [&] {
                RowsCopy c{bytes, alloc_huge(bytes)};
                constexpr int64_t kChunk = 1 << 20;
                parallel_for((int64_t(bytes) + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e) {
                  const size_t o = size_t(b * kChunk);
                  std::memcpy(c.data.get() + o, w + o, std::min(bytes, size_t(e * kChunk)) - o);
                });
                // Later steps read the copy: the mapped pages go back to the OS.
                release_file_pages(w, bytes);
                return c;
              })};
}

const uint8_t* resident_rows(WeightPack* pack, const uint8_t* w, size_t bytes) {
  if (!pack || bytes < kHugeBufferMin) return w;
  const RowsCopy* c = pack->rows_copy(w, [&] { return shared_rows_copy(w, bytes); });
  return c && c->bytes == bytes ? c->data.get() : w;
}

void quant_matmul(const Context& ctx, const QuantRows& w, const float* x, int64_t M,
                  const float* bias, float* y) {
  const int64_t N = w.N, K = w.K;
  const TypeTraits& tr = quant::traits(w.type);
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) y[m * N + n] = bias ? bias[n] : 0.f;
    return;
  }
  const Problem p{x, w.w, bias, y, M, N, K, w.rb};
  // Decode on constant rows of a regrouped type: their rows regrouped on first use.
  if (M < kGemmMinRows && w.groups)
    return grouped(p, tr, *w.groups, w.first_group, quant::group_kernel(w.type));
  // Many rows of a type with an integer GEMM: activations quantized once
  // (as the direct path and ggml do), integer products on the blocks.
  if (M >= kGemmMinRows && quant::qgemm::path_for(w.type) != quant::qgemm::Path::none) {
    quant::qgemm::matmul(w.type, p.x, M, K, p.w, w.rb, N, bias, y);
    return;
  }
  // ggml_numerics quantizes activations at every M, as ggml does, so logits
  // can be compared with llama.cpp's rounding for rounding.
  if (tr.vec_dot && (M < kGemmMinRows || ctx.ggml_numerics))
    direct(p, tr);
  else  // types with a direct kernel stream tiles instead of filling the cache
    tiled(p, tr, w.owner, tr.vec_dot ? nullptr : ctx.dequant_cache);
}

}  // namespace rlx::cpu
