"""The float64 reference of one GroupQueryAttention step, from the operator's definition (not from
the kernels): batch entry b has past_b = L_b - S earlier tokens; its new query, key and value rows
(unpacked from packed QKV, and with rotary, Q and K rotated at their positions past_b + s) follow
the R_b earlier tokens its cache holds (the last R_b, at positions past_b - R_b .. past_b - 1; a
windowed cache holds at most C, `inputs.resident_rows`). Query row s at position q = past_b + s
attends, with query head n reading KV head n // (N / Nk), the held keys at positions j <= q
(causal) and, given `window_keys` = K, the K keys q - K < j <= q. Scores scale * q . k_j with
scale = 1 / sqrt(H), through softcap * tanh(x / softcap) when softcap > 0; the LSE is
log sum_j exp(x_j) over the keys seen.

Rotary embedding over the whole head, pairs (i, i + H / 2) rotated by the angle whose cos and sin
the caches hold at that position: (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin).

The route's own window rule (`window_keys`): XQA, Flash and MEA keep the W keys q - W < j <= q of a
local window W, ORT's unfused softmax the W + 1 keys q - W <= j <= q (`unfused_route`). The output
[B, S, N * H] has one row per (b, s) (`output_rows`).
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.gqa.problem import GqaProblem
from ...spec.problem import Backend
from ..operator_inputs import HostInputs
from .inputs import resident_rows


def new_tokens(p: GqaProblem, host: HostInputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the new (Q [B, S, N, H], K, V [B, S, Nk, H]) in float64, unpacked."""
    b, s, n, nk, h = p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    query = host.arrays["query"].astype(np.float64).reshape(b, s, -1, h)
    if p.is_packed_qkv:
        return query[:, :, :n], query[:, :, n:n + nk], query[:, :, n + nk:]
    kv = [host.arrays[name].astype(np.float64).reshape(b, s, nk, h) for name in ("key", "value")]
    return query, kv[0], kv[1]


def rotated(x: np.ndarray, positions: np.ndarray, host: HostInputs) -> np.ndarray:
    """Return x [S, heads, H] with token s rotated at positions[s] (module docstring)."""
    cos = host.arrays["cos_cache"].astype(np.float64)[positions][:, None, :]
    sin = host.arrays["sin_cache"].astype(np.float64)[positions][:, None, :]
    half = x.shape[-1] // 2
    x0, x1 = x[..., :half], x[..., half:]
    return np.concatenate([x0 * cos - x1 * sin, x1 * cos + x0 * sin], axis=-1)


def reference(p: GqaProblem, host: HostInputs, window_keys: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Return (output [B, S, N, H], LSE [B, N, S]) in float64 for the inputs (module docstring)."""
    b_, s_, n, h = p.batch_size, p.sequence_length, p.num_heads, p.head_size
    group = n // p.kv_num_heads
    query, new_key, new_value = new_tokens(p, host)
    lengths = np.array(host.lengths)
    held = resident_rows(p, lengths - s_)
    out = np.zeros((b_, s_, n, h))
    lse = np.zeros((b_, n, s_))
    for b, length in enumerate(lengths):
        past = length - s_
        mine = past + np.arange(s_)
        q, k = query[b], new_key[b]
        if p.do_rotary:
            q, k = rotated(q, mine, host), rotated(k, mine, host)
        positions = np.concatenate([np.arange(past - held[b], past), mine])
        cache = [host.arrays[name][b, :, :held[b]].astype(np.float64) for name in ("present_key", "present_value")]
        keys = np.repeat(np.concatenate([cache[0], k.transpose(1, 0, 2)], axis=1), group, axis=0)  # [N, R + S, H]
        values = np.repeat(np.concatenate([cache[1], new_value[b].transpose(1, 0, 2)], axis=1), group, axis=0)
        for s, position in enumerate(mine):
            seen = positions <= position if p.causal else np.ones(positions.size, bool)
            if window_keys is not None:
                seen &= positions > position - window_keys
            x = np.einsum("nh,njh->nj", q[s], keys) / math.sqrt(h)
            if p.softcap > 0:
                x = p.softcap * np.tanh(x / p.softcap)
            x = np.where(seen, x, -np.inf)
            top = x.max(axis=1, keepdims=True)
            weights = np.exp(x - top)
            total = weights.sum(axis=1)
            out[b, s] = np.einsum("nj,njh->nh", weights, values) / total[:, None]
            lse[b, :, s] = top[:, 0] + np.log(total)
    return out, lse


def window_keys(p: GqaProblem, backend: Backend) -> int | None:
    """Return the keys a local window W keeps on the route: W, or W + 1 on unfused (None: no window)."""
    if p.local_window_size <= 0:
        return None
    return p.local_window_size + (backend is Backend.UNFUSED)


def output_rows(p: GqaProblem) -> int:
    """Return B * S: the rows of the output [B * S, N * H]."""
    return p.batch_size * p.sequence_length


def reference_output(p: GqaProblem, host: HostInputs, rows: np.ndarray, backend: Backend) -> np.ndarray:
    """Return the float64 output rows [len(rows), N * H] of the given sorted row indexes (b * S + s)
    on the route of `backend` (its window rule)."""
    out, _ = reference(p, host, window_keys(p, backend))
    return out.reshape(output_rows(p), -1)[rows]
