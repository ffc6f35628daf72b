// libFuzzer target for the GGUF reader (see tests/fuzz/README.md): parse,
// print every metadata value, and dequantize every (small) tensor. Any input
// must give a File or an rlx::Error.
#include <cstddef>
#include <cstdint>

#include "fuzz_common.h"
#include "rlx/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::expect_clean([&] {
    const rlx::gguf::File f = rlx::gguf::read_bytes(data, size, "fuzz.gguf");
    volatile size_t sink = 0;
    for (const auto& [key, v] : f.metadata) sink = sink + v.to_string().size();
    for (const auto& t : f.tensors) {
      if (t.numel() > rlx::fuzz::kMaxFuzzElements) continue;
      const rlx::Tensor x = rlx::gguf::to_f32(f, t);
      volatile double s = 0;
      for (int64_t i = 0; i < x.numel(); ++i) s = s + x.item_as_double(i);
    }
  });
  return 0;
}
