// Plain scalar references for the indexing ops, written per output element
// from coordinates (no code shared with the kernels). They compute in double
// and cast to the data dtype at the end, which is exact for pure copies.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "support/testing.h"

namespace rlx::testing::ref {

inline int64_t wrap(int64_t v, int64_t n) { return v < 0 ? v + n : v; }
inline int64_t iv(const Tensor& t, int64_t f) { return int64_t(t.item_as_double(f)); }

inline Tensor from_doubles(const Dims& dims, const std::vector<double>& v, DType t) {
  return Tensor::from_vector<double>(dims, v, DType::F64).to(t);
}

inline Tensor gather(const Tensor& d, const Tensor& ix, int64_t axis) {
  const int ax = normalize_axis(axis, d.rank());
  const Dims &dd = d.dims(), &id = ix.dims();
  Dims od(dd.begin(), dd.begin() + ax);
  od.insert(od.end(), id.begin(), id.end());
  od.insert(od.end(), dd.begin() + ax + 1, dd.end());
  std::vector<double> out(size_t(numel(od)));
  for (int64_t f = 0; f < int64_t(out.size()); ++f) {
    Dims c = unravel(f, od);
    Dims ic(c.begin() + ax, c.begin() + ax + int64_t(id.size()));
    Dims dc(c.begin(), c.begin() + ax);
    dc.push_back(wrap(iv(ix, ravel(ic, id)), dd[size_t(ax)]));
    dc.insert(dc.end(), c.begin() + ax + int64_t(id.size()), c.end());
    out[size_t(f)] = d.item_as_double(ravel(dc, dd));
  }
  return from_doubles(od, out, d.dtype());
}

inline Tensor gather_elements(const Tensor& d, const Tensor& ix, int64_t axis) {
  const int ax = normalize_axis(axis, d.rank());
  std::vector<double> out(size_t(ix.numel()));
  for (int64_t f = 0; f < ix.numel(); ++f) {
    Dims c = unravel(f, ix.dims());
    c[size_t(ax)] = wrap(iv(ix, f), d.dims()[size_t(ax)]);
    out[size_t(f)] = d.item_as_double(ravel(c, d.dims()));
  }
  return from_doubles(ix.dims(), out, d.dtype());
}

inline Tensor gather_nd(const Tensor& d, const Tensor& ix, int64_t b) {
  const Dims &dd = d.dims(), &id = ix.dims();
  const int64_t k = id.back();
  Dims tdims(id.begin(), id.end() - 1);
  Dims od = tdims;
  od.insert(od.end(), dd.begin() + b + k, dd.end());
  std::vector<double> out(size_t(numel(od)));
  for (int64_t f = 0; f < int64_t(out.size()); ++f) {
    Dims c = unravel(f, od);
    Dims tc(c.begin(), c.begin() + int64_t(tdims.size()));
    int64_t t = ravel(tc, tdims);
    Dims dc(c.begin(), c.begin() + b);
    for (int64_t j = 0; j < k; ++j) dc.push_back(wrap(iv(ix, t * k + j), dd[size_t(b + j)]));
    dc.insert(dc.end(), c.begin() + int64_t(tdims.size()), c.end());
    out[size_t(f)] = d.item_as_double(ravel(dc, dd));
  }
  return from_doubles(od, out, d.dtype());
}

// Reduction in double; NaN propagates through max/min like torch amax/amin.
inline double reduce(const std::string& r, double a, double b) {
  if (r == "none") return b;
  if (r == "add") return a + b;
  if (r == "mul") return a * b;
  if (std::isnan(a) || std::isnan(b)) return NAN;
  return r == "max" ? std::max(a, b) : std::min(a, b);
}

inline Tensor scatter_elements(const Tensor& d, const Tensor& ix, const Tensor& u, int64_t axis,
                               const std::string& red) {
  const int ax = normalize_axis(axis, d.rank());
  std::vector<double> out(size_t(d.numel()));
  for (int64_t f = 0; f < d.numel(); ++f) out[size_t(f)] = d.item_as_double(f);
  for (int64_t f = 0; f < ix.numel(); ++f) {  // row-major order: later duplicates win
    Dims c = unravel(f, ix.dims());
    c[size_t(ax)] = wrap(iv(ix, f), d.dims()[size_t(ax)]);
    double& o = out[size_t(ravel(c, d.dims()))];
    o = reduce(red, o, u.item_as_double(f));
  }
  return from_doubles(d.dims(), out, d.dtype());
}

inline Tensor scatter_nd(const Tensor& d, const Tensor& ix, const Tensor& u,
                         const std::string& red) {
  const Dims &dd = d.dims(), &id = ix.dims();
  const int64_t k = id.back(), count = ix.numel() / std::max<int64_t>(k, 1);
  const int64_t inner = numel(Dims(dd.begin() + k, dd.end()));
  std::vector<double> out(size_t(d.numel()));
  for (int64_t f = 0; f < d.numel(); ++f) out[size_t(f)] = d.item_as_double(f);
  for (int64_t t = 0; t < count; ++t) {
    Dims dc;
    for (int64_t j = 0; j < k; ++j) dc.push_back(wrap(iv(ix, t * k + j), dd[size_t(j)]));
    for (int64_t j = k; j < int64_t(dd.size()); ++j) dc.push_back(0);
    int64_t base = ravel(dc, dd);
    for (int64_t x = 0; x < inner; ++x) {
      double& o = out[size_t(base + x)];
      o = reduce(red, o, u.item_as_double(t * inner + x));
    }
  }
  return from_doubles(dd, out, d.dtype());
}

// Returns {values, indices}; NaN ranks largest, ties by smaller index.
inline std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t axis, bool largest,
                                      bool sorted) {
  const int ax = normalize_axis(axis, x.rank());
  Dims od = x.dims();
  od[size_t(ax)] = k;
  std::vector<double> vals(size_t(numel(od))), ids(vals.size());
  Dims line_dims = x.dims();
  line_dims[size_t(ax)] = 1;
  for (int64_t l = 0; l < numel(line_dims); ++l) {
    Dims c = unravel(l, line_dims);
    std::vector<std::pair<double, int64_t>> line;
    for (int64_t j = 0; j < x.dims()[size_t(ax)]; ++j) {
      c[size_t(ax)] = j;
      line.push_back({x.item_as_double(ravel(c, x.dims())), j});
    }
    auto key = [&](double v) { return std::isnan(v) ? INFINITY : v; };
    auto rank_nan = [](double v) { return std::isnan(v) ? 1 : 0; };
    std::stable_sort(line.begin(), line.end(), [&](const auto& a, const auto& b) {
      if (rank_nan(a.first) != rank_nan(b.first))
        return largest ? rank_nan(a.first) > rank_nan(b.first)
                       : rank_nan(a.first) < rank_nan(b.first);
      return largest ? key(a.first) > key(b.first) : key(a.first) < key(b.first);
    });
    line.resize(size_t(k));
    if (!sorted)
      std::sort(line.begin(), line.end(), [](auto& a, auto& b) { return a.second < b.second; });
    for (int64_t j = 0; j < k; ++j) {
      c[size_t(ax)] = j;
      int64_t f = ravel(c, od);
      vals[size_t(f)] = line[size_t(j)].first;
      ids[size_t(f)] = double(line[size_t(j)].second);
    }
  }
  return {from_doubles(od, vals, x.dtype()), from_doubles(od, ids, DType::I64)};
}

inline Tensor one_hot(const Tensor& ix, int64_t depth, DType t) {
  Dims od = ix.dims();
  od.push_back(depth);
  std::vector<double> out(size_t(numel(od)), 0.0);
  for (int64_t f = 0; f < ix.numel(); ++f) out[size_t(f * depth + wrap(iv(ix, f), depth))] = 1;
  return from_doubles(od, out, t);
}

inline Tensor embedding(const Tensor& table, const Tensor& ids) {
  const int64_t dim = table.dims()[1];
  Dims od = ids.dims();
  od.push_back(dim);
  std::vector<double> out(size_t(numel(od)));
  for (int64_t f = 0; f < ids.numel(); ++f)
    for (int64_t j = 0; j < dim; ++j)
      out[size_t(f * dim + j)] = table.item_as_double(iv(ids, f) * dim + j);
  return from_doubles(od, out, table.dtype());
}

}  // namespace rlx::testing::ref
