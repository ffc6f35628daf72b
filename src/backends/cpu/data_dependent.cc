// The ops whose output extents the values decide: nonzero, unique, non_max_suppression. The
// runtime hands each kernel outputs sized for the count at its bound (the largest input's
// element count); the kernel writes the first `count` rows and shrinks its outputs to them
// (shrink_to), which is how the runtime learns the count.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backends/cpu/indexing_util.h"
#include "backends/cpu/kernels.h"

namespace rlx::cpu {

namespace {

// out viewed with `count` in place of its first dim (the data-dependent one, or the axis one).
void shrink_to(Tensor& out, size_t axis, int64_t count) {
  Dims d = out.dims();
  RLX_CHECK(count <= d[axis], "data-dependent output: ", count, " rows exceed the bound ", d[axis]);
  d[axis] = count;
  out = Tensor(out.buffer(), out.offset(), d, out.dtype());
}

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

// A value of x widened to the dtype the comparisons run in (f16/bf16 as float, bool as u8).
Tensor comparable(const Tensor& x) { return is_half(x.dtype()) ? x.to(DType::F32) : x; }

// ---- nonzero

// Writes the indices into out, which holds `rows` of them; throws when the values have more (a
// graph that planned this node for another count).
template <typename T>
int64_t nonzero_typed(const Tensor& x, int64_t* out, int64_t rows) {
  const T* v = x.data<T>();
  const int64_t n = x.numel(), r = x.rank();
  const Dims& d = x.dims();
  int64_t found = 0;
  for (int64_t i = 0; i < n; ++i) found += v[i] != T(0);
  RLX_CHECK(found <= rows, "nonzero: ", found, " nonzero elements, room for ", rows);
  Dims at(size_t(r), 0);
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (v[i] != T(0)) {
      std::copy(at.begin(), at.end(), out + count * r);
      ++count;
    }
    for (int64_t k = r - 1; k >= 0; --k) {  // the next row-major index
      if (++at[size_t(k)] < d[size_t(k)]) break;
      at[size_t(k)] = 0;
    }
  }
  return count;
}

// ---- unique

// A total order that keeps NaNs together after every number, so sorting and merging are sound.
template <typename T>
bool less(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}
template <typename T>
bool same(T a, T b) {
  return !less(a, b) && !less(b, a);
}

template <typename T>
void unique_typed(const KernelCall& c, const Tensor& x) {
  const auto& a = c.node.attrs_as<UniqueAttrs>();
  const Dims& d = x.dims();
  const int ax = a.axis ? normalize_axis(*a.axis, x.rank()) : -1;
  // x as [outer, n, inner]: slice s of the axis is x[:, s, :] (one element when flattened).
  const int64_t outer = ax < 0 ? 1 : idx::prod(d, 0, size_t(ax));
  const int64_t n = ax < 0 ? x.numel() : d[size_t(ax)];
  const int64_t inner = ax < 0 ? 1 : idx::prod(d, size_t(ax) + 1, d.size());
  const T* v = x.data<T>();
  auto elem = [&](int64_t s, int64_t e) { return v[(e / inner * n + s) * inner + e % inner]; };
  const int64_t width = outer * inner;
  auto slice_less = [&](int64_t p, int64_t q) {
    for (int64_t e = 0; e < width; ++e) {
      const T u = elem(p, e), w = elem(q, e);
      if (less(u, w)) return true;
      if (less(w, u)) return false;
    }
    return false;
  };
  auto slice_same = [&](int64_t p, int64_t q) {
    for (int64_t e = 0; e < width; ++e)
      if (!same(elem(p, e), elem(q, e))) return false;
    return true;
  };

  // Slices in the order they are merged in: sorted (stably, so each group starts at its first
  // occurrence) or as they come (consecutive).
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  if (!a.consecutive) std::stable_sort(order.begin(), order.end(), slice_less);
  std::vector<int64_t> group_of(static_cast<size_t>(n)), first;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = order[size_t(i)];
    if (i == 0 || !slice_same(order[size_t(i - 1)], s)) first.push_back(s);
    group_of[size_t(s)] = int64_t(first.size()) - 1;
  }
  // Unsorted: groups in order of first occurrence.
  std::vector<int64_t> rank(first.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!a.sorted && !a.consecutive) {
    std::vector<int64_t> by_first(first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t p, int64_t q) { return first[size_t(p)] < first[size_t(q)]; });
    std::vector<int64_t> ordered(first.size());
    for (size_t r = 0; r < by_first.size(); ++r) {
      rank[size_t(by_first[r])] = int64_t(r);
      ordered[r] = first[size_t(by_first[r])];
    }
    first = std::move(ordered);
  }
  const int64_t count = int64_t(first.size());

  auto& outs = c.outs;
  shrink_to(outs[0], ax < 0 ? 0 : size_t(ax), count);
  for (size_t i : {size_t(1), size_t(3)}) shrink_to(outs[i], 0, count);
  const DType vt = outs[0].dtype();
  std::vector<T> values(size_t(outer * count * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t u = 0; u < count; ++u)
      for (int64_t i = 0; i < inner; ++i)
        values[size_t((o * count + u) * inner + i)] = v[(o * n + first[size_t(u)]) * inner + i];
  cast_elements(values.data(), x.dtype(), outs[0].raw(), vt, int64_t(values.size()));
  int64_t* first_out = outs[1].data<int64_t>();
  int64_t* inverse = outs[2].data<int64_t>();
  int64_t* counts = outs[3].data<int64_t>();
  std::copy(first.begin(), first.end(), first_out);
  std::fill(counts, counts + count, 0);
  for (int64_t s = 0; s < n; ++s) {
    inverse[s] = rank[size_t(group_of[size_t(s)])];
    ++counts[inverse[s]];
  }
}

