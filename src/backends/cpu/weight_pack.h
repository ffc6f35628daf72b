// A node's constant GEMM operand (a matmul's or conv's weight), packed for
// rlx's sgemm on first use and kept with the compiled graph: loading and
// compiling stay as fast as before, and every later run skips the packing.
#pragma once
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>

#include "backends/cpu/sgemm.h"

namespace rlx::cpu {

class WeightPack {
 public:
  // The operand packed from `source` by `pack` (called once, thread safe);
  // null when this slot already holds another source's packing (the weight
  // was rebound), so the caller packs per call as usual.
  const PackedOperand* get(const float* source, const std::function<PackedOperand()>& pack) {
    // Every run after the first takes only the atomic load (kernels ask once per tile).
    const PackedOperand* done = ready_.load(std::memory_order_acquire);
    if (!done) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!packed_) {
        packed_ = pack();
        ready_.store(&*packed_, std::memory_order_release);
      }
      done = &*packed_;
    }
    return done->source == source ? done : nullptr;
  }

 private:
  std::mutex mu_;
  std::optional<PackedOperand> packed_;
  std::atomic<const PackedOperand*> ready_{nullptr};
};

}  // namespace rlx::cpu
