// Plain scalar references for the element-wise tests, written independently
// of the kernels: index arithmetic for broadcasting, everything in double.
#pragma once
#include <cmath>
#include <functional>
#include <vector>

#include "support/testing.h"

namespace rlx::testing {

inline Dims broadcast_shape(const std::vector<Dims>& ins) {
  size_t r = 0;
  for (const Dims& d : ins) r = std::max(r, d.size());
  Dims out(r, 1);
  for (const Dims& d : ins)
    for (size_t i = 0; i < d.size(); ++i) {
      int64_t& o = out[r - d.size() + i];
      if (d[i] != 1) o = d[i];
    }
  return out;
}

// Flat index into `in` (contiguous, broadcast to `out`) of output element `flat`.
inline int64_t source_index(const Dims& out, const Dims& in, int64_t flat) {
  std::vector<int64_t> idx(out.size());
  for (int i = int(out.size()) - 1; i >= 0; --i) {
    idx[size_t(i)] = flat % out[size_t(i)];
    flat /= out[size_t(i)];
  }
  int64_t src = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t k = idx[out.size() - in.size() + i];
    src = src * in[i] + (in[i] == 1 ? 0 : k);
  }
  return src;
}

// out[i] = f(inputs broadcast at i) as double, stored in dtype `t`.
inline Tensor ref_map(const std::vector<Tensor>& ins, DType t,
                      const std::function<double(const std::vector<double>&)>& f) {
  std::vector<Dims> ds;
  for (const Tensor& x : ins) ds.push_back(x.dims());
  Dims out = broadcast_shape(ds);
  Tensor r(out, DType::F64);
  std::vector<double> args(ins.size());
  for (int64_t i = 0; i < r.numel(); ++i) {
    for (size_t k = 0; k < ins.size(); ++k)
      args[k] = ins[k].item_as_double(source_index(out, ins[k].dims(), i));
    r.data<double>()[i] = f(args);
  }
  return r.to(t);
}

// Tensor from explicit values (converted to `t`).
inline Tensor tensor_of(const Dims& d, const std::vector<double>& v, DType t) {
  return Tensor::from_vector<double>(d, v, t);
}

}  // namespace rlx::testing
