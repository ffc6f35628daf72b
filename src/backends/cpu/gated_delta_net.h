// gated_delta_net's two CPU forms over one call's contiguous tensors (ops.def's layout): the step
// form, the reference, and the chunked (WY) form, which turns each chunk of kGdnChunk steps into
// GEMMs. The kernel (state_space.cc) picks one; tests and benches may ask for either.
#pragma once
#include <cstdint>

namespace rlx::cpu {

template <typename T>
struct GdnView {
  const T *q, *k, *v, *g, *beta;  // [B,S,H,N] x3, [B,S,H] x2
  T* o;                           // [B,S,H,N]
  T* state;                       // [B,H,N,N]: the initial state on entry, the final on exit
  int64_t B, S, H, N;
};

enum class GdnForm { step, chunked };
inline constexpr int64_t kGdnChunk = 64;  // steps per chunk of the chunked form

// Every (b, h) sequence, threaded over rlx's pool.
void gated_delta_net_run(const GdnView<float>& a, GdnForm form);
void gated_delta_net_run(const GdnView<double>& a, GdnForm form);

}  // namespace rlx::cpu
