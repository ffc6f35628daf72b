// Reductions (sum/mean/max/min/prod), argmax/argmin and cumsum. Softmax lives
// in softmax.cc. Every op is brought to an [outer, axis, inner] layout; the
// contiguous inner-axis case (inner == 1) has AVX2 row reducers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// Calls f(T{}) with T the storage type of a non-f16/bf16 dtype (bool as u8;
// callers reject the ops that make no sense on bool first).
template <typename F>
void dispatch_real(DType t, const std::string& who, F&& f) {
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
      return f(uint8_t{});  // 0/1 bytes: max/min = any/all
    default:
      throw make_error(who, ": unsupported dtype ", dtype_name(t));
  }
}

// Product of dims in [b, e).
int64_t span(const Dims& d, int b, int e) {
  int64_t n = 1;
  for (int i = b; i < e; ++i) n *= d[size_t(i)];
  return n;
}

// ---------------------------------------------------------------- reduce

enum class Kind { Sum, Prod, Max, Min };

// Accumulator: f32 sums/products in double for accuracy; integer sums and
// products wrap in uint64 (no signed-overflow UB), max/min stay in T.
template <typename T, Kind K>
using Acc = std::conditional_t<K == Kind::Max || K == Kind::Min, T,
                               std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>>;

template <typename A, Kind K>
A reduce_identity() {
  if constexpr (K == Kind::Sum) return A(0);
  if constexpr (K == Kind::Prod) return A(1);
  if constexpr (K == Kind::Max)
    return std::is_floating_point_v<A> ? -std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::lowest();
  if constexpr (K == Kind::Min)
    return std::is_floating_point_v<A> ? std::numeric_limits<A>::infinity()
                                       : std::numeric_limits<A>::max();
}

// One step; max/min propagate NaN like PyTorch (once NaN, stays NaN).
template <typename A, Kind K>
[[gnu::always_inline]] inline A step(A a, A v) {
  if constexpr (K == Kind::Sum) return a + v;
  if constexpr (K == Kind::Prod) return a * v;
  if constexpr (K == Kind::Max) {
    if constexpr (std::is_floating_point_v<A>) return (v > a || v != v) ? v : a;
    return v > a ? v : a;
  }
  if constexpr (K == Kind::Min) {
    if constexpr (std::is_floating_point_v<A>) return (v < a || v != v) ? v : a;
    return v < a ? v : a;
  }
}

template <typename T, Kind K, typename A = Acc<T, K>>
[[gnu::always_inline]] inline A cvt(T v) {
  if constexpr (std::is_same_v<A, uint64_t>) return uint64_t(int64_t(v));
  return A(v);
}

// acc[i] = step(acc[i], x[i]): the strided (inner > 1) case. Written once and
// compiled twice; the AVX2 copy lets GCC vectorize it with wider registers.
template <typename T, Kind K, typename A = Acc<T, K>>
[[gnu::always_inline]] inline void cols_generic(A* acc, const T* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) acc[i] = step<A, K>(acc[i], cvt<T, K>(x[i]));
}
template <typename T, Kind K, typename A = Acc<T, K>>
__attribute__((target("avx2,fma"))) void cols_avx2(A* acc, const T* x, int64_t n) {
  cols_generic<T, K>(acc, x, n);
}
template <typename T, Kind K, typename A = Acc<T, K>>
void cols_scalar(A* acc, const T* x, int64_t n) {
  cols_generic<T, K>(acc, x, n);
}

