// libFuzzer target for ONNX import (see tests/fuzz/README.md): parse the
// ModelProto (no external data: there is no model directory), lower every
// node through the ONNX op registry, verify. Any input must give a model or
// an rlx::Error (and not an ImportInternalError: a library exception inside a
// lowering rule).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "frontends/onnx/import.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rlx::fuzz::expect_clean([&] {
    try {
      const rlx::onnx::Model om = rlx::onnx::parse_model(data, size, "fuzz.onnx", "");
      const rlx::Model m = rlx::import_onnx(om);
      volatile size_t sink = m.graph.size();
      (void)sink;
    } catch (const rlx::ImportInternalError& e) {
      std::fprintf(stderr, "fuzz: %s\n", e.what());
      std::abort();
    }
  });
  return 0;
}
