// Generated leaves: full (a constant fill) and arange. Both handle every
// dtype; values are computed in double and converted with cast_elements, so
// conversion rules (float->int truncation, f16 rounding) match Tensor::to.
#include <cstring>

#include "backends/cpu/ew_util.h"
#include "backends/cpu/kernels.h"

namespace rlx::cpu {

void full(const KernelCall& c) {
  const double v = c.node.attrs_as<FullAttrs>().value;
  const size_t es = dtype_size(c.out.dtype());
  std::byte one[8] = {};
  cast_elements(&v, DType::F64, one, c.out.dtype(), 1);
  auto* dst = static_cast<std::byte*>(c.out.raw());
  parallel_for(c.out.numel(), kGrainCheap, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(dst + size_t(i) * es, one, es);
  });
}

// Element i is start + i * step evaluated in double (not by accumulation, so
// long ranges do not drift), then converted to the output dtype.
void arange(const KernelCall& c) {
  const auto& a = c.node.attrs_as<ArangeAttrs>();
  const double start = a.start, step = a.step;
  const int64_t n = c.out.numel();
  RLX_CHECK(a.count == n, c.node.label(), ": count ", a.count, " does not match output ",
            c.out.shape().str());
  const size_t es = dtype_size(c.out.dtype());
  auto* dst = static_cast<std::byte*>(c.out.raw());
  parallel_for(n, kGrainCheap, [&](int64_t b, int64_t e) {
    double buf[1024];
    for (int64_t i0 = b; i0 < e; i0 += 1024) {
      const int64_t m = std::min<int64_t>(1024, e - i0);
      for (int64_t j = 0; j < m; ++j) buf[j] = start + double(i0 + j) * step;
      cast_elements(buf, DType::F64, dst + size_t(i0) * es, c.out.dtype(), m);
    }
  });
}

}  // namespace rlx::cpu
