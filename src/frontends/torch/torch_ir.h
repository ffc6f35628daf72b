// torch-ir.json v1 (shared/spec/torch-ir.md): the parsed document. Parsing
// validates structure only; lowering gives meaning to ops.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rlx/shape.h"

namespace rlx::torch_ir {

// One Arg: {"ref"}, {"int"}, {"float"}, {"bool"}, {"str"}, {"dtype"}, {"none"}, {"list"}.
struct Arg {
  enum Kind { Ref, Int, Float, Bool, Str, DTypeArg, None, List } kind = None;
  std::string text;  // ref id, string, dtype token
  int64_t i = 0;
  double f = 0;
  std::vector<Arg> list;
};

struct TensorMeta {
  Dims shape;
  DType dtype = DType::F32;
  bool complex = false;  // c64: not representable; an error if used
};

// A node's "out": one tensor, a tuple (entries may be null), or a scalar.
struct Out {
  enum Kind { Tensor, Tuple, Scalar, Unknown } kind = Unknown;
  TensorMeta tensor;
  std::vector<std::optional<TensorMeta>> tuple;
  std::optional<Arg> scalar;
};

struct Input {
  std::string id;
  Dims shape;
  DType dtype;
  std::vector<std::string> dynamic;  // per dim: "" static, else the symbol's name
};

struct Weight {
  std::string id, key, kind;
  Dims shape;
  DType dtype;
};

struct Node {
  std::string id, op;  // op: "aten.addmm.default"
  std::vector<Arg> args;
  std::map<std::string, Arg> kwargs;
  Out out;
};

struct OutputRef {
  std::string name;  // optional; empty: the importer names it out::<index>
  std::optional<std::string> ref;
  std::optional<Arg> constant;
};

struct Document {
  std::string model_name, producer, decomposition;
  std::vector<Input> inputs;
  std::vector<Weight> weights;
  std::vector<Node> nodes;
  std::vector<OutputRef> outputs;
};

// Parses and structurally validates; errors name the file and the node.
Document parse(const std::string& json_text, const std::string& source);
// Checks the dims (non-negative, bounded rank and element count); dtype
// "f32" etc., c64 -> complex flag.
TensorMeta parse_meta(const Dims& shape, const std::string& dtype);
// Symbol names for numbered `dynamic` entries: 0 batch, 1 seq, 2 rows, 3 past_seq, k -> s<k>.
std::string symbol_name(int64_t k);

}  // namespace rlx::torch_ir
