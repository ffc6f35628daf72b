// Dims (static or named symbols) and shapes (dims + dtype).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "rlx/dtype.h"

namespace rlx {

// A static extent, or a named symbol ("batch", "seq") bound per run. The
// symbol "?" is anonymous: inference could not name it; it becomes concrete
// once the graph is specialized to real input shapes.
struct Dim {
  int64_t value = 0;
  std::string sym;

  Dim() = default;
  Dim(int64_t v) : value(v) {}  // NOLINT: dims are used like integers
  static Dim symbol(std::string name) {
    Dim d;
    d.value = -1;
    d.sym = std::move(name);
    return d;
  }
  bool is_static() const { return sym.empty(); }
  bool operator==(const Dim& o) const { return value == o.value && sym == o.sym; }
  std::string str() const { return is_static() ? std::to_string(value) : sym; }
};

using Dims = std::vector<int64_t>;

struct Shape {
  std::vector<Dim> dims;
  DType dtype = DType::F32;

  Shape() = default;
  Shape(std::vector<Dim> d, DType t) : dims(std::move(d)), dtype(t) {}
  Shape(const Dims& d, DType t);

  int rank() const { return int(dims.size()); }
  bool is_static() const;
  // Static extents; throws if any dim is symbolic.
  Dims concrete() const;
  int64_t numel() const;  // requires static
  bool operator==(const Shape& o) const { return dims == o.dims && dtype == o.dtype; }
  // "[2,seq,64] f32"
  std::string str() const;
};

int64_t numel(const Dims& d);
std::string dims_str(const Dims& d);
// Normalizes a possibly negative axis for a tensor of `rank`; throws if out of range.
int normalize_axis(int64_t axis, int rank);

}  // namespace rlx
