#include "frontends/pool3d.h"

#include "rlx/error.h"

namespace rlx::frontends {

NodeId pool3d_by_2d(Builder& b, NodeId x, const Dims& d, const Dims& kernel, const Dims& stride,
                    const Dims& dilation, const Dims& pads, const Pool2d& pool2d) {
  RLX_CHECK(d.size() >= 3 && kernel.size() == 3 && stride.size() == 3 && dilation.size() == 3 &&
                pads.size() == 6,
            "3-d pool of ", dims_str(d), ": windows need 3 values each and pads 6");
  const size_t lead = d.size() - 3;
  int64_t L = 1;
  for (size_t j = 0; j < lead; ++j) L *= d[j];
  const int64_t D = d[lead], H = d[lead + 1], W = d[lead + 2];
  NodeId y = pool2d(b.reshape(x, {1, L * D, H, W}), {kernel[1], kernel[2]}, {stride[1], stride[2]},
                    {dilation[1], dilation[2]}, {pads[1], pads[2], pads[4], pads[5]});
  const Dims hw = b.graph().node(y).shape.concrete();  // [1, L*D, OH, OW]
  y = pool2d(b.reshape(y, {1, L, D, hw[2] * hw[3]}), {kernel[0], 1}, {stride[0], 1},
             {dilation[0], 1}, {pads[0], 0, pads[3], 0});
  Dims out(d.begin(), d.begin() + int64_t(lead));
  out.insert(out.end(), {b.graph().node(y).shape.concrete()[2], hw[2], hw[3]});
  return b.reshape(y, out);
}

}  // namespace rlx::frontends
