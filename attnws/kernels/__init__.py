"""attnws.kernels: Numba CUDA backends on memory the recipes allocate, indexed by the footprint
(`attnws.spec.footprint`), and the validator that measures them against it.

The backends' kernels are written once in `backends/`; each operator family's inputs, layouts,
routes, reference, cost and own checks are in its folder (`packed/`, `mha/`, `gqa/`, `paged/`), which the shared
harness (`validate`, `budget`) reaches through the registry `families`, keyed by the spec's families.

Imports attnws.spec only. Importing the package picks the device before anything can import
numba: a real GPU when an NVIDIA driver is present, else the CUDA simulator (an explicit
NUMBA_ENABLE_CUDASIM always wins). The validator's names load numba on first use, so registering
the `validate` command costs nothing.
"""

import importlib
from typing import Any

from .device import select_mode

select_mode()

EXPORTS = {"ValidationReport": "report", "pair_comparisons": "report", "validate_document": "validate",
           "validate_shape": "validate", "iter_document": "validate", "RunLimits": "budget", "run_cost": "budget"}
__all__ = sorted(EXPORTS)


def __getattr__(name: str) -> Any:
    if name in EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
