// Passes that must see the forward graph before autodiff differentiates it:
// bn_train, so the backward of BatchNorm's training form is one
// batch_norm_train_grad. -O0 and --disable-pass bn_train turn it off.
#pragma once
#include <algorithm>

#include "opt/passes.h"
#include "rlx/runtime.h"

namespace rlx::train {

inline Graph before_autodiff(Graph g, const CompileOptions& o) {
  const auto& off = o.disabled_passes;
  if (o.opt_level < 1 || std::find(off.begin(), off.end(), "bn_train") != off.end()) return g;
  return opt::fuse_batch_norm_training(g);
}

}  // namespace rlx::train
