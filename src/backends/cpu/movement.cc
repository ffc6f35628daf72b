// Movement kernels: byte copies by element size, so they serve every dtype.
// Most work row by row: the output's last axis is one row; rows are split
// across threads and located with an odometer over the leading axes.
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/elem_types.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

using Byte = unsigned char;

// memcpy split over threads in >= 64 KiB pieces.
void par_copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  parallel_for(int64_t(bytes), int64_t(1) << 16, [&](int64_t b, int64_t e) {
    std::memcpy(static_cast<Byte*>(dst) + b, static_cast<const Byte*>(src) + b, size_t(e - b));
  });
}

// Rows over the leading `dims` with ~16K elements of work per chunk.
int64_t movement_row_grain(int64_t row_len) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row_len));
}

// Multi-index over dims, advanced in row-major order.
struct Odometer {
  Dims dims, idx;
  explicit Odometer(Dims d) : dims(std::move(d)), idx(dims.size(), 0) {}
  void seek(int64_t t) {
    for (size_t k = dims.size(); k-- > 0;) {
      idx[k] = t % dims[k];
      t /= dims[k];
    }
  }
  void next() {
    for (size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) return;
      idx[k] = 0;
    }
  }
};

// Runs fn(row, odometer) for every row of `out_dims` (all axes but the last),
// threaded; fn gets the odometer positioned at that row.
template <typename F>
void for_rows(const Dims& out_dims, F&& fn) {
  if (numel(out_dims) == 0) return;
  Dims lead(out_dims.begin(), out_dims.end() - (out_dims.empty() ? 0 : 1));
  int64_t row_len = out_dims.empty() ? 1 : out_dims.back();
  parallel_for(numel(lead), movement_row_grain(row_len), [&](int64_t b, int64_t e) {
    Odometer od(lead);
    od.seek(b);
    for (int64_t r = b; r < e; ++r, od.next()) fn(r, od);
  });
}

void check_dtype(const KernelCall& c) {
  for (const Tensor& t : c.in)
    RLX_CHECK(t.dtype() == c.out.dtype(), c.node.label(), ": dtype ", dtype_name(t.dtype()),
              " differs from output ", dtype_name(c.out.dtype()));
}

// Input axis strides (in elements), contiguous.
Dims strides_of(const Dims& d) { return contiguous_strides(d); }

}  // namespace

void reshape(const KernelCall& c) {
  // reshape_like's second input lends only its dims.
  RLX_CHECK(c.in[0].dtype() == c.out.dtype(), c.node.label(), ": dtype ",
            dtype_name(c.in[0].dtype()), " differs from output ", dtype_name(c.out.dtype()));
  RLX_CHECK(c.in[0].numel() == c.out.numel(), c.node.label(), ": cannot reshape ",
            c.in[0].shape().str(), " to ", dims_str(c.out.dims()));
  par_copy(c.out.raw(), c.in[0].raw(), c.out.nbytes());
}

// ---------------------------------------------------------------- transpose

