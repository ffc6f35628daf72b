// "loss [] f32, logits [4,10] f32": a graph's outputs for error messages.
#pragma once
#include <string>

#include "rlx/graph.h"

namespace rlx::train {

inline std::string output_list(const Graph& g) {
  std::string s;
  for (const auto& o : g.outputs())
    s += (s.empty() ? "" : ", ") + o.name + " " + g.node(o.node).shape.str();
  return s.empty() ? "(none)" : s;
}

}  // namespace rlx::train
