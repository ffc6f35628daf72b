// vec_dot entries of the traits table: run-time choice between the AVX2
// kernels and a portable path, and the activation quantizers they consume.
//
// The portable path dequantizes one block of weight and activation and sums
// float products: slower, but obviously right, and it only runs on CPUs
// without AVX2 (or when forced by tests).

#include <cpuid.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "quant/quant_impl.h"
#include "quant/vec_dot.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::quant {
namespace detail {
namespace {

std::atomic<bool> g_force_portable{false};

bool cpu_has_avx2() { return cpu_isa() >= Isa::avx2; }

// One weight block against the matching activation block (same block size
// for every pair used here), products summed in float.
template <GgmlType W, GgmlType A>
float dot_portable(const void* w, const void* a, int64_t n) {
  const TypeTraits& tw = traits(W);
  const TypeTraits& ta = traits(A);
  const int64_t B = tw.block_size;
  float fw[256], fa[256];
  float sum = 0;
  for (int64_t i = 0; i < n; i += B) {
    tw.dequantize_row(static_cast<const uint8_t*>(w) + (i / B) * tw.type_size, fw, B);
    ta.dequantize_row(static_cast<const uint8_t*>(a) + (i / ta.block_size) * ta.type_size, fa, B);
    float s = 0;
    for (int64_t j = 0; j < B; ++j) s += fw[j] * fa[j];
    sum += s;
  }
  return sum;
}

template <typename Load>
float dot_float(const void* w, const void* a, int64_t n, Load load) {
  const float* x = static_cast<const float*>(a);
  float sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += load(w, i) * x[i];
  return sum;
}

}  // namespace

bool vec_dot_uses_avx2() { return cpu_has_avx2() && !g_force_portable.load(); }
void force_portable_vec_dot(bool on) { g_force_portable = on; }

// cpuid leaf 7 ECX bit 11 (AVX512_VNNI); cpu_isa()'s avx512 level is only
// F/BW/VL/DQ.
bool cpu_has_avx512_vnni() {
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
  }();
  return has;
}

VecDot4Fn vec_dot4(GgmlType t) {
  if (!vec_dot_uses_avx2()) return nullptr;
  const bool vnni = cpu_isa() >= Isa::avx512 && cpu_has_avx512_vnni();
  if (t == GgmlType::Q4_0) return vnni ? vec_dot4_q4_0_vnni : vec_dot4_q4_0_avx2;
  if (t == GgmlType::Q8_0) return vnni ? vec_dot4_q8_0_vnni : vec_dot4_q8_0_avx2;
  return nullptr;
}

float vec_dot_f32(const void* w, const void* a, int64_t n) {
  if (vec_dot_uses_avx2())
    return cpu_isa() >= Isa::avx512 ? vec_dot_f32_avx512(w, a, n) : vec_dot_f32_avx2(w, a, n);
  return dot_float(w, a, n,
                   [](const void* p, int64_t i) { return static_cast<const float*>(p)[i]; });
}
float vec_dot_f16(const void* w, const void* a, int64_t n) {
  if (vec_dot_uses_avx2())
    return cpu_isa() >= Isa::avx512 ? vec_dot_f16_avx512(w, a, n) : vec_dot_f16_avx2(w, a, n);
  return dot_float(w, a, n, [](const void* p, int64_t i) {
    return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
  });
}
float vec_dot_bf16(const void* w, const void* a, int64_t n) {
  if (vec_dot_uses_avx2())
    return cpu_isa() >= Isa::avx512 ? vec_dot_bf16_avx512(w, a, n) : vec_dot_bf16_avx2(w, a, n);
  return dot_float(w, a, n, [](const void* p, int64_t i) {
    return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
  });
}

#define RLX_VEC_DOT(name, W, A)                                     \
  float vec_dot_##name(const void* w, const void* a, int64_t n) {   \
    if (vec_dot_uses_avx2()) return vec_dot_##name##_avx2(w, a, n); \
    return dot_portable<GgmlType::W, GgmlType::A>(w, a, n);         \
  }
