"""Kernel: the unfused route's masked softmax, scratch region 1 -> scratch region 2.

Row (b, n, i) of scores [B, N, S, S] plus the optional attention bias row becomes a softmax over
keys j < L_b = cu[b + 1] - cu[b]; keys j >= L_b (padding) get probability 0, and so does every
key of an empty sequence. One work item per row, grid-stride over B * N * S rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .attention_bias import bias_row
from .launching import stride_launch
from .plans import AttentionBias, Packing


@cuda.jit(device=True)
def biased_score(scores, row_start, j, bias, bias_start):
    value = float32(scores[row_start + j])
    if bias is not None:
        value += float32(bias[bias_start + j])
    return value


@cuda.jit
def masked_softmax(scores, probabilities, bias, broadcast_batch, broadcast_heads, cu, batch, heads, seq):
    """probabilities[row * S + j] = softmax over j < L_b of scores[row * S + j] + bias, 0 for j >= L_b."""
    for row in range(cuda.grid(1), batch * heads * seq, cuda.gridsize(1)):
        b = row // (heads * seq)
        n = (row // seq) - b * heads
        length = cu[b + 1] - cu[b]
        bias_start = bias_row(b, n, row - (row // seq) * seq, heads, seq, broadcast_batch, broadcast_heads)
        m_i = -math.inf
        for j in range(length):
            m_i = max(m_i, biased_score(scores, row * seq, j, bias, bias_start))
        l_i = float32(0.0)
        for j in range(length):
            l_i += math.exp(biased_score(scores, row * seq, j, bias, bias_start) - m_i)
        for j in range(seq):
            p = float32(0.0)
            if j < length:
                p = math.exp(biased_score(scores, row * seq, j, bias, bias_start) - m_i) / l_i
            probabilities[row * seq + j] = p


@dataclass(frozen=True)
class SoftmaxPlan:
    """Scores and probabilities regions, the attention bias (or None) and the packing."""

    scores: Any
    probabilities: Any
    bias: AttentionBias | None
    packing: Packing


def launch(plan: SoftmaxPlan) -> None:
    p, bias = plan.packing, plan.bias
    blocks, threads = stride_launch(p.batch * p.heads * p.seq)
    masked_softmax[blocks, threads](
        plan.scores, plan.probabilities, None if bias is None else bias.array,
        bias is not None and bias.broadcast_batch, bias is not None and bias.broadcast_heads,
        p.cumulative_sequence_length, p.batch, p.heads, p.seq,
    )
