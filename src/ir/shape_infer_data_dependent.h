// Shape rules of the ops whose output extents depend on input values (nonzero, unique,
// non_max_suppression), kept apart from shape_infer.cc, which dispatches to them from the op
// table. The value-decided extent is the symbol the node's `count` attribute names.
#pragma once
#include <vector>

#include "rlx/graph.h"

namespace rlx {

Shape infer_nonzero(const Node& n, const std::vector<const Shape*>& in);
std::vector<Shape> infer_unique(const Node& n, const std::vector<const Shape*>& in);
Shape infer_nms(const Node& n, const std::vector<const Shape*>& in);

}  // namespace rlx
