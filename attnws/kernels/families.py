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

A spec family whose kernels do not have these hooks yet is declared in `IN_PROGRESS`, with why: it
is left out of `FAMILIES`, its folder holds any modules (held to the import and backend rules; tested),
and it validates with a harness of its own, which the shared `validate` hands its shapes to
(`register_family_command(family, "validate", handler)`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ..spec.errors import InternalError
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


# Spec families whose kernels are in progress, with why they are not registered here.
IN_PROGRESS: dict[str, str] = {
    "gqa": "GroupQueryAttention's footprint depends on the inputs' key lengths (the statement is laid on the "
           "complete recipe after the inputs are drawn), XQA carves its scratch itself, and its checks are its "
           "own (each buffer inside its region's room, the present cache kept and appended, Flash's LSE, the "
           "bytes no kernel touches): `attnws/kernels/gqa/harness.py` runs it, `commands.py` takes `validate`",
}

FAMILIES = {family.name: KernelFamily(family.name) for family in SPEC_FAMILIES if family.name not in IN_PROGRESS}


def kernel_family(op: Op) -> KernelFamily:
    """Return the kernels of the operator's family (InternalError for a family in progress, which
    the shared harness never reaches: `validate` hands it to the family's own)."""
    name = family_of(op).name
    if name in IN_PROGRESS:
        raise InternalError(f"{op.onnx_name}'s kernels are in progress (attnws.kernels.families.IN_PROGRESS): "
                            "the shared harness does not run them")
    return FAMILIES[name]
