// Gather-style indexing kernels: gather, gather_elements, gather_nd, one_hot,
// embedding. They only move elements, so they handle every dtype by element
// size. Index tensors may be i32 or i64; every index is bounds-checked before
// it is used and a bad one raises rlx::Error naming its value and dim.
#include <cstring>

#include "backends/cpu/elem_types.h"
#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

using idx::prod;

void gather(const KernelCall& c) {
  const Tensor &d = c.in[0], &ix = c.in[1];
  RLX_CHECK(d.rank() >= 1, c.node.label(), ": cannot gather from a scalar");
  const int ax = normalize_axis(c.node.attrs_as<GatherAttrs>().axis, d.rank());
  const Dims& dd = d.dims();
  const int64_t outer = prod(dd, 0, size_t(ax)), n = dd[size_t(ax)];
  const int64_t inner = prod(dd, size_t(ax) + 1, dd.size());
  const std::vector<int64_t> ids = idx::wrapped_indices(c, ix, n, ax);
  const int64_t m = int64_t(ids.size());
  const size_t es = dtype_size(d.dtype());
  if (outer * m * inner == 0) return;
  const auto* src = static_cast<const std::byte*>(d.raw());
  auto* dst = static_cast<std::byte*>(c.out.raw());
  parallel_for(outer * m, idx::grain_for(inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      int64_t o = r / m, j = r % m;
      idx::copy_elems(dst + size_t(r * inner) * es,
                      src + size_t((o * n + ids[size_t(j)]) * inner) * es, inner, es);
    }
  });
}

void gather_elements(const KernelCall& c) {
  const Tensor &d = c.in[0], &ix = c.in[1];
  idx::check_index_tensor(c, ix);
  RLX_CHECK(d.rank() >= 1 && d.rank() == ix.rank(), c.node.label(),
            ": data and indices need the same rank >= 1, got ", d.shape().str(), " and ",
            ix.shape().str());
  const int ax = normalize_axis(c.node.attrs_as<AxisAttrs>().axis, d.rank());
  for (int k = 0; k < d.rank(); ++k)
    RLX_CHECK(k == ax || ix.dims()[size_t(k)] <= d.dims()[size_t(k)], c.node.label(), ": indices ",
              ix.shape().str(), " exceed data ", d.shape().str(), " in dim ", k);
  if (ix.numel() == 0) return;
  const idx::AxisWalk w(ix.dims(), d.dims(), ax);
  const int64_t n = d.dims()[size_t(ax)];
  visit_elem_size(dtype_size(d.dtype()), [&](auto tag) {
    using U = decltype(tag);
    const U* src = static_cast<const U*>(d.raw());
    U* dst = static_cast<U*>(c.out.raw());
    // One item = one (outer, axis position) row of `inner` elements.
    parallel_for(w.outer * w.len, idx::grain_for(w.inner), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t base = w.outer_off[size_t(r / w.len)];
        for (int64_t i = 0; i < w.inner; ++i) {
          const int64_t f = r * w.inner + i;
          const int64_t v = idx::wrap_index(c, idx::index_at(ix, f), n, ax);
          dst[f] = src[base + v * w.axis_stride + w.inner_off[size_t(i)]];
        }
      }
    });
  });
}

