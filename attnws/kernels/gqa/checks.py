"""GroupQueryAttention's checks beyond the shared ones (the hooks `attnws.kernels.validate` calls;
`family_checks.Check` each):

- regions: each workspace buffer ends within the room its recipe region has (through the last
  region it spans): up to the next non-empty region of the allocation, or its end
  (`attnws.spec.gqa.footprint.region_rooms`, the rooms the solver's kernel contract reads too). A
  kernel writing into an alignment gap harms nothing; one reaching the next region does, though
  the buffers there may be dead then (so no overlap shows) and the allocation may not end there
  (so no undersize shows). Nothing is launched when a buffer is outside its region.
- slack: ORT documents none for GroupQueryAttention's workspace, so what the recipe reserves
  beyond the footprint (alignment gaps, regions reserved larger than their buffers: the report's
  spare bytes) is reported, not failed.
- present cache [B, Nk, C, H] (past and present share one buffer): rows below past_b = L_b - S
  keep their bytes (the past the step reads), rows past_b .. past_b + S - 1 hold the new K
  (rotated at their positions) and V within the element type's tolerance, the rows past them keep
  their bytes. Not applicable to a windowed cache: its staging's write-back is not run here, and
  compaction moves its rows.
- LSE: Flash's float32 `softmax_lse` [B, N, S] against the float64 reference
  (`reference.reference`) at `reference_check.tolerance` for float32; the other routes write none.
"""

from __future__ import annotations

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.gqa.footprint import SOFTMAX_LSE, region_rooms
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import GqaRecipe
from ...spec.problem import Backend
from ...spec.statement import ATTENTION, FLOAT32_BYTES
from ..family_checks import Check, Ran, compared, not_applicable, outcome
from ..operator_inputs import HostInputs
from ..placement import Placement
from ..reference_check import max_abs_error, tolerance
from .reference import new_tokens, reference, rotated, window_keys

PRESENT = ("present_key", "present_value")


def outside_regions(p: GqaProblem, recipe: GqaRecipe, placement: Placement) -> Check:
    """Return the buffers that end past their region's room (module docstring)."""
    rooms = region_rooms(CONCRETE, recipe.run)
    return outcome([b.name for b in placement.buffers if b.allocation == ATTENTION
                    and b.end > rooms[b.buffer.through or b.buffer.placed_at].end])


def slack_unbounded(p: GqaProblem) -> str:
    """Return why the recipe's bytes beyond the footprint are reported, not bounded (module docstring)."""
    return ("ORT documents no slack for GroupQueryAttention's workspace: what the recipe reserves beyond the "
            "footprint is reported (spare bytes), not failed")


def present_cache_failures(p: GqaProblem, host: HostInputs, present: tuple[np.ndarray, np.ndarray]) -> list[str]:
    """Return what the step did wrong to the present cache [B, Nk, C, H], in words (module docstring)."""
    _, new_key, new_value = new_tokens(p, host)
    failures = []
    for name, after, new in zip(PRESENT, present, (new_key, new_value)):
        before = host.arrays[name]
        for b, length in enumerate(host.lengths):
            past = length - p.sequence_length
            rows = new[b]
            if name == "present_key" and p.do_rotary:
                rows = rotated(rows, past + np.arange(p.sequence_length), host)
            kept = np.ones(before.shape[2], bool)
            kept[past:length] = False
            if (after[b][:, kept].view(np.uint16) != before[b][:, kept].view(np.uint16)).any():
                failures.append(f"{name} of batch entry {b}: a row outside the appended {past}..{length - 1} changed")
            error = float(np.abs(after[b][:, past:length].astype(np.float64) - rows.transpose(1, 0, 2)).max())
            if not error <= tolerance(p.element_size, rows):
                failures.append(f"{name} of batch entry {b}: appended rows off by {error}")
    return failures


def present_cache(p: GqaProblem, recipe: GqaRecipe, ran: Ran | None) -> Check:
    """Return the present cache after the step against the cache before it and the new rows
    (module docstring)."""
    if p.sliding_window_cache:
        return not_applicable("a windowed cache: its staging's write-back is not run here, and compaction moves "
                              "its rows")
    if ran is None:
        return Check()
    present = tuple(ran.inputs[name].copy_to_host().reshape(ran.host.arrays[name].shape) for name in PRESENT)
    return outcome(present_cache_failures(p, ran.host, present))


def lse(p: GqaProblem, recipe: GqaRecipe, ran: Ran | None) -> Check:
    """Return Flash's LSE against the float64 reference (module docstring)."""
    if recipe.backend is not Backend.FLASH:
        return not_applicable(f"the {recipe.backend.value} route writes no LSE")
    if ran is None:
        return Check()
    _, expected = reference(p, ran.host, window_keys(p, Backend.FLASH))
    got = ran.arrays[SOFTMAX_LSE][:expected.size].copy_to_host()
    return compared("LSE", max_abs_error(got, expected.reshape(-1)), tolerance(FLOAT32_BYTES, expected))
