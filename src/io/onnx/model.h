// ONNX files (io layer: the file format only). read_model parses a ModelProto
// and returns it as plain structs (no protobuf types leak out): nodes with
// typed attributes, initializers already converted to rlx tensors (raw,
// typed or external data, each size checked against the file before any
// allocation), and graph inputs/outputs with their declared types, dims as
// values or symbols. What the ops mean is frontends/onnx's job.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rlx/shape.h"
#include "rlx/tensor.h"

namespace rlx::onnx {

// Protobuf messages nested deeper than this (graphs inside If/Loop bodies
// inside attributes, ...) are refused; real models nest a handful of levels.
inline constexpr int kMaxNesting = 64;

struct Graph;

struct Attribute {
  enum Kind { Undefined, Float, Int, String, TensorK, GraphK, Floats, Ints, Strings, Other };
  std::string name;
  Kind kind = Undefined;
  double f = 0;
  int64_t i = 0;
  std::string s;
  Tensor t;                        // TensorK (converted; std::nullopt dtype errors throw)
  std::shared_ptr<const Graph> g;  // GraphK (If/Loop/Scan bodies)
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::string kind_name() const;
};

struct Node {
  std::string name, op_type, domain;  // domain "" or "ai.onnx" is the default set
  std::vector<std::string> inputs;    // "" marks an omitted optional input
  std::vector<std::string> outputs;
  std::vector<Attribute> attributes;
  const Attribute* attr(std::string_view name) const;
  // "node 'Conv_3' (Conv)" or "node #12 (Conv)" when unnamed
  std::string label(size_t index) const;
};

struct ValueInfo {
  std::string name;
  int32_t elem_type = 0;  // TensorProto.DataType; 0 when not declared
  bool has_shape = false;
  std::vector<Dim> dims;  // dim_value, dim_param as a symbol, or an unnamed symbol
};

struct Graph {
  std::string name;
  std::vector<Node> nodes;
  std::vector<std::pair<std::string, Tensor>> initializers;  // in file order
  std::vector<ValueInfo> inputs, outputs, value_info;
};

struct Model {
  std::string path;  // the file it came from, for messages
  int64_t ir_version = 0;
  std::string producer;
  std::map<std::string, int64_t> opsets;  // domain ("" = ai.onnx) -> version
  Graph graph;
  // The default domain's opset (ONNX defaults to 1 when absent).
  int64_t opset() const;
};

// Reads `path`; external data resolve relative to its directory. Throws
// rlx::Error naming the file and, where it applies, the node, tensor or
// attribute and what is wrong.
Model read_model(const std::string& path);
// Same from memory; `source_name` is used in messages and `base_dir` for
// external data ("" refuses external data).
Model parse_model(const void* data, size_t size, const std::string& source_name,
                  const std::string& base_dir);

// A serialized TensorProto (the node tests' input_*.pb / output_*.pb).
Tensor read_tensor(const std::string& path, std::string* name = nullptr);
Tensor parse_tensor(const void* data, size_t size, const std::string& source_name,
                    std::string* name = nullptr);

// The rlx dtype of a TensorProto.DataType, or nullopt (uint16/32/64, string,
// complex, float8, ...: rlx has no such dtype).
std::optional<DType> dtype_of(int32_t onnx_type);
// "FLOAT", "INT64", ... for messages.
std::string onnx_type_name(int32_t onnx_type);

}  // namespace rlx::onnx
