"""Kernel: the strided copy, one [B, X, N, H] view into another with an optional bias. Every
producer, concatenation and transpose of a padded batch (MultiHeadAttention's `layouts` and
`routes`) is one; the view, `Strided`, is also what the strided attention (`backends.strided`) reads.

Element (b, x, n, h) for b < B, x < X (a sequence position), n < N, h < H moves from
src[src.base + b * src.batch + x * src.row + n * src.head + h] (plus bias[bias_base + n * H + h]
when a bias is given) to the same place in dst. Every layout ORT's PrepareQkv, ConcatPastToPresent
and the TRT producers use is such a view: [B, X, N, H] (BSNH) has strides (X*N*H, N*H, H), [B, N,
X, H] (BNSH) (N*X*H, H, X*H), matrix m of packed [B, X, N, M, H] base m*H and strides
(X*N*M*H, N*M*H, M*H), and present [B, N, T, H] from row P on base P*H and strides (N*T*H, H,
T*H). Element type in and out, float32 arithmetic; grid-stride over B * X * N * H.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .launching import stride_launch


@dataclass(frozen=True)
class Strided:
    """Element (b, x, n, h) of a [B, X, N, H] view is array[base + b * batch + x * row + n * head + h]."""

    array: Any
    base: int
    batch: int
    row: int
    head: int


def bsnh(array: Any, rows: int, heads: int, head_size: int, base: int = 0, matrices: int = 1) -> Strided:
    """Return the view of matrix base // head_size of [B, rows, N, matrices, H] (matrices = 1: [B, rows, N, H])."""
    return Strided(array, base, rows * heads * matrices * head_size, heads * matrices * head_size,
                   matrices * head_size)


def bnsh(array: Any, rows: int, heads: int, head_size: int, first_row: int = 0, capacity: int | None = None) -> Strided:
    """Return the view of [B, N, capacity, H] from row `first_row` on (capacity None: rows)."""
    capacity = rows if capacity is None else capacity
    return Strided(array, first_row * head_size, heads * capacity * head_size, head_size, capacity * head_size)


@cuda.jit
def strided_copy(src, s_base, s_batch, s_row, s_head, bias, bias_base, dst, d_base, d_batch, d_row, d_head,
                 batch, rows, heads, head_size):
    """dst[(b, x, n, h)] = src[(b, x, n, h)] (+ bias[bias_base + n * H + h]); see the module docstring."""
    per_batch = rows * heads * head_size
    for index in range(cuda.grid(1), batch * per_batch, cuda.gridsize(1)):
        b = index // per_batch
        rest = index - b * per_batch
        x = rest // (heads * head_size)
        rest -= x * heads * head_size
        n = rest // head_size
        h = rest - n * head_size
        value = float32(src[s_base + b * s_batch + x * s_row + n * s_head + h])
        if bias is not None:
            value += float32(bias[bias_base + n * head_size + h])
        dst[d_base + b * d_batch + x * d_row + n * d_head + h] = value


@dataclass(frozen=True)
class CopyPlan:
    """Copy the [batch, rows, heads, head_size] view `source` (+ bias from `bias_base`) to `destination`."""

    source: Strided
    destination: Strided
    batch: int
    rows: int
    heads: int
    head_size: int
    bias: Any = None
    bias_base: int = 0


def launch(plan: CopyPlan) -> None:
    s, t = plan.source, plan.destination
    blocks, threads = stride_launch(plan.batch * plan.rows * plan.heads * plan.head_size)
    strided_copy[blocks, threads](s.array, s.base, s.batch, s.row, s.head, plan.bias, plan.bias_base, t.array, t.base,
                                  t.batch, t.row, t.head, plan.batch, plan.rows, plan.heads, plan.head_size)


def launch_all(plans: list[CopyPlan]) -> None:
    """Enqueue one copy per plan (a stage made of several launches)."""
    for plan in plans:
        launch(plan)