void gather_nd(const KernelCall& c) {
  const Tensor &d = c.in[0], &ix = c.in[1];
  idx::check_index_tensor(c, ix);
  const Dims &dd = d.dims(), &id = ix.dims();
  const int64_t b = c.node.attrs_as<GatherNDAttrs>().batch_dims;
  RLX_CHECK(!id.empty(), c.node.label(), ": indices must have rank >= 1");
  const int64_t k = id.back(), r = int64_t(dd.size()), q = int64_t(id.size());
  RLX_CHECK(b >= 0 && b < q && k >= 1 && b + k <= r, c.node.label(), ": index depth ", k,
            " with batch_dims ", b, " does not fit data ", d.shape().str(), " and indices ",
            ix.shape().str());
  for (int64_t i = 0; i < b; ++i)
    RLX_CHECK(dd[size_t(i)] == id[size_t(i)], c.node.label(), ": batch dim ", i, " differs: data ",
              d.shape().str(), ", indices ", ix.shape().str());
  const int64_t inner = prod(dd, size_t(b + k), dd.size());
  const int64_t batch_elems = prod(dd, size_t(b), dd.size());    // elements per batch entry
  const int64_t per_batch = prod(id, size_t(b), size_t(q - 1));  // tuples per batch entry
  const int64_t rows = prod(id, 0, size_t(q - 1));
  if (rows * inner == 0) {
    // Nothing is copied, but the indices must still be valid (inner can be 0).
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t j = 0; j < k; ++j)
        idx::wrap_index(c, idx::index_at(ix, t * k + j), dd[size_t(b + j)], b + j);
    return;
  }
  Dims dstr = contiguous_strides(dd);
  const size_t es = dtype_size(d.dtype());
  const auto* src = static_cast<const std::byte*>(d.raw());
  auto* dst = static_cast<std::byte*>(c.out.raw());
  parallel_for(rows, idx::grain_for(inner), [&](int64_t lo, int64_t hi) {
    for (int64_t t = lo; t < hi; ++t) {
      int64_t off = (t / per_batch) * batch_elems;
      for (int64_t j = 0; j < k; ++j) {
        int64_t v = idx::wrap_index(c, idx::index_at(ix, t * k + j), dd[size_t(b + j)], b + j);
        off += v * dstr[size_t(b + j)];
      }
      idx::copy_elems(dst + size_t(t * inner) * es, src + size_t(off) * es, inner, es);
    }
  });
}

void one_hot(const KernelCall& c) {
  const Tensor& ix = c.in[0];
  idx::check_index_tensor(c, ix);
  const int64_t depth = c.node.attrs_as<OneHotAttrs>().depth;
  RLX_CHECK(depth > 0, c.node.label(), ": depth must be > 0, got ", depth);
  RLX_CHECK(c.out.numel() == ix.numel() * depth, c.node.label(), ": output ", c.out.shape().str(),
            " does not match indices ", ix.shape().str(), " x ", depth);
  const size_t es = dtype_size(c.out.dtype());
  const double one = 1.0;
  std::byte one_bytes[8];
  cast_elements(&one, DType::F64, one_bytes, c.out.dtype(), 1);
  auto* dst = static_cast<std::byte*>(c.out.raw());
  // The output slot may hold stale data (arena), so every row is written whole.
  parallel_for(ix.numel(), idx::grain_for(depth), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t v = idx::index_at(ix, i);
      int64_t w = v < 0 ? v + depth : v;
      RLX_CHECK(w >= 0 && w < depth, c.node.label(), ": class index ", v,
                " is out of range for depth ", depth, " (valid: [", -depth, ", ", depth - 1, "])");
      std::memset(dst + size_t(i * depth) * es, 0, size_t(depth) * es);
      std::memcpy(dst + size_t(i * depth + w) * es, one_bytes, es);
    }
  });
}

void embedding(const KernelCall& c) {
  const Tensor &table = c.in[0], &ids = c.in[1];
  idx::check_index_tensor(c, ids);
  RLX_CHECK(table.rank() == 2, c.node.label(), ": table must be 2-d, got ", table.shape().str());
  const int64_t rows = table.dims()[0], dim = table.dims()[1];
  const size_t es = dtype_size(table.dtype());
  const auto* src = static_cast<const std::byte*>(table.raw());
  auto* dst = static_cast<std::byte*>(c.out.raw());
  // Like torch.nn.functional.embedding, negative ids are errors (no wrap).
  parallel_for(ids.numel(), idx::grain_for(dim), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t v = idx::index_at(ids, i);
      RLX_CHECK(v >= 0 && v < rows, c.node.label(), ": id ", v,
                " is out of range for an embedding table of ", rows, " rows (dim 0)");
      if (dim > 0) idx::copy_elems(dst + size_t(i * dim) * es, src + size_t(v * dim) * es, dim, es);
    }
  });
}

}  // namespace rlx::cpu
