"""The float64 NumPy reference of the packed operators' output [T, N * Hv], one row per token.

Q, K and V are formed from the host inputs exactly as the operator defines them (PA: input @
weights + bias; PMHA: packed or separate inputs plus the optional QKV bias), then every sequence
b attends within its own L_b tokens: softmax(Q K^T / sqrt(H) + attention bias) V. The LSE of a
token's row is log sum_j exp(x_j) over those scores (`reference_lse`, Flash's).
"""

from __future__ import annotations

import numpy as np

from ...spec.problem import Backend, Op
from ...spec.packed.problem import Problem, QkvFormat
from ..operator_inputs import HostInputs


def output_rows(p: Problem) -> int:
    """Return T: the rows of the output [T, N * Hv]."""
    return p.token_count


def token_qkv(p: Problem, host: HostInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return float64 Q [T, N, H], K [T, N, H], V [T, N, Hv] with the QKV bias added."""
    a = {name: x.astype(np.float64) for name, x in host.arrays.items()}
    t, n, h = p.token_count, p.num_heads, p.qk_head_size
    if p.op is Op.PA:
        packed = a["input"] @ a["weights"] + a["bias"]
    elif p.qkv_format is QkvFormat.PACKED:
        packed = np.concatenate([a["query"][:, :, i, :].reshape(t, -1) for i in range(3)], axis=1)
    else:
        packed = np.concatenate([a["query"], a["key"], a["value"]], axis=1)
    if p.op is Op.PMHA and p.has_bias:
        packed = packed + a["bias"]
    q, k, v = np.split(packed, [p.hidden_size, 2 * p.hidden_size], axis=1)
    return q.reshape(t, n, h), k.reshape(t, n, h), v.reshape(t, n, p.v_head_size)


def sequence_scores(p: Problem, host: HostInputs, q: np.ndarray, k: np.ndarray, b: int, first: int,
                    queries: np.ndarray) -> np.ndarray:
    """Return the float64 scores [N, len(queries), L_b] of the given token indexes of sequence b
    (its tokens from `first`) against its L_b keys: Q K^T / sqrt(H) plus the attention bias."""
    length = host.lengths[b]
    keys = slice(first, first + length)
    scores = q[queries].transpose(1, 0, 2) @ k[keys].transpose(1, 2, 0) / np.sqrt(p.qk_head_size)
    bias = host.arrays.get("attention_bias")
    if bias is not None:
        rows = bias[0 if p.broadcast_attn_bias_dim_0 else b, :, queries - first, :length]
        scores = scores + rows.transpose(1, 0, 2).astype(np.float64)
    return scores


def reference_output(p: Problem, host: HostInputs, tokens: np.ndarray, backend: Backend) -> np.ndarray:
    """Return the float64 output rows [len(tokens), N * Hv] of the given sorted token indexes.
    Every route computes the same attention, so `backend` changes nothing."""
    q, k, v = token_qkv(p, host)
    out = np.zeros((len(tokens), p.num_heads, p.v_head_size))
    first = 0
    for b, length in enumerate(host.lengths):
        chosen = np.flatnonzero((tokens >= first) & (tokens < first + length))
        scores = sequence_scores(p, host, q, k, b, first, tokens[chosen])
        weights = np.exp(scores - scores.max(axis=-1, keepdims=True, initial=-np.inf))
        weights /= weights.sum(axis=-1, keepdims=True)
        out[chosen] = (weights @ v[first:first + length].transpose(1, 0, 2)).transpose(1, 0, 2)
        first += length
    return out.reshape(len(tokens), -1)


def reference_lse(p: Problem, host: HostInputs) -> np.ndarray:
    """Return the float64 LSE [N, T] of every token's scores (module docstring)."""
    q, k, _ = token_qkv(p, host)
    lse = np.zeros((p.num_heads, p.token_count))
    first = 0
    for b, length in enumerate(host.lengths):
        scores = sequence_scores(p, host, q, k, b, first, np.arange(first, first + length))
        top = scores.max(axis=-1, initial=-np.inf)
        lse[:, first:first + length] = top + np.log(np.exp(scores - top[..., None]).sum(axis=-1))
        first += length
    return lse
