// Shared helpers of the element-wise kernels: NumPy broadcasting over
// contiguous operands, and dispatch from a runtime DType to a C++ type.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {

// Elements per parallel chunk: cheap ops (add, compare, copy) and ops that
// cost tens of cycles per element (exp, erf, pow).
constexpr int64_t kGrainCheap = 32768;
constexpr int64_t kGrainHeavy = 4096;

// The index space of an N-operand broadcasting op. Output dims of size 1 are
// dropped and neighbouring dims are merged wherever every operand stays
// linear across them, so same-shape inputs become one run, a scalar operand
// has stride 0 and [M,N] + [N] becomes M runs of N. Strides are in elements;
// the innermost stride of each operand is 0 (broadcast) or 1.
template <int N>
struct Broadcast {
  std::vector<int64_t> dims;
  std::array<std::vector<int64_t>, N> strides;
  int64_t numel = 0;

  Broadcast(const Dims& out, std::array<const Dims*, N> in, const Node& node) {
    const size_t r = out.size();
    std::array<Dims, N> st;
    for (int k = 0; k < N; ++k) {
      const Dims& d = *in[size_t(k)];
      RLX_CHECK(d.size() <= r, node.label(), ": operand ", k, " ", dims_str(d),
                " has more dims than the output ", dims_str(out));
      Dims cs = contiguous_strides(d);
      st[size_t(k)].assign(r, 0);
      for (size_t i = 0; i < d.size(); ++i) {
        const size_t o = i + (r - d.size());
        RLX_CHECK(d[i] == out[o] || d[i] == 1, node.label(), ": operand ", k, " ", dims_str(d),
                  " does not broadcast to ", dims_str(out));
        st[size_t(k)][o] = d[i] == 1 ? 0 : cs[i];
      }
    }
    numel = rlx::numel(out);
    for (size_t i = 0; i < r; ++i) {
      if (out[i] == 1) continue;
      bool merge = !dims.empty();
      for (int k = 0; k < N && merge; ++k)
        merge = strides[size_t(k)].back() == st[size_t(k)][i] * out[i];
      if (merge) {
        dims.back() *= out[i];
        for (int k = 0; k < N; ++k) strides[size_t(k)].back() = st[size_t(k)][i];
      } else {
        dims.push_back(out[i]);
        for (int k = 0; k < N; ++k) strides[size_t(k)].push_back(st[size_t(k)][i]);
      }
    }
    if (dims.empty()) {  // every dim is 1 (or rank 0): one element
      dims.push_back(1);
      for (int k = 0; k < N; ++k) strides[size_t(k)].push_back(0);
    }
  }

  int64_t inner_stride(int k) const { return strides[size_t(k)].back(); }

  // Calls f(offsets, out_offset, len) for the runs covering output elements
  // [begin, end): operand k reads elements offsets[k] + j * inner_stride(k).
  template <typename F>
  void for_each_run(int64_t begin, int64_t end, F&& f) const {
    const int r = int(dims.size());
    std::vector<int64_t> idx(static_cast<size_t>(r), 0);
    int64_t rem = begin;
    for (int i = r - 1; i >= 0; --i) {
      idx[size_t(i)] = rem % dims[size_t(i)];
      rem /= dims[size_t(i)];
    }
    for (int64_t pos = begin; pos < end;) {
      std::array<int64_t, N> off{};
      for (int k = 0; k < N; ++k)
        for (int i = 0; i < r; ++i)
          off[size_t(k)] += idx[size_t(i)] * strides[size_t(k)][size_t(i)];
      const int64_t len = std::min(dims.back() - idx.back(), end - pos);
      f(off, pos, len);
      pos += len;
      idx.back() += len;
      for (int i = r - 1; i > 0 && idx[size_t(i)] == dims[size_t(i)]; --i) {
        idx[size_t(i)] = 0;
        ++idx[size_t(i - 1)];
      }
    }
  }

  // for_each_run over all elements, split across the thread pool.
  template <typename F>
  void parallel_runs(int64_t grain, F&& f) const {
    if (numel == 0) return;
    parallel_for(numel, grain, [&](int64_t b, int64_t e) { for_each_run(b, e, f); });
  }
};

// Calls f.template operator()<T>() with T the storage type of `t`, for the
// dtypes the upcasting kernels see (no f16/bf16: the runtime widens those).
template <typename F>
decltype(auto) visit_compute_dtype(DType t, const Node& node, F&& f) {
  switch (t) {
    case DType::F32:
      return f.template operator()<float>();
    case DType::F64:
      return f.template operator()<double>();
    case DType::I8:
      return f.template operator()<int8_t>();
    case DType::I16:
      return f.template operator()<int16_t>();
    case DType::I32:
      return f.template operator()<int32_t>();
    case DType::I64:
      return f.template operator()<int64_t>();
    case DType::U8:
      return f.template operator()<uint8_t>();
    case DType::Bool:
      return f.template operator()<bool>();
    case DType::F16:
    case DType::BF16:
      break;
  }
  throw make_error(node.label(), ": internal error: ", dtype_name(t),
                   " reached an f32-upcast kernel");
}

}  // namespace rlx::cpu
