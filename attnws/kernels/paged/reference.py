"""The float64 reference of one PagedAttention step, from the operator's definition (not from the
kernels): sequence b has n_b new tokens (rows cu[b] .. cu[b + 1] - 1 of query, key and value)
after past_b earlier ones, which its cache holds at positions 0 .. past_b - 1 (position j in slot
j mod bs of block block_table[b, j // bs]). Its keys are those past_b rows then its n_b new K
rows (L_b = past_b + n_b), its values likewise. New token i at position q = past_b + i attends,
query head n reading KV head n // (N / Nk), the keys j <= q (causal within the step's new
tokens). Scores scale * q . k_j with scale = 1 / sqrt(H); the LSE is log sum_j exp(x_j) over the
keys seen.

With rotary (do_rotary), the new Q and K rows (not V, not the cache's earlier rows) are rotated
first, standard RoPE over the whole head: new token i of sequence b at position past_b + i, the
head's halves x1 = x[:H / 2], x2 = x[H / 2:] become (x1 cos - x2 sin, x2 cos + x1 sin), cos and
sin the caches' rows at that position (`new_rows`).

The output [T, N * H] has one row per new token (`output_rows`); the LSE is [N, T].
"""

from __future__ import annotations

import math

import numpy as np

from ...spec.paged.problem import PagedProblem
from ...spec.problem import Backend
from ..operator_inputs import HostInputs


def past_rows(p: PagedProblem, host: HostInputs, name: str, b: int, past: int) -> np.ndarray:
    """Return positions 0 .. past - 1 of sequence b in the cache `name` before the step, [past, Nk, H]."""
    table = host.arrays["block_table"][b]
    cache = host.arrays[name]
    j = np.arange(past)
    return cache[table[j // p.block_size], j % p.block_size].astype(np.float64)


def token_positions(p: PagedProblem, host: HostInputs) -> np.ndarray:
    """Return each new token's position [T]: past_b + its index within its sequence b."""
    cu = host.arrays["cumulative_sequence_length"]
    out = np.zeros(p.token_count, np.int64)
    for b, past in enumerate(host.arrays["past_seqlens"]):
        out[cu[b]:cu[b + 1]] = past + np.arange(cu[b + 1] - cu[b])
    return out


def new_rows(p: PagedProblem, host: HostInputs, name: str) -> np.ndarray:
    """Return the new rows of input `name` ("query", "key" or "value") as [T, heads, H] float64,
    Q and K rotated at their positions with rotary (module docstring)."""
    x = host.arrays[name].astype(np.float64).reshape(p.token_count, -1, p.head_size)
    if not p.do_rotary or name == "value":
        return x
    at = token_positions(p, host)
    cos = host.arrays["cos_cache"].astype(np.float64)[at][:, None, :]  # [T, 1, H / 2]
    sin = host.arrays["sin_cache"].astype(np.float64)[at][:, None, :]
    x1, x2 = np.split(x, 2, axis=-1)
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def reference(p: PagedProblem, host: HostInputs) -> tuple[np.ndarray, np.ndarray]:
    """Return (output [T, N, H], LSE [N, T]) in float64 for the inputs (module docstring)."""
    t_, n, nk, h = p.token_count, p.num_heads, p.kv_num_heads, p.head_size
    group = n // nk
    cu = host.arrays["cumulative_sequence_length"]
    past_lengths = host.arrays["past_seqlens"]
    query = new_rows(p, host, "query")
    new = {name: new_rows(p, host, name) for name in ("key", "value")}
    out = np.zeros((t_, n, h))
    lse = np.zeros((n, t_))
    for b in range(p.batch_size):
        first, last, past = int(cu[b]), int(cu[b + 1]), int(past_lengths[b])
        keys = np.concatenate([past_rows(p, host, "key_cache", b, past), new["key"][first:last]])  # [L, Nk, H]
        values = np.concatenate([past_rows(p, host, "value_cache", b, past), new["value"][first:last]])
        keys, values = np.repeat(keys, group, axis=1), np.repeat(values, group, axis=1)  # [L, N, H]
        for i, t in enumerate(range(first, last)):
            seen = past + i + 1
            x = np.einsum("nh,jnh->nj", query[t], keys[:seen]) / math.sqrt(h)
            top = x.max(axis=1, keepdims=True)
            weights = np.exp(x - top)
            total = weights.sum(axis=1)
            out[t] = np.einsum("nj,jnh->nh", weights, values[:seen]) / total[:, None]
            lse[:, t] = top[:, 0] + np.log(total)
    return out, lse


def output_rows(p: PagedProblem) -> int:
    """Return T: the rows of the output [T, N * H]."""
    return p.token_count


def reference_output(p: PagedProblem, host: HostInputs, rows: np.ndarray, backend: Backend) -> np.ndarray:
    """Return the float64 output rows [len(rows), N * H] of the given sorted token indexes (every
    route computes the same attention)."""
    out, _ = reference(p, host)
    return out.reshape(output_rows(p), -1)[rows]
