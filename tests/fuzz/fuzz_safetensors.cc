// libFuzzer target for the safetensors reader (see tests/fuzz/README.md). Any
// input must give tensors or an rlx::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "rlx/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::expect_clean([&] {
    rlx::TensorMap m = rlx::read_safetensors_bytes(data, size, "fuzz.safetensors");
    volatile double sink = 0;
    for (const auto& [name, t] : m)
      for (int64_t i = 0; i < t.numel(); ++i) sink = sink + t.item_as_double(i);
  });
  return 0;
}
