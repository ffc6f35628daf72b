// Backward ops spelt as primitive ops, for a backend that has no kernel of its
// own for them (the CoreML lowering builds these on the node's inputs).
#pragma once
#include "opt/autodiff/emit.h"

namespace rlx::opt::ad {

// max_pool2d_grad(x, dy) from pad, a grouped one-hot conv that extracts every
// window's taps, compares with max_pool2d, an exclusive cumsum that keeps the
// first maximum, and a conv_transpose that puts the taps back. A window whose
// maximum is NaN passes no gradient here (the CPU kernel gives it to the NaN).
NodeId max_pool_grad_primitives(Emit& e, NodeId x, NodeId dy, MaxPoolAttrs a);

}  // namespace rlx::opt::ad
