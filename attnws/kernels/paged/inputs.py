"""Seeded inputs of one PagedAttention step, as ORT's kernels find them (separate Q, K, V; an fp16
cache; no slot_mapping, QK-norm or head sink: `routes.unmodelled` refuses those):

- `query` [T, N * H], `key` and `value` [T, Nk * H]: the T new tokens, uniform in [-1, 1) (fp16);
- `cumulative_sequence_length` [B + 1] int32: sequence b's new tokens are rows cu[b] .. cu[b + 1] - 1.
  n_b: the first sequence (after a seeded shuffle) has S, the others one token each in turn until
  the T tokens are placed (a sequence may get none when T < S + B - 1);
- `past_seqlens` [B] int32: past_b = L - n_b, so that every sequence has the key length L_b = L
  (the step's longest, which ORT sizes with): the gather then writes exactly the B * L rows its
  statement counts, and the sequences still differ in where their new tokens start;
- `block_table` [B, M] int32: a seeded permutation of the B * M blocks, M per sequence;
- with rotary, `cos_cache` and `sin_cache` [M * bs, H / 2] (fp16, ORT's shapes): cos and sin of
  the angle position * 10000^(-i / (H / 2)) of pair i;
- `key_cache`, `value_cache` [B * M, bs, Nk, H]: the cache before the step, uniform in [-1, 1). As a
  route reads them (`route_inputs`) every slot at a position >= past_b of its sequence holds NaN:
  the step's ReshapeAndCache writes positions past_b .. L_b - 1 before any kernel reads them, and no
  kernel may read a position past L_b.

The footprint depends on the lengths drawn only through the gathered rows (`drawn_footprint`),
which add up to B * L here; the statement leaves the operator's output out, which
`drawn_footprint` adds. Counts are tokens or elements.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ...spec.paged.problem import PagedProblem
from ...spec.paged.recipe import PagedRecipe
from ...spec.problem import Backend
from ...spec.statement import OUTPUT, Buffer, Footprint, Stage
from ..allocator import Allocator
from ..operator_inputs import HostInputs, upload_arrays, uniform_values

GATHERED = ("gathered_key", "gathered_value")
ROTARY_BASE = 10000.0  # RoPE's angle base
CACHES = ("key_cache", "value_cache")


def new_token_counts(p: PagedProblem, rng: np.random.Generator) -> np.ndarray:
    """Return n_b [B] (module docstring): S for one sequence, the rest one at a time, sum T."""
    counts = np.zeros(p.batch_size, np.int64)
    counts[0], left, b = p.max_query_len, p.token_count - p.max_query_len, 1
    while left:
        if b == p.batch_size:
            b = 1
        if counts[b] < p.max_query_len:
            counts[b] += 1
            left -= 1
        b += 1
    return rng.permutation(counts)


def rotary_caches(positions: int, head_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Return cos and sin [positions, H / 2] in fp16 (module docstring)."""
    half = head_size // 2
    angles = np.arange(positions)[:, None] * ROTARY_BASE ** (-np.arange(half)[None, :] / half)
    return np.cos(angles).astype(np.float16), np.sin(angles).astype(np.float16)


def make_inputs(p: PagedProblem, seed: int = 0) -> HostInputs:
    """Return the seeded host inputs (module docstring); `lengths` are the key lengths L_b."""
    rng = np.random.default_rng(seed)
    uniform = uniform_values(rng, p.element_size)
    b, t, n, nk, h, bs, m = (p.batch_size, p.token_count, p.num_heads, p.kv_num_heads, p.head_size, p.block_size,
                             p.max_blocks_per_sequence)
    counts = new_token_counts(p, rng)
    lengths = np.full(b, p.max_kv_len, np.int64)
    cache_shape = (p.num_blocks, bs, nk, h)
    arrays = {"query": uniform((t, n * h)), "key": uniform((t, nk * h)), "value": uniform((t, nk * h)),
              "key_cache": uniform(cache_shape), "value_cache": uniform(cache_shape),
              "cumulative_sequence_length": np.concatenate([[0], np.cumsum(counts)]).astype(np.int32),
              "past_seqlens": (lengths - counts).astype(np.int32),
              "block_table": rng.permutation(p.num_blocks)[:b * m].reshape(b, m).astype(np.int32)}
    if p.do_rotary:
        arrays["cos_cache"], arrays["sin_cache"] = rotary_caches(m * bs, h)
    return HostInputs(arrays, tuple(int(x) for x in lengths))


def positions(p: PagedProblem, host: HostInputs) -> np.ndarray:
    """Return, per cache slot [num_blocks, bs], the key position it holds for the sequence whose
    table lists its block (-1 for a block no table lists)."""
    out = np.full((p.num_blocks, p.block_size), -1, np.int64)
    for table in host.arrays["block_table"]:
        for m, block in enumerate(table):
            out[block] = m * p.block_size + np.arange(p.block_size)
    return out


def owners(p: PagedProblem, host: HostInputs) -> np.ndarray:
    """Return, per block, the sequence whose table lists it (-1: none)."""
    out = np.full(p.num_blocks, -1, np.int64)
    for b, table in enumerate(host.arrays["block_table"]):
        out[table] = b
    return out


def route_inputs(p: PagedProblem, recipe: PagedRecipe, host: HostInputs) -> HostInputs:
    """Return the inputs as every route reads them: NaN in each cache slot at a position >= past_b
    of its sequence, and in the blocks no table lists (module docstring)."""
    past = host.arrays["past_seqlens"].astype(np.int64)
    owner = owners(p, host)
    unused = (owner[:, None] < 0) | (positions(p, host) >= np.where(owner >= 0, past[owner], 0)[:, None])
    arrays = dict(host.arrays)
    for name in CACHES:
        arrays[name] = np.where(unused[:, :, None, None], np.float16(np.nan), arrays[name])
    return HostInputs(arrays, host.lengths)


def output_buffer(p: PagedProblem) -> Buffer:
    """Return the operator's output [T, N * H] (element type), at 0 of its own tensor."""
    return Buffer(OUTPUT, OUTPUT, OUTPUT, p.element_size, p.token_count * p.num_heads * p.head_size, 1,
                  source="the attention kernel (or the reduce / combine after a split)")


def drawn_footprint(p: PagedProblem, recipe: PagedRecipe, fp: Footprint, host: HostInputs) -> Footprint:
    """Return the statement `fp` for the lengths drawn: the gathered buffers hold sum L_b rows (B * L
    here), and the operator's output, which the statement leaves out (ORT's output tensor, not
    scratch), is a buffer of its own allocation written by the attention stage (the last)."""
    rows = sum(host.lengths)
    heads = p.num_heads if recipe.backend is Backend.MEA else p.kv_num_heads  # Flash gathers Nk heads
    buffers = [replace(b, elements=rows * heads * p.head_size) if b.name in GATHERED and b.elements else b
               for b in fp.buffers]
    output = output_buffer(p)
    last = fp.stages[-1]
    stages = (*fp.stages[:-1], Stage(last.name, last.reads, (*last.writes, OUTPUT)))
    return replace(fp, buffers=(*buffers, output), stages=stages, outputs=((OUTPUT, output.nbytes()),))


def upload(allocator: Allocator, p: PagedProblem, host: HostInputs) -> dict[str, Any]:
    """Copy every input to the device through the allocator (purpose "input:<name>"), by ORT name, flat."""
    return upload_arrays(allocator, host)
