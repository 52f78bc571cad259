"""Descriptors shared by the launch plans: how tokens are packed, where a token-major tensor lies,
the attention bias; the softmax scale the plans carry, and the integer arithmetic of launch
geometry. Imports nothing of numba (the cost model uses it too).

Units: every offset and stride is in elements of the array it indexes; counts are tokens or heads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


def softmax_scale(head_size: int) -> float:
    """Return 1 / sqrt(H), the softmax scale ORT uses when the scale attribute is 0 (its default)."""
    return 1.0 / math.sqrt(head_size)


def ceil_div(a: int, b: int) -> int:
    """Return ceil(a / b) for a >= 0, b > 0 in integer arithmetic."""
    return -(-a // b)


@dataclass(frozen=True)
class TokenMatrix:
    """Element (t, n, h) of a token-major tensor is array[base + t * token_stride + n * head_stride + h].

    [T, N, H] planar: (0, N*H, H). [T, N, 3, H] interleaved: Q at base 0, K at H, V at 2H, strides
    (3*N*H, 3*H). PA's projection [T, 2*N*H + N*Hv]: Q at 0, K at N*H, V at 2*N*H, head stride H or Hv.
    """

    array: Any
    base: int
    token_stride: int
    head_stride: int


@dataclass(frozen=True)
class Packing:
    """The packed batch: device int32 cumulative_sequence_length [B + 1] and token_offset [B * S]
    (the padded position b*S + s of packed token i for i < T, then the padding positions)."""

    cumulative_sequence_length: Any
    token_offset: Any
    batch: int
    seq: int
    heads: int
    tokens: int


@dataclass(frozen=True)
class AttentionBias:
    """Device attention bias [B or 1, N or 1, S, S]; a broadcast dimension has extent 1."""

    array: Any
    broadcast_batch: bool
    broadcast_heads: bool
