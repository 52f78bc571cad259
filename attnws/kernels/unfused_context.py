"""Kernel: the unfused route's second GEMM, output = probabilities V, packed back to tokens.

probabilities [B, N, S, S] and V planar [B, N, S, Hv] in the element type; output [T, N * Hv]:
token t sits at padded position token_offset[t] = b * S + s. Float32 sums, grid-stride over T * N * Hv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .plans import Packing
from .strided_dot import strided_dot


@cuda.jit
def attention_context(probabilities, v, out, token_offset, tokens, heads, seq, v_head_size):
    """out[(t * N + n) * Hv + h] = sum_j probabilities[b, n, s, j] * v[b, n, j, h], (b, s) of token t."""
    for index in range(cuda.grid(1), tokens * heads * v_head_size, cuda.gridsize(1)):
        t = index // (heads * v_head_size)
        n = (index // v_head_size) - t * heads
        h = index - (index // v_head_size) * v_head_size
        b = token_offset[t] // seq
        bn = b * heads + n
        row = (bn * seq + token_offset[t] - b * seq) * seq
        out[index] = strided_dot(probabilities, row, 1, v, bn * seq * v_head_size + h, v_head_size, seq)


@dataclass(frozen=True)
class ContextPlan:
    """Probabilities region, V view, output [T, N * Hv] and the packing."""

    probabilities: Any
    v: Any
    out: Any
    packing: Packing
    v_head_size: int


def launch(plan: ContextPlan) -> None:
    p = plan.packing
    blocks, threads = stride_launch(p.tokens * p.heads * plan.v_head_size)
    attention_context[blocks, threads](plan.probabilities, plan.v, plan.out, p.token_offset, p.tokens, p.heads,
                                       p.seq, plan.v_head_size)
