// GGUF files (llama.cpp's model format): a checked, mmap-based reader for
// versions 2 and 3 and a writer producing files llama.cpp reads. Tensor data
// stays in its ggml type (see rlx/quant.h for block layouts and conversion).
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rlx/quant.h"
#include "rlx/tensor.h"

namespace rlx::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* value_type_name(ValueType t);

// One metadata value. Integers keep their GGUF width in `type`; arrays hold
// their element type and elements (arrays of arrays are allowed).
struct Value {
  ValueType type = ValueType::U32;
  uint64_t u = 0;  // unsigned ints and bool
  int64_t i = 0;   // signed ints
  double f = 0;    // f32 / f64
  std::string s;
  ValueType elem_type = ValueType::U8;  // arrays only
  std::vector<Value> arr;

  static Value of_u32(uint32_t v) {
    Value x;
    x.type = ValueType::U32;
    x.u = v;
    return x;
  }
  static Value of_i32(int32_t v) {
    Value x;
    x.type = ValueType::I32;
    x.i = v;
    return x;
  }
  static Value of_u64(uint64_t v) {
    Value x;
    x.type = ValueType::U64;
    x.u = v;
    return x;
  }
  static Value of_f32(float v) {
    Value x;
    x.type = ValueType::F32;
    x.f = v;
    return x;
  }
  static Value of_bool(bool v) {
    Value x;
    x.type = ValueType::BOOL;
    x.u = v;
    return x;
  }
  static Value of_string(std::string v) {
    Value x;
    x.type = ValueType::STRING;
    x.s = std::move(v);
    return x;
  }
  static Value of_array(ValueType elem, std::vector<Value> v) {
    Value x;
    x.type = ValueType::ARRAY;
    x.elem_type = elem;
    x.arr = std::move(v);
    return x;
  }

  bool is_integer() const;
  // Any integer width (readers must accept u32, i32, u64 ... alike); throws
  // rlx::Error for other types or values that do not fit.
  int64_t as_int() const;
  double as_float() const;  // floats and integers
  const std::string& as_string() const;
  // Short human-readable form; arrays longer than max_elems are abbreviated.
  std::string to_string(size_t max_elems = 8) const;
};

struct TensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] fastest varying (PyTorch dims reversed)
  quant::GgmlType type = quant::GgmlType::F32;
  uint64_t offset = 0;  // relative to the data section
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping / caller's buffer
  int64_t numel() const;
};

// A parsed file. The mapping (or the caller's buffer for from_bytes) must
// outlive every TensorInfo::data pointer; File keeps its mapping alive.
struct File {
  std::string source;
  uint32_t version = 3;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;                             // file offset of the data section
  std::vector<std::pair<std::string, Value>> metadata;  // file order
  std::vector<TensorInfo> tensors;                      // file order
  std::shared_ptr<const void> mapping;

  const Value* find(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;
};

// Maps and parses the file. Every count, length, offset and size is checked
// against the file before use; any problem is an rlx::Error naming the file.
File read(const std::string& path);
File read_bytes(const void* data, size_t size, const std::string& source_name);

// The tensor as f32 in PyTorch dim order (ne reversed): zero-copy for F32
// tensors (the tensor keeps the mapping alive), dequantized otherwise.
Tensor to_f32(const File& f, const TensorInfo& t);

struct WriteTensor {
  std::string name;
  quant::GgmlType type = quant::GgmlType::F32;
  std::vector<int64_t> ne;
  std::string_view data;  // exactly the tensor's bytes
};
// Serializes version 3 with tensors back to back, each padded to the
// alignment (general.alignment if present in metadata, else 32).
std::string serialize(const std::vector<std::pair<std::string, Value>>& metadata,
                      const std::vector<WriteTensor>& tensors);
void write(const std::string& path, const std::vector<std::pair<std::string, Value>>& metadata,
           const std::vector<WriteTensor>& tensors);

}  // namespace rlx::gguf