namespace {

// out[...] of an already coalesced permutation: dims `id` (input), out axis k
// reads input axis p[k]. Handles the case where the input's innermost axis
// is not the output's: 2-D tiles over (out-innermost, in-innermost) axes so
// both reads and writes stay in cache.

// dst[j * ds + i] = src[i * ss + j] for an 8x8 block of 4-byte elements.
// Shuffles move bits unchanged, so loading any 4-byte dtype as floats is exact.
__attribute__((target("avx2,fma"))) void transpose8x8_avx2(const void* src, int64_t ss, void* dst,
                                                           int64_t ds) {
  const float* s = static_cast<const float*>(src);
  float* d = static_cast<float*>(dst);
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ss);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(d + i * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(d + (i + 4) * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

template <typename E>
void transpose_tiled(const E* x, E* y, const Dims& id, const std::vector<int>& p) {
  const int r = int(id.size());
  Dims od(static_cast<size_t>(r)), is_(static_cast<size_t>(r));
  Dims ist = strides_of(id);
  for (int k = 0; k < r; ++k)
    od[size_t(k)] = id[size_t(p[size_t(k)])], is_[size_t(k)] = ist[size_t(p[size_t(k)])];
  Dims os = strides_of(od);
  const int a = r - 1;  // out innermost (input stride is_[a])
  int q = 0;            // out axis holding the input innermost (input stride 1)
  for (int k = 0; k < r; ++k)
    if (p[size_t(k)] == r - 1) q = k;
  Dims rest_dims;
  std::vector<int> rest;
  for (int k = 0; k < r; ++k)
    if (k != a && k != q) rest.push_back(k), rest_dims.push_back(od[size_t(k)]);
  const int64_t A = od[size_t(a)], B = od[size_t(q)], sA = is_[size_t(a)], oB = os[size_t(q)];
  constexpr int64_t T = 32;
  const int64_t ntb = (B + T - 1) / T;
  const int64_t nrest = numel(rest_dims);
  const bool avx = has_avx2_fma();
  parallel_for(nrest * ntb, std::max<int64_t>(1, 16384 / (T * A)), [&](int64_t b, int64_t e) {
    Odometer odo(rest_dims);
    odo.seek(b / ntb);
    int64_t cur = b / ntb;
    for (int64_t t = b; t < e; ++t) {
      int64_t ro = t / ntb;
      while (cur < ro) odo.next(), ++cur;
      int64_t ib = 0, ob = 0;
      for (size_t j = 0; j < rest.size(); ++j)
        ib += odo.idx[j] * is_[size_t(rest[j])], ob += odo.idx[j] * os[size_t(rest[j])];
      int64_t b0 = (t % ntb) * T, b1 = std::min(B, b0 + T);
      for (int64_t a0 = 0; a0 < A; a0 += T) {
        int64_t a1 = std::min(A, a0 + T);
        // 8x8 blocks: one AVX2 register transpose for 4-byte elements.
        for (int64_t bb = b0; bb < b1; bb += 8)
          for (int64_t aa = a0; aa < a1; aa += 8) {
            const E* src = x + ib + aa * sA + bb;
            E* dst = y + ob + bb * oB + aa;
            if constexpr (sizeof(E) == 4) {
              if (avx && bb + 8 <= b1 && aa + 8 <= a1) {
                transpose8x8_avx2(src, sA, dst, oB);
                continue;
              }
            }
            for (int64_t bi = 0; bi < std::min<int64_t>(8, b1 - bb); ++bi)
              for (int64_t ai = 0; ai < std::min<int64_t>(8, a1 - aa); ++ai)
                dst[bi * oB + ai] = src[ai * sA + bi];
          }
      }
    }
  });
}

}  // namespace

void transpose(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  const auto& perm = c.node.attrs_as<TransposeAttrs>().perm;
  RLX_CHECK(int(perm.size()) == rank, c.node.label(), ": perm of ", perm.size(), " axes for ",
            x.shape().str());
  std::vector<int> p;
  std::vector<bool> seen(size_t(rank), false);
  for (int64_t v : perm) {
    int a = normalize_axis(v, rank);
    RLX_CHECK(!seen[size_t(a)], c.node.label(), ": axis ", v, " repeated in perm");
    seen[size_t(a)] = true;
    p.push_back(a);
  }
  if (x.numel() == 0) return;
  // Coalesce: drop size-1 axes, then merge input axes that stay adjacent.
  std::vector<int> newid(size_t(rank), -1);
  Dims id;
  for (int i = 0; i < rank; ++i)
    if (x.dims()[size_t(i)] != 1)
      newid[size_t(i)] = int(id.size()), id.push_back(x.dims()[size_t(i)]);
  std::vector<int> q;
  for (int a : p)
    if (newid[size_t(a)] >= 0) q.push_back(newid[size_t(a)]);
  // Groups of out-consecutive axes that are also input-consecutive.
  std::vector<std::vector<int>> groups;
  for (size_t k = 0; k < q.size(); ++k) {
    if (k > 0 && q[k] == q[k - 1] + 1)
      groups.back().push_back(q[k]);
    else
      groups.push_back({q[k]});
  }
  // Renumber groups by their first input axis.
  std::vector<int> order(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) order[g] = int(g);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return groups[size_t(a)][0] < groups[size_t(b)][0]; });
  Dims cd(groups.size());
  std::vector<int> cp(groups.size());
  for (size_t j = 0; j < order.size(); ++j) {
    const auto& g = groups[size_t(order[j])];
    int64_t n = 1;
    for (int a : g) n *= id[size_t(a)];
    cd[j] = n;
    cp[size_t(order[j])] = int(j);
  }
  const size_t es = dtype_size(x.dtype());
  const int r = int(cd.size());
  bool identity = true;
  for (int k = 0; k < r; ++k) identity = identity && cp[size_t(k)] == k;
  if (identity) return par_copy(c.out.raw(), x.raw(), c.out.nbytes());
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  if (cp.back() == r - 1) {
    // The innermost axis stays innermost: copy runs of cd.back() elements.
    Dims od(static_cast<size_t>(r)), ist = strides_of(cd);
    for (int k = 0; k < r; ++k) od[size_t(k)] = cd[size_t(cp[size_t(k)])];
    const size_t run = size_t(cd.back()) * es;
    for_rows(od, [&](int64_t row, const Odometer& o) {
      int64_t off = 0;
      for (int k = 0; k + 1 < r; ++k) off += o.idx[size_t(k)] * ist[size_t(cp[size_t(k)])];
      std::memcpy(dst + size_t(row) * run, src + size_t(off) * es, run);
    });
    return;
  }
  visit_elem_size(es, [&](auto tag) {
    using E = decltype(tag);
    transpose_tiled<E>(reinterpret_cast<const E*>(src), reinterpret_cast<E*>(dst), cd, cp);
  });
}

