// CoreML export: IR graph -> MIL program -> .mlpackage, plus a structural
// checker for packages. Pure data transformation; nothing here needs Apple
// hardware.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "rlx/backend.h"
#include "rlx/graph.h"
#include "rlx/io.h"

namespace rlx::coreml {

struct ExportOptions {
  int opset = 6;      // 5..8 = CoreML5..CoreML8 (iOS15..iOS18)
  bool fp16 = false;  // compute and store floats in fp16; I/O stays fp32
};

// "CoreML6" -> 6; throws rlx::Error for anything outside CoreML5..CoreML8.
int parse_opset(const std::string& s);
std::string opset_name(int opset);
// CoreML spec version an opset needs (CoreML5 -> 6 ... CoreML8 -> 9).
int spec_version_for(int opset);

// Whether `n` lowers to MIL: the one answer behind unsupported_ops,
// export_package's check and make_coreml_backend()->supports(n).
Support supports(const Node& n);
// Ops of `g` with no lowering, with counts. Empty when everything lowers.
std::map<std::string, int> unsupported_ops(const Graph& g);
// Every IR op that has a lowering (op-table names), for docs and tests.
std::vector<std::string> supported_op_names();

// Lowers `g` (params bound from `weights`) and writes `dir` (X.mlpackage).
// Throws rlx::Error, before anything is written, listing every op that cannot
// be lowered. The same graph and options give byte-identical packages.
void export_package(const Graph& g, const TensorMap& weights, const std::string& dir,
                    const ExportOptions& opts = {});

// Structural check of a package: returns the problems found (empty = ok).
std::vector<std::string> check_package(const std::string& dir);

}  // namespace rlx::coreml
