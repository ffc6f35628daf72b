// A loadable model: a graph plus the weights its params bind to. load_model
// picks the frontend from the file's content, so tools never name frontends.
#pragma once
#include <string>

#include "rlx/graph.h"
#include "rlx/io.h"

namespace rlx {

struct Model {
  Graph graph;
  TensorMap weights;
  std::string source;  // the path it came from
  std::string format;  // "rlx-graph", ...
};

// Accepts a directory holding `model.rlx.json` (+ `weights.safetensors`), or
// a graph JSON file (weights from `weights.safetensors` beside it, if any).
// Throws rlx::Error naming the path and what it found when nothing fits.
Model load_model(const std::string& path);

// Writes `dir/model.rlx.json` and, when there are weights, `dir/weights.safetensors`.
void save_model(const std::string& dir, const Graph& g, const TensorMap& weights);

inline constexpr const char* kGraphFile = "model.rlx.json";
inline constexpr const char* kWeightsFile = "weights.safetensors";

}  // namespace rlx
