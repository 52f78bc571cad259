"""Kernel: the unfused route's first GEMM, scores = scale * Q K^T, into scratch region 1.

Q and K planar [B, N, S, H], scores [B, N, S, S], all in the element type; every S x S entry of
every (b, n) is computed (padding rows and columns included), float32 dot products, grid-stride.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from .launching import stride_launch
from .strided_dot import strided_dot


@cuda.jit
def scaled_scores(q, k, scores, batch_heads, seq, head_size, scale):
    """scores[(bn * S + i) * S + j] = scale * sum_h q[(bn * S + i) * H + h] * k[(bn * S + j) * H + h]."""
    for index in range(cuda.grid(1), batch_heads * seq * seq, cuda.gridsize(1)):
        row = index // seq
        key_row = (row // seq) * seq + index - row * seq
        scores[index] = strided_dot(q, row * head_size, 1, k, key_row * head_size, 1, head_size) * scale


@dataclass(frozen=True)
class ScoresPlan:
    """The Q, K and scores buffers, B * N, S, H and the softmax scale (1 / sqrt(H))."""

    q: Any
    k: Any
    scores: Any
    batch_heads: int
    seq: int
    head_size: int
    scale: float


def launch(plan: ScoresPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.seq)
    scaled_scores[blocks, threads](plan.q, plan.k, plan.scores, plan.batch_heads, plan.seq, plan.head_size,
                                   plan.scale)
