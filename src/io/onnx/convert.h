// Internal to io/onnx: protobuf messages -> the plain structs of model.h.
#pragma once
#include <string>

#include "io/onnx/model.h"
#include "onnx.pb.h"
#include "rlx/checked.h"

namespace rlx::onnx {

// Converts one TensorProto, external data relative to `base_dir` ("" refuses
// them). Errors name the tensor.
Tensor to_tensor(const rlx_onnx::TensorProto& tp, const std::string& base_dir);

inline std::string t_str(const Dims& dims, DType t) {
  return short_dims_str(dims) + " " + std::string(dtype_name(t));
}

}  // namespace rlx::onnx
