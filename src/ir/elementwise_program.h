// The program of a fused_elementwise node: a straight-line list of element-wise
// ops (unary, binary, compare, where) over the node's inputs, which the
// elementwise pass builds from a region of the graph and every consumer
// (shape inference, the CPU kernel, autodiff, CoreML) reads back.
//
// Its text is the node's `program` attribute, one instruction per `;`:
//   "mul(x0, x1); add(t0, x2); clamp(t1, max=6, min=0)"
// xK is the node's input K, tK the result of instruction K (only earlier
// ones), name=value the op's attributes (ops.def) where they differ from the
// defaults. The last instruction is the node's output. Every value is f32 or,
// for a compare's result (and a bool input), a mask that only where reads.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "rlx/dtype.h"
#include "rlx/graph.h"

namespace rlx {

// Caps on one region: a kernel keeps one pointer per input and a chunk per
// instruction in flight, and a hostile program must not ask for more.
constexpr int kMaxRegionInputs = 8;
constexpr int kMaxRegionCode = 64;

struct EwInstr {
  Op op = Op::Add;
  OpAttrs attrs;
  std::vector<int> args;  // k < inputs: input k; else the result of instruction k - inputs
};

struct EwProgram {
  int inputs = 0;
  std::vector<EwInstr> code;
  // Whether value v (an input index, or inputs + instruction index) is a mask.
  std::vector<bool> is_mask;
};

// Ops a program may hold: float unary, binary and compare ops, and where.
bool is_region_op(Op op);

std::string format_program(const EwProgram& p);
// Parses `text` for a node with `input_types` (F32, or Bool for masks) and
// checks every operand's kind; the result is F32. Throws rlx::Error saying
// which instruction is wrong and why.
EwProgram parse_program(std::string_view text, const std::vector<DType>& input_types);

}  // namespace rlx
