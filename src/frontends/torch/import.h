// PyTorch export directories (torch-ir.json + weights.safetensors) -> Model.
#pragma once
#include <string>

#include "rlx/model.h"

namespace rlx {

// Imports an export directory. Every unsupported op is reported in one error
// (with counts) before lowering starts; lowering errors name the source node.
// Graph inputs are named by the export's input ids; outputs "out::<i>".
Model import_torch_export(const std::string& dir);

}  // namespace rlx
