"""The float64 NumPy reference of MultiHeadAttention's output [B * S, N * Hv], one row per query
position b * S + s.

Q, K, V are formed from the host inputs as the operator defines them (the format's views, the QKV
bias, the past keys and values first), then query row i of batch b sees key j < T (T = P + L)
unless the mask hides it or (unidirectional) j > P + i: softmax(Q K^T / sqrt(H) + attention bias)
V over the keys it sees; a row seeing no key outputs 0. The TRT runner with a [B] mask takes each
sequence's padding as a sequence of its own (its 2B + 1 offsets): padding rows see only padding
keys, so the reference depends on the backend there. The LSE of a row is log sum_j exp(x_j) over
the scaled, biased scores of the keys it sees, -inf for a row that sees none (`reference_lse`,
Flash's [B, N, S]); the present outputs hold the past keys and values, then the new ones (bias
added): `host_qkv`'s K and V in [B, N, T, *].
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.mha.problem import MhaFormat, MhaProblem
from ...spec.problem import Backend
from ..operator_inputs import HostInputs


def output_rows(p: MhaProblem) -> int:
    """Return B * S: the rows of the output [B * S, N * Hv]."""
    return p.batch_size * p.sequence_length


def host_qkv(p: MhaProblem, host: HostInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return float64 Q [B, S, N, H], K [B, T, N, H], V [B, T, N, Hv] (bias added, past first)."""
    a = {name: x.astype(np.float64) for name, x in host.arrays.items()}
    b, s, l, n, h, hv = p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size, \
        p.v_head_size
    fmt = p.qkv_format
    if fmt is MhaFormat.PACKED_QKV:
        q, k, v = (a["query"][:, :, :, i, :] for i in range(3))
    else:
        q = a["query"].reshape(b, s, n, h)
        if fmt is MhaFormat.PACKED_KV:
            k, v = a["key"][:, :, :, 0, :], a["key"][:, :, :, 1, :]
        elif fmt is MhaFormat.CROSS:
            k, v = a["key"].transpose(0, 2, 1, 3), a["value"].transpose(0, 2, 1, 3)
        else:
            k, v = a["key"].reshape(b, l, n, h), a["value"].reshape(b, l, n, hv)
    if p.has_bias:
        bias = a["bias"]
        q = q + bias[:n * h].reshape(n, h)
        if fmt is not MhaFormat.CROSS:  # ORT adds no bias to key and value given as [B, N, L, H]
            k = k + bias[n * h:2 * n * h].reshape(n, h)
            v = v + bias[2 * n * h:].reshape(n, hv)
    if p.has_past:
        k = np.concatenate([a["past_key"].transpose(0, 2, 1, 3), k], axis=1)
        v = np.concatenate([a["past_value"].transpose(0, 2, 1, 3), v], axis=1)
    return q, k, v


def seen_keys(p: MhaProblem, host: HostInputs, backend: Backend) -> np.ndarray:
    """Return the boolean [B, S, T] of the keys each query row sees (module docstring)."""
    b, s, t, past = p.batch_size, p.sequence_length, p.total_sequence_length, p.past_sequence_length
    seen = np.ones((b, s, t), dtype=bool)
    keys = np.arange(t)[None, None, :]
    queries = np.arange(s)[None, :, None]
    mask = host.arrays.get("key_padding_mask")
    if p.mask_rank == 1:
        lengths = np.asarray(host.lengths)[:, None, None]
        if backend is Backend.TRT:
            seen = np.where(queries < lengths, keys < lengths, (keys >= lengths) & (keys < s))
        else:
            seen &= keys < lengths
    elif p.mask_rank == 2:
        seen &= mask[:, None, :] != 0
    elif p.mask_rank == 3:
        seen &= mask != 0
    if p.is_unidirectional:
        seen &= keys <= past + queries
    return seen


def row_scores(p: MhaProblem, host: HostInputs, q: np.ndarray, k: np.ndarray, seen: np.ndarray, row: int) -> np.ndarray:
    """Return the float64 scores [N, T] of query row b * S + s: scale * Q K^T plus the attention
    bias, -inf at the keys it does not see."""
    b, i = divmod(int(row), p.sequence_length)
    scores = np.einsum("nh,tnh->nt", q[b, i], k[b]) / math.sqrt(p.qk_head_size)
    bias = host.arrays.get("attention_bias")
    if bias is not None:
        scores = scores + bias[0 if p.broadcast_attn_bias_dim_0 else b, :, i, :].astype(np.float64)
    return np.where(seen[b, i][None, :], scores, -np.inf)


def reference_output(p: MhaProblem, host: HostInputs, chosen: np.ndarray, backend: Backend) -> np.ndarray:
    """Return the float64 output rows [len(chosen), N * Hv] of the given sorted row indexes (b * S + s)."""
    q, k, v = host_qkv(p, host)
    seen = seen_keys(p, host, backend)
    out = np.zeros((len(chosen), p.num_heads, p.v_head_size))
    for row_index, row in enumerate(chosen):
        b, i = divmod(int(row), p.sequence_length)
        if not seen[b, i].any():
            continue
        scores = row_scores(p, host, q, k, seen, row)
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
        weights /= weights.sum(axis=-1, keepdims=True)
        out[row_index] = np.einsum("nt,tnh->nh", weights, v[b])
    return out.reshape(len(chosen), -1)


def reference_lse(p: MhaProblem, host: HostInputs, backend: Backend) -> np.ndarray:
    """Return the float64 LSE [B, N, S] of every query row (module docstring)."""
    q, k, _ = host_qkv(p, host)
    seen = seen_keys(p, host, backend)
    b_, s_ = p.batch_size, p.sequence_length
    lse = np.full((b_, p.num_heads, s_), -np.inf)
    for row in range(b_ * s_):
        b, i = divmod(row, s_)
        if seen[b, i].any():
            scores = row_scores(p, host, q, k, seen, row)
            top = scores.max(axis=-1)
            lse[b, :, i] = top + np.log(np.exp(scores - top[:, None]).sum(axis=-1))
    return lse
