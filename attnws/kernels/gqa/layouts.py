"""GroupQueryAttention's layouts: the preparation for one step, as the launches of
`attnws.spec.gqa.footprint.preparation_stages`, and what it leaves the backend (`Prepared`): the
query it reads, the K / V cache with the new rows appended, and the key lengths.

The kernels are `preparation`'s, on the carved regions and the device inputs (by ORT name, flat):
- `GetSequenceLengths` into `sequence_lengths` (3 int32 [B] vectors, 6 with a windowed cache
  whose capacity in use is Ce = C + S while staging, else C);
- `CompactKvCacheRows` (a windowed cache at S == 1) through the `compaction` scratch, with the
  eviction counts and retained rows GetSequenceLengths wrote;
- `UnpackRoPEAppend (Q)` into the `qkv_preprocess` scratch (rotary or packed QKV);
- the new K / V rows, rotated with rotary: staging a windowed cache, the seed copy of the C cache
  rows into the staged regions [B, Nk, Ce, H] and the append at cache_past_seq_lens, as one stage;
  on Flash's fast decode the append at seqlens_k (the split kernel's own Append_KV); otherwise the
  append into the present cache at past_seq_lens (cache_past_seq_lens windowed).

The backend's key lengths: on fast decode the stand-in input (`inputs`); with a windowed cache
cache_total_seq_lens; on the first prompt padded_seq_lens for Flash and MEA (ORT's
has_custom_right_padding); else total_seq_lens. Rotary uses the non-interleaved pairs
(rotary_interleaved = 0, the builder's only layout).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Route
from ...spec.gqa.footprint import COMPACTION, Q_SCRATCH, SEQUENCE_LENGTHS, STAGED, staging
from ...spec.problem import Backend
from ..launching import Launch
from ..workspace import Workspace
from .preparation import (CacheGeometry, NewTokens, Rotary, Window, append_key_value, compact_cache, copy_cache_rows,
                          sequence_lengths, sequence_vectors, unpack_query)


@dataclass(frozen=True)
class Prepared:
    """The preparation's launches, and what the backend reads: `query` [B, S, N, H], `key` and
    `value` [B, Nk, capacity, H] BNSH with the new rows appended, `key_lengths` int32 [B]."""

    launches: tuple[Launch, ...]
    query: Any
    key: Any
    value: Any
    capacity: int
    key_lengths: Any


def chained(stage: str, launches: Sequence[Launch]) -> Launch:
    """Return one stage enqueuing `launches` in order."""

    def enqueue() -> None:
        for launch in launches:
            launch.enqueue()

    return Launch(stage, enqueue)


def new_tokens(p: GqaProblem, inputs: Mapping[str, Any], past_seq_lens: Any) -> NewTokens:
    """Return the new tokens over the device inputs (packed QKV in `query`)."""
    dims = dict(batch=p.batch_size, seq=p.sequence_length, heads=p.num_heads, kv_heads=p.kv_num_heads,
                head_size=p.head_size, past_seq_lens=past_seq_lens)
    if p.is_packed_qkv:
        return NewTokens(packed=inputs["query"], **dims)
    return NewTokens(query=inputs["query"], key=inputs["key"], value=inputs["value"], **dims)


def key_length_vector(p: GqaProblem, backend: Backend) -> str:
    """Return the sequence-length vector the backend reads its key lengths from (module docstring)."""
    if p.sliding_window_cache:
        return "cache_total_seq_lens"
    if p.is_first_prompt(CONCRETE) and backend in (Backend.FLASH, Backend.MEA):
        return "padded_seq_lens"
    return "total_seq_lens"


def prepare(p: GqaProblem, route: Route, inputs: Mapping[str, Any], ws: Workspace) -> Prepared:
    """Return the preparation's launches for the carved workspace and what they leave the backend."""
    b, s, nk, h, c = p.batch_size, p.sequence_length, p.kv_num_heads, p.head_size, p.present_capacity(CONCRETE)
    arrays, cache = ws.arrays, CacheGeometry(b, nk, c, h)
    present = (inputs["present_key"], inputs["present_value"])
    rotary = Rotary(inputs["cos_cache"], inputs["sin_cache"]) if p.do_rotary else None
    capacity = c + s if staging(p) else c
    window = Window(capacity, c) if p.sliding_window_cache else None
    launches, vectors = [], {}
    if SEQUENCE_LENGTHS in arrays:
        region = arrays[SEQUENCE_LENGTHS].view(np.int32)
        vectors = sequence_vectors(region, b, window)
        launches.append(sequence_lengths(region, inputs["seqlens_k"], b, s, p.total_sequence_length, window))
    if route.fast_decode:
        past = vectors.get("past_seq_lens", inputs["seqlens_k"])  # seqlens_k = L - 1 = past at S == 1
        append = append_key_value(*present, c, new_tokens(p, inputs, past), past)
        launches.append(Launch("Append_KV", append.enqueue))
        return Prepared(tuple(launches), inputs["query"], *present, c, inputs["total_seq_lens"])
    tokens = new_tokens(p, inputs, vectors["past_seq_lens"])
    if COMPACTION in arrays:
        launches.append(compact_cache(arrays[COMPACTION], *present, cache, vectors["evict_counts"],
                                      vectors["cache_past_seq_lens"]))
    query = inputs["query"]
    if Q_SCRATCH in arrays:
        query = arrays[Q_SCRATCH][:b * s * p.num_heads * h]
        launches.append(unpack_query(query, tokens, rotary))
    append_at = vectors["cache_past_seq_lens" if window else "past_seq_lens"]
    kv = present
    if staging(p):
        kv = (arrays[STAGED[0]], arrays[STAGED[1]])
        seed = copy_cache_rows(*kv, *present, cache, capacity, c)
        launches.append(chained("CopyKvCacheRows and UnpackRoPEAppend (K, V)",
                                [*seed, append_key_value(*kv, capacity, tokens, append_at, rotary)]))
    else:
        launches.append(append_key_value(*kv, capacity, tokens, append_at, rotary))
    return Prepared(tuple(launches), query, *kv, capacity, vectors[key_length_vector(p, route.backend)])
