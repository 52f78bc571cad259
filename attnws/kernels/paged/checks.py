"""PagedAttention's checks beyond the shared ones (the hooks `attnws.kernels.validate` calls;
`family_checks.Check` each):

- regions: the recipe is a list of separate requests, each the room of the one buffer of its name
  (`attnws.spec.paged.footprint.room_contract`): a buffer must lie in the request named after it,
  from byte 0, and end within it. A request holding another buffer, or a buffer past its
  request's end, fails; nothing is launched then.
- slack: ORT sizes each request for the one buffer it holds and documents nothing beyond it, so
  the bound is the buffer itself: `allocation_checks.oversized` holds every request to its
  buffer's bytes (zero slack) and a request larger than the buffer it holds fails.
- present cache [num_blocks, bs, Nk, H] (updated in place): the slots of positions
  past_b .. L_b - 1 of each sequence hold its new K and V rows bit for bit (ReshapeAndCache copies
  them), every other slot keeps its bytes (NaN included). With rotary the new K rows are the
  prologue's rotated K, held against the float64 rotation (`reference.new_rows`) within
  ROTATED_ULPS of fp16's spacing at 1 (float32 arithmetic rounded once to fp16); V stays bit for bit.
- LSE: Flash's float32 `softmax_lse` [N, T] (unpadded, varlen) against the float64 reference
  (`reference.reference`) at `reference_check.tolerance` for float32; the other routes write none.
"""

from __future__ import annotations

import numpy as np

from ...spec.paged.problem import PagedProblem
from ...spec.paged.recipe import PagedRecipe
from ...spec.problem import Backend
from ...spec.statement import FLOAT32_BYTES
from ..family_checks import Check, Ran, compared, not_applicable, outcome
from ..operator_inputs import HostInputs
from ..placement import Placement
from ..reference_check import max_abs_error, tolerance
from .inputs import CACHES
from .reference import new_rows, reference

SOFTMAX_LSE = "softmax_lse"
NEW_ROWS = {"key_cache": "key", "value_cache": "value"}
ROTATED_ULPS = 1  # fp16 spacings (2^-10) a rotated K element may lie from its float64 value (|x| < 2)


def outside_regions(p: PagedProblem, recipe: PagedRecipe, placement: Placement) -> Check:
    """Return the buffers outside the request of their name (module docstring)."""
    requests = dict(recipe.allocations())
    return outcome([b.name for b in placement.buffers if b.allocation in requests
                    and (b.allocation != b.name or b.offset != 0 or b.end > requests[b.allocation])])


def slack_unbounded(p: PagedProblem) -> str:
    """Return '': each request is bounded by the one buffer it holds (module docstring)."""
    return ""


def present_cache_failures(p: PagedProblem, host: HostInputs, present: dict[str, np.ndarray]) -> list[str]:
    """Return what the step did wrong to the caches [num_blocks, bs, Nk, H], in words (module docstring)."""
    cu, past = host.arrays["cumulative_sequence_length"], host.arrays["past_seqlens"]
    failures = []
    for name in CACHES:
        expected = host.arrays[name].copy()
        rotated = p.do_rotary and name == "key_cache"
        new = new_rows(p, host, NEW_ROWS[name]) if rotated else host.arrays[NEW_ROWS[name]].reshape(
            p.token_count, p.kv_num_heads, p.head_size)
        slots = []
        for b, table in enumerate(host.arrays["block_table"]):
            j = past[b] + np.arange(cu[b + 1] - cu[b])
            slots.append((table[j // p.block_size], j % p.block_size, new[cu[b]:cu[b + 1]]))
            expected[table[j // p.block_size], j % p.block_size] = new[cu[b]:cu[b + 1]]
        differ = (present[name].view(np.uint16) != expected.view(np.uint16)).any(axis=(2, 3))
        if rotated:  # the new slots within ROTATED_ULPS of the float64 rotation instead of bit for bit
            for blocks, offsets, rows in slots:
                error = np.abs(present[name][blocks, offsets].astype(np.float64) - rows)
                differ[blocks, offsets] = ~(error <= ROTATED_ULPS * 2.0 ** -10).all(axis=(1, 2))
        failures += [f"{name}: block {block} slot {slot} differs from the cache with the step's rows in their slots"
                     for block, slot in zip(*np.nonzero(differ))][:4]
    return failures


def present_cache(p: PagedProblem, recipe: PagedRecipe, ran: Ran | None) -> Check:
    """Return the caches after the step against the caches before it and the new rows (module docstring)."""
    if ran is None:
        return Check()
    present = {name: ran.inputs[name].copy_to_host().reshape(ran.host.arrays[name].shape) for name in CACHES}
    return outcome(present_cache_failures(p, ran.host, present))


def lse(p: PagedProblem, recipe: PagedRecipe, ran: Ran | None) -> Check:
    """Return Flash's LSE against the float64 reference (module docstring)."""
    if recipe.backend is not Backend.FLASH:
        return not_applicable(f"the {recipe.backend.value} route writes no LSE")
    if ran is None:
        return Check()
    _, expected = reference(p, ran.host)
    got = ran.arrays[SOFTMAX_LSE][:expected.size].copy_to_host()
    return compared("LSE", max_abs_error(got, expected.reshape(-1)), tolerance(FLOAT32_BYTES, expected))
