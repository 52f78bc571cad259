"""MultiHeadAttention's checks beyond the shared ones (the hooks `attnws.kernels.validate` calls;
`family_checks.Check` each):

- regions: not applicable; each buffer is placed at a recipe view, and its allocation
  (undersized) and the buffers live beside it (overlapping) bound it;
- slack: ORT documents what its workspace size reserves beyond the buffers (the footprint's
  `slack`), so `allocation_checks.oversized` holds the allocation to it;
- present cache: with present outputs, present_key [B, N, T, H] and present_value [B, N, T, Hv]
  (the first B * N * T * Hv elements of their [B, N, T, H] allocation) hold the past rows, then
  the new K and V with the bias added (`reference.host_qkv`), within the element type's tolerance;
- LSE: Flash's float32 [B, N, S] (its own allocation) against the float64 reference
  (`reference.reference_lse`) at the element type's tolerance (`reference_check.tolerance`): the
  kernel scores Q and K as the route materialized them, in the element type with the bias added,
  which the reference, from the operator's definition, does not round; the other routes write none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...spec.mha.footprint import PRESENT_KEY, PRESENT_VALUE, SOFTMAX_LSE
from ...spec.mha.problem import MhaProblem
from ...spec.problem import Backend
from ..family_checks import Check, Ran, compared, not_applicable, outcome, placed_at_views
from ..placement import Placement
from ..reference_check import max_abs_error, tolerance
from .reference import host_qkv, reference_lse


def outside_regions(p: MhaProblem, recipe: Any, placement: Placement) -> Check:
    """Return the regions check: not applicable (module docstring)."""
    return placed_at_views(p.op.onnx_name)


def slack_unbounded(p: MhaProblem) -> str:
    """Return '' : ORT documents the slack (module docstring)."""
    return ""


def present_cache(p: MhaProblem, recipe: Any, ran: Ran | None) -> Check:
    """Return the present outputs against past + new K and V (module docstring)."""
    if not p.has_present:
        return not_applicable("the node has no present outputs")
    if ran is None:
        return Check()
    if PRESENT_KEY not in ran.arrays:
        return not_applicable(f"the {recipe.backend.value} route writes no present output")
    _, k, v = host_qkv(p, ran.host)
    failures = []
    for name, expected in ((PRESENT_KEY, k), (PRESENT_VALUE, v)):
        expected = expected.transpose(0, 2, 1, 3)
        got = ran.arrays[name][:expected.size].copy_to_host().astype(np.float64).reshape(expected.shape)
        error = max_abs_error(got, expected)
        if not error <= tolerance(p.element_size, expected):
            failures.append(f"{name}: off past + new rows by {error:.3g}")
    return outcome(failures)


def lse(p: MhaProblem, recipe: Any, ran: Ran | None) -> Check:
    """Return Flash's LSE against the float64 reference (module docstring)."""
    if recipe.backend is not Backend.FLASH:
        return not_applicable(f"the {recipe.backend.value} route writes no LSE")
    if ran is None:
        return Check()
    expected = reference_lse(p, ran.host, recipe.backend)
    got = ran.arrays[SOFTMAX_LSE][:expected.size].copy_to_host()
    return compared("LSE", max_abs_error(got, expected.reshape(-1)), tolerance(p.element_size, expected))
