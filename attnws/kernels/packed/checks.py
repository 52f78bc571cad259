"""The packed operators' checks beyond the shared ones (the hooks `attnws.kernels.validate` calls;
`family_checks.Check` each):

- regions: not applicable; each buffer is placed at a recipe view, and its allocation
  (undersized) and the buffers live beside it (overlapping) bound it;
- slack: ORT documents what its workspace sizes reserve beyond the buffers (the footprint's
  `slack`), so `allocation_checks.oversized` holds each allocation to it;
- present cache: not applicable, PackedAttention and PackedMultiHeadAttention keep no KV cache;
- LSE: Flash's float32 LSE, [N, T] at the start of its [B, N, S] buffer (`backends.flash`),
  against the float64 reference (`reference.reference_lse`) at the element type's tolerance
  (`reference_check.tolerance`): the kernel scores Q and K as the route materialized them, in the
  element type with the bias added, which the reference, from the operator's definition, does not
  round; the other routes write none.
"""

from __future__ import annotations

from typing import Any


from ...spec.packed.problem import Problem
from ...spec.problem import Backend
from ..family_checks import Check, Ran, compared, not_applicable, placed_at_views
from ..placement import Placement
from ..reference_check import max_abs_error, tolerance
from .reference import reference_lse

LSE = "softmax_lse"


def outside_regions(p: Problem, recipe: Any, placement: Placement) -> Check:
    """Return the regions check: not applicable (module docstring)."""
    return placed_at_views(p.op.onnx_name)


def slack_unbounded(p: Problem) -> str:
    """Return '' : ORT documents the slack (module docstring)."""
    return ""


def present_cache(p: Problem, recipe: Any, ran: Ran | None) -> Check:
    """Return the present-cache check: not applicable (module docstring)."""
    return not_applicable(f"{p.op.onnx_name} keeps no KV cache")


def lse(p: Problem, recipe: Any, ran: Ran | None) -> Check:
    """Return Flash's LSE against the float64 reference (module docstring)."""
    if recipe.backend is not Backend.FLASH:
        return not_applicable(f"the {recipe.backend.value} route writes no LSE")
    if ran is None:
        return Check()
    expected = reference_lse(p, ran.host)
    got = ran.arrays[LSE][:expected.size].copy_to_host()
    return compared("LSE", max_abs_error(got, expected.reshape(-1)), tolerance(p.element_size, expected))
