// DequantCache: budget, FIFO eviction, oversize entries, disabled cache, and
// staleness (freed or rewritten source buffers); then the runtime path.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "quant/dequant_cache.h"
#include "rlx/quant.h"
#include "support/testing.h"

namespace rlx::quant {
namespace {
using namespace rlx::testing;

struct Src {
  std::shared_ptr<std::vector<uint8_t>> bytes = std::make_shared<std::vector<uint8_t>>(64, 1);
  DequantCache::Key key(int64_t rows = 10, int64_t cols = 100) const {
    return {bytes->data(), GgmlType::Q4_0, rows, cols};
  }
};

// 10 x 100 floats = 4000 bytes per entry unless told otherwise.
DequantCache::Floats get(DequantCache& c, const Src& s, int* fills, int64_t rows = 10,
                         int64_t cols = 100) {
  return c.get_or_fill(s.key(rows, cols), s.bytes->size(), s.bytes, [&](float* d) {
    ++*fills;
    for (int64_t i = 0; i < rows * cols; ++i) d[i] = float(i);
  });
}

TEST(DequantCache, HitsBudgetAndFifoEviction) {
  DequantCache c(8000);  // room for two entries
  Src a, b, d;
  int fills = 0;
  auto fa = get(c, a, &fills);
  ASSERT_TRUE(fa);
  EXPECT_EQ((*fa)[7], 7.f);
  EXPECT_EQ(get(c, a, &fills), fa);  // hit: same storage, no refill
  EXPECT_EQ(fills, 1);
  get(c, b, &fills);
  EXPECT_EQ(c.bytes_used(), 8000u);
  EXPECT_EQ(c.size(), 2u);
  get(c, a, &fills);  // a hit does not refresh a's place: FIFO, not LRU
  get(c, d, &fills);  // evicts the oldest insertion: a
  EXPECT_EQ(fills, 3);
  EXPECT_FALSE(c.contains(a.key()));
  EXPECT_TRUE(c.contains(b.key()));
  EXPECT_TRUE(c.contains(d.key()));
  EXPECT_LE(c.bytes_used(), c.budget());
  EXPECT_TRUE(fa);     // evicted storage stays valid for its holder
  c.set_budget(4000);  // shrinking evicts oldest first
  EXPECT_FALSE(c.contains(b.key()));
  EXPECT_TRUE(c.contains(d.key()));
  EXPECT_EQ(c.bytes_used(), 4000u);
}

TEST(DequantCache, OversizeNeverCachedAndZeroDisables) {
  DequantCache c(8000);
  Src a, b;
  int fills = 0;
  get(c, b, &fills);
  EXPECT_FALSE(get(c, a, &fills, 10, 201));  // 8040 bytes > whole budget
  EXPECT_EQ(fills, 1);                       // never filled, nothing evicted
  EXPECT_TRUE(c.contains(b.key()));
  EXPECT_EQ(c.size(), 1u);
  DequantCache off(0);
  EXPECT_FALSE(get(off, a, &fills, 1, 1));
  EXPECT_EQ(off.size(), 0u);
  EXPECT_EQ(fills, 1);
}

TEST(DequantCache, StaleEntriesAreRefilled) {
  DequantCache c(1 << 20);
  Src a;
  int fills = 0;
  get(c, a, &fills);
  (*a.bytes)[40] = 7;  // rewritten in place: fingerprint differs
  get(c, a, &fills);
  EXPECT_EQ(fills, 2);
  // Pointer reuse: the owner that registered the entry is gone and a new
  // owner's bytes sit at the same address (kept alive here by `storage`, so
  // nothing reads freed memory): a miss, even though the bytes are equal.
  std::vector<uint8_t> storage(64, 1);
  const DequantCache::Key k{storage.data(), GgmlType::Q4_0, 1, 1};
  auto fill = [&](float* d) { *d = 1, ++fills; };
  auto owner1 = std::make_shared<int>(1);
  c.get_or_fill(k, 64, owner1, fill);
  c.get_or_fill(k, 64, owner1, fill);
  EXPECT_EQ(fills, 3);
  owner1.reset();
  auto owner2 = std::make_shared<int>(2);
  c.get_or_fill(k, 64, owner2, fill);
  EXPECT_EQ(fills, 4);
  c.get_or_fill(k, 64, owner2, fill);
  EXPECT_EQ(fills, 4);
  EXPECT_TRUE(c.contains(k));
}

// The runtime: an IQ weight (no vec_dot) lands in the cache of the backend
// the executable was compiled for, and a second run gives identical results
// from it. Backends with different budgets in one process are independent.
TEST(DequantCache, EachBackendOwnsItsCache) {
  const int64_t K = 256, N = 8;
  Tensor w(Dims{N, int64_t(row_size(GgmlType::TQ2_0, K))}, DType::U8);
  for (int64_t i = 0; i < w.numel(); ++i) w.data<uint8_t>()[i] = uint8_t(i * 37 % 251) & 0xBF;
  const Tensor x = random_tensor({3, K}, DType::F32, 5);
  Graph g;
  NodeId xi = g.input("x", x.shape());
  NodeId wi = g.input("w", w.shape());
  g.add_output(
      "y", g.add(Op::DequantMatmul, {xi, wi}, Attrs{{"scheme", std::string("tq2_0")}, {"k", K}}));
  auto run = [&](const std::shared_ptr<const Backend>& b) {
    CompileOptions o;
    o.backend = b;
    Session s(Executable::compile(g, {}, o));
    return s.run({{"x", x}, {"w", w}}).at("y");
  };
  auto big = make_cpu_backend({.dequant_cache_bytes = size_t(1) << 20});
  auto off = make_cpu_backend({.dequant_cache_bytes = 0});
  auto other = make_cpu_backend({.dequant_cache_bytes = size_t(1) << 20});
  const DequantCache *big_c = cpu::dequant_cache_of(*big), *off_c = cpu::dequant_cache_of(*off),
                     *other_c = cpu::dequant_cache_of(*other);
  ASSERT_TRUE(big_c && off_c && other_c);
  EXPECT_EQ(cpu::dequant_cache_of(*make_coreml_backend()), nullptr);

  const Tensor y1 = run(big);
  EXPECT_TRUE(big_c->contains({w.raw(), GgmlType::TQ2_0, N, K}));
  EXPECT_EQ(big_c->size(), 1u);
  EXPECT_EQ(big_c->bytes_used(), size_t(N * K * 4));
  const Tensor y2 = run(big);
  EXPECT_TRUE(all_equal(y1, y2));
  EXPECT_EQ(big_c->size(), 1u);
  // The disabled cache takes the tile path: same numbers, nothing cached,
  // and neither run touched the third backend's cache.
  const Tensor y3 = run(off);
  EXPECT_EQ(off_c->size(), 0u);
  EXPECT_EQ(off_c->budget(), 0u);
  EXPECT_TRUE(all_close(y3, y1, 1e-5, 1e-5));
  EXPECT_EQ(other_c->size(), 0u);
  EXPECT_EQ(big_c->size(), 1u);
}

}  // namespace
}  // namespace rlx::quant
