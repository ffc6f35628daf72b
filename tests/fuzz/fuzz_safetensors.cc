// libFuzzer target for the safetensors reader (built only with clang; see
// tests/CMakeLists.txt). Any input must give tensors or an rlx::Error.
//   ./build/tests/fuzz_safetensors -max_total_time=60 corpus/
#include <cstddef>
#include <cstdint>

#include "rlx/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    rlx::TensorMap m = rlx::read_safetensors_bytes(data, size, "fuzz");
    volatile double sink = 0;
    for (const auto& [name, t] : m)
      for (int64_t i = 0; i < t.numel(); ++i) sink = sink + t.item_as_double(i);
  } catch (const rlx::Error&) {
  }
  return 0;
}
