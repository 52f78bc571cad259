"""Kernel: the unfused route's second GEMM, context = probabilities V, still padded.

probabilities [B, N, S, T] and V planar [B, N, T, Hv] in the element type (T = S for the packed
operators; MultiHeadAttention's T = P + L keys); the context [B, N, S, Hv] (ORT's temp_output) in
the element type, every row of every (b, n) included. ORT writes it over Q (temp_output = qkv, or
data.q); a transpose then moves it into the output. Float32 sums, grid-stride over B * N * S * Hv.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .strided_dot import strided_dot


@cuda.jit
def attention_context(probabilities, v, context, batch_heads, seq, kv_seq, v_head_size):
    """context[(bn * S + i) * Hv + h] = sum_j probabilities[(bn * S + i) * T + j] * v[(bn * T + j) * Hv + h]."""
    for index in range(cuda.grid(1), batch_heads * seq * v_head_size, cuda.gridsize(1)):
        row = index // v_head_size
        h = index - row * v_head_size
        bn = row // seq
        context[index] = strided_dot(probabilities, row * kv_seq, 1, v, bn * kv_seq * v_head_size + h, v_head_size,
                                     kv_seq)


@dataclass(frozen=True)
class ContextPlan:
    """The probabilities and V buffers, the context buffer, B * N, S, Hv and the key count T (None: S)."""

    probabilities: Any
    v: Any
    context: Any
    batch_heads: int
    seq: int
    v_head_size: int
    kv_seq: int | None = None

    @property
    def keys(self) -> int:
        return self.seq if self.kv_seq is None else self.kv_seq


def launch(plan: ContextPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.v_head_size)
    attention_context[blocks, threads](plan.probabilities, plan.v, plan.context, plan.batch_heads, plan.seq,
                                       plan.keys, plan.v_head_size)
