// Dispatch on an element's byte size, for kernels that only move elements
// (movement, gather): one typed load/store per element, whatever the dtype.
#pragma once
#include <cstddef>
#include <cstdint>

#include "rlx/error.h"

namespace rlx::cpu {

// Calls f(U{}) with U the unsigned integer type of `esize` bytes.
template <typename F>
void visit_elem_size(size_t esize, F&& f) {
  switch (esize) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint64_t{});
    default:
      throw make_error("unsupported element size ", esize);
  }
}

}  // namespace rlx::cpu
