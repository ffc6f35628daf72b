// gated_delta_net and selective_scan kernels (ops.def, rlx/state_space.h), f32 and f64: the
// run-time checks of every input, then gated_delta_net's forms (gated_delta_net.cc: chunked from
// a full chunk of steps on, else step) and selective_scan's step form here.
//
// selective_scan: one task per (b, block of channels), the state kept transposed ([N][channels])
// so that every loop runs along channels: the decay exp(delta A) of a whole step is one vexp
// call, and y = h C accumulates along n with one axpy per n, without a horizontal sum. The loop
// body is compiled for the baseline and under target("avx2,fma"), picked from cpu_isa() (so
// RLX_ISA=portable tests the other).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/gated_delta_net.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/state_space.h"
#include "rlx/thread_pool.h"

#define RLX_FORCE_INLINE __attribute__((always_inline)) inline

namespace rlx::cpu {
namespace {

constexpr int64_t kScanGrainWork = 1 << 15;  // multiply-adds per parallel_for chunk, at least

// Run-time shapes may bind symbols that inference could only call compatible; check them all.
void check_dims(const Node& n, const char* what, const Tensor& t, const Dims& want) {
  RLX_CHECK(t.dims() == want, n.label(), ": ", what, " ", t.shape().str(), " must be ",
            dims_str(want));
}

void ssm_check_float(const Node& n, std::span<const Tensor> in) {
  const DType dt = in[0].dtype();
  RLX_CHECK(dt == DType::F32 || dt == DType::F64, n.label(), ": wants f32 or f64 inputs, got ",
            in[0].shape().str());
  for (const Tensor& t : in)
    RLX_CHECK(t.dtype() == dt, n.label(), ": inputs of mixed dtypes: ", in[0].shape().str(),
              " and ", t.shape().str());
}

// ---- selective_scan

constexpr int64_t kChannelBlock = 64;  // channels per task: the state block is [N][64]

template <typename T>
struct Ssm {
  const T *x, *delta, *A, *Bm, *C, *d_skip, *h0;  // d_skip, h0 may be null
  T *y, *h;
  int64_t L, D, N;
};

// Channels [d0, d0 + w) of batch row b, w <= kChannelBlock.
template <typename T>
RLX_FORCE_INLINE void ssm_block(const Ssm<T>& a, int64_t b, int64_t d0, int64_t w, T* __restrict hT,
                                T* __restrict AT, T* __restrict e, T* __restrict dx,
                                T* __restrict acc) {
  const int64_t L = a.L, D = a.D, N = a.N;
  // A and the state transposed to [n][channel]
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < w; ++d) {
      AT[n * w + d] = a.A[(d0 + d) * N + n];
      hT[n * w + d] = a.h0 ? a.h0[(b * D + d0 + d) * N + n] : T(0);
    }
  for (int64_t t = 0; t < L; ++t) {
    const int64_t row = (b * L + t) * D + d0;
    const T* __restrict xt = a.x + row;
    const T* __restrict dt = a.delta + row;
    const T* __restrict Bt = a.Bm + (b * L + t) * N;
    const T* __restrict Ct = a.C + (b * L + t) * N;
    for (int64_t d = 0; d < w; ++d) dx[d] = dt[d] * xt[d];
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < w; ++d) e[n * w + d] = dt[d] * AT[n * w + d];
    exp_in_place(e, N * w);
    std::fill(acc, acc + w, T(0));
    for (int64_t n = 0; n < N; ++n) {
      const T bn = Bt[n], cn = Ct[n];
      T* __restrict hn = hT + n * w;
      const T* __restrict en = e + n * w;
      for (int64_t d = 0; d < w; ++d) {
        const T hv = en[d] * hn[d] + dx[d] * bn;
        hn[d] = hv;
        acc[d] += hv * cn;
      }
    }
    T* __restrict yt = a.y + row;
    if (a.d_skip) {
      const T* __restrict ds = a.d_skip + d0;
      for (int64_t d = 0; d < w; ++d) yt[d] = acc[d] + ds[d] * xt[d];
    } else {
      std::copy(acc, acc + w, yt);
    }
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < w; ++d) a.h[(b * D + d0 + d) * N + n] = hT[n * w + d];
}

// Tasks [begin, end) of (batch row, channel block) pairs.
template <typename T>
RLX_FORCE_INLINE void ssm_tasks(const Ssm<T>& a, int64_t begin, int64_t end) {
  const int64_t blocks = (a.D + kChannelBlock - 1) / kChannelBlock, cap = kChannelBlock;
  std::vector<T> buf(size_t(3 * a.N * cap + 2 * cap));
  T *hT = buf.data(), *AT = hT + a.N * cap, *e = AT + a.N * cap, *dx = e + a.N * cap,
    *acc = dx + cap;
  for (int64_t i = begin; i < end; ++i) {
    const int64_t b = i / blocks, d0 = (i % blocks) * cap;
    ssm_block(a, b, d0, std::min(cap, a.D - d0), hT, AT, e, dx, acc);
  }
}
template <typename T>
void ssm_range(const Ssm<T>& a, int64_t begin, int64_t end) {
  ssm_tasks(a, begin, end);
}
template <typename T>
RLX_AVX2 void ssm_range_avx2(const Ssm<T>& a, int64_t begin, int64_t end) {
  ssm_tasks(a, begin, end);
}

