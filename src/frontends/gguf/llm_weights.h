// Binds GGUF tensors to graph params: dense f32 tensors (norms, biases,
// rope factors) and projection / embedding weights, which stay in the file's
// quant blocks (Weights::Quantized) or are dequantized to f32 (Weights::F32).
#pragma once
#include <map>
#include <string>

#include "rlx/builder.h"
#include "rlx/llm.h"

namespace rlx::llm {

class WeightBinder {
 public:
  WeightBinder(const gguf::File& f, Weights mode, TensorMap& out) : f_(f), mode_(mode), out_(out) {}

  // A small tensor as an f32 param in PyTorch dim order.
  NodeId dense(Builder& b, const std::string& name);
  // x @ W^T for W [out, in] stored as GGUF ne [in, out].
  NodeId linear(Builder& b, NodeId x, const std::string& name);
  // A 3-D expert weight (GGUF ne [k, rows, experts]) as u8 [experts * rows,
  // row_bytes]: the file's blocks in place (Quantized) or f32 rows (F32);
  // `scheme` gets their ggml type name, as moe_ffn takes it.
  NodeId experts(Builder& b, const std::string& name, std::string& scheme);
  // Rows of table [V, D] selected by ids.
  NodeId embedding(Builder& b, const std::string& name, NodeId ids);

 private:
  const gguf::File& f_;
  Weights mode_;
  TensorMap& out_;
  std::map<std::string, NodeId> params_;  // one param node per tensor (tied output)

  const gguf::TensorInfo& info(const std::string& name) const;
  NodeId f32_param(Builder& b, const std::string& name);
  NodeId quant_param(Builder& b, const std::string& name);
  bool keep_quantized(const gguf::TensorInfo& t) const;
};

}  // namespace rlx::llm
