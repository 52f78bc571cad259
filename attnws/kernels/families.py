"""The kernels' operator families, keyed by the spec's (`attnws.spec.families`): the registry the
shared harness (`validate`, `budget`) looks a problem's family up in, instead of naming families.

A family is a folder `attnws/kernels/<name>/` (the spec family's name) holding one module per name
in `FAMILY_MODULES`, each offering the same functions (its hooks); `recipe` below is the route's
recipe (`attnws.spec.recipe`), `fp` its footprint:

- `inputs`: `make_inputs(p, seed)`, seeded `operator_inputs.HostInputs`; `route_inputs(p, recipe,
  host)`, those inputs as the route reads them (GroupQueryAttention's fast-decode stand-in, and
  NaN in the cache rows a route must not read); `drawn_footprint(p, recipe, fp, host)`, the
  footprint of the inputs drawn (`fp` itself where it does not depend on them); `upload(allocator,
  p, host)`, the device inputs the family's routes read.
- `layouts`: where Q, K, V lie as the operator gives them, and the stages that move them into the
  layouts each route reads (and the unfused context back into the output; GroupQueryAttention's
  preparation); called by the family's `routes` only.
- `routes`: `launch_sequence(p, recipe, fp, inputs, workspace)`, each route's `launching.Launch`es,
  stage for stage as the footprint `fp` names them; `unmodelled(p, config, backend)`, why the
  kernels here do not run the route or the problem's features ('' when they do); and
  `launches_not_run(p, recipe)`, ORT's launches on the route the kernels here do not run, in words.
- `reference`: `output_rows(p)`, the rows of the output [rows, N * Hv]; `reference_output(p, host,
  rows, backend)`, those rows in float64.
- `cost`: `stage_seconds(p, fp, stage)`, `input_elements(p)`, `reference_bytes(p)`: what a run
  costs (`budget`), without numba.
- `checks`: the family's checks beyond the shared ones (`family_checks.Check` each, saying where
  it does not apply): `outside_regions(p, recipe, placement)` before any launch;
  `slack_unbounded(p)`, why ORT documents no slack bounding the recipe beyond the footprint ('':
  it does, and `allocation_checks.oversized` holds it); `present_cache(p, recipe, ran)` and
  `lse(p, recipe, ran)` after the run (`ran` a `family_checks.Ran`, None when nothing ran).

The backends' kernels are written once, in `attnws/kernels/backends/`; a family composes them, and
its `routes` may compose modules of its own folder (one per route). Modules load on first use, so
that the cost hooks (used when the `validate` command registers) load no numba. Adding a family is
a folder with these modules; nothing here names one.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from ..spec.families import FAMILIES as SPEC_FAMILIES, family_of
from ..spec.problem import Op

FAMILY_MODULES = ("inputs", "layouts", "routes", "reference", "cost", "checks")


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
