"""Kernel: ORT's TransposeRemovePadding, the padded context [B, N, S, Hv] packed into output [T, N * Hv].

Token t sits at padded position token_offset[t] = b * S + s; rows of padding positions are not
read. Element type in and out; grid-stride over T * N * Hv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .plans import Packing


@cuda.jit
def transpose_remove_padding(context, out, token_offset, tokens, heads, seq, v_head_size):
    """out[(t * N + n) * Hv + h] = context[((b * N + n) * S + s) * Hv + h] where b * S + s = token_offset[t]."""
    for index in range(cuda.grid(1), tokens * heads * v_head_size, cuda.gridsize(1)):
        t = index // (heads * v_head_size)
        n = (index // v_head_size) - t * heads
        h = index - (index // v_head_size) * v_head_size
        b = token_offset[t] // seq
        out[index] = context[((b * heads + n) * seq + token_offset[t] - b * seq) * v_head_size + h]


@dataclass(frozen=True)
class TransposePlan:
    """The context buffer [B, N, S, Hv], the output [T, N * Hv], the packing and Hv."""

    context: Any
    out: Any
    packing: Packing
    v_head_size: int


def launch(plan: TransposePlan) -> None:
    p = plan.packing
    blocks, threads = stride_launch(p.tokens * p.heads * plan.v_head_size)
    transpose_remove_padding[blocks, threads](plan.context, plan.out, p.token_offset, p.tokens, p.heads, p.seq,
                                              plan.v_head_size)
