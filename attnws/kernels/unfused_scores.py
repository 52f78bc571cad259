"""Kernel: the unfused route's first GEMM, scores = scale * Q K^T, into scratch region 1.

Q planar [B, N, S, H], K planar [B, N, T, H] (T = S for the packed operators; MultiHeadAttention's
T = P + L keys), scores [B, N, S, T], all in the element type; every S x T entry of every (b, n) is
computed (padding rows and columns included), float32 dot products, grid-stride.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .strided_dot import strided_dot


@cuda.jit
def scaled_scores(q, k, scores, batch_heads, seq, kv_seq, head_size, scale):
    """scores[(bn * S + i) * T + j] = scale * sum_h q[(bn * S + i) * H + h] * k[(bn * T + j) * H + h]."""
    for index in range(cuda.grid(1), batch_heads * seq * kv_seq, cuda.gridsize(1)):
        row = index // kv_seq
        key_row = (row // seq) * kv_seq + index - row * kv_seq
        scores[index] = strided_dot(q, row * head_size, 1, k, key_row * head_size, 1, head_size) * scale


@dataclass(frozen=True)
class ScoresPlan:
    """The Q, K and scores buffers, B * N, S, H, the softmax scale (1 / sqrt(H)) and the key count
    T (None: S)."""

    q: Any
    k: Any
    scores: Any
    batch_heads: int
    seq: int
    head_size: int
    scale: float
    kv_seq: int | None = None

    @property
    def keys(self) -> int:
        return self.seq if self.kv_seq is None else self.kv_seq


def launch(plan: ScoresPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.keys)
    scaled_scores[blocks, threads](plan.q, plan.k, plan.scores, plan.batch_heads, plan.seq, plan.keys, plan.head_size,
                                   plan.scale)
