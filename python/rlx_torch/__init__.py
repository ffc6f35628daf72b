"""rlx_torch: export PyTorch modules to the rlx torch-ir exchange format.

See README.md and the spec (shared/spec/torch-ir.md).
"""
from ._export import VERSION as __version__
from ._export import export, split_example_inputs
from ._trace import HIGH_KEEP, LEVELS

__all__ = ["export", "split_example_inputs", "HIGH_KEEP", "LEVELS", "__version__"]
