// A node's constant weight in a kernel's own layout, made on first use and
// kept with the compiled graph: loading and compiling stay as fast as before,
// and every later run skips the packing. A matmul's or conv's f32 weight is
// packed for rlx's sgemm; a dequant_matmul's quantized rows are regrouped
// for the decode GEMV (quant/row_groups.h), its float rows copied into huge
// pages.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>

#include "backends/cpu/sgemm.h"
#include "core/file_pages.h"
#include "core/huge_pages.h"
#include "quant/row_groups.h"

namespace rlx::cpu {

// One packed form of T (which names its `source`), made once, thread safe.
template <class T>
class PackSlot {
 public:
  // The form made from `source` by `make`; null when this slot already holds
  // another source's (the weight was rebound), so the caller packs per call.
  const T* get(const void* source, const std::function<T()>& make) {
    // Every run after the first takes only the atomic load (kernels ask once per tile).
    const T* done = ready_.load(std::memory_order_acquire);
    if (!done) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!made_) {
        made_ = make();
        ready_.store(&*made_, std::memory_order_release);
      }
      done = &*made_;
    }
    return static_cast<const void*>(done->source) == source ? done : nullptr;
  }

 private:
  std::mutex mu_;
  std::optional<T> made_;
  std::atomic<const T*> ready_{nullptr};
};

// Regrouped rows depend only on the weight's bytes, so every compiled graph
// over the same mapped weight (rlx serve's single and batched graphs) shares
// one copy: made by the first, kept while any holds it.
struct SharedRowGroups {
  const void* source = nullptr;
  std::shared_ptr<const quant::RowGroups> groups;
};
SharedRowGroups shared_row_groups(quant::GgmlType type, const uint8_t* w, size_t row_bytes,
                                  int64_t N, int64_t K);

// A weight's bytes as they are, copied into huge pages (core/huge_pages.h)
// for kernels that stream them every step (float rows of decode GEMVs),
// shared the same way.
struct RowsCopy {
  size_t bytes = 0;
  HugeBuffer data;
};
struct SharedRowsCopy {
  const void* source = nullptr;
  std::shared_ptr<const RowsCopy> copy;
};
SharedRowsCopy shared_rows_copy(const uint8_t* w, size_t bytes);

class WeightPack {
 public:
  // `source_floats`: the weight's size. Once packed, its mapped pages (if it
  // lies in a file mapping) are handed back to the OS: the packed form is
  // what later runs read (core/file_pages.h).
  const PackedOperand* get(const float* source, size_t source_floats,
                           const std::function<PackedOperand()>& pack) {
    return sgemm_.get(source, [&] {
      PackedOperand packed = pack();
      release_file_pages(source, source_floats * sizeof(float));
      return packed;
    });
  }
  // slot: which of the node's weights (moe_ffn: gate, up, down).
  const quant::RowGroups* row_groups(int slot, const uint8_t* source,
                                     const std::function<SharedRowGroups()>& make) {
    const SharedRowGroups* g = groups_[slot].get(source, make);
    return g ? g->groups.get() : nullptr;
  }
  const RowsCopy* rows_copy(const uint8_t* source, const std::function<SharedRowsCopy()>& make) {
    const SharedRowsCopy* c = copy_.get(source, make);
    return c ? c->copy.get() : nullptr;
  }

 private:
  PackSlot<PackedOperand> sgemm_;
  PackSlot<SharedRowGroups> groups_[3];
  PackSlot<SharedRowsCopy> copy_;
};

}  // namespace rlx::cpu
