// ONNX -> rlx Graph (frontends/onnx). Reads the file with io/onnx, lists every
// unsupported op at once, lowers node by node through the op registry
// (context.h) with shape subgraphs folded at import, binds initializers as
// params by name, and verifies the result.
#pragma once
#include <string>

#include "frontends/torch/import.h"  // ImportInternalError, shared by the importers
#include "io/onnx/model.h"
#include "rlx/model.h"  // Model, LoadOptions

namespace rlx {

// `options`: input_shapes and frozen_inputs (the rest is for other formats).
Model import_onnx(const std::string& path, const LoadOptions& options = {});
// The same from a parsed file (tests, fuzzing). A library exception inside a
// lowering (an rlx bug) is rethrown as ImportInternalError naming the node.
Model import_onnx(const onnx::Model& model);
// LoadOptions::frozen_inputs give values to graph inputs (by name), which then
// become constants known at import, so shape parameters fed as inputs (axes,
// pads, a reshape target: common in the ONNX node tests) fold like
// initializers. The values must have the inputs' declared dtype and dims.
// LoadOptions::input_shapes replace declared dims. Unknown names throw.
Model import_onnx(const onnx::Model& model, const LoadOptions& options);
// Whether `head` (the first bytes of a file) can start an ONNX ModelProto:
// its first field is ir_version (field 1, varint), as every exporter writes it.
bool looks_like_onnx_bytes(std::string_view head);

}  // namespace rlx
