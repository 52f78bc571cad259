"""MultiHeadAttention's inputs: seeded host arrays and their device copies.

ORT's names and shapes: query [B, S, N*H] (packed QKV: [B, S, N, 3, H]), key [B, L, N*H] (cross:
[B, N, L, H]; packed KV: [B, L, N, 2, H]), value [B, L, N*Hv] (cross: [B, N, L, Hv]), the [2D + Dv]
bias, the key padding mask ([B] key lengths in [1, T]; [3B + 2] those, then the query starts b*S
and key starts b*T; [B, T] and [B, S, T] of 0/1 with every row seeing some key), the attention
bias [B|1, N|1, S, T], past_key and past_value [B, N, P, H]. Values uniform in [-1, 1), biases in
[-0.5, 0.5) (`attnws.kernels.operator_inputs`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...spec.mha.problem import MhaFormat, MhaProblem
from ...spec.statement import Footprint
from ..allocator import Allocator
from ..operator_inputs import HostInputs, uniform_values, upload_arrays


def make_inputs(p: MhaProblem, seed: int = 0) -> HostInputs:
    """Return seeded host inputs (module docstring); `lengths` are the key lengths of a rank-1 mask."""
    rng = np.random.default_rng(seed)
    uniform = uniform_values(rng, p.element_size)
    b, s, l, n, h, hv, t = (p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size,
                            p.v_head_size, p.total_sequence_length)
    arrays: dict[str, np.ndarray] = {}
    fmt = p.qkv_format
    if fmt is MhaFormat.PACKED_QKV:
        arrays["query"] = uniform((b, s, n, 3, h))
    else:
        arrays["query"] = uniform((b, s, n * h))
        if fmt is MhaFormat.PACKED_KV:
            arrays["key"] = uniform((b, l, n, 2, h))
        elif fmt is MhaFormat.CROSS:
            arrays["key"], arrays["value"] = uniform((b, n, l, h)), uniform((b, n, l, hv))
        else:
            arrays["key"], arrays["value"] = uniform((b, l, n * h)), uniform((b, l, n * hv))
    if p.has_bias:
        arrays["bias"] = uniform((2 * n * h + n * hv,), 0.5)
    lengths: tuple[int, ...] = ()
    if p.mask_rank == 1:
        key_lengths = rng.integers(1, t + 1, size=b).astype(np.int32) if t else np.zeros(b, np.int32)
        lengths = tuple(int(x) for x in key_lengths)
        mask = key_lengths
        if p.mask_is_start:
            mask = np.concatenate([key_lengths, np.arange(b + 1) * s, np.arange(b + 1) * t]).astype(np.int32)
        arrays["key_padding_mask"] = mask
    elif p.mask_rank in (2, 3):
        shape = (b, t) if p.mask_rank == 2 else (b, s, t)
        mask = (rng.random(shape) < 0.7).astype(np.int32)
        if t:
            first = rng.integers(0, t, size=shape[:-1])
            np.put_along_axis(mask, first[..., None], 1, axis=-1)
        arrays["key_padding_mask"] = mask
    if p.has_attention_bias:
        arrays["attention_bias"] = uniform((1 if p.broadcast_attn_bias_dim_0 else b,
                                            1 if p.broadcast_attn_bias_dim_1 else n, s, t), 0.5)
    if p.has_past:
        arrays["past_key"] = uniform((b, n, p.past_sequence_length, h))
        arrays["past_value"] = uniform((b, n, p.past_sequence_length, h))
    return HostInputs(arrays, lengths)


def route_inputs(p: MhaProblem, recipe: Any, host: HostInputs) -> HostInputs:
    """Return the inputs as the route reads them: as drawn (every route reads the same inputs)."""
    return host


def drawn_footprint(p: MhaProblem, recipe: Any, fp: Footprint, host: HostInputs) -> Footprint:
    """Return the footprint of the drawn inputs: `fp`, stated from the shapes; the key lengths and
    masks drawn change what the kernels read, not what they write."""
    return fp


@dataclass(frozen=True)
class DeviceInputs:
    """Flat device copies of the inputs by ORT name."""

    arrays: Mapping[str, Any]


def upload(allocator: Allocator, p: MhaProblem, host: HostInputs) -> DeviceInputs:
    """Copy every input to the device through the allocator (purpose "input:<name>"); the problem
    adds nothing (no packing: the routes read the mask as given)."""
    return DeviceInputs(upload_arrays(allocator, host))
