"""GroupQueryAttention's XQA route (`ExtremeDecoding`, decode S = 1) as launches named after the
footprint's writers (`attnws.spec.gqa.footprint.xqa_touches`): `xqa (memset)` zeroes the
semaphores, `kernel_mha multi-block epilogue` runs the attention (`backends.xqa`) and, with
several subsequences per sequence, writes the multi-block scratch and merges it in the same kernel.

Both take `workspace`: the uint8 device array from the XQA semaphores region's first byte on
(`Root.pointer(offset, np.uint8)`), the launch's own carving of it (`backends.xqa.scratch_layout`)
giving the uint32 semaphores, the float32 row max / sum records and the fp16 partial outputs. The
query, cache, key lengths and output are flat fp16 / int32 device arrays (`backends.xqa`). The
sliding window is the problem's local_window_size W as W keys (the keys Flash sees with
window_size_left = W - 1; the argument ORT passes XQA is not read here).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.gqa.problem import GqaProblem
from ..backends import xqa
from ..launching import Launch
from ..plans import softmax_scale
from .. import sentinel_fill

MEMSET = "xqa (memset)"
EPILOGUE = "kernel_mha multi-block epilogue"


def xqa_geometry(p: GqaProblem, sm_count: int) -> tuple[int, xqa.XqaScratch]:
    """Return (P, the workspace carving) of the launch for the problem on `sm_count` SMs."""
    sequences = p.batch_size * p.kv_num_heads
    per = xqa.subsequences_per_sequence(sm_count, sequences, p.present_capacity(CONCRETE))
    return per, xqa.scratch_layout(sequences, per, p.num_heads // p.kv_num_heads, p.head_size)


def memset_stage(p: GqaProblem, workspace: Any) -> Launch:
    """Return `xqa (memset)`: zero the 4 * B * Nk semaphore bytes at the start of `workspace`."""
    semaphores = workspace[:xqa.SEMAPHORE_BYTES * p.batch_size * p.kv_num_heads]
    return Launch(MEMSET, partial(sentinel_fill.launch, semaphores, 0))


def kernel_stage(p: GqaProblem, sm_count: int, workspace: Any, query: Any, key: Any, value: Any, key_lengths: Any,
                 output: Any) -> Launch:
    """Return `kernel_mha multi-block epilogue`: the attention of the query [B, 1, N, H] over the
    cache [B, Nk, C, H] into the output, the semaphores and (P > 1) the scratch of `workspace`."""
    per, layout = xqa_geometry(p, sm_count)
    records = partials = None
    if per > 1:
        records = workspace[layout.row_max:layout.records_end].view(np.float32)
        partials = workspace[layout.partials:layout.end].view(np.float16)
    kernel = xqa.XqaPlan(query, key, value, key_lengths, output, workspace[:layout.semaphores].view(np.uint32),
                         records, partials, p.batch_size, p.num_heads, p.kv_num_heads, p.head_size,
                         p.present_capacity(CONCRETE), per, max(p.local_window_size, 0), softmax_scale(p.head_size))
    return Launch(EPILOGUE, partial(xqa.launch_xqa, kernel))


def xqa_stages(p: GqaProblem, sm_count: int, workspace: Any, query: Any, key: Any, value: Any, key_lengths: Any,
               output: Any) -> tuple[Launch, Launch]:
    """Return the route's stages in ORT's order: the memset, then the kernel."""
    return (memset_stage(p, workspace),
            kernel_stage(p, sm_count, workspace, query, key, value, key_lengths, output))
