// libFuzzer target for the .mlpackage reader of the MIL interpreter (see
// tests/fuzz/README.md). The input is split into the two files of a package:
//   [u32 little-endian n][n bytes: model.mlmodel][the rest: weight.bin]
// (n is clamped to what is there; no rest means no weight.bin). The program's
// function `main` then runs on zero inputs of its declared types (symbolic
// dims as 1). Any input must give outputs or an rlx::Error.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "backends/coreml/interp/package.h"
#include "fuzz_common.h"
#include "rlx/checked.h"

namespace {

using namespace rlx::coreml;

rlx::DType host_dtype(pb::DataType dt) {
  if (interp::is_float_dt(dt)) return rlx::DType::F32;
  if (dt == pb::BOOL) return rlx::DType::Bool;
  return rlx::DType::I32;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t n = 0;
  if (size >= 4) std::memcpy(&n, data, 4);
  const size_t body = size >= 4 ? size - 4 : 0;
  const size_t model_len = n < body ? n : body;
  const std::string model(reinterpret_cast<const char*>(data) + (size - body), model_len);
  const std::string weights(reinterpret_cast<const char*>(data) + (size - body) + model_len,
                            body - model_len);
  rlx::fuzz::expect_clean([&] {
    const interp::Package p = interp::package_from_bytes(
        model, weights.empty() ? nullptr : &weights, "fuzz.mlpackage/model.mlmodel");
    rlx::TensorMap inputs;
    const auto& fns = p.model.mlprogram().functions();
    if (auto f = fns.find("main"); f != fns.end()) {
      int64_t total = 0;
      for (const auto& in : f->second.inputs()) {
        const Type t = get_type(in.type());
        rlx::Dims dims;
        for (int64_t d : t.dims) dims.push_back(d < 0 ? 1 : d);
        total += rlx::checked_numel(dims, "fuzz input");
        if (total > rlx::fuzz::kMaxFuzzElements) return;
        inputs.insert_or_assign(in.name(), rlx::Tensor(dims, host_dtype(t.dt)));
      }
    }
    InterpOptions opts;
    opts.max_elements = rlx::fuzz::kMaxFuzzElements;
    const rlx::TensorMap out = interp::run_program(p, inputs, opts);
    volatile size_t sink = out.size();
    (void)sink;
  });
  return 0;
}
