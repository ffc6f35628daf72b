// Shape rules of the state-space scans (gated_delta_net, selective_scan), kept apart from
// shape_infer.cc, which dispatches to them from the op table.
#pragma once
#include <vector>

#include "rlx/graph.h"

namespace rlx {

// (o [B,S,H,N], state [B,H,N,N])
std::vector<Shape> infer_gated_delta_net(const Node& n, const std::vector<const Shape*>& in);
// (y [B,L,D], h [B,D,N])
std::vector<Shape> infer_selective_scan(const Node& n, const std::vector<const Shape*>& in);

}  // namespace rlx