RLX_VEC_DOT(q4_0, Q4_0, Q8_0)
RLX_VEC_DOT(q5_0, Q5_0, Q8_0)
RLX_VEC_DOT(q8_0, Q8_0, Q8_0)
RLX_VEC_DOT(q2_K, Q2_K, Q8_K)
RLX_VEC_DOT(q3_K, Q3_K, Q8_K)
RLX_VEC_DOT(q4_K, Q4_K, Q8_K)
RLX_VEC_DOT(q5_K, Q5_K, Q8_K)
RLX_VEC_DOT(q6_K, Q6_K, Q8_K)
#undef RLX_VEC_DOT

namespace {
// q4_1 / q5_1 x Q8_1: the min term uses the activation block sum s stored in
// Q8_1 (fp16, so not exactly sum(q) * d), as the AVX2 kernels and ggml do;
// a dequantize-based path would round differently.
template <bool kFive>
float dot_q41_q51_portable(const void* w, const void* a, int64_t n) {
  const auto* x = static_cast<const uint8_t*>(w);
  const auto* y = static_cast<const uint8_t*>(a);
  const size_t bw = kFive ? 24 : 20;
  float sum = 0;
  for (int64_t b = 0; b < n / 32; ++b, x += bw, y += 36) {
    const uint32_t qh = kFive ? u32le(x + 4) : 0;
    const uint8_t* qs = x + (kFive ? 8 : 4);
    const auto* aq = reinterpret_cast<const int8_t*>(y + 4);
    int isum = 0;
    for (int j = 0; j < 16; ++j) {
      const int q0 = (qs[j] & 15) | int((qh >> j) & 1) << 4;
      const int q1 = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
      isum += q0 * aq[j] + q1 * aq[j + 16];
    }
    sum += fp16(x) * fp16(y) * float(isum) + fp16(x + 2) * fp16(y + 2);
  }
  return sum;
}
}  // namespace

float vec_dot_q4_1(const void* w, const void* a, int64_t n) {
  if (vec_dot_uses_avx2()) return vec_dot_q4_1_avx2(w, a, n);
  return dot_q41_q51_portable<false>(w, a, n);
}
float vec_dot_q5_1(const void* w, const void* a, int64_t n) {
  if (vec_dot_uses_avx2()) return vec_dot_q5_1_avx2(w, a, n);
  return dot_q41_q51_portable<true>(w, a, n);
}

namespace {
// ggml-cpu's activation rounding for Q8_0 / Q8_1 (its AVX2 quantize_row_q8_0
// and q8_1): scale 127 / amax, round half to even. Not the same bytes as the
// round-half-away reference quantizer, so it is a separate function.
void quantize_act_q8(const float* x, uint8_t* y, int64_t n, bool with_sum) {
  const size_t bytes = with_sum ? 36 : 34;
  for (int64_t b = 0; b < n / 32; ++b, x += 32, y += bytes) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    put_fp16(y, d);
    int8_t* qs = reinterpret_cast<int8_t*>(y + bytes - 32);
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int q = std::clamp(nearest_int(x[j] * id), -128, 127);
      qs[j] = int8_t(q);
      sum += q;
    }
    if (with_sum) put_fp16(y + 2, d * float(sum));
  }
}
}  // namespace
}  // namespace detail

void quantize_activations(GgmlType vdt, const float* src, void* dst, int64_t n) {
  row_size(vdt, n);  // checks the block multiple
  auto* y = static_cast<uint8_t*>(dst);
  switch (vdt) {
    case GgmlType::F32:
      std::memcpy(dst, src, size_t(n) * sizeof(float));
      return;
    case GgmlType::Q8_0:
      detail::quantize_act_q8(src, y, n, false);
      return;
    case GgmlType::Q8_1:
      detail::quantize_act_q8(src, y, n, true);
      return;
    case GgmlType::Q8_K:
      detail::quantize_row_q8_K(src, dst, n);
      return;
    default:
      throw make_error("quantize_activations: ", traits(vdt).name,
                       " is not an activation format (f32, q8_0, q8_1, q8_K)");
  }
}

}  // namespace rlx::quant
