// A loadable model: a graph plus the weights its params bind to. load_model
// picks the frontend from the file's content, so tools never name frontends.
#pragma once
#include <map>
#include <set>
#include <string>

#include "rlx/graph.h"
#include "rlx/io.h"

namespace rlx {

struct Model {
  Graph graph;
  TensorMap weights;
  std::string source;   // the path it came from
  std::string format;   // "rlx-graph", "torch-ir", "gguf-llama", ...
  std::string summary;  // one line about the model, when the format has one
  // Params that are state, not trained (PyTorch buffers and lifted
  // constants): gradients (rlx grad) skip them.
  std::set<std::string> non_trainable;
};

struct LoadOptions {
  // GGUF language models. The default graph takes tokens/positions and gives
  // logits for every token, without a KV cache (what `rlx run --tokens` and
  // export want); a generator asks for the KV-cache graph.
  bool kv_cache = false;
  bool all_logits = true;
  bool dequantize = false;  // every weight to f32 up front, not quant blocks
  int64_t n_tokens = 0;     // > 0: a static token count (CoreML export); 0: symbolic

  // ONNX: import for these input dims (by input name; a declared symbolic dim
  // takes the given extent, a static one must match), so shape code and If
  // conditions on dims fold at import. Other formats take input shapes at
  // compile time instead (CompileOptions::input_shapes).
  std::map<std::string, Dims> input_shapes = {};
  // ONNX: graph inputs frozen to these values. They become constants known at
  // import (an If on a sample-rate input, shape parameters fed as inputs) and
  // are no longer inputs of the loaded graph.
  TensorMap frozen_inputs = {};
};

// The one entry point for every model format, picked from the file's
// content: a directory holding `model.rlx.json` (+ `weights.safetensors`) or
// `torch-ir.json` (the PyTorch exporter's output), a graph JSON file (weights
// from `weights.safetensors` beside it, if any), a GGUF language model, or an
// ONNX model (`.onnx`, or a protobuf starting with ir_version). Throws
// rlx::Error naming the path and what it found when nothing fits.
Model load_model(const std::string& path, const LoadOptions& options = {});

// Whether load_model reads `path` as an ONNX model (by extension or content).
bool is_onnx_model(const std::string& path);

// Writes `dir/model.rlx.json` and, when there are weights, `dir/weights.safetensors`.
void save_model(const std::string& dir, const Graph& g, const TensorMap& weights);

inline constexpr const char* kGraphFile = "model.rlx.json";
inline constexpr const char* kWeightsFile = "weights.safetensors";

}  // namespace rlx
