// fake_quantize's integer grid, read from its attributes in one place, so shape inference,
// the CPU kernels, autodiff, the QAT pass and the CoreML lowering agree on it.
#pragma once
#include <cstdint>

#include "rlx/error.h"
#include "rlx/op_attrs.h"

namespace rlx {

// The smallest scale fake_quantize uses: an all-zero channel quantizes to zeros instead of NaN.
inline constexpr double kFakeQuantMinScale = 1e-12;

struct FakeQuantRange {
  int64_t qmin = 0, qmax = 0;
};

// [quant_min, quant_max] of `a`: the symmetric [-q, q], q = 2^(bits-1) - 1, unless both bounds are
// given. Throws naming what is wrong (bits outside {8, 4, 2}, one bound alone, an empty range, a
// range of more than 2^bits values).
inline FakeQuantRange fake_quant_range(const FakeQuantAttrs& a) {
  RLX_CHECK(a.bits == 8 || a.bits == 4 || a.bits == 2,
            "fake_quantize: bits must be 8, 4 or 2, got ", a.bits);
  RLX_CHECK(a.quant_min.has_value() == a.quant_max.has_value(),
            "fake_quantize: quant_min and quant_max are given together or not at all");
  if (!a.quant_min) {
    const int64_t q = (int64_t(1) << (a.bits - 1)) - 1;
    return {-q, q};
  }
  const int64_t lo = *a.quant_min, hi = *a.quant_max;
  RLX_CHECK(lo < hi, "fake_quantize: quant_min (", lo, ") must be below quant_max (", hi, ")");
  RLX_CHECK(
      lo > -(int64_t(1) << 32) && hi < (int64_t(1) << 32) && hi - lo + 1 <= (int64_t(1) << a.bits),
      "fake_quantize: [", lo, ", ", hi, "] has more than 2^", a.bits, " values for bits=", a.bits);
  return {lo, hi};
}

}  // namespace rlx
