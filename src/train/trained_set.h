// What training changes in a model with a `loss` output, by the Trainer's
// rules, shared by the Trainer and training_step_graph so both train the same
// params and carry the same buffers.
#pragma once
#include <string>
#include <vector>

#include "rlx/model.h"

namespace rlx::train {

struct TrainedSet {
  NodeId loss = -1;                  // the `loss` output's node
  std::vector<std::string> params;   // every float param not in non_trainable, graph order
  std::vector<std::string> buffers;  // the weights update:: outputs give new values, output order
};

// Throws rlx::Error naming the model when it has no `loss` output or the loss
// is not one float element (a symbolic shape passes: it is checked once
// bound), when a trained param is not f32, is bound by more than one node or
// has no weight, when nothing is trainable, or when an update:: output names
// something other than a non-trainable weight.
TrainedSet trained_set(const Model& m);

}  // namespace rlx::train
