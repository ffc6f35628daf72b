// A fused_elementwise node spelt back into its instructions.
#include "ir/elementwise_program.h"
#include "opt/autodiff/primitives.h"

namespace rlx::opt::ad {

NodeId elementwise_primitives(Emit& e, const Node& n, const std::vector<NodeId>& in) {
  std::vector<DType> types;
  for (NodeId id : in) types.push_back(e.dtype(id));
  const EwProgram p = parse_program(n.attrs_as<FusedElementwiseAttrs>().program, types);
  std::vector<NodeId> value = in;
  for (const EwInstr& instr : p.code) {
    std::vector<NodeId> args;
    for (int a : instr.args) args.push_back(value[size_t(a)]);
    value.push_back(e.graph().add_typed(instr.op, std::move(args), instr.attrs, {}, n.origin));
  }
  // An input the last instruction does not read may still widen the node's output.
  return e.expand(value.back(), n.shape.dims);
}

}  // namespace rlx::opt::ad
