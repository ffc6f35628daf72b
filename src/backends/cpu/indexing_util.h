// Helpers shared by the indexing kernels (indexing.cc, scatter.cc, topk.cc):
// reading i32/i64 index tensors with bounds checks, and flat-extent products.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/kernel.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu::idx {

inline int64_t prod(const Dims& d, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= d[i];
  return p;
}

inline void check_index_tensor(const KernelCall& c, const Tensor& t) {
  RLX_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, c.node.label(),
            ": indices must be i32 or i64, got ", t.shape().str());
}

inline int64_t index_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::I64 ? t.data<int64_t>()[i] : int64_t(t.data<int32_t>()[i]);
}

// Wraps a negative index once (ONNX/PyTorch) and checks it against `len`.
// `what` names the dimension in the error ("dim 1 of size 5").
inline int64_t wrap_index(const KernelCall& c, int64_t v, int64_t len, int64_t dim) {
  int64_t w = v < 0 ? v + len : v;
  if (w < 0 || w >= len)
    throw make_error(c.node.label(), ": index ", v, " is out of range for dim ", dim, " of size ",
                     len, " (valid: [", -len, ", ", len - 1, "])");
  return w;
}

// All indices of `t`, wrapped and checked against dim `dim` of size `len`.
inline std::vector<int64_t> wrapped_indices(const KernelCall& c, const Tensor& t, int64_t len,
                                            int64_t dim) {
  check_index_tensor(c, t);
  std::vector<int64_t> out(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) out[size_t(i)] = wrap_index(c, index_at(t, i), len, dim);
  return out;
}

// Copies `n` elements of `esize` bytes; a fixed-size copy for the common
// single-element case keeps element-wise gathers from paying a memcpy call.
inline void copy_elems(std::byte* dst, const std::byte* src, int64_t n, size_t esize) {
  if (n == 1) {
    switch (esize) {
      case 1:
        *dst = *src;
        return;
      case 2:
        std::memcpy(dst, src, 2);
        return;
      case 4:
        std::memcpy(dst, src, 4);
        return;
      case 8:
        std::memcpy(dst, src, 8);
        return;
      default:
        break;
    }
  }
  std::memcpy(dst, src, size_t(n) * esize);
}

// Grain for parallel_for over `n` items of `per_item` elements of work each,
// so each chunk does at least ~16K elements.
inline int64_t grain_for(int64_t per_item) {
  constexpr int64_t kWork = 16384;
  return per_item >= kWork ? 1 : (kWork + per_item - 1) / std::max<int64_t>(per_item, 1);
}

// Offsets for walking an index tensor `idims` against a data tensor `ddims`
// of the same rank along `axis` (gather_elements / scatter_elements): index
// element (o, j, i) with o over idims[:axis] and i over idims[axis+1:] maps to
// data offset outer_off[o] + w * axis_stride + inner_off[i], w the index value.
struct AxisWalk {
  int64_t outer = 1, len = 1, inner = 1, axis_stride = 1;
  std::vector<int64_t> outer_off, inner_off;

  AxisWalk(const Dims& idims, const Dims& ddims, int axis) {
    const int r = int(idims.size());
    Dims dstr = contiguous_strides(ddims);
    outer = prod(idims, 0, size_t(axis));
    len = idims[size_t(axis)];
    inner = prod(idims, size_t(axis) + 1, size_t(r));
    axis_stride = dstr[size_t(axis)];
    outer_off = offsets(idims, dstr, 0, axis, outer);
    inner_off = offsets(idims, dstr, axis + 1, r, inner);
  }

 private:
  // Data offsets of every row-major coordinate of idims[b:e).
  static std::vector<int64_t> offsets(const Dims& idims, const Dims& dstr, int b, int e,
                                      int64_t count) {
    std::vector<int64_t> off(size_t(count), 0);
    int64_t block = 1;  // elements per step of the dim being added
    for (int d = e - 1; d >= b; --d) {
      int64_t n = idims[size_t(d)];
      for (int64_t f = 0; f < count; ++f) off[size_t(f)] += (f / block) % n * dstr[size_t(d)];
      block *= n;
    }
    return off;
  }
};

// Applies f(i) for i in [0, n) where update i writes destination dest[i] in
// [0, ndest). Updates to one destination keep their order (so duplicates
// reduce deterministically, last write wins for plain assignment) while
// distinct destination ranges run in parallel: a stable counting sort into
// one bucket per destination range.
template <typename F>
void ordered_by_dest(int64_t n, const int64_t* dest, int64_t ndest, int64_t work_per, F&& f) {
  int64_t parts = std::min<int64_t>(int64_t(num_threads()) * 4, ndest);
  if (parts <= 1 || n * work_per < 32768) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
  const int64_t blk = (ndest + parts - 1) / parts;
  std::vector<int64_t> start(size_t(parts) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[size_t(dest[i] / blk) + 1];
  for (int64_t p = 0; p < parts; ++p) start[size_t(p + 1)] += start[size_t(p)];
  std::vector<int64_t> fill(start.begin(), start.end() - 1);
  for (int64_t i = 0; i < n; ++i) order[size_t(fill[size_t(dest[i] / blk)]++)] = i;
  parallel_for(parts, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p)
      for (int64_t k = start[size_t(p)]; k < start[size_t(p + 1)]; ++k) f(order[size_t(k)]);
  });
}

// Calls f(T{}) with the C++ type computing dtype t (f32, f64, integers,
// bool); f16/bf16 never reach these kernels (the runtime upcasts them).
template <typename F>
void visit_compute_type(const KernelCall& c, DType t, F&& f) {
  switch (t) {
    case DType::F32:
      return f(float{});
    case DType::F64:
      return f(double{});
    case DType::I8:
      return f(int8_t{});
    case DType::I16:
      return f(int16_t{});
    case DType::I32:
      return f(int32_t{});
    case DType::I64:
      return f(int64_t{});
    case DType::U8:
      return f(uint8_t{});
    case DType::Bool:
      return f(bool{});
    default:
      break;
  }
  throw make_error(c.node.label(), ": unsupported dtype ", dtype_name(t));
}

}  // namespace rlx::cpu::idx
