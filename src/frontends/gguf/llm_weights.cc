#include "frontends/gguf/llm_weights.h"

#include "rlx/error.h"
#include "rlx/quant.h"

namespace rlx::llm {
namespace {

std::shared_ptr<Buffer> file_bytes(const gguf::File& f, const gguf::TensorInfo& t) {
  return make_borrowed_buffer(const_cast<uint8_t*>(t.data), t.nbytes,
                              std::const_pointer_cast<void>(f.mapping));
}

}  // namespace

const gguf::TensorInfo& WeightBinder::info(const std::string& name) const {
  const gguf::TensorInfo* t = f_.find_tensor(name);
  RLX_CHECK(t, f_.source, ": tensor '", name, "' is missing");
  return *t;
}

bool WeightBinder::keep_quantized(const gguf::TensorInfo& t) const {
  // F32 matrices too: dequant_matmul reads them in place from the mapping,
  // where a BLAS matmul would fold a transposed copy of every weight.
  return mode_ == Weights::Quantized && t.ne.size() == 2;
}

NodeId WeightBinder::f32_param(Builder& b, const std::string& name) {
  if (auto it = params_.find(name); it != params_.end()) return it->second;
  const gguf::TensorInfo& t = info(name);
  Tensor w = gguf::to_f32(f_, t);
  NodeId id = b.param(name, Shape(w.dims(), DType::F32));
  out_[name] = std::move(w);
  return params_[name] = id;
}

// The raw blocks as u8 [rows, row_bytes] (rows: every dim past the first),
// borrowed from the mapping.
NodeId WeightBinder::quant_param(Builder& b, const std::string& name) {
  if (auto it = params_.find(name); it != params_.end()) return it->second;
  const gguf::TensorInfo& t = info(name);
  int64_t rows = 1;
  for (size_t i = 1; i < t.ne.size(); ++i) rows *= t.ne[i];
  const int64_t row_bytes = int64_t(quant::row_size(t.type, t.ne[0]));
  RLX_CHECK(uint64_t(rows * row_bytes) == t.nbytes, f_.source, ": tensor '", name, "' holds ",
            t.nbytes, " bytes, expected ", rows * row_bytes);
  Dims dims{rows, row_bytes};
  NodeId id = b.param(name, Shape(dims, DType::U8));
  out_[name] = Tensor(file_bytes(f_, t), 0, dims, DType::U8);
  return params_[name] = id;
}

NodeId WeightBinder::dense(Builder& b, const std::string& name) { return f32_param(b, name); }

NodeId WeightBinder::linear(Builder& b, NodeId x, const std::string& name) {
  const gguf::TensorInfo& t = info(name);
  if (!keep_quantized(t)) return b.linear(x, f32_param(b, name));
  return b.op(Op::DequantMatmul, {x, quant_param(b, name)},
              {{"scheme", std::string(quant::traits(t.type).name)}, {"k", t.ne[0]}});
}

NodeId WeightBinder::experts(Builder& b, const std::string& name, std::string& scheme) {
  const gguf::TensorInfo& t = info(name);
  RLX_CHECK(t.ne.size() == 3, f_.source, ": tensor '", name, "' is not 3-d (experts)");
  if (mode_ == Weights::Quantized) {
    scheme = quant::traits(t.type).name;
    return quant_param(b, name);
  }
  scheme = quant::traits(quant::GgmlType::F32).name;
  if (auto it = params_.find(name); it != params_.end()) return it->second;
  Tensor w = gguf::to_f32(f_, t);
  const Dims dims{t.ne[1] * t.ne[2], t.ne[0] * int64_t(sizeof(float))};
  NodeId id = b.param(name, Shape(dims, DType::U8));
  out_[name] = Tensor(w.buffer(), 0, dims, DType::U8);
  return params_[name] = id;
}

NodeId WeightBinder::embedding(Builder& b, const std::string& name, NodeId ids) {
  const gguf::TensorInfo& t = info(name);
  if (!keep_quantized(t)) return b.op(Op::Embedding, {f32_param(b, name), ids});
  return b.op(Op::DequantEmbedding, {quant_param(b, name), ids},
              {{"scheme", std::string(quant::traits(t.type).name)}, {"k", t.ne[0]}});
}

}  // namespace rlx::llm
