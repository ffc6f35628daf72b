// Helpers shared by the tensor file readers and writers: overflow-safe element
// counts for untrusted shapes; writes go through io/atomic_write.h.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "io/atomic_write.h"
#include "rlx/checked.h"
#include "rlx/error.h"
#include "rlx/tensor.h"

namespace rlx::io {

// Element count of an untrusted shape read as unsigned dims; returns false
// (and leaves `numel` unset) when the shape is beyond the limits of
// rlx/checked.h (rank, product of the non-zero dims), so later numel() and
// stride math cannot overflow, even for empty tensors.
inline bool checked_numel(const std::vector<uint64_t>& dims, uint64_t& numel) {
  constexpr uint64_t kMax = uint64_t(kMaxElements);
  if (dims.size() > size_t(kMaxRank)) return false;
  uint64_t nonzero = 1;
  bool empty = false;
  for (uint64_t d : dims) {
    if (d == 0) {
      empty = true;
      continue;
    }
    if (d > kMax || nonzero > kMax / d) return false;
    nonzero *= d;
  }
  numel = empty ? 0 : nonzero;
  return true;
}

inline std::string_view bytes_of(const Tensor& contiguous) {
  return {static_cast<const char*>(contiguous.raw()), contiguous.nbytes()};
}

}  // namespace rlx::io
