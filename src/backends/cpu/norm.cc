// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void layer_norm(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void rms_norm(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void group_norm(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void batch_norm(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void layer_norm_2d(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
