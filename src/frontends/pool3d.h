// A 3-d max or average pool as two of rlx's 2-d pools, for the importers (ONNX MaxPool /
// AveragePool, torch max_pool3d / avg_pool3d): one over H x W of [1, L*D, H, W], then one over D
// of [1, L, D, OH*OW]. Both separate exactly: a window and its part inside the input are boxes,
// so the max is a max of maxes and a count_include_pad=0 divisor a product of per-axis counts.
#pragma once
#include <functional>

#include "rlx/builder.h"

namespace rlx::frontends {

// The frontend's 2-d pool of a 4-d value: kernel, stride, dilation [h, w], pads [t, l, b, r].
using Pool2d = std::function<NodeId(NodeId x, const Dims& kernel, const Dims& stride,
                                    const Dims& dilation, const Dims& pads)>;

// x [lead..., D, H, W] with static dims `d`; per-axis windows in D, H, W order, pads as
// [begin d, h, w, end d, h, w]. Returns [lead..., OD, OH, OW].
NodeId pool3d_by_2d(Builder& b, NodeId x, const Dims& d, const Dims& kernel, const Dims& stride,
                    const Dims& dilation, const Dims& pads, const Pool2d& pool2d);

}  // namespace rlx::frontends