// ---------------------------------------------------------------- slice / concat

void slice(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  RLX_CHECK(rank > 0, c.node.label(), ": cannot slice a scalar");
  const auto& a = c.node.attrs_as<SliceAttrs>();
  int ax = normalize_axis(a.axis, std::max(rank, 1));
  int64_t step = a.step;
  RLX_CHECK(step != 0, c.node.label(), ": step must not be 0");
  const int64_t len = x.dims()[size_t(ax)];
  int64_t start = slice_start(a);
  // Python start clamping: [0, len] going forward, [-1, len-1] going back.
  if (start < 0) start += len;
  start = step > 0 ? std::clamp<int64_t>(start, 0, len) : std::clamp<int64_t>(start, -1, len - 1);
  const int64_t count = c.out.dims()[size_t(ax)];
  RLX_CHECK(count == 0 || (start + (count - 1) * step >= 0 && start + (count - 1) * step < len),
            c.node.label(), ": slice of ", count, " from ", start, " step ", step,
            " is out of range for ", x.shape().str());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < ax; ++i) outer *= x.dims()[size_t(i)];
  for (int i = ax + 1; i < rank; ++i) inner *= x.dims()[size_t(i)];
  if (c.out.numel() == 0) return;
  const size_t es = dtype_size(x.dtype()), row = size_t(inner) * es;
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  parallel_for(outer * count, movement_row_grain(inner), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / count, k = t % count;
      std::memcpy(dst + size_t(t) * row, src + size_t(o * len + start + k * step) * row, row);
    }
  });
}

