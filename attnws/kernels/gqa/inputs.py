"""Seeded inputs of one GroupQueryAttention step, as ORT's kernels find them.

- `query` [B, S, N * H], `key` and `value` [B, S, Nk * H]: the S new tokens, uniform in [-1, 1)
  (fp16); with packed QKV, `query` is [B, S, (N + 2 Nk) * H], each token's Q, K then V, and
  there is no `key` or `value`;
- `present_key`, `present_value` [B, Nk, C, H]: the cache before the step (past and present share
  one buffer), rows r < R_b uniform in [-1, 1). R_b = past_b = L_b - S; a windowed cache holds its
  last R_b = min(past_b, C) tokens in order, row r the token at position past_b - R_b + r. Every
  other row holds finite stale values (uniform), as a cache reused across steps does; as a route
  reads them (`route_inputs`) they hold NaN, so that a kernel reading a row it must not poisons
  the output, but on the unfused route: its GEMMs read every row below Tk, rows past a shorter
  entry's length too, and multiply those by a zero probability, which a NaN would turn into NaN;
- `seqlens_k` [B] int32, ORT's input: L_b - 1;
- with rotary, `cos_cache` and `sin_cache` [max(C, T), H / 2] (fp16): cos and sin of the angle
  position * 10000^(-i / (H / 2)) of pair i;
- on Flash's fast decode only (`route_inputs`), `total_seq_lens` [B] int32: the key length L_b.
  The split kernel forms it from seqlens_k and the S tokens it appends (ORT passes no such
  array); here it is an input standing in for that.

L_b = T on the first prompt (S = T) and for b = 0; otherwise drawn in [max(S, T - 8), T]. Counts
are tokens; C is the cache capacity. The footprint depends on them (`drawn_footprint`: the rows a
windowed cache's staging and compaction leave unwritten).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.gqa.footprint import statement
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import GqaRecipe
from ...spec.problem import Backend
from ...spec.statement import Footprint
from ..allocator import Allocator
from ..operator_inputs import HostInputs, upload_arrays, uniform_values

LENGTH_SPREAD = 8  # how far below T a later batch entry's key length may be drawn
ROTARY_BASE = 10000.0  # RoPE's angle base


def resident_rows(p: GqaProblem, past: np.ndarray) -> np.ndarray:
    """Return R_b, the cache rows holding earlier tokens: past_b, at most C for a windowed cache."""
    return np.minimum(past, p.present_capacity(CONCRETE)) if p.sliding_window_cache else past


def rotary_caches(positions: int, head_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return cos and sin [positions, H / 2] in fp16 (module docstring)."""
    half = head_size // 2
    angles = np.arange(positions)[:, None] * ROTARY_BASE ** (-np.arange(half)[None, :] / half)
    return np.cos(angles).astype(np.float16), np.sin(angles).astype(np.float16)


def make_inputs(p: GqaProblem, seed: int = 0) -> HostInputs:
    """Return the seeded host inputs (module docstring); `lengths` are the key lengths L_b."""
    rng = np.random.default_rng(seed)
    uniform = uniform_values(rng, p.element_size)
    b, s, n, nk, h, t = (p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size,
                         p.total_sequence_length)
    capacity = p.present_capacity(CONCRETE)
    if p.is_first_prompt(CONCRETE):
        lengths = np.full(b, t, np.int32)
    else:
        lengths = rng.integers(max(s, t - LENGTH_SPREAD), t + 1, size=b).astype(np.int32)
        lengths[0] = t
    arrays = {"present_key": uniform((b, nk, capacity, h)), "present_value": uniform((b, nk, capacity, h)),
              "seqlens_k": lengths - 1}
    if p.is_packed_qkv:
        arrays["query"] = uniform((b, s, (n + 2 * nk) * h))
    else:
        arrays.update(query=uniform((b, s, n * h)), key=uniform((b, s, nk * h)), value=uniform((b, s, nk * h)))
    if p.do_rotary:
        arrays["cos_cache"], arrays["sin_cache"] = rotary_caches(max(capacity, t), h)
    return HostInputs(arrays, tuple(int(x) for x in lengths))


def route_inputs(p: GqaProblem, recipe: GqaRecipe, host: HostInputs) -> HostInputs:
    """Return the inputs as the recipe's route reads them (module docstring): NaN in the cache rows
    past R_b but on the unfused route, and on Flash's fast decode the key lengths' stand-in."""
    arrays = dict(host.arrays)
    lengths = np.array(host.lengths, np.int32)
    if recipe.backend is not Backend.UNFUSED:
        held = resident_rows(p, lengths - p.sequence_length)
        unused = np.arange(p.present_capacity(CONCRETE))[None, None, :, None] >= held[:, None, None, None]
        for name in ("present_key", "present_value"):
            arrays[name] = np.where(unused, np.float16(np.nan), arrays[name])
    if recipe.route.fast_decode:
        arrays["total_seq_lens"] = lengths
    return HostInputs(arrays, host.lengths)


def drawn_footprint(p: GqaProblem, recipe: GqaRecipe, fp: Footprint, host: HostInputs) -> Footprint:
    """Return the route's footprint for the key lengths drawn (`attnws.spec.gqa.footprint.statement`
    on the complete recipe), `fp` being the one for every entry at T."""
    return statement(p, recipe.route, recipe.run, host.lengths)


def upload(allocator: Allocator, p: GqaProblem, host: HostInputs) -> dict[str, Any]:
    """Copy every input to the device through the allocator (purpose "input:<name>"), by ORT name, flat."""
    return upload_arrays(allocator, host)
