"""PagedAttention's prologue with rotary embedding: ORT 1.31.1's `QkNormRotaryTNH`
(`LaunchQkNormRotaryKernel`) without QK-norm, non-interleaved, rotary_dim = H, rotary offset 0.

`rotary_prologue` writes the `prologue` request [T * N * H + T * Nk * H] (element type): Q
[T, N, H] at elements 0 .. T N H - 1, then K [T, Nk, H], each head of new token t rotated
(`backends.rotary.rotated_element`) at its position past_b + (t - cu_q[b]), b the sequence whose
rows [cu_q[b], cu_q[b + 1]) hold t (cumulative_sequence_length), from the cos / sin caches
[max_pos, H / 2] (max_pos = M * bs). V is not rotated: ReshapeAndCache reads it from the value
input, and the rotated K from the prologue. One grid-stride launch over T (N + Nk) H elements;
nothing else of the request is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda

from ..backends.rotary import rotated_element
from ..launching import stride_launch
from .paging import sequence_of


@cuda.jit
def rotary_prologue(dst, query, key, cos, sin, cu_q, past_seqlens, batch, tokens, heads, kv_heads, head_size):
    """dst[t * N * H + n * H + h] = element h of query head n of token t rotated at its position;
    dst[T * N * H + t * Nk * H + k * H + h] = element h of key head k likewise (module docstring)."""
    half = head_size // 2
    per_token = (heads + kv_heads) * head_size
    q_width = heads * head_size
    kv_width = kv_heads * head_size
    for index in range(cuda.grid(1), tokens * per_token, cuda.gridsize(1)):
        t = index // per_token
        column = index - t * per_token
        h = column % head_size
        b = sequence_of(cu_q, batch, t)
        position = past_seqlens[b] + t - cu_q[b]
        if column < q_width:
            at = t * q_width + column - h
            dst[at + h] = rotated_element(query, at, h, half, position, cos, sin, False)
        else:
            at = t * kv_width + column - q_width - h
            dst[tokens * q_width + at + h] = rotated_element(key, at, h, half, position, cos, sin, False)


@dataclass(frozen=True)
class RotaryPlan:
    """The prologue's operands: the destination request (flat, element type), the query [T, N * H]
    and key [T, Nk * H] inputs, the cos / sin caches [max_pos, H / 2] (flat), the int32
    cumulative query lengths [B + 1] and past_seqlens [B], and the dimensions."""

    destination: Any
    query: Any
    key: Any
    cos: Any
    sin: Any
    cu_q: Any
    past_seqlens: Any
    batch: int
    tokens: int
    heads: int
    kv_heads: int
    head_size: int

    def query_part(self) -> Any:
        """Return the rotated Q [T * N * H] in the destination."""
        return self.destination[:self.tokens * self.heads * self.head_size]

    def key_part(self) -> Any:
        """Return the rotated K [T * Nk * H] in the destination, after Q."""
        start = self.tokens * self.heads * self.head_size
        return self.destination[start:start + self.tokens * self.kv_heads * self.head_size]


def rotate_query_key(plan: RotaryPlan) -> None:
    """Enqueue QkNormRotaryTNH (rotary only) over the T (N + Nk) H elements of Q and K."""
    if plan.head_size % 2:
        raise ValueError(f"rotary embedding needs an even head size: H={plan.head_size}")
    blocks, threads = stride_launch(plan.tokens * (plan.heads + plan.kv_heads) * plan.head_size)
    rotary_prologue[blocks, threads](plan.destination, plan.query, plan.key, plan.cos, plan.sin, plan.cu_q,
                                     plan.past_seqlens, plan.batch, plan.tokens, plan.heads, plan.kv_heads,
                                     plan.head_size)
