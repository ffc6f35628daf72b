// libFuzzer target for torch-ir.json import (see tests/fuzz/README.md): parse,
// lower every node through the aten registry, verify. The weights the document
// declares are given as zeros when they are small, so lowering gets past the
// weight check. Any input must give a model or an rlx::Error (and not an
// ImportInternalError: a library exception inside a lowering rule).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "frontends/torch/import.h"
#include "frontends/torch/torch_ir.h"
#include "fuzz_common.h"
#include "rlx/checked.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string name = "fuzz/torch-ir.json";
  rlx::fuzz::expect_clean([&] {
    try {
      const rlx::torch_ir::Document doc = rlx::torch_ir::parse(text, name);
      rlx::TensorMap weights;
      int64_t total = 0;
      for (const auto& w : doc.weights) {
        total += rlx::checked_numel(w.shape, "fuzz weight");
        if (total > rlx::fuzz::kMaxFuzzElements) break;
        weights.insert_or_assign(w.key, rlx::Tensor(w.shape, w.dtype));
      }
      const rlx::Model m = rlx::import_torch_ir(text, name, std::move(weights));
      volatile size_t sink = m.graph.size();
      (void)sink;
    } catch (const rlx::ImportInternalError& e) {
      std::fprintf(stderr, "fuzz: %s\n", e.what());
      std::abort();
    }
  });
  return 0;
}
