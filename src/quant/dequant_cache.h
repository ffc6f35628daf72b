// Dequantized-weight cache for the quant types without a direct vec_dot:
// dequant_matmul dequantizes such a weight once to f32 and reuses it across
// calls while it fits the byte budget.
//
// Entries are keyed by (weight data pointer, type, rows, cols). A pointer can
// be reused after its buffer is freed, so each entry also holds a weak
// reference to the source buffer (an expired one is a miss) and a fingerprint
// of sampled source bytes (a mismatch, i.e. the bytes were rewritten in
// place, is a miss). Eviction is FIFO by insertion. An entry larger than the
// whole budget is never cached; budget 0 disables the cache.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <vector>

#include "rlx/quant.h"

namespace rlx::quant {

class DequantCache {
 public:
  struct Key {
    const void* data;
    GgmlType type;
    int64_t rows, cols;
    auto tie() const { return std::tuple(data, uint32_t(type), rows, cols); }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  using Floats = std::shared_ptr<const std::vector<float>>;

  explicit DequantCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The cached rows x cols floats of the weight at key.data (source bytes
  // `src_bytes` long, owned by `owner`), created with fill(dst) on a miss.
  // Returns nullptr, without calling fill, when the entry cannot be cached
  // (too large or cache disabled): the caller then dequantizes tile by tile.
  // fill runs without the lock held, so it may use the thread pool.
  Floats get_or_fill(const Key& key, size_t src_bytes, const std::shared_ptr<const void>& owner,
                     const std::function<void(float*)>& fill);

  size_t budget() const;
  void set_budget(size_t bytes);  // evicts down to the new budget
  size_t bytes_used() const;
  size_t size() const;
  bool contains(const Key& key) const;
  void clear();

  // Fingerprint of sampled bytes (public for tests).
  static uint64_t fingerprint(const void* data, size_t bytes);

 private:
  struct Entry {
    Floats floats;
    std::weak_ptr<const void> owner;
    uint64_t fp;
    size_t bytes;
  };
  void erase_locked(const Key& key);
  void evict_locked(size_t need);

  mutable std::mutex mu_;
  size_t budget_;
  size_t used_ = 0;
  std::map<Key, Entry> map_;
  std::deque<Key> fifo_;  // insertion order, oldest first
};

// There is no process-wide cache: each CPU backend instance owns one, sized
// by CpuOptions::dequant_cache_bytes (default 512 MiB).
constexpr size_t kDefaultDequantCacheBytes = size_t(512) << 20;

}  // namespace rlx::quant
