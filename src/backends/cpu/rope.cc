// Rotary position embedding: rope(x [B,H,S,D], positions int [S][, freq_factors [rotary_dims/2]]).
//
//   freq_i  = theta^(-2i / rotary_dims) / freq_factor_i      i in [0, rotary_dims/2)
//   angle   = position[s] * freq_i
//   neox        (HF `rotate_half`): pairs (i, i + rotary_dims/2)
//   interleaved (GPT-J, original llama): pairs (2i, 2i + 1)
//   (a, b) -> (a cos - b sin, b cos + a sin); dims >= rotary_dims pass through unchanged.
//
// Angles, cos and sin are computed in double and rounded once, so large positions do not lose
// precision to a float product (HF computes the angle in float32; the two agree to ~1e-7 relative
// at small positions and differ by float32 rounding of the angle beyond that).
#include <cmath>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/vmath.h"
#include "rlx/cpu_isa.h"
#include "rlx/error.h"
#include "rlx/thread_pool.h"

namespace rlx::cpu {
namespace {

// One row of D values. cs/sn hold rotary_dims/2 entries for this row's position. The rotated
// pair is read before it is written, so y may alias x.
template <typename T>
[[gnu::always_inline]] inline void rope_row_body(const T* x, T* y, int64_t D, int64_t rd, bool neox,
                                                 const T* cs, const T* sn) {
  const int64_t half = rd / 2;
  if (neox) {
    for (int64_t i = 0; i < half; ++i) {
      T a = x[i], b = x[i + half];
      y[i] = a * cs[i] - b * sn[i];
      y[i + half] = b * cs[i] + a * sn[i];
    }
  } else {
    for (int64_t i = 0; i < half; ++i) {
      T a = x[2 * i], b = x[2 * i + 1];
      y[2 * i] = a * cs[i] - b * sn[i];
      y[2 * i + 1] = b * cs[i] + a * sn[i];
    }
  }
  if (y != x)
    for (int64_t i = rd; i < D; ++i) y[i] = x[i];
}

template <typename T>
__attribute__((target("avx2,fma"))) void rope_row_avx2(const T* x, T* y, int64_t D, int64_t rd,
                                                       bool neox, const T* cs, const T* sn) {
  rope_row_body(x, y, D, rd, neox, cs, sn);
}

template <typename T>
void rope_row_plain(const T* x, T* y, int64_t D, int64_t rd, bool neox, const T* cs, const T* sn) {
  rope_row_body(x, y, D, rd, neox, cs, sn);
}

template <typename P>
int64_t position_at(const Tensor& pos, int64_t s) {
  return int64_t(pos.data<P>()[s]);
}

template <typename T>
void rope_t(const KernelCall& c, int64_t rd, double theta, bool neox) {
  const Tensor& x = c.in[0];
  const int64_t B = x.dim(0), H = x.dim(1), S = x.dim(2), D = x.dim(3), half = rd / 2;
  const Tensor& pos = c.in[1];
  const bool pos64 = pos.dtype() == DType::I64;
  // Inverse frequencies in double; freq factors divide them (llama 3 / longrope scaling).
  std::vector<double> inv(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    inv[size_t(i)] = std::pow(theta, -2.0 * double(i) / double(rd));
    if (c.in.size() > 2) {
      double f = double(c.in[2].data<T>()[i]);
      RLX_CHECK(f != 0, c.node.label(), ": freq_factors[", i, "] is 0");
      inv[size_t(i)] /= f;
    }
  }
  // cos/sin table per sequence position: [S, half] each.
  std::vector<T> cs(size_t(S * half)), sn(size_t(S * half));
  parallel_for(
      S, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, half)), [&](int64_t s0, int64_t s1) {
        for (int64_t s = s0; s < s1; ++s) {
          double p = double(pos64 ? position_at<int64_t>(pos, s) : position_at<int32_t>(pos, s));
          for (int64_t i = 0; i < half; ++i) {
            double a = p * inv[size_t(i)];
            cs[size_t(s * half + i)] = T(std::cos(a));
            sn[size_t(s * half + i)] = T(std::sin(a));
          }
        }
      });
  const T* xp = x.data<T>();
  T* yp = c.out.data<T>();
  const bool avx = has_avx2_fma();
  parallel_for(B * H * S, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, D)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r) {
                   const int64_t s = r % S;
                   const T* cr = cs.data() + s * half;
                   const T* sr = sn.data() + s * half;
                   if (avx)
                     rope_row_avx2(xp + r * D, yp + r * D, D, rd, neox, cr, sr);
                   else
                     rope_row_plain(xp + r * D, yp + r * D, D, rd, neox, cr, sr);
                 }
               });
}

}  // namespace

void rope(const KernelCall& c) {
  const Tensor &x = c.in[0], &pos = c.in[1];
  const std::string& who = c.node.label();
  RLX_CHECK(x.rank() == 4, who, ": x must be [B,H,S,D], got ", x.shape().str());
  RLX_CHECK(x.dtype() == DType::F32 || x.dtype() == DType::F64, who,
            ": x must be a float tensor, got ", x.shape().str());
  RLX_CHECK(pos.dtype() == DType::I64 || pos.dtype() == DType::I32, who,
            ": positions must be i64 or i32, got ", pos.shape().str());
  RLX_CHECK(pos.rank() == 1 && pos.dim(0) == x.dim(2), who, ": positions ", pos.shape().str(),
            " must be [S] for x ", x.shape().str());
  const int64_t D = x.dim(3);
  const auto& a = c.node.attrs_as<RopeAttrs>();
  const int64_t rd = a.rotary_dims.value_or(D);
  RLX_CHECK(rd >= 0 && rd <= D && rd % 2 == 0, who, ": rotary_dims=", rd,
            " must be even and in [0, ", D, "]");
  const bool neox = a.style == RopeStyle::neox;
  const double theta = a.theta;
  RLX_CHECK(theta > 0 && std::isfinite(theta), who, ": theta must be > 0, got ", theta);
  if (c.in.size() > 2) {
    const Tensor& ff = c.in[2];
    RLX_CHECK(ff.dtype() == x.dtype() && ff.rank() == 1 && ff.dim(0) == rd / 2, who,
              ": freq_factors ", ff.shape().str(), " must be [", rd / 2, "] of x's dtype");
  }
  if (x.numel() == 0) return;
  if (x.dtype() == DType::F32)
    rope_t<float>(c, rd, theta, neox);
  else
    rope_t<double>(c, rd, theta, neox);
}

}  // namespace rlx::cpu
