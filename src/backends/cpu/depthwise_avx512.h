// The AVX-512 depthwise planes (conv.cc threads planes over the pool and runs
// the epilogue; the caller checks cpu_isa() >= Isa::avx512).
#pragma once
#include <cstdint>
#include <vector>

namespace rlx::cpu {

// One channel plane's geometry: input H x W, kernel KH x KW (KW <= 16), top
// and left padding, stride S (1 or 2, both axes), output OH x OW; no dilation.
// `zeros`: W zeros, read for the tap rows in the padding. With `clamp`,
// outputs are stored as min(top, max(0, y)): a fused relu / relu6 (clamp_top
// in epilogue.h), rounded as the separate pass.
struct DwPlane {
  int64_t H, W, KH, KW, pt, pl, S, OH, OW;
  const float* zeros;
  bool clamp = false;
  float top = 0.f;
};

// The lane masks of the flat form: a stride-1 plane whose output rows are as
// wide as its input rows (OW == W) can run as one flat row of OH * OW outputs,
// output q reading tap (kh, kw) at q + (kh - pt) * W + kw - pl, each lane's
// mask clearing the taps that fall in the padding. Empty where the flat form
// does not apply or would not beat one masked vector per output row (small
// maps such as 7x7, where a row fills 7 of 16 lanes). Computed once per conv.
std::vector<uint16_t> dw_flat_masks(const DwPlane& g);

// y[oh * OW + ow] = b + sum_{kh, kw} w[kh * KW + kw] * x[(S oh + kh - pt) * W + S ow + kw - pl],
// taps outside the H x W input reading as zero, read straight from the input
// (masked loads stand in for the padding, so nothing is copied); `flat` is
// dw_flat_masks(g) (the flat form when not empty).
void dw_plane_avx512(const DwPlane& g, const float* x, const float* w, float b, float* y,
                     const std::vector<uint16_t>& flat);

}  // namespace rlx::cpu
