// Evaluating IR nodes while importing: the ONNX importer folds nodes whose
// inputs are all known (shape code beyond what it tracks element by element).
// Frontends sit below the backends, so the `rlx` library wires the CPU
// backend in (src/api/backends.cc); without it nothing extra folds.
#pragma once
#include <functional>
#include <span>
#include <vector>

#include "rlx/graph.h"

namespace rlx {

using NodeEvaluator = std::function<std::vector<Tensor>(const Node&, std::span<const Tensor>)>;
void set_import_evaluator(NodeEvaluator eval);
const NodeEvaluator& import_evaluator();  // empty until wired

}  // namespace rlx