// Sum of n floats in double: 16 lanes of double accumulators.
__attribute__((target("avx2,fma"))) double row_sum_f32_avx2(const float* x, int64_t n) {
  __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
    a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
    a2 = _mm256_add_pd(a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
    a3 = _mm256_add_pd(a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
  }
  __m256d s = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
  alignas(32) double l[4];
  _mm256_store_pd(l, s);
  double r = (l[0] + l[1]) + (l[2] + l[3]);
  for (; i < n; ++i) r += double(x[i]);
  return r;
}

// Max (or min) of n floats, NaN-propagating: the max instruction drops NaNs,
// so NaNs are tracked separately in an unordered-compare mask.
template <bool kMax>
__attribute__((target("avx2,fma"))) float row_maxmin_f32_avx2(const float* x, int64_t n) {
  const float init = kMax ? -INFINITY : INFINITY;
  __m256 a0 = _mm256_set1_ps(init), a1 = a0, nan = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(v0, v1, _CMP_UNORD_Q));
    a0 = kMax ? _mm256_max_ps(a0, v0) : _mm256_min_ps(a0, v0);
    a1 = kMax ? _mm256_max_ps(a1, v1) : _mm256_min_ps(a1, v1);
  }
  if (_mm256_movemask_ps(nan)) return NAN;
  a0 = kMax ? _mm256_max_ps(a0, a1) : _mm256_min_ps(a0, a1);
  alignas(32) float l[8];
  _mm256_store_ps(l, a0);
  float r = init;
  for (float v : l) r = kMax ? std::max(r, v) : std::min(r, v);
  for (; i < n; ++i) r = kMax ? step<float, Kind::Max>(r, x[i]) : step<float, Kind::Min>(r, x[i]);
  return r;
}

// Reduces n contiguous elements to an accumulator.
template <typename T, Kind K, typename A = Acc<T, K>>
A reduce_row(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (has_avx2_fma()) {
      if constexpr (K == Kind::Sum) return row_sum_f32_avx2(x, n);
      if constexpr (K == Kind::Max) return row_maxmin_f32_avx2<true>(x, n);
      if constexpr (K == Kind::Min) return row_maxmin_f32_avx2<false>(x, n);
    }
  }
  // Four independent accumulators break the dependency chain.
  A a[4] = {reduce_identity<A, K>(), reduce_identity<A, K>(), reduce_identity<A, K>(),
            reduce_identity<A, K>()};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) a[j] = step<A, K>(a[j], cvt<T, K>(x[i + j]));
  for (; i < n; ++i) a[0] = step<A, K>(a[0], cvt<T, K>(x[i]));
  return step<A, K>(step<A, K>(a[0], a[1]), step<A, K>(a[2], a[3]));
}

template <typename T, Kind K>
void reduce_typed(const T* x, T* y, int64_t outer, int64_t red, int64_t inner, bool mean) {
  using A = Acc<T, K>;
  {
    // Work is split into (outer row, inner block, chunk of the reduced axis)
    // tasks of ~32K elements, so one long reduction still uses every thread.
    // Partials are merged in chunk order: results do not depend on threads.
    const int64_t iblk = inner == 1 ? 1 : std::min<int64_t>(inner, 1024);
    const int64_t nib = (inner + iblk - 1) / iblk;
    const int64_t rlen = std::max<int64_t>(1, 32768 / iblk);
    const int64_t nrc = std::max<int64_t>(1, (red + rlen - 1) / rlen);
    std::vector<A> part(size_t(outer * nrc * inner));
    const bool avx = has_avx2_fma();
    const int64_t grain =
        std::max<int64_t>(1, 16384 / std::max<int64_t>(1, std::min(red, rlen) * iblk));
    parallel_for(outer * nib * nrc, grain, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t rc = t % nrc, ib = (t / nrc) % nib, o = t / (nrc * nib);
        int64_t r0 = rc * rlen, r1 = std::min(red, r0 + rlen);
        int64_t i0 = ib * iblk, ni = std::min(inner, i0 + iblk) - i0;
        A* acc = part.data() + (o * nrc + rc) * inner + i0;
        if (inner == 1) {
          acc[0] = reduce_row<T, K>(x + o * red + r0, r1 - r0);
          continue;
        }
        std::fill(acc, acc + ni, reduce_identity<A, K>());
        for (int64_t r = r0; r < r1; ++r) {
          const T* row = x + (o * red + r) * inner + i0;
          avx ? cols_avx2<T, K>(acc, row, ni) : cols_scalar<T, K>(acc, row, ni);
        }
      }
    });
    parallel_for(outer * inner, 4096, [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        int64_t o = t / inner, i = t % inner;
        A a = reduce_identity<A, K>();
        for (int64_t rc = 0; rc < nrc; ++rc)
          a = step<A, K>(a, part[size_t((o * nrc + rc) * inner + i)]);
        if constexpr (std::is_floating_point_v<T>) {
          y[t] = T(mean ? a / double(red) : a);
        } else {
          y[t] = T(int64_t(a));
        }
      }
    });
  }
}

