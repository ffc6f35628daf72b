// Shape rules of the control-flow ops (if, loop): a body's output shapes in the node's terms.
// Kept apart from shape_infer.cc, which dispatches to them from the op table.
#pragma once
#include <vector>

#include "rlx/graph.h"

namespace rlx {

std::vector<Shape> infer_if(const Node& n, const std::vector<const Shape*>& in);
std::vector<Shape> infer_loop(const Node& n, const std::vector<const Shape*>& in);

}  // namespace rlx
