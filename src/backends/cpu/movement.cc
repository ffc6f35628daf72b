// TEMPORARY: replaced by the real kernels of this family.
#include "backends/cpu/kernels.h"
#include "rlx/error.h"

namespace rlx::cpu {

void reshape(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void transpose(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void slice(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void concat(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void expand(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void pad(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void tile(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }
void flip(const KernelCall& c) { throw make_error(c.node.label(), ": kernel not written yet"); }

}  // namespace rlx::cpu
