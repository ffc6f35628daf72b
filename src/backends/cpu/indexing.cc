// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void gather(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void gather_elements(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void gather_nd(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void scatter_elements(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void scatter_nd(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void topk(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void one_hot(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void embedding(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
