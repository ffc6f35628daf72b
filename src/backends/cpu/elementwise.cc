// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void unary(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void binary(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void compare(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void logical(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void where(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void cast(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
