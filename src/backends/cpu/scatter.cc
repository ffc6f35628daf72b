// Scatter kernels: scatter_elements (ONNX ScatterElements, torch.scatter /
// scatter_reduce with include_self) and scatter_nd (ONNX ScatterND,
// index_put with accumulate). The output starts as a copy of data; updates
// are applied in index order per destination, so duplicates are
// deterministic: "none" keeps the last update, reductions fold in order.
#include <cmath>
#include <cstring>
#include <type_traits>

#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

using idx::prod;

namespace {

// dst = reduce(dst, src). Integers wrap on overflow (computed unsigned, no
// UB); float max/min propagate NaN from either side, like torch amax/amin;
// bool uses or (add, max) and and (mul, min).
template <ScatterReduction R, typename T>
inline void scatter_apply(T& dst, T src) {
  if constexpr (R == ScatterReduction::none) {
    dst = src;
  } else if constexpr (std::is_same_v<T, bool>) {
    if constexpr (R == ScatterReduction::add || R == ScatterReduction::max)
      dst = dst || src;
    else
      dst = dst && src;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (R == ScatterReduction::add)
      dst = T(U(dst) + U(src));
    else if constexpr (R == ScatterReduction::mul)
      dst = T(U(dst) * U(src));
    else if constexpr (R == ScatterReduction::max)
      dst = src > dst ? src : dst;
    else
      dst = src < dst ? src : dst;
  } else {
    if constexpr (R == ScatterReduction::add)
      dst = dst + src;
    else if constexpr (R == ScatterReduction::mul)
      dst = dst * src;
    else if constexpr (R == ScatterReduction::max)
      dst = (std::isnan(src) || src > dst) ? src : dst;
    else
      dst = (std::isnan(src) || src < dst) ? src : dst;
  }
}

// Calls f.template operator()<R>() with the reduction as a compile-time value.
template <typename F>
void visit_reduction(ScatterReduction r, F&& f) {
  switch (r) {
    case ScatterReduction::none:
      return f.template operator()<ScatterReduction::none>();
    case ScatterReduction::add:
      return f.template operator()<ScatterReduction::add>();
    case ScatterReduction::mul:
      return f.template operator()<ScatterReduction::mul>();
    case ScatterReduction::max:
      return f.template operator()<ScatterReduction::max>();
    case ScatterReduction::min:
      return f.template operator()<ScatterReduction::min>();
  }
}

void check_same_dtype(const KernelCall& c, const Tensor& d, const Tensor& u) {
  RLX_CHECK(d.dtype() == u.dtype() && c.out.dtype() == d.dtype(), c.node.label(), ": data ",
            d.shape().str(), " and updates ", u.shape().str(), " need one dtype");
}

}  // namespace

void scatter_elements(const KernelCall& c) {
  const Tensor &d = c.in[0], &ix = c.in[1], &u = c.in[2];
  idx::check_index_tensor(c, ix);
  check_same_dtype(c, d, u);
  RLX_CHECK(d.rank() >= 1 && ix.rank() == d.rank() && u.dims() == ix.dims(), c.node.label(),
            ": need data, indices and updates of one rank >= 1 with updates shaped like "
            "indices, got ",
            d.shape().str(), ", ", ix.shape().str(), ", ", u.shape().str());
  const auto& a = c.node.attrs_as<ScatterElementsAttrs>();
  const int ax = normalize_axis(a.axis, d.rank());
  for (int k = 0; k < d.rank(); ++k)
    RLX_CHECK(k == ax || ix.dims()[size_t(k)] <= d.dims()[size_t(k)], c.node.label(), ": indices ",
              ix.shape().str(), " exceed data ", d.shape().str(), " in dim ", k);
  const ScatterReduction red = a.reduction;
  if (d.nbytes() > 0) std::memcpy(c.out.raw(), d.raw(), d.nbytes());
  const int64_t n = ix.numel();
  if (n == 0) return;

  // Destination offset of every update, checked in parallel before any write.
  const idx::AxisWalk w(ix.dims(), d.dims(), ax);
  const int64_t len = d.dims()[size_t(ax)];
  std::vector<int64_t> dest(static_cast<size_t>(n));
  parallel_for(w.outer * w.len, idx::grain_for(w.inner), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t base = w.outer_off[size_t(r / w.len)];
      for (int64_t i = 0; i < w.inner; ++i) {
        const int64_t f = r * w.inner + i;
        const int64_t v = idx::wrap_index(c, idx::index_at(ix, f), len, ax);
        dest[size_t(f)] = base + v * w.axis_stride + w.inner_off[size_t(i)];
      }
    }
  });
  idx::visit_compute_type(c, d.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* up = static_cast<const T*>(u.raw());
    T* out = static_cast<T*>(c.out.raw());
    visit_reduction(red, [&]<ScatterReduction R>() {
      idx::ordered_by_dest(n, dest.data(), d.numel(), 1,
                           [&](int64_t i) { scatter_apply<R>(out[dest[size_t(i)]], up[i]); });
    });
  });
}