template <typename T>
void run_ssm(const KernelCall& c, const SelectiveScanSpec& s, int64_t B) {
  auto opt = [&](int i) { return i >= 0 ? c.in[size_t(i)].data<T>() : nullptr; };
  const Tensor& x = c.in[0];
  Ssm<T> a{x.data<T>(),         c.in[1].data<T>(), c.in[2].data<T>(), c.in[3].data<T>(),
           c.in[4].data<T>(),   opt(s.d_skip),     opt(s.h0),         c.outs[0].data<T>(),
           c.outs[1].data<T>(), x.dim(1),          x.dim(2),          c.in[2].dim(1)};
  const int64_t blocks = (a.D + kChannelBlock - 1) / kChannelBlock;
  const int64_t per_task = std::max<int64_t>(1, 3 * a.L * a.N * std::min(a.D, kChannelBlock));
  const bool avx2 = has_avx2_fma();
  parallel_for(
      B * blocks, std::max<int64_t>(1, kScanGrainWork / per_task),
      [&](int64_t i0, int64_t i1) { avx2 ? ssm_range_avx2(a, i0, i1) : ssm_range(a, i0, i1); });
}

template <typename T>
void run_gdn(const KernelCall& c, const GatedDeltaNetSpec& s, int64_t B) {
  const Tensor& q = c.in[0];
  const GdnView<T> a{q.data<T>(),
                     c.in[1].data<T>(),
                     c.in[2].data<T>(),
                     c.in[3].data<T>(),
                     c.in[4].data<T>(),
                     c.outs[0].data<T>(),
                     c.outs[1].data<T>(),
                     B,
                     q.dim(1),
                     q.dim(2),
                     q.dim(3)};
  const size_t state_elems = size_t(B * a.H * a.N * a.N);
  if (s.state >= 0)
    std::memcpy(a.state, c.in[size_t(s.state)].raw(), state_elems * sizeof(T));
  else
    std::fill(a.state, a.state + state_elems, T(0));
  // From a full chunk on, the chunked form measured as fast as the step form at N = 64 and up to
  // 1.6x faster at N = 128 (bench/state_space_bench.cc); shorter calls (decoding) keep the step.
  // An infinite log-decay (a hard reset) is exact only in the step form.
  const T* g = a.g;
  const bool finite = std::all_of(g, g + B * a.S * a.H, [](T v) { return std::isfinite(v); });
  gated_delta_net_run(a, a.S >= kGdnChunk && finite ? GdnForm::chunked : GdnForm::step);
}

}  // namespace

void gated_delta_net(const KernelCall& c) {
  const GatedDeltaNetSpec s = gated_delta_net_spec(c.node);
  ssm_check_float(c.node, c.in);
  const Tensor& q = c.in[0];
  RLX_CHECK(q.rank() == 4 && q.dim(3) == s.state_size, c.node.label(), ": q ", q.shape().str(),
            " must be [B, S, H, N] with N = state_size=", s.state_size);
  const int64_t B = q.dim(0), S = q.dim(1), H = q.dim(2), N = q.dim(3);
  check_dims(c.node, "k", c.in[1], q.dims());
  check_dims(c.node, "v", c.in[2], q.dims());
  check_dims(c.node, "g", c.in[3], {B, S, H});
  check_dims(c.node, "beta", c.in[4], {B, S, H});
  if (s.state >= 0) check_dims(c.node, "state", c.in[size_t(s.state)], {B, H, N, N});
  if (q.dtype() == DType::F32)
    run_gdn<float>(c, s, B);
  else
    run_gdn<double>(c, s, B);
}

void selective_scan(const KernelCall& c) {
  const SelectiveScanSpec s = selective_scan_spec(c.node);
  RLX_CHECK(int(c.in.size()) == s.num_inputs, c.node.label(), ": expected ", s.num_inputs,
            " inputs, got ", c.in.size());
  ssm_check_float(c.node, c.in);
  const Tensor &x = c.in[0], &A = c.in[2];
  RLX_CHECK(x.rank() == 3 && A.rank() == 2, c.node.label(), ": x ", x.shape().str(), " and A ",
            A.shape().str(), " must be [B, L, D] and [D, N]");
  const int64_t B = x.dim(0), L = x.dim(1), D = x.dim(2), N = A.dim(1);
  check_dims(c.node, "delta", c.in[1], x.dims());
  check_dims(c.node, "A", A, {D, N});
  check_dims(c.node, "B", c.in[3], {B, L, N});
  check_dims(c.node, "C", c.in[4], {B, L, N});
  if (s.d_skip >= 0) check_dims(c.node, "D_skip", c.in[size_t(s.d_skip)], {D});
  if (s.h0 >= 0) check_dims(c.node, "h0", c.in[size_t(s.h0)], {B, D, N});
  if (x.dtype() == DType::F32)
    run_ssm<float>(c, s, B);
  else
    run_ssm<double>(c, s, B);
}

}  // namespace rlx::cpu
