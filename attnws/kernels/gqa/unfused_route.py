"""GroupQueryAttention's unfused route (UnfusedGqaAttention), stage by stage over its regions.

ORT 1.31.1's kernels they stand for (`group_query_attention_impl.cu` and `unfused_attention.cu`;
`docs/research/gqa-footprint.md` §3), with Tk the key length (T, or min(T, C) windowed), C the
cache capacity (the present cache's row count, Ce while staging) and G = N / Nk:

- `transpose_query`: Transpose_BSNH_to_BNSH, the prepared Q [B, S, N, H] into `q_bnsh`
  [B, N, S, H], every element.
- `qk_gemm`: LaunchQkGemmFp32 (cublasGemmStridedBatchedEx, alpha 1): for each of the B * Nk
  (b, kv head) batches, the G * S query rows of its heads (contiguous in BNSH) against keys j < Tk
  of the present cache (stride C * H per batch) into the float32 `scores` [B, N, S, Tk], every
  element, unscaled.
- `softmax`: UnfusedSoftmaxKernel: row (b, n, i) with L = min(Tk, seqlens_k[b]) and query
  position q = L - S + i: x_j = scale * score_j, then softcap * tanh(x_j / softcap) when softcap
  > 0; softmax over j in [start, end), end = min(L, q + 1) when causal (else L), start =
  max(0, q - W) for a window W >= 0 (W + 1 keys, unlike MEA's W); zeros elsewhere and on a row
  with no key. Writes every element of `softmax` [B, N, S, Tk] in the element type.
- `av_gemm`: LaunchAttnVGemm: for each (b, kv head), probabilities [G * S, Tk] times V rows
  j < Tk of the present cache into `y_bnsh` [B, N, S, H], every element.
- `transpose_output`: Transpose_BNSH_to_BSNH, `y_bnsh` into the output [B, S, N * H].

`launch_sequence` runs the five on the prepared query, cache and key lengths (`layouts`) and the
carved regions. The GEMMs are the backends' unfused kernels launched once per (b, kv head) on that
batch's slices, as the strided-batched GEMM runs one matrix product per batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda, float32

from ...spec.domain import CONCRETE
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Route, effective_kv_length
from ...spec.gqa.footprint import Q_BNSH, SCORES, SOFTMAX, Y_BNSH
from ...spec.statement import OUTPUT
from ..backends.unfused import ContextPlan, ScoresPlan, launch_context, launch_scores
from ..launching import Launch, stride_launch
from ..plans import softmax_scale
from ..strided_copy import CopyPlan, bnsh, bsnh, launch as launch_copy
from ..workspace import Workspace
from .layouts import Prepared


@dataclass(frozen=True)
class UnfusedShape:
    """B, S, N, Nk, H, the key length Tk and the present cache's capacity C (C >= Tk)."""

    batch: int
    seq: int
    heads: int
    kv_heads: int
    head_size: int
    kv_length: int
    capacity: int

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads or not 0 < self.kv_length <= self.capacity:
            raise ValueError(f"needs N a multiple of Nk and 0 < Tk <= C: N={self.heads}, Nk={self.kv_heads}, "
                             f"Tk={self.kv_length}, C={self.capacity}")

    @property
    def group_rows(self) -> int:
        """G * S: the query rows of one (b, kv head) batch."""
        return self.heads // self.kv_heads * self.seq


def transpose_query(q_bnsh: Any, query: Any, shape: UnfusedShape) -> Launch:
    """Return Transpose_BSNH_to_BNSH: every element of q_bnsh [B, N, S, H] from query [B, S, N, H]."""
    b, s, n, h = shape.batch, shape.seq, shape.heads, shape.head_size
    plan = CopyPlan(bsnh(query, s, n, h), bnsh(q_bnsh, s, n, h), b, s, n, h)
    return Launch("Transpose_BSNH_to_BNSH", partial(launch_copy, plan))


def transpose_output(output: Any, y_bnsh: Any, shape: UnfusedShape) -> Launch:
    """Return Transpose_BNSH_to_BSNH: every element of the output [B, S, N * H] from y_bnsh."""
    b, s, n, h = shape.batch, shape.seq, shape.heads, shape.head_size
    plan = CopyPlan(bnsh(y_bnsh, s, n, h), bsnh(output, s, n, h), b, s, n, h)
    return Launch("Transpose_BNSH_to_BSNH", partial(launch_copy, plan))


def _batches(shape: UnfusedShape) -> range:
    return range(shape.batch * shape.kv_heads)


