// Shape rule of the linalg op (one per function), kept apart from shape_infer.cc, which
// dispatches to it from the op table.
#pragma once
#include <vector>

#include "rlx/graph.h"

namespace rlx {

std::vector<Shape> infer_linalg(const Node& n, const std::vector<const Shape*>& in);

}  // namespace rlx
