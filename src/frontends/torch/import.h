// PyTorch export directories (torch-ir.json + weights.safetensors) -> Model.
#pragma once
#include <string>

#include "rlx/error.h"
#include "rlx/model.h"

namespace rlx {

// Imports an export directory. Every unsupported op is reported in one error
// (with counts) before lowering starts; lowering errors name the source node.
// Graph inputs are named by the export's input ids; outputs "out::<i>".
Model import_torch_export(const std::string& dir);
// What import throws when a lowering rule raised a library exception (an rlx
// bug, still reported with the node's name); the fuzzer tells it apart.
class ImportInternalError : public Error {
 public:
  using Error::Error;
};
// The same from a torch-ir.json document held in memory (`json_name` names it
// in errors) and the weights it declares (checked against the declarations).
Model import_torch_ir(const std::string& json_text, const std::string& json_name,
                      TensorMap weights);

}  // namespace rlx
