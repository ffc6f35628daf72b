// PyTorch goldens computed at test time by python3-torch, so references never
// share code with our kernels. Batch all cases of a suite into one call: each
// call starts one Python process.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlx/io.h"

namespace rlx::testing {

struct GoldenCase {
  std::string name;  // unique within the batch, no '/'
  // Python statements; `torch`, `F` and `x` (dict of inputs) are in scope;
  // assign the result(s) to `y`.
  std::string code;
  TensorMap inputs;
};

// Returns, per case name, its outputs in order. Throws rlx::Error with
// Python's stderr when a case fails or torch is not installed.
std::map<std::string, std::vector<Tensor>> torch_goldens(const std::vector<GoldenCase>& cases);

}  // namespace rlx::testing