void scatter_nd(const KernelCall& c) {
  const Tensor &d = c.in[0], &ix = c.in[1], &u = c.in[2];
  idx::check_index_tensor(c, ix);
  check_same_dtype(c, d, u);
  const Dims &dd = d.dims(), &id = ix.dims();
  RLX_CHECK(!id.empty(), c.node.label(), ": indices must have rank >= 1");
  const int64_t k = id.back(), r = int64_t(dd.size()), q = int64_t(id.size());
  RLX_CHECK(k >= 1 && k <= r, c.node.label(), ": index depth ", k, " does not fit data ",
            d.shape().str());
  Dims want_u(id.begin(), id.end() - 1);
  want_u.insert(want_u.end(), dd.begin() + k, dd.end());
  RLX_CHECK(u.dims() == want_u, c.node.label(), ": updates ", u.shape().str(), " should be ",
            dims_str(want_u), " for data ", d.shape().str(), " and indices ", ix.shape().str());
  const ScatterReduction red = c.node.attrs_as<ScatterNDAttrs>().reduction;
  if (d.nbytes() > 0) std::memcpy(c.out.raw(), d.raw(), d.nbytes());
  const int64_t count = prod(id, 0, size_t(q - 1));
  const int64_t inner = prod(dd, size_t(k), dd.size());
  const int64_t nrows = prod(dd, 0, size_t(k));  // destination slices

  // Destination slice of every index tuple, all checked before any write.
  Dims rstr = contiguous_strides(Dims(dd.begin(), dd.begin() + k));
  std::vector<int64_t> dest(static_cast<size_t>(count));
  parallel_for(count, idx::grain_for(k), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t row = 0;
      for (int64_t j = 0; j < k; ++j)
        row += idx::wrap_index(c, idx::index_at(ix, t * k + j), dd[size_t(j)], j) * rstr[size_t(j)];
      dest[size_t(t)] = row;
    }
  });
  if (count * inner == 0) return;
  idx::visit_compute_type(c, d.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* up = static_cast<const T*>(u.raw());
    T* out = static_cast<T*>(c.out.raw());
    visit_reduction(red, [&]<ScatterReduction R>() {
      if (inner >= 4096) {
        // Wide slices: split each slice's columns across threads; every
        // thread walks the tuples in order, so duplicates stay ordered.
        parallel_for(inner, 2048, [&](int64_t lo, int64_t hi) {
          for (int64_t t = 0; t < count; ++t) {
            T* o = out + dest[size_t(t)] * inner;
            const T* s = up + t * inner;
            for (int64_t x = lo; x < hi; ++x) scatter_apply<R>(o[x], s[x]);
          }
        });
        return;
      }
      idx::ordered_by_dest(count, dest.data(), nrows, inner, [&](int64_t t) {
        T* o = out + dest[size_t(t)] * inner;
        const T* s = up + t * inner;
        for (int64_t x = 0; x < inner; ++x) scatter_apply<R>(o[x], s[x]);
      });
    });
  });
}

}  // namespace rlx::cpu
