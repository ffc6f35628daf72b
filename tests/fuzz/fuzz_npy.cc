// libFuzzer target for the .npy reader (built only with clang; see
// tests/CMakeLists.txt). Any input must give a tensor or an rlx::Error.
#include <cstddef>
#include <cstdint>

#include "rlx/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rlx::Tensor t = rlx::read_npy_bytes(data, size, "fuzz");
    volatile double sink = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sink = sink + t.item_as_double(i);
  } catch (const rlx::Error&) {
  }
  return 0;
}