// Each piece's rows are contiguous runs of the input: one pass, no index math per element.
void split(const KernelCall& c) {
  const Tensor& x = c.in[0];
  const int rank = x.rank();
  RLX_CHECK(rank > 0, c.node.label(), ": cannot split a scalar");
  const int ax = normalize_axis(c.node.attrs_as<SplitAttrs>().axis, rank);
  int64_t outer = 1, inner = 1, total = 0;
  for (int i = 0; i < ax; ++i) outer *= x.dims()[size_t(i)];
  for (int i = ax + 1; i < rank; ++i) inner *= x.dims()[size_t(i)];
  for (const Tensor& t : c.outs) {
    RLX_CHECK(t.dtype() == x.dtype() && t.rank() == rank, c.node.label(), ": piece ",
              t.shape().str(), " does not match input ", x.shape().str());
    total += t.dims()[size_t(ax)];
  }
  RLX_CHECK(total == x.dims()[size_t(ax)], c.node.label(), ": pieces of ", total,
            " do not cover axis ", ax, " of ", x.shape().str());
  const size_t es = dtype_size(x.dtype());
  const size_t in_row = size_t(total * inner) * es;
  const Byte* src = static_cast<const Byte*>(x.raw());
  size_t off = 0;
  for (Tensor& t : c.outs) {
    const size_t chunk = size_t(t.dims()[size_t(ax)] * inner) * es;
    Byte* dst = static_cast<Byte*>(t.raw());
    if (outer == 1) {
      par_copy(dst, src + off, chunk);
    } else if (chunk > 0) {
      parallel_for(outer, movement_row_grain(int64_t(chunk / es)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          std::memcpy(dst + size_t(o) * chunk, src + size_t(o) * in_row + off, chunk);
      });
    }
    off += chunk;
  }
}

void concat(const KernelCall& c) {
  check_dtype(c);
  const int rank = c.out.rank();
  RLX_CHECK(rank > 0, c.node.label(), ": cannot concatenate scalars");
  int ax = normalize_axis(c.node.attrs_as<AxisAttrs>().axis, std::max(rank, 1));
  int64_t outer = 1, inner = 1, total = 0;
  for (int i = 0; i < ax; ++i) outer *= c.out.dims()[size_t(i)];
  for (int i = ax + 1; i < rank; ++i) inner *= c.out.dims()[size_t(i)];
  for (const Tensor& t : c.in) {
    RLX_CHECK(t.rank() == rank, c.node.label(), ": rank mismatch ", t.shape().str());
    for (int i = 0; i < rank; ++i)
      RLX_CHECK(i == ax || t.dims()[size_t(i)] == c.out.dims()[size_t(i)], c.node.label(),
                ": input ", t.shape().str(), " does not match output ", dims_str(c.out.dims()));
    total += t.dims()[size_t(ax)];
  }
  RLX_CHECK(total == c.out.dims()[size_t(ax)], c.node.label(), ": concat sizes do not add up");
  if (c.out.numel() == 0) return;
  const size_t es = dtype_size(c.out.dtype());
  const size_t out_row = size_t(total * inner) * es;
  Byte* dst = static_cast<Byte*>(c.out.raw());
  size_t off = 0;
  for (const Tensor& t : c.in) {
    const size_t chunk = size_t(t.dims()[size_t(ax)] * inner) * es;
    const Byte* src = static_cast<const Byte*>(t.raw());
    if (outer == 1) {
      // An operand already in place was grown into (Session::run's append).
      if (dst + off != src) par_copy(dst + off, src, chunk);
    } else if (chunk > 0) {
      parallel_for(outer, movement_row_grain(int64_t(chunk / es)), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          std::memcpy(dst + size_t(o) * out_row + off, src + size_t(o) * chunk, chunk);
      });
    }
    off += chunk;
  }
}

// ---------------------------------------------------------------- expand / tile

