// libFuzzer target for the .npy reader (see tests/fuzz/README.md). Any input
// must give a tensor or an rlx::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "rlx/io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::expect_clean([&] {
    rlx::Tensor t = rlx::read_npy_bytes(data, size, "fuzz.npy");
    volatile double sink = 0;
    for (int64_t i = 0; i < t.numel(); ++i) sink = sink + t.item_as_double(i);
  });
  return 0;
}