template <typename T>
void reduce_kind(ReduceOp op, const T* x, T* y, int64_t outer, int64_t red, int64_t inner) {
  switch (op) {
    case ReduceOp::ReduceSum:
      return reduce_typed<T, Kind::Sum>(x, y, outer, red, inner, false);
    case ReduceOp::ReduceMean:
      return reduce_typed<T, Kind::Sum>(x, y, outer, red, inner, true);
    case ReduceOp::ReduceProd:
      return reduce_typed<T, Kind::Prod>(x, y, outer, red, inner, false);
    case ReduceOp::ReduceMax:
      return reduce_typed<T, Kind::Max>(x, y, outer, red, inner, false);
    case ReduceOp::ReduceMin:
      return reduce_typed<T, Kind::Min>(x, y, outer, red, inner, false);
  }
}

// Which input axes are reduced (empty list = all), validated.
std::vector<bool> reduced_mask(const Node& n, int rank) {
  std::vector<bool> red(size_t(rank), false);
  const auto& axes = n.attrs_as<ReduceAttrs>().axes;
  if (axes.empty()) red.assign(size_t(rank), true);
  for (int64_t a : axes) {
    int ax = normalize_axis(a, std::max(rank, 1));
    if (rank == 0) continue;  // a scalar's axis 0/-1: nothing to reduce
    RLX_CHECK(!red[size_t(ax)], n.label(), ": axis ", a, " listed twice");
    red[size_t(ax)] = true;
  }
  return red;
}

}  // namespace

void reduce(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const DType dt = x.dtype();
  const ReduceOp op = family_op<ReduceOp>(c.node.op);
  RLX_CHECK(c.out.dtype() == dt, c.node.label(), ": output dtype ", dtype_name(c.out.dtype()),
            " differs from input ", dtype_name(dt));
  RLX_CHECK(op != ReduceOp::ReduceMean || dt == DType::F32 || dt == DType::F64, c.node.label(),
            ": reduce_mean needs a float input, got ", x.shape().str());
  RLX_CHECK(dt != DType::Bool || op == ReduceOp::ReduceMax || op == ReduceOp::ReduceMin,
            c.node.label(), ": only max/min reduce bool tensors (cast first), got ",
            x.shape().str());
  const int rank = x.rank();
  auto red = reduced_mask(c.node, rank);
  int64_t count = 1;
  for (int i = 0; i < rank; ++i)
    if (red[size_t(i)]) count *= x.dims()[size_t(i)];
  if (c.out.numel() == 0) return;
  RLX_CHECK(count > 0 || (op != ReduceOp::ReduceMax && op != ReduceOp::ReduceMin), c.node.label(),
            ": max/min over an empty axis of ", x.shape().str());

  // Coalesce: drop size-1 dims, merge neighbours with the same role.
  Dims bdims;
  std::vector<bool> bred;
  for (int i = 0; i < rank; ++i) {
    int64_t d = x.dims()[size_t(i)];
    if (d == 1) continue;
    if (!bred.empty() && bred.back() == red[size_t(i)]) {
      bdims.back() *= d;
    } else {
      bdims.push_back(d);
      bred.push_back(red[size_t(i)]);
    }
  }
  Tensor src = x;
  int64_t outer = 1, rn = 1, inner = 1;
  const size_t nb = bdims.size();
  if (nb == 0) {
  } else if (nb == 1) {
    (bred[0] ? rn : inner) = bdims[0];
  } else if (nb == 2) {
    outer = bred[0] ? 1 : bdims[0];
    rn = bred[0] ? bdims[0] : bdims[1];
    inner = bred[0] ? bdims[1] : 1;
  } else if (nb == 3 && !bred[0]) {
    outer = bdims[0], rn = bdims[1], inner = bdims[2];
  } else if (nb == 3) {
    // Reduced, kept, reduced ([N, C, H*W] to [C]: a bias gradient, a batch
    // norm's statistics): the rows first, then the leading block, with no
    // transposed copy. Every op here composes so (a mean of equal-sized means).
    Tensor rows(Dims{bdims[0], bdims[1]}, dt);
    dispatch_real(dt, c.node.label(), [&](auto tag) {
      using T = decltype(tag);
      reduce_kind<T>(op, x.data<T>(), rows.data<T>(), bdims[0] * bdims[1], bdims[2], 1);
      reduce_kind<T>(op, rows.data<T>(), c.out.data<T>(), 1, bdims[0], bdims[1]);
    });
    return;
  } else {
    // Interleaved kept/reduced blocks: one transposed copy puts every kept
    // block first, then the rows reduce contiguously.
    std::vector<int> perm;
    for (size_t i = 0; i < nb; ++i)
      if (!bred[i]) perm.push_back(int(i)), outer *= bdims[i];
    for (size_t i = 0; i < nb; ++i)
      if (bred[i]) perm.push_back(int(i)), rn *= bdims[i];
    src = x.reshape(bdims).permute(perm).contiguous();
  }
  dispatch_real(dt, c.node.label(), [&](auto tag) {
    using T = decltype(tag);
    reduce_kind<T>(op, src.data<T>(), c.out.data<T>(), outer, rn, inner);
  });
}