// ---- non_max_suppression (ONNX's, as ONNX Runtime computes it)

struct Box {
  double y0, x0, y1, x1;
};

Box box_at(const double* b, bool center) {
  if (center)  // [x_center, y_center, width, height]
    return {b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2};
  // [y1, x1, y2, x2], either corner first
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

bool overlaps(const Box& p, const Box& q, double threshold) {
  const double w = std::min(p.x1, q.x1) - std::max(p.x0, q.x0);
  const double h = std::min(p.y1, q.y1) - std::max(p.y0, q.y0);
  if (w <= 0 || h <= 0) return false;
  const double inter = w * h;
  const double ap = (p.x1 - p.x0) * (p.y1 - p.y0), aq = (q.x1 - q.x0) * (q.y1 - q.y0);
  const double uni = ap + aq - inter;
  if (ap <= 0 || aq <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

}  // namespace

void nonzero(const KernelCall& c) {
  const Tensor& x = c.in[0];
  int64_t count = 0;
  int64_t* out = c.out.data<int64_t>();
  if (is_half(x.dtype())) {
    // f16 and bf16: any bit but the sign's set
    const uint16_t* h = x.data<uint16_t>();
    Tensor nz = Tensor::uninitialized(x.dims(), DType::U8);
    for (int64_t i = 0; i < x.numel(); ++i) nz.data<uint8_t>()[i] = (h[i] & 0x7fff) != 0;
    count = nonzero_typed<uint8_t>(nz, out, c.out.dims()[0]);
  } else {
    idx::visit_compute_type(c, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
      count = nonzero_typed<S>(x, out, c.out.dims()[0]);
    });
  }
  shrink_to(c.outs[0], 0, count);
}

void unique(const KernelCall& c) {
  RLX_CHECK(c.outs.size() == 4, c.node.label(), ": unique writes 4 outputs");
  const Tensor x = comparable(c.in[0]);
  idx::visit_compute_type(c, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using S = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    unique_typed<S>(c, x);
  });
}

void non_max_suppression(const KernelCall& c) {
  const auto& a = c.node.attrs_as<NmsAttrs>();
  const Tensor boxes_t = c.in[0].to(DType::F64), scores_t = c.in[1].to(DType::F64);
  const int64_t batches = boxes_t.dims()[0], n = boxes_t.dims()[1];
  const int64_t classes = scores_t.dims()[1];
  RLX_CHECK(scores_t.dims()[0] == batches && scores_t.dims()[2] == n, c.node.label(), ": scores ",
            scores_t.shape().str(), " do not match boxes ", boxes_t.shape().str());
  const double* boxes = boxes_t.data<double>();
  const double* scores = scores_t.data<double>();
  int64_t* out = c.out.data<int64_t>();
  int64_t count = 0;
  std::vector<int64_t> candidates, kept;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t k = 0; k < classes; ++k) {
      const double* s = scores + (b * classes + k) * n;
      candidates.clear();
      for (int64_t i = 0; i < n; ++i)
        if (!a.score_threshold || s[i] > *a.score_threshold) candidates.push_back(i);
      // Highest score first; equal scores by index.
      std::stable_sort(candidates.begin(), candidates.end(),
                       [&](int64_t p, int64_t q) { return s[p] > s[q]; });
      kept.clear();
      for (int64_t i : candidates) {
        if (int64_t(kept.size()) >= a.max_per_class) break;
        const Box box = box_at(boxes + (b * n + i) * 4, a.center_point_box);
        bool suppressed = false;
        for (int64_t j : kept)
          if (overlaps(box_at(boxes + (b * n + j) * 4, a.center_point_box), box, a.iou_threshold)) {
            suppressed = true;
            break;
          }
        if (suppressed) continue;
        kept.push_back(i);
        RLX_CHECK(count < c.out.dims()[0], c.node.label(), ": more selections than the bound");
        int64_t* row = out + 3 * count++;
        row[0] = b, row[1] = k, row[2] = i;
      }
    }
  shrink_to(c.outs[0], 0, count);
}

}  // namespace rlx::cpu
