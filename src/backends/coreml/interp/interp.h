// MIL reference interpreter: executes function `main` of an exported
// .mlpackage on the CPU from the protobuf and weight.bin alone (it never
// looks at an rlx graph), so the numerics of our CoreML lowering can be
// checked on machines without Apple hardware.
//
// Numerics: every op computes in f32 (integers in int32, bools as 0/1).
// Values of fp16 type hold f32 numbers that are exactly representable in
// fp16: each op's result is rounded to fp16 when the op declares an fp16
// output, which mirrors a device that stores fp16 between ops.
#pragma once
#include <string>
#include <vector>

#include "rlx/io.h"

namespace rlx::coreml {

struct InterpOptions {
  // Check every op's computed shape and dtype class against its declared
  // output type (a mismatch is a lowering bug) and throw on a difference.
  bool check_types = true;
  // Largest tensor (in elements) the run may materialize; a larger one is an
  // rlx::Error. At most 2^31; the fuzzer sets a small one.
  int64_t max_elements = int64_t(1) << 31;
};

// Runs `main` of the package at `dir` on `inputs` (by function input name;
// converted to the declared dtype) and returns the block outputs by name.
// Throws rlx::Error on a malformed package, an unknown op (naming the op and
// its output), bad blob offsets/sizes, or missing/mis-shaped inputs.
TensorMap run_package(const std::string& dir, const TensorMap& inputs,
                      const InterpOptions& opts = {});

// MIL op types the interpreter implements (sorted), for coverage reports.
std::vector<std::string> interp_op_names();

}  // namespace rlx::coreml