// ---------------------------------------------------------------- argmax / argmin

namespace {

// True when v should replace the current best b (which sits at a lower index):
// strictly better, or the first NaN (PyTorch treats NaN as the extreme for
// both argmax and argmin). A NaN best is never replaced.
template <bool kMax, typename T>
inline bool better(T v, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (b != b) return false;
    if (v != v) return true;
  }
  return kMax ? v > b : v < b;
}

template <bool kMax, typename T>
void arg_typed(const T* x, int64_t* y, int64_t outer, int64_t len, int64_t inner) {
  const int64_t iblk = std::min<int64_t>(std::max<int64_t>(inner, 1), 512);
  const int64_t nib = (inner + iblk - 1) / iblk;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len * iblk));
  if (inner == 1) {  // contiguous rows: one scan each
    parallel_for(outer, grain, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = x + o * len;
        int64_t bi = 0;
        for (int64_t a = 1; a < len; ++a)
          if (better<kMax>(row[a], row[bi])) bi = a;
        y[o] = bi;
      }
    });
    return;
  }
  parallel_for(outer * nib, grain, [&](int64_t b, int64_t e) {
    std::vector<T> best(static_cast<size_t>(iblk));
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nib, i0 = (t % nib) * iblk, ni = std::min(inner, i0 + iblk) - i0;
      const T* base = x + o * len * inner + i0;
      int64_t* out = y + o * inner + i0;
      std::copy(base, base + ni, best.begin());
      std::fill(out, out + ni, 0);
      for (int64_t a = 1; a < len; ++a) {
        const T* row = base + a * inner;
        for (int64_t i = 0; i < ni; ++i)
          if (better<kMax>(row[i], best[size_t(i)])) best[size_t(i)] = row[i], out[i] = a;
      }
    }
  });
}

}  // namespace

void arg_reduce(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  int ax = normalize_axis(c.node.attrs_as<ArgReduceAttrs>().axis, std::max(rank, 1));
  RLX_CHECK(c.out.dtype() == DType::I64, c.node.label(), ": output must be i64");
  if (c.out.numel() == 0) return;
  int64_t len = rank == 0 ? 1 : x.dims()[size_t(ax)];
  RLX_CHECK(len > 0, c.node.label(), ": arg reduction over an empty axis of ", x.shape().str());
  int64_t outer = rank == 0 ? 1 : span(x.dims(), 0, ax);
  int64_t inner = rank == 0 ? 1 : span(x.dims(), ax + 1, rank);
  dispatch_real(x.dtype(), c.node.label(), [&](auto tag) {
    using T = decltype(tag);
    if (c.node.op == Op::ArgMax)
      arg_typed<true>(x.data<T>(), c.out.data<int64_t>(), outer, len, inner);
    else
      arg_typed<false>(x.data<T>(), c.out.data<int64_t>(), outer, len, inner);
  });
}

