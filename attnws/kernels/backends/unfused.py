"""Kernels of ORT's unfused backend: scores GEMM, masked softmax, context GEMM, over the scratch regions.

`scaled_scores`, scores = scale * Q K^T into scratch region 1: Q planar [B, N, S, H], K planar [B, N,
T, H] (T = S for a packed batch; a padded batch with a past has T = P + L keys), scores [B, N, S,
T], all in the element type; every S x T entry of every (b, n) is computed (padding rows and
columns included), float32 dot products.

`masked_softmax`, scratch region 1 -> scratch region 2, of a packed batch: row (b, n, i) of scores
[B, N, S, S] plus the optional attention bias row becomes a softmax over keys j < L_b = cu[b + 1] -
cu[b]; keys j >= L_b (padding) get probability 0, and so does every key of an empty sequence.

`masked_softmax_keys`, the same of a padded batch: rows of scores [B, N, S, T] over T = P + L keys,
the attention bias [B|1, N|1, S, T], and the keys a row sees set by the key mask ([B] or the key
lengths of [3B + 2]: j < length_b; [B, T] and [B, S, T]: mask != 0) and causality (j <= P + i);
unseen keys get probability 0 (ORT adds its mask filter value instead: the same output wherever a
row sees some key).

`attention_context`, context = probabilities V, still padded: probabilities [B, N, S, T] and V planar
[B, N, T, Hv] in the element type; the context [B, N, S, Hv] (ORT's temp_output) in the element
type, every row of every (b, n) included. ORT writes it over Q (temp_output = qkv, or data.q); a
transpose then moves it into the output. Float32 sums.

Every kernel is grid-stride: over B * N * S * T scores, B * N * S softmax rows, B * N * S * Hv
context elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from ..launching import stride_launch
from ..plans import AttentionBias, Packing
from ..strided_dot import strided_dot
from .attention_bias import bias_row


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


def launch_scores(plan: ScoresPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.keys)
    scaled_scores[blocks, threads](plan.q, plan.k, plan.scores, plan.batch_heads, plan.seq, plan.keys, plan.head_size,
                                   plan.scale)


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


def launch_softmax(plan: SoftmaxPlan) -> None:
    p, bias = plan.packing, plan.bias
    blocks, threads = stride_launch(p.batch * p.heads * p.seq)
    masked_softmax[blocks, threads](
        plan.scores, plan.probabilities, None if bias is None else bias.array,
        bias is not None and bias.broadcast_batch, bias is not None and bias.broadcast_heads,
        p.cumulative_sequence_length, p.batch, p.heads, p.seq,
    )


# The key masks of a padded batch, as `masked_softmax_keys` reads them (an int32 device array).
MASK_NONE = 0
MASK_KEY_LENGTHS = 1  # [B] key lengths, or the first B entries of the [3B + 2] form
MASK_KEY_PADDING = 2  # [B, T]: key j of batch b is seen iff mask[b, j] != 0
MASK_ATTENTION = 3  # [B, S, T]: key j of query row i of batch b is seen iff mask[b, i, j] != 0


@cuda.jit(device=True)
def key_seen(mask, kind, b, i, j, seq, total, past, causal):
    """Return whether query row i of batch b sees key j (< T) under the mask and causality."""
    if causal and j > past + i:
        return False
    if mask is None:
        return True
    if kind == MASK_KEY_LENGTHS:
        return j < mask[b]
    if kind == MASK_KEY_PADDING:
        return mask[b * total + j] != 0
    if kind == MASK_ATTENTION:
        return mask[(b * seq + i) * total + j] != 0
    return True


@cuda.jit
def masked_softmax_keys(scores, probabilities, bias, bias_b, bias_n, mask, kind, batch, heads, seq, total, past,
                        causal):
    """probabilities[row * T + j] = softmax over the keys row sees of scores[row * T + j] + bias, 0
    for a key it does not see (every key 0 when it sees none); rows (b, n, i) of [B, N, S]."""
    for row in range(cuda.grid(1), batch * heads * seq, cuda.gridsize(1)):
        b = row // (heads * seq)
        n = (row // seq) - b * heads
        i = row - (row // seq) * seq
        bias_start = b * bias_b + n * bias_n + i * total
        m_i = -math.inf
        for j in range(total):
            if key_seen(mask, kind, b, i, j, seq, total, past, causal):
                m_i = max(m_i, biased_score(scores, row * total, j, bias, bias_start))
        l_i = float32(0.0)
        for j in range(total):
            if key_seen(mask, kind, b, i, j, seq, total, past, causal):
                l_i += math.exp(biased_score(scores, row * total, j, bias, bias_start) - m_i)
        for j in range(total):
            p = float32(0.0)
            if l_i != 0 and key_seen(mask, kind, b, i, j, seq, total, past, causal):  # a NaN l_i stays NaN
                p = math.exp(biased_score(scores, row * total, j, bias, bias_start) - m_i) / l_i
            probabilities[row * total + j] = p


@dataclass(frozen=True)
class KeySoftmaxPlan:
    """The softmax of a padded batch: scores and probabilities [B, N, S, T], the attention
    bias [B|1, N|1, S, T] or None with its broadcasts, the mask (int32 device array or None) and
    its kind, causality with the past length P."""

    scores: Any
    probabilities: Any
    batch: int
    heads: int
    seq: int
    total: int
    bias: Any = None
    bias_broadcast_batch: bool = False
    bias_broadcast_heads: bool = False
    mask: Any = None
    kind: int = MASK_NONE
    causal: bool = False
    past: int = 0


def launch_key_softmax(plan: KeySoftmaxPlan) -> None:
    heads_stride = 0 if plan.bias_broadcast_heads else plan.seq * plan.total
    batch_stride = 0 if plan.bias_broadcast_batch else (1 if plan.bias_broadcast_heads else plan.heads) * \
        plan.seq * plan.total
    blocks, threads = stride_launch(plan.batch * plan.heads * plan.seq)
    masked_softmax_keys[blocks, threads](
        plan.scores, plan.probabilities, plan.bias, batch_stride, heads_stride, plan.mask, plan.kind, plan.batch,
        plan.heads, plan.seq, plan.total, plan.past, plan.causal)


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


def launch_context(plan: ContextPlan) -> None:
    blocks, threads = stride_launch(plan.batch_heads * plan.seq * plan.v_head_size)
    attention_context[blocks, threads](plan.probabilities, plan.v, plan.context, plan.batch_heads, plan.seq,
                                       plan.keys, plan.v_head_size)