def qk_gemm(scores: Any, q_bnsh: Any, present_key: Any, shape: UnfusedShape) -> Launch:
    """Return QK GEMM: every element of the float32 scores [B, N, S, Tk], q . k_j unscaled."""
    rows, h, tk = shape.group_rows, shape.head_size, shape.kv_length
    plans = [ScoresPlan(q_bnsh[i * rows * h:(i + 1) * rows * h],
                        present_key[i * shape.capacity * h:(i * shape.capacity + tk) * h],
                        scores[i * rows * tk:(i + 1) * rows * tk], 1, rows, h, 1.0, tk) for i in _batches(shape)]

    def enqueue() -> None:
        for plan in plans:
            launch_scores(plan)

    return Launch("QK GEMM", enqueue)


def av_gemm(y_bnsh: Any, probabilities: Any, present_value: Any, shape: UnfusedShape) -> Launch:
    """Return AV GEMM: every element of y_bnsh [B, N, S, H] = probabilities [B, N, S, Tk] times V."""
    rows, h, tk = shape.group_rows, shape.head_size, shape.kv_length
    plans = [ContextPlan(probabilities[i * rows * tk:(i + 1) * rows * tk],
                         present_value[i * shape.capacity * h:(i * shape.capacity + tk) * h],
                         y_bnsh[i * rows * h:(i + 1) * rows * h], 1, rows, h, tk) for i in _batches(shape)]

    def enqueue() -> None:
        for plan in plans:
            launch_context(plan)

    return Launch("AV GEMM", enqueue)


@cuda.jit(device=True)
def capped(scores, at, scale, softcap):
    """Return scale * scores[at], through softcap * tanh(x / softcap) when softcap > 0."""
    x = float32(scores[at]) * scale
    if softcap > 0:
        x = softcap * math.tanh(x / softcap)
    return x


@cuda.jit
def windowed_softmax(scores, probabilities, seqlens_k, batch, heads, seq, total, causal, window, scale, softcap):
    """probabilities[row * Tk + j] for rows (b, n, i) of [B, N, S]; see the module docstring."""
    for row in range(cuda.grid(1), batch * heads * seq, cuda.gridsize(1)):
        b = row // (heads * seq)
        i = row % seq
        length = max(min(total, seqlens_k[b]), 0)
        position = length - seq + i
        end = min(length, position + 1) if causal else length
        start = max(0, position - window) if window >= 0 else 0
        end = max(end, 0)
        start = min(start, end)
        m_i = -math.inf
        for j in range(start, end):
            m_i = max(m_i, capped(scores, row * total + j, scale, softcap))
        l_i = float32(0.0)
        for j in range(start, end):
            l_i += math.exp(capped(scores, row * total + j, scale, softcap) - m_i)
        for j in range(total):
            p = float32(0.0)
            if start <= j < end:
                p = math.exp(capped(scores, row * total + j, scale, softcap) - m_i) / l_i
            probabilities[row * total + j] = p


@dataclass(frozen=True)
class Masking:
    """Causal, the local window W (-1: none), the softmax scale and the softcap (0: none)."""

    scale: float
    causal: bool = True
    window: int = -1
    softcap: float = 0.0


def softmax(probabilities: Any, scores: Any, seqlens_k: Any, shape: UnfusedShape, masking: Masking) -> Launch:
    """Return UnfusedSoftmaxKernel: every element of probabilities [B, N, S, Tk] (the element type)
    from the float32 scores and the key lengths seqlens_k (int32 [B]: total_seq_lens, or
    cache_total_seq_lens windowed)."""
    b, n, s, tk = shape.batch, shape.heads, shape.seq, shape.kv_length

    def enqueue() -> None:
        blocks, threads = stride_launch(b * n * s)
        windowed_softmax[blocks, threads](scores, probabilities, seqlens_k, b, n, s, tk, masking.causal,
                                          masking.window, masking.scale, masking.softcap)

    return Launch("UnfusedSoftmaxKernel", enqueue)


def launch_sequence(p: GqaProblem, route: Route, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the five stages over the carved regions; Tk = T, or min(T, Ce) with a windowed cache."""
    tk = effective_kv_length(CONCRETE, route.total_sequence_length, prepared.capacity, p.sliding_window_cache)
    shape = UnfusedShape(p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size, tk,
                         prepared.capacity)
    masking = Masking(softmax_scale(p.head_size), p.causal, p.local_window_size, p.softcap)
    a = ws.arrays
    return (transpose_query(a[Q_BNSH], prepared.query, shape), qk_gemm(a[SCORES], a[Q_BNSH], prepared.key, shape),
            softmax(a[SOFTMAX], a[SCORES], prepared.key_lengths, shape, masking),
            av_gemm(a[Y_BNSH], a[SOFTMAX], prepared.value, shape), transpose_output(a[OUTPUT], a[Y_BNSH], shape))