// ---------------------------------------------------------------- cumsum

namespace {

// f32 runs in double (PyTorch's CPU accumulator too), integers wrap in uint64
// (PyTorch would promote to i64; rlx keeps the dtype, so the result is the i64
// sum or product truncated).
template <typename T>
using CumAcc = std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

// The running sum (or product, from 1) along an axis of [outer, len, inner].
template <typename T>
void cumsum_typed(const T* x, T* y, int64_t outer, int64_t len, int64_t inner, bool excl, bool rev,
                  bool product) {
  using A = CumAcc<T>;
  const A init = product ? A(1) : A(0);
  auto step = [product](A& s, A v) { s = product ? A(s * v) : A(s + v); };
  auto cvt_in = [](T v) { return std::is_floating_point_v<T> ? A(v) : A(int64_t(v)); };
  auto fin = [](A s) { return std::is_floating_point_v<T> ? T(s) : T(int64_t(s)); };
  if (inner == 1) {  // contiguous rows: one running sum each
    const int64_t d = rev ? -1 : 1;
    parallel_for(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len)),
                 [&](int64_t b, int64_t e) {
                   for (int64_t o = b; o < e; ++o) {
                     const T* xr = x + o * len + (rev ? len - 1 : 0);
                     T* yr = y + o * len + (rev ? len - 1 : 0);
                     A s = init;
                     if (excl)
                       for (int64_t k = 0; k < len; ++k)
                         yr[k * d] = fin(s), step(s, cvt_in(xr[k * d]));
                     else
                       for (int64_t k = 0; k < len; ++k)
                         step(s, cvt_in(xr[k * d])), yr[k * d] = fin(s);
                   }
                 });
    return;
  }
  const int64_t iblk = std::min<int64_t>(inner, 512);
  const int64_t nib = (inner + iblk - 1) / iblk;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(1, len * iblk));
  parallel_for(outer * nib, grain, [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(iblk));
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nib, i0 = (t % nib) * iblk, ni = std::min(inner, i0 + iblk) - i0;
      std::fill(acc.begin(), acc.begin() + ni, init);
      for (int64_t k = 0; k < len; ++k) {
        int64_t a = rev ? len - 1 - k : k;
        int64_t off = (o * len + a) * inner + i0;
        for (int64_t i = 0; i < ni; ++i) {
          A& s = acc[size_t(i)];
          if (excl) y[off + i] = fin(s);
          step(s, cvt_in(x[off + i]));
          if (!excl) y[off + i] = fin(s);
        }
      }
    }
  });
}

}  // namespace

void cumsum(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  const auto& a = c.node.attrs_as<CumSumAttrs>();
  int ax = normalize_axis(a.axis, std::max(rank, 1));
  bool excl = a.exclusive, rev = a.reverse;
  if (x.numel() == 0) return;
  int64_t len = rank == 0 ? 1 : x.dims()[size_t(ax)];
  int64_t outer = rank == 0 ? 1 : span(x.dims(), 0, ax);
  int64_t inner = rank == 0 ? 1 : span(x.dims(), ax + 1, rank);
  RLX_CHECK(x.dtype() != DType::Bool, c.node.label(), ": ", op_name(c.node.op),
            " of bool is not supported (cast first)");
  dispatch_real(x.dtype(), c.node.label(), [&](auto tag) {
    using T = decltype(tag);
    cumsum_typed<T>(x.data<T>(), c.out.data<T>(), outer, len, inner, excl, rev,
                    c.node.op == Op::CumProd);
  });
}

float reduce_row_max(const float* x, int64_t n) { return reduce_row<float, Kind::Max>(x, n); }
double reduce_row_max(const double* x, int64_t n) { return reduce_row<double, Kind::Max>(x, n); }

}  // namespace rlx::cpu
