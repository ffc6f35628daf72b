// topk along one axis. The order is total: by value (NaN counts as the
// largest value, like PyTorch), then by index ascending, so ties and repeated
// runs are deterministic. sorted=0 returns the selected k in index order.
// One pass writes both outputs: the values and their i64 indices along the axis.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

namespace {

template <typename T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return false;
}

// a ranks above b when looking for the largest values (NaN above all).
template <typename T>
inline bool above(T a, T b) {
  if (is_nan(a)) return !is_nan(b);
  if (is_nan(b)) return false;
  return a > b;
}

template <typename T>
void topk_typed(const KernelCall& c, int ax, int64_t k, bool largest, bool sorted) {
  const Tensor& x = c.in[0];
  const Dims& dd = x.dims();
  const int64_t outer = idx::prod(dd, 0, size_t(ax)), n = dd[size_t(ax)];
  const int64_t inner = idx::prod(dd, size_t(ax) + 1, dd.size());
  const T* src = static_cast<const T*>(x.raw());
  T* vals_out = static_cast<T*>(c.outs[0].raw());
  int64_t* idx_out = static_cast<int64_t*>(c.outs[1].raw());
  if (outer * inner * k == 0) return;
  // Work per row ~ n log k comparisons.
  const int64_t per_row = n * std::max<int64_t>(1, int64_t(std::log2(double(k) + 1)));
  parallel_for(outer * inner, idx::grain_for(per_row), [&](int64_t b, int64_t e) {
    std::vector<T> v(static_cast<size_t>(n));
    std::vector<int64_t> ord(static_cast<size_t>(n));
    for (int64_t row = b; row < e; ++row) {
      const int64_t o = row / inner, i = row % inner;
      const T* s = src + o * n * inner + i;
      for (int64_t j = 0; j < n; ++j) v[size_t(j)] = s[j * inner];
      std::iota(ord.begin(), ord.end(), int64_t(0));
      auto cmp = [&](int64_t a, int64_t bb) {
        T va = v[size_t(a)], vb = v[size_t(bb)];
        if (largest ? above(va, vb) : above(vb, va)) return true;
        if (largest ? above(vb, va) : above(va, vb)) return false;
        return a < bb;  // equal (or both NaN): smaller index first
      };
      if (k == n)
        std::sort(ord.begin(), ord.end(), cmp);
      else
        std::partial_sort(ord.begin(), ord.begin() + k, ord.end(), cmp);
      if (!sorted) std::sort(ord.begin(), ord.begin() + k);
      const int64_t base = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        idx_out[base + j * inner] = ord[size_t(j)];
        vals_out[base + j * inner] = v[size_t(ord[size_t(j)])];
      }
    }
  });
}

}  // namespace

void topk(const KernelCall& c) {
  const Tensor& x = c.in[0];
  RLX_CHECK(x.rank() >= 1, c.node.label(), ": topk needs rank >= 1, got ", x.shape().str());
  const auto& a = c.node.attrs_as<TopKAttrs>();
  const int ax = normalize_axis(a.axis, x.rank());
  const int64_t k = a.k;
  const int64_t n = x.dims()[size_t(ax)];
  RLX_CHECK(k >= 0 && k <= n, c.node.label(), ": k=", k, " out of range for axis ", ax, " of size ",
            n);
  RLX_CHECK(c.outs.size() == 2 && c.outs[0].dtype() == x.dtype() && c.outs[1].dtype() == DType::I64,
            c.node.label(), ": wants (values ", dtype_name(x.dtype()), ", indices i64) buffers");
  const bool largest = a.largest, sorted = a.sorted;
  idx::visit_compute_type(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    // bool is stored as one byte 0/1; rank it as uint8 (std::vector<bool> is packed).
    using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    topk_typed<S>(c, ax, k, largest, sorted);
  });
}

}  // namespace rlx::cpu
