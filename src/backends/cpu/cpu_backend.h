// What tests and benchmarks may see of a CPU backend instance beyond the
// Backend interface.
#pragma once
#include "rlx/backend.h"

namespace rlx::quant {
class DequantCache;
}

namespace rlx::cpu {

// The dequantized-weight cache owned by `b` when it came from
// make_cpu_backend; nullptr for any other backend.
const quant::DequantCache* dequant_cache_of(const Backend& b);

}  // namespace rlx::cpu
