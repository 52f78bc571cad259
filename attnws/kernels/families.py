"""The kernels' operator families, keyed by the spec's (`attnws.spec.families`): the registry the
shared harness (`validate`, `budget`) looks a problem's family up in, instead of naming families.

A family is a folder `attnws/kernels/<name>/` (the spec family's name) holding one module per name
in `FAMILY_MODULES`, each offering the same functions (its hooks):

- `inputs`: `make_inputs(p, seed)`, seeded `operator_inputs.HostInputs`; `upload(allocator, p,
  host)`, the device inputs the family's routes read.
- `layouts`: where Q, K, V lie as the operator gives them, and the stages that move them into the
  layouts each route reads (and the unfused context back into the output); called by the family's
  `routes` only.
- `routes`: `launch_sequence(p, fp, inputs, workspace)`, each route's `launching.Launch`es, stage
  for stage as the footprint `fp` names them.
- `reference`: `output_rows(p)`, the rows of the output [rows, N * Hv]; `reference_output(p, host,
  rows, backend)`, those rows in float64.
- `cost`: `stage_seconds(p, fp, stage)`, `input_elements(p)`, `reference_bytes(p)`: what a run
  costs (`budget`), without numba.

The backends' kernels are written once, in `attnws/kernels/backends/`; a family composes them.
Modules load on first use, so that the cost hooks (used when the `validate` command registers)
load no numba. Adding a family is a folder with these modules; nothing here names one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ..spec.families import FAMILIES as SPEC_FAMILIES, family_of
from ..spec.problem import Op

FAMILY_MODULES = ("inputs", "layouts", "routes", "reference", "cost")


@dataclass(frozen=True)
class KernelFamily:
    """One family's kernels: `family.<module>` imports `attnws.kernels.<name>.<module>` on first use."""

    name: str

    def __getattr__(self, module: str) -> ModuleType:
        if module not in FAMILY_MODULES:
            raise AttributeError(module)
        return importlib.import_module(f"{__package__}.{self.name}.{module}")


FAMILIES = {family.name: KernelFamily(family.name) for family in SPEC_FAMILIES}


def kernel_family(op: Op) -> KernelFamily:
    """Return the kernels of the operator's family."""
    return FAMILIES[family_of(op).name]
