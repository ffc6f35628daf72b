// Checked shape arithmetic: the one place where element counts, byte sizes and
// products of dims that come from files or graphs are computed. Dims must be
// non-negative, rank is bounded, and every product is overflow-checked, so a
// lying shape is an rlx::Error instead of a wrapped-around (under-allocated)
// size.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "rlx/dtype.h"
#include "rlx/shape.h"

namespace rlx {

// No tensor has more dims than NumPy allows, nor a product of its non-zero
// dims above kMaxElements: byte sizes and strides of any dtype (<= 8 bytes)
// then stay below 2^63, even for an empty tensor whose other dims are huge.
inline constexpr int kMaxRank = 64;
inline constexpr int64_t kMaxElements = int64_t(1) << 60;
// A node splits into at most this many outputs: a split's piece count comes
// from a dim, which may be huge where the tensor is empty or the file lies.
inline constexpr int64_t kMaxOutputs = int64_t(1) << 16;

// a * b and a + b; throw rlx::Error "<what>: ... overflows" when the exact
// result does not fit in int64_t.
int64_t checked_mul(int64_t a, int64_t b, std::string_view what);
int64_t checked_add(int64_t a, int64_t b, std::string_view what);

// Throws rlx::Error "<what>: ..." unless `dims` has rank <= kMaxRank,
// non-negative dims and a product of its non-zero dims <= kMaxElements.
void check_dims(const Dims& dims, std::string_view what);
// Element count and byte size after check_dims.
int64_t checked_numel(const Dims& dims, std::string_view what);
size_t checked_nbytes(const Dims& dims, DType dtype, std::string_view what);

// A reshape target: entries >= 0 and at most one -1 (inferred from the
// element count). `known` is the checked product of the other entries.
struct ReshapeTarget {
  int64_t known = 1;
  int infer_at = -1;  // index of the -1, or -1 when there is none
};
ReshapeTarget check_reshape_target(const Dims& target, std::string_view what);
// The dims a reshape of `numel` elements to `target` gives (the -1 filled in);
// throws when the element counts cannot match.
Dims resolve_reshape(const Dims& target, int64_t numel, std::string_view what);

// "[2,3,...]" with at most `max_dims` dims shown, for messages about shapes
// that may be enormous.
std::string short_dims_str(const Dims& dims, size_t max_dims = 8);

}  // namespace rlx
