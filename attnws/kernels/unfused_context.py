"""Kernel: the unfused route's second GEMM, context = probabilities V, still padded.

probabilities [B, N, S, S] and V planar [B, N, S, Hv] in the element type; the context
[B, N, S, Hv] (ORT's temp_output) in the element type, every row of every (b, n) included.
ORT writes it over Q (temp_output = qkv); `transpose_remove_padding` then packs it into the output.
Float32 sums, grid-stride over B * N * S * Hv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .strided_dot import strided_dot


@cuda.jit
def attention_context(probabilities, v, context, batch_heads, seq, v_head_size):
    """context[(bn * S + i) * Hv + h] = sum_j probabilities[(bn * S + i) * S + j] * v[(bn * S + j) * Hv + h]."""
    for index in range(cuda.grid(1), batch_heads * seq * v_head_size, cuda.gridsize(1)):
        row = index // v_head_size
        h = index - row * v_head_size
        bn = row // seq
        context[index] = strided_dot(probabilities, row * seq, 1, v, bn * seq * v_head_size + h, v_head_size, seq)


@dataclass(frozen=True)
class ContextPlan:
    """The probabilities and V buffers, the context buffer, B * N, S and Hv."""

    probabilities: Any
    v: Any
    context: Any
    batch_heads: int
    seq: int
    v_head_size: int


def launch(plan: ContextPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.v_head_size)
    attention_context[blocks, threads](plan.probabilities, plan.v, plan.context, plan.batch_heads, plan.seq,
                                       plan.v_head_size)
