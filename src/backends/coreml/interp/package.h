// Loading an .mlpackage for the interpreter: manifest, model protobuf and
// MILBlob v2 weights, with every offset and size validated.
#pragma once
#include <string>

#include "interp.h"
#include "model.pb.h"
#include "value.h"

namespace rlx::coreml::interp {

struct Package {
  std::string model_path;  // Data/<root item path>
  CoreML::Specification::Model model;
  std::string weights;  // weight.bin bytes ("" when absent)
  bool have_weights = false;
};

Package load_package(const std::string& dir);
// The same from the bytes of model.mlmodel and of weight.bin (nullptr: the
// package has none); `model_path` names the model in errors.
Package package_from_bytes(const std::string& model_bytes, const std::string* weights,
                           const std::string& model_path);

// run_package on a loaded package.
TensorMap run_program(const Package& p, const TensorMap& inputs, const InterpOptions& opts);

// Decodes a const's value (immediate or blob) as a tensor of type `t`.
Value decode_value(const Package& p, const pb::Value& v, const Type& t, const std::string& where);

}  // namespace rlx::coreml::interp
