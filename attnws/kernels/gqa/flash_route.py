"""GroupQueryAttention's Flash route as launches, stage for stage of
`attnws.spec.gqa.footprint.backend_stages`: the split-KV forward (`backends.flash_split`) over the
prepared cache, then, with splits > 1, the combine. Regular and fast decode run the same attention
kernels; what differs between them (the split heuristic's inputs, the preparation) is the recipe's
and the preparation's.

The geometry the kernels take comes from the spec: the key block block_n of the split heuristic
(`spec.backends.flash.split_block_n`), the out_accum strides kHeadDim and d_rounded of
`mha_fwd_kvcache` and the combine's rows per block (`spec.gqa.footprint`); the local window is
Flash's window_size_left = W - 1 (ORT passes local_window_size - 1).
"""

from __future__ import annotations

from functools import partial

from ...spec.backends.flash import split_block_n
from ...spec.domain import CONCRETE
from ...spec.gqa import footprint as gqa_footprint
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.footprint import LSE_ACCUMULATOR, OUTPUT_ACCUMULATOR, SOFTMAX_LSE
from ...spec.statement import OUTPUT
from ..backends import flash_split
from ..launching import Launch
from ..plans import softmax_scale
from ..workspace import Workspace
from .layouts import Prepared


def plan(p: GqaProblem, splits: int, prepared: Prepared, ws: Workspace) -> flash_split.SplitKvPlan:
    """Return the kernels' plan over the prepared query, cache and key lengths and the carved workspace."""
    h = p.head_size
    head_dim = gqa_footprint.kernel_head_dim(h)
    arrays = ws.arrays
    return flash_split.SplitKvPlan(
        prepared.query, prepared.key, prepared.value, prepared.key_lengths, arrays[OUTPUT], arrays[SOFTMAX_LSE],
        arrays.get(OUTPUT_ACCUMULATOR), arrays.get(LSE_ACCUMULATOR), p.batch_size, p.sequence_length, p.num_heads,
        p.kv_num_heads, h, prepared.capacity, splits, split_block_n(CONCRETE, h), p.causal,
        p.local_window_size - 1 if p.local_window_size > 0 else -1, p.softcap, softmax_scale(h), head_dim,
        gqa_footprint.row_stride(h, kvcache_api=True), gqa_footprint.combine_block_rows(head_dim))


def launch_sequence(p: GqaProblem, splits: int, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the stages: `attention` with one split, else `split_kv` and `combine`."""
    kernels = plan(p, splits, prepared, ws)
    if splits == 1:
        return (Launch("attention", partial(flash_split.launch_split, kernels)),)
    return (Launch("split_kv", partial(flash_split.launch_split, kernels)),
            Launch("combine", partial(flash_split.launch_combine, kernels)))
