// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void reduce(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void arg_reduce(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void softmax(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void cumsum(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
