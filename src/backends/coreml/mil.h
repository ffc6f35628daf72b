// MIL program building blocks: value types, the MILBlob v2 weight writer and
// a builder that appends operations (and their const inputs) to a block.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "mil.pb.h"
#include "rlx/tensor.h"

namespace rlx::coreml {

namespace pb = ::CoreML::Specification::MILSpec;

// A MIL tensor type; dims of -1 are unknown (symbolic in the IR).
struct Type {
  pb::DataType dt = pb::FLOAT32;
  std::vector<int64_t> dims;
  int rank() const { return int(dims.size()); }
  bool is_static() const;
  int64_t numel() const;  // requires static
};

struct Val {
  std::string name;
  Type type;
};

std::string mil_dtype_name(pb::DataType dt);  // "fp32", "int32", ... (cast's dtype strings)
size_t mil_dtype_size(pb::DataType dt);       // 0 for non-numeric
void set_type(pb::ValueType* vt, const Type& t);
Type get_type(const pb::ValueType& vt);
std::string type_str(const Type& t);  // "fp32[2,?,3]"
// Makes `s` a valid MIL identifier ([A-Za-z_][A-Za-z0-9_@]*).
std::string sanitize_name(const std::string& s);

// MILBlob v2: a 64-byte header, then per blob a 64-byte metadata record
// followed (64 bytes later) by the data; records start 64-aligned.
class BlobWriter {
 public:
  BlobWriter();
  // Appends one blob; returns the offset of its metadata record.
  uint64_t add(uint32_t blob_dtype, const void* data, size_t bytes);
  const std::string& bytes() const { return buf_; }
  uint32_t count() const { return count_; }

 private:
  std::string buf_;
  uint32_t count_ = 0;
};

inline constexpr uint32_t kBlobSentinel = 0xDEADBEEF;
inline constexpr const char* kWeightFile = "@model_path/weights/weight.bin";
// MILBlob dtype codes.
inline constexpr uint32_t kBlobF16 = 1, kBlobF32 = 2, kBlobU8 = 3, kBlobI8 = 4, kBlobI32 = 14;
// The blob record dtype code for a MIL tensor dtype; 0 when blobs cannot hold it.
inline uint32_t blob_dtype_for(pb::DataType dt) {
  switch (dt) {
    case pb::FLOAT16:
      return kBlobF16;
    case pb::FLOAT32:
      return kBlobF32;
    case pb::INT32:
      return kBlobI32;
    case pb::INT8:
      return kBlobI8;
    case pb::UINT8:
      return kBlobU8;
    default:
      return 0;
  }
}
// Tensors with at least this many elements go to weight.bin; smaller ones inline.
inline constexpr int64_t kMinBlobElements = 10;

// An op input: one name, or several for variadic inputs (concat's values).
struct Arg {
  std::vector<std::string> names;
  Arg(const Val& v) : names{v.name} {}  // NOLINT: a value is the common case
  Arg(const std::vector<Val>& vs) {     // NOLINT
    for (const auto& v : vs) names.push_back(v.name);
  }
};

class Builder {
 public:
  Builder(pb::Block* block, BlobWriter* blobs, int opset)
      : block_(block), blobs_(blobs), opset_(opset) {}

  int opset() const { return opset_; }
  // A fresh identifier based on `hint` (suffixed when taken).
  std::string fresh(const std::string& hint);
  void reserve(const std::string& name) { used_.insert(name); }
  void release(const std::string& name) { used_.erase(name); }

  // const ops. `t` is converted to `dt` (floats to fp16/fp32, integers to int32).
  Val constant(const Tensor& t, pb::DataType dt, const std::string& hint);
  Val ints(const std::vector<int64_t>& v, const std::string& hint);  // int32 [n]
  Val int_scalar(int64_t v, const std::string& hint);
  Val scalar(double v, pb::DataType dt, const std::string& hint);
  Val boolean(bool v, const std::string& hint);
  Val string(const std::string& v, const std::string& hint);
  // constexpr_affine_dequantize (CoreML6+): a weight stored as int8 (`q`, values in [-128, 127],
  // in weight.bin from 10 elements) with one `out_dt` scale per index of `axis` and zero points 0;
  // it reads as q * scale[axis index]. Its parameters are attributes, like a const's val.
  Val affine_dequantize(const std::vector<int8_t>& q, const std::vector<int64_t>& dims,
                        const std::vector<float>& scale, int64_t axis, pb::DataType out_dt,
                        const std::string& hint);

  // Appends `type(inputs) -> out` named from `hint`.
  Val op(const std::string& type, const std::vector<std::pair<std::string, Arg>>& inputs,
         const Type& out, const std::string& hint);

 private:
  Val emit_const(pb::Value&& value, const Type& t, const std::string& hint);
  pb::Block* block_;
  BlobWriter* blobs_;
  int opset_;
  std::set<std::string> used_;
};

}  // namespace rlx::coreml