void expand(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const Dims& od = c.out.dims();
  const int R = int(od.size()), r = x.rank();
  RLX_CHECK(r <= R, c.node.label(), ": cannot expand ", x.shape().str(), " to ", dims_str(od));
  Dims ist = strides_of(x.dims());
  // Per output axis: input stride, 0 where broadcast. Then coalesce.
  Dims cd, cs;
  for (int k = 0; k < R; ++k) {
    int64_t d = k < R - r ? 1 : x.dims()[size_t(k - (R - r))];
    RLX_CHECK(d == od[size_t(k)] || d == 1, c.node.label(), ": cannot expand ", x.shape().str(),
              " to ", dims_str(od));
    if (od[size_t(k)] == 1) continue;
    int64_t s = d == 1 ? 0 : ist[size_t(k - (R - r))];
    if (!cd.empty() && ((s == 0 && cs.back() == 0) || (s != 0 && cs.back() == s * od[size_t(k)]))) {
      cd.back() *= od[size_t(k)];
      cs.back() = s;
    } else {
      cd.push_back(od[size_t(k)]);
      cs.push_back(s);
    }
  }
  if (c.out.numel() == 0) return;
  if (cd.empty()) cd.push_back(1), cs.push_back(1);
  const size_t es = dtype_size(x.dtype());
  const int64_t L = cd.back();
  const bool bcast_last = cs.back() == 0;
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  visit_elem_size(es, [&](auto tag) {
    using E = decltype(tag);
    for_rows(cd, [&](int64_t row, const Odometer& o) {
      int64_t off = 0;
      for (size_t k = 0; k + 1 < cd.size(); ++k) off += o.idx[k] * cs[k];
      E* d = reinterpret_cast<E*>(dst) + row * L;
      const E* s = reinterpret_cast<const E*>(src) + off;
      if (bcast_last)
        std::fill(d, d + L, *s);
      else
        std::memcpy(d, s, size_t(L) * es);
    });
  });
}

void tile(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const int r = x.rank();
  const auto& reps = c.node.attrs_as<TileAttrs>().repeats;
  RLX_CHECK(int(reps.size()) == r, c.node.label(), ": ", reps.size(), " repeats for ",
            x.shape().str());
  for (int i = 0; i < r; ++i)
    RLX_CHECK(
        reps[size_t(i)] >= 0 && c.out.dims()[size_t(i)] == x.dims()[size_t(i)] * reps[size_t(i)],
        c.node.label(), ": bad repeats ", dims_str(reps), " for ", x.shape().str());
  if (c.out.numel() == 0) return;
  if (r == 0) return par_copy(c.out.raw(), x.raw(), c.out.nbytes());
  const size_t es = dtype_size(x.dtype());
  Dims ist = strides_of(x.dims());
  const int64_t L = x.dims().back(), nrep = reps.back();
  const size_t run = size_t(L) * es;
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  for_rows(c.out.dims(), [&](int64_t row, const Odometer& o) {
    int64_t off = 0;
    for (int k = 0; k + 1 < r; ++k)
      off += (o.idx[size_t(k)] % x.dims()[size_t(k)]) * ist[size_t(k)];
    Byte* d = dst + size_t(row) * run * size_t(nrep);
    for (int64_t j = 0; j < nrep; ++j)
      std::memcpy(d + size_t(j) * run, src + size_t(off) * es, run);
  });
}

// ---------------------------------------------------------------- pad / flip

