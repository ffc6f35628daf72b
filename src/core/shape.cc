#include "rlx/shape.h"

#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx {

Shape::Shape(const Dims& d, DType t) : dtype(t) {
  dims.reserve(d.size());
  for (int64_t v : d) dims.emplace_back(v);
}

bool Shape::is_static() const {
  for (const auto& d : dims)
    if (!d.is_static()) return false;
  return true;
}

Dims Shape::concrete() const {
  Dims out;
  out.reserve(dims.size());
  for (const auto& d : dims) {
    RLX_CHECK(d.is_static(), "shape ", str(), " has symbolic dim '", d.sym, "'");
    out.push_back(d.value);
  }
  return out;
}

int64_t Shape::numel() const { return rlx::numel(concrete()); }

std::string Shape::str() const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dims[i].str();
  return s + "] " + std::string(dtype_name(dtype));
}

// Checked everywhere, not only where shapes are read: a negative or
// overflowing element count must never reach an allocation or a loop bound.
int64_t numel(const Dims& d) { return checked_numel(d, "numel"); }

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

int normalize_axis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  RLX_CHECK(a >= 0 && a < std::max(rank, 1), "axis ", axis, " out of range for rank ", rank);
  return int(a);
}

}  // namespace rlx
