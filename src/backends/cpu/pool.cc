// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void max_pool2d(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void avg_pool2d(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void adaptive_avg_pool2d(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
