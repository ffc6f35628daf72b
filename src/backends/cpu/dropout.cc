// dropout(x, step) {p, seed}: y = keep ? x / (1 - p) : 0 with keep a counter-based hash.
//
// keep_i = (mix64(key + i) >> 40) >= floor(p * 2^24), key = mix64(mix64(seed) ^ step), where
// mix64 is splitmix64's finalizer. The mask is a pure function of (seed, step, flat index): no
// state, so the node is as deterministic as any other op (CSE may merge two dropouts only when
// they have the same seed and step, i.e. the same mask; folding with a constant step is exact),
// and the vjp draws the same mask again instead of storing it. python/rlx_torch/_dropout.py
// mirrors this bit for bit, so exported references match.
#include <cstdint>

#include "backends/cpu/kernels.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kDropoutGrain = 16384;

inline uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename T>
void apply_dropout(const KernelCall& c, uint64_t key, uint64_t threshold, double p) {
  const T* x = c.in[0].data<T>();
  T* y = c.out.data<T>();
  const T scale = T(1.0 / (1.0 - p));
  parallel_for(c.out.numel(), kDropoutGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      y[i] = (mix64(key + uint64_t(i)) >> 40) >= threshold ? x[i] * scale : T(0);
  });
}

}  // namespace

void dropout(const KernelCall& c) {
  const auto& a = c.node.attrs_as<DropoutAttrs>();
  const Tensor& s = c.in[1];
  RLX_CHECK(s.numel() == 1 && (s.dtype() == DType::I64 || s.dtype() == DType::I32), c.node.label(),
            ": step must be an integer scalar");
  const int64_t step = s.dtype() == DType::I64 ? *s.data<int64_t>() : *s.data<int32_t>();
  const uint64_t key = mix64(mix64(uint64_t(a.seed)) ^ uint64_t(step));
  const uint64_t threshold = uint64_t(a.p * 16777216.0);  // p in 24-bit fixed point
  switch (c.out.dtype()) {
    case DType::F32:
      return apply_dropout<float>(c, key, threshold, a.p);
    case DType::F64:
      return apply_dropout<double>(c, key, threshold, a.p);
    default:
      throw make_error(c.node.label(), ": dropout needs f32 or f64, got ",
                       dtype_name(c.out.dtype()));
  }
}

}  // namespace rlx::cpu
