"""PagedAttention's layouts: where the step's Q, K and V lie as the operator gives them, and the
stages before the attention that every route shares (`prepare`):

- Q is the query input [T, N, H] as it is, or with rotary the prologue's rotated copy; K and V are
  read through the block table from the paged caches [num_blocks, bs, Nk, H], which the step
  updates in place;
- `GetCumulativeSeqlensKV` writes the `cumulative_seqlens_kv` request (B + 1 int32: the carving
  types it float32, its 4-byte element; it is viewed as int32 here);
- `prologue`: without rotary it writes nothing (its request has 0 bytes without rotary, QK-norm or
  packed QKV, which `routes.unmodelled` refuses); with rotary, QkNormRotaryTNH
  (`prologue.rotate_query_key`) writes the rotated Q [T, N, H] then the rotated K [T, Nk, H] into
  the `prologue` request, every element;
- ReshapeAndCache (the new tokens into their slots) runs first in the attention stage, before any
  kernel reads the cache: the routes chain it ahead of their own kernels (`Prepared.cache`), so
  every route reads the cache holding the step's tokens, as ORT's do. Its K rows are the key input,
  or with rotary the prologue's rotated K (V is never rotated); the routes read Q from
  `Prepared.query`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np

from ...spec.errors import InternalError
from ...spec.paged.problem import PagedProblem
from ...spec.statement import Footprint
from ..launching import Launch
from ..workspace import Workspace
from .paging import PagedCache, cumulative_kv_lengths, reshape_and_cache
from .prologue import RotaryPlan, rotate_query_key

CUMULATIVE = "cumulative_seqlens_kv"
PROLOGUE = "prologue"


@dataclass(frozen=True)
class Prepared:
    """The shared stages (`GetCumulativeSeqlensKV`, `prologue`), ReshapeAndCache for the attention
    stage to run first, and what the routes read: the query [T, N * H] (the input, or with rotary
    the prologue's rotated Q), the cache, the int32 cumulative query and key lengths [B + 1],
    past_seqlens [B], the output [T, N * H]; `attention`, the name of the footprint's attention
    stage."""

    launches: tuple[Launch, ...]
    cache_update: Launch
    attention: str
    query: Any
    cache: PagedCache
    cu_q: Any
    cu_kv: Any
    past_seqlens: Any
    output: Any


def chained(stage: str, launches: Sequence[Launch]) -> Launch:
    """Return one stage enqueuing `launches` in order."""

    def enqueue() -> None:
        for launch in launches:
            launch.enqueue()

    return Launch(stage, enqueue)


def prepare(p: PagedProblem, fp: Footprint, inputs: Mapping[str, Any], ws: Workspace, output: Any) -> Prepared:
    """Return the shared stages over the device inputs (by ORT name, flat) and the carved requests,
    named as the footprint `fp` names its three stages."""
    if len(fp.stages) != 3:
        raise InternalError(f"PagedAttention's statement has stages {[s.name for s in fp.stages]}; the kernels "
                            "here run GetCumulativeSeqlensKV, the prologue and the attention")
    lengths, prologue, attention = (s.name for s in fp.stages)
    cu_kv = ws.arrays[CUMULATIVE].view(np.int32)
    cache = PagedCache(inputs["key_cache"], inputs["value_cache"], inputs["block_table"], p.block_size,
                       p.max_blocks_per_sequence, p.kv_num_heads, p.head_size)
    cu_q, past = inputs["cumulative_sequence_length"], inputs["past_seqlens"]
    query, key, prologue_run = inputs["query"], inputs["key"], lambda: None
    if p.do_rotary:
        plan = RotaryPlan(ws.arrays[PROLOGUE], query, key, inputs["cos_cache"], inputs["sin_cache"], cu_q, past,
                          p.batch_size, p.token_count, p.num_heads, p.kv_num_heads, p.head_size)
        query, key, prologue_run = plan.query_part(), plan.key_part(), partial(rotate_query_key, plan)
    launches = (Launch(lengths, partial(cumulative_kv_lengths, cu_kv, cu_q, past, p.batch_size)),
                Launch(prologue, prologue_run))
    update = Launch("ReshapeAndCache", partial(reshape_and_cache, cache, key, inputs["value"], cu_q, past,
                                                p.batch_size, p.token_count))
    return Prepared(launches, update, attention, query, cache, cu_q, cu_kv, past, output)
