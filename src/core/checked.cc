#include "rlx/checked.h"

#include "rlx/error.h"

namespace rlx {

int64_t checked_mul(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  RLX_CHECK(!__builtin_mul_overflow(a, b, &r), what, ": ", a, " * ", b, " overflows");
  return r;
}

int64_t checked_add(int64_t a, int64_t b, std::string_view what) {
  int64_t r;
  RLX_CHECK(!__builtin_add_overflow(a, b, &r), what, ": ", a, " + ", b, " overflows");
  return r;
}

std::string short_dims_str(const Dims& dims, size_t max_dims) {
  if (dims.size() <= max_dims) return dims_str(dims);
  std::string s = "[";
  for (size_t i = 0; i < max_dims; ++i) s += std::to_string(dims[i]) + ",";
  return s + "... (" + std::to_string(dims.size()) + " dims)]";
}

void check_dims(const Dims& dims, std::string_view what) {
  RLX_CHECK(dims.size() <= size_t(kMaxRank), what, ": shape ", short_dims_str(dims), " has rank ",
            dims.size(), " (the most rlx supports is ", kMaxRank, ")");
  int64_t nonzero = 1;
  for (int64_t d : dims) {
    RLX_CHECK(d >= 0, what, ": shape ", short_dims_str(dims), " has a negative dim ", d);
    if (d == 0) continue;
    RLX_CHECK(nonzero <= kMaxElements / d, what, ": shape ", short_dims_str(dims),
              " has more than 2^60 elements");
    nonzero *= d;
  }
}

int64_t checked_numel(const Dims& dims, std::string_view what) {
  check_dims(dims, what);
  int64_t n = 1;
  for (int64_t d : dims) n *= d;  // cannot overflow after check_dims
  return n;
}

size_t checked_nbytes(const Dims& dims, DType dtype, std::string_view what) {
  return size_t(checked_numel(dims, what)) * dtype_size(dtype);  // < 2^63 for dtypes <= 8 bytes
}

ReshapeTarget check_reshape_target(const Dims& target, std::string_view what) {
  RLX_CHECK(target.size() <= size_t(kMaxRank), what, ": target shape ", short_dims_str(target),
            " has rank ", target.size(), " (the most rlx supports is ", kMaxRank, ")");
  ReshapeTarget r;
  int64_t nonzero = 1;  // bounded like check_dims, so no product of the result can overflow
  bool empty = false;
  for (size_t i = 0; i < target.size(); ++i) {
    const int64_t d = target[i];
    if (d == -1) {
      RLX_CHECK(r.infer_at < 0, what, ": more than one -1 in target shape ",
                short_dims_str(target));
      r.infer_at = int(i);
      continue;
    }
    RLX_CHECK(d >= 0, what, ": target shape ", short_dims_str(target), " has a negative dim ", d,
              " (only a single -1 is allowed)");
    if (d == 0) {
      empty = true;
      continue;
    }
    RLX_CHECK(nonzero <= kMaxElements / d, what, ": target shape ", short_dims_str(target),
              " has more than 2^60 elements");
    nonzero *= d;
  }
  r.known = empty ? 0 : nonzero;
  return r;
}

Dims resolve_reshape(const Dims& target, int64_t numel, std::string_view what) {
  const ReshapeTarget r = check_reshape_target(target, what);
  Dims out = target;
  if (r.infer_at >= 0) {
    RLX_CHECK(r.known != 0 && numel % r.known == 0, what, ": cannot reshape ", numel,
              " elements to ", short_dims_str(target));
    out[size_t(r.infer_at)] = numel / r.known;
  } else {
    RLX_CHECK(r.known == numel, what, ": cannot reshape ", numel, " elements to ",
              short_dims_str(target), " (", r.known, " elements)");
  }
  return out;
}

}  // namespace rlx
