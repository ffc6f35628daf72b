#include "core/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>

#include "rlx/error.h"

namespace rlx {

HugeBuffer alloc_huge(size_t bytes) {
  constexpr size_t kHuge = size_t(2) << 20;
  const size_t align = bytes >= kHugeBufferMin ? kHuge : 64;
  const size_t padded = std::max(align, (bytes + align - 1) / align * align);
  HugeBuffer b(static_cast<uint8_t*>(std::aligned_alloc(align, padded)));
  RLX_CHECK(b, "out of memory for a buffer of ", padded, " bytes");
  if (align == kHuge) ::madvise(b.get(), padded, MADV_HUGEPAGE);  // advice: may fail
  return b;
}

}  // namespace rlx