void pad(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const int r = x.rank();
  const auto& a = c.node.attrs_as<PadAttrs>();
  const auto& pads = a.pads;
  RLX_CHECK(int(pads.size()) == 2 * r, c.node.label(), ": need ", 2 * r, " pads for ",
            x.shape().str());
  // Per axis: output index -> input index, or -1 for the constant value.
  std::vector<std::vector<int64_t>> map(static_cast<size_t>(r));
  for (int d = 0; d < r; ++d) {
    const int64_t L = x.dims()[size_t(d)], b = pads[size_t(d)], n = c.out.dims()[size_t(d)];
    RLX_CHECK(n == L + b + pads[size_t(d + r)], c.node.label(), ": output dim ", n,
              " does not match pads for ", x.shape().str());
    auto& m = map[size_t(d)];
    m.resize(size_t(n));
    for (int64_t j = 0; j < n; ++j) {
      int64_t i = j - b;
      if (i < 0 || i >= L) {
        switch (a.mode) {
          case PadMode::reflect:
            i = i < 0 ? -i : 2 * (L - 1) - i;
            break;
          case PadMode::replicate:
            RLX_CHECK(L > 0, c.node.label(), ": replicate padding of an empty axis");
            i = std::clamp<int64_t>(i, 0, L - 1);
            break;
          case PadMode::constant:
            i = -1;
            break;
        }
        RLX_CHECK(i >= -1 && i < L && (i >= 0 || a.mode == PadMode::constant), c.node.label(), ": ",
                  to_string(a.mode), " padding ", dims_str(pads), " too large for ",
                  x.shape().str());
      }
      m[size_t(j)] = i;
    }
  }
  if (c.out.numel() == 0) return;
  const size_t es = dtype_size(x.dtype());
  alignas(8) Byte value[8] = {};
  const double v = a.value;
  cast_elements(&v, DType::F64, value, x.dtype(), 1);
  if (r == 0) return par_copy(c.out.raw(), x.raw(), es);
  Dims ist = strides_of(x.dims());
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  const auto& last = map.back();
  const int64_t Lo = c.out.dims().back(), Li = x.dims().back(), b = pads[size_t(r - 1)];
  // Interior of the last axis, copied with one memcpy.
  const int64_t j0 = std::clamp<int64_t>(b, 0, Lo), j1 = std::clamp<int64_t>(b + Li, j0, Lo);
  visit_elem_size(es, [&](auto tag) {
    using E = decltype(tag);
    E fillv;
    std::memcpy(&fillv, value, sizeof(E));
    for_rows(c.out.dims(), [&](int64_t row, const Odometer& o) {
      E* d = reinterpret_cast<E*>(dst) + row * Lo;
      int64_t off = 0;
      for (int k = 0; k + 1 < r; ++k) {
        int64_t i = map[size_t(k)][size_t(o.idx[size_t(k)])];
        if (i < 0) return std::fill(d, d + Lo, fillv);
        off += i * ist[size_t(k)];
      }
      const E* s = reinterpret_cast<const E*>(src) + off;
      for (int64_t j = 0; j < j0; ++j) d[j] = last[size_t(j)] < 0 ? fillv : s[last[size_t(j)]];
      if (j1 > j0) std::memcpy(d + j0, s + (j0 - b), size_t(j1 - j0) * es);
      for (int64_t j = j1; j < Lo; ++j) d[j] = last[size_t(j)] < 0 ? fillv : s[last[size_t(j)]];
    });
  });
}

void flip(const KernelCall& c) {
  check_dtype(c);
  const Tensor& x = c.in[0];
  const int r = x.rank();
  std::vector<bool> fl(size_t(std::max(r, 1)), false);
  for (int64_t a : c.node.attrs_as<FlipAttrs>().axes) {
    int ax = normalize_axis(a, std::max(r, 1));
    RLX_CHECK(!fl[size_t(ax)], c.node.label(), ": axis ", a, " listed twice");
    fl[size_t(ax)] = true;
  }
  if (x.numel() == 0) return;
  if (r == 0) return par_copy(c.out.raw(), x.raw(), c.out.nbytes());
  const size_t es = dtype_size(x.dtype());
  Dims ist = strides_of(x.dims());
  const Dims& d = x.dims();
  const int64_t L = d.back();
  const Byte* src = static_cast<const Byte*>(x.raw());
  Byte* dst = static_cast<Byte*>(c.out.raw());
  visit_elem_size(es, [&](auto tag) {
    using E = decltype(tag);
    for_rows(d, [&](int64_t row, const Odometer& o) {
      int64_t off = 0;
      for (int k = 0; k + 1 < r; ++k) {
        int64_t i = o.idx[size_t(k)];
        off += (fl[size_t(k)] ? d[size_t(k)] - 1 - i : i) * ist[size_t(k)];
      }
      const E* s = reinterpret_cast<const E*>(src) + off;
      E* t = reinterpret_cast<E*>(dst) + row * L;
      if (fl[size_t(r - 1)])
        std::reverse_copy(s, s + L, t);
      else
        std::memcpy(t, s, size_t(L) * es);
    });
  });
}

}  // namespace rlx::cpu
