"""The packed operators' inputs (PackedAttention, PackedMultiHeadAttention): seeded host arrays,
their device copies and the packing.

Sequence lengths are a seeded random split of T tokens over B sequences of at most S each.
Values are uniform in [-1, 1) (PA weights scaled by 1 / sqrt(k) to keep projections O(1)), QKV
and attention biases in [-0.5, 0.5) (`attnws.kernels.operator_inputs`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ...spec.problem import Op
from ...spec.packed.problem import Problem, QkvFormat
from ...spec.statement import Footprint
from ..allocator import Allocator
from ..operator_inputs import HostInputs, uniform_values, upload_arrays
from ..plans import AttentionBias, Packing


def sequence_lengths(rng: np.random.Generator, p: Problem) -> np.ndarray:
    """Return B lengths, each in [0, S], summing to T: S each, less B*S - T padding slots drawn at random."""
    padding = rng.choice(p.batch_size * p.sequence_length, size=p.batch_size * p.sequence_length - p.token_count,
                         replace=False)
    return p.sequence_length - np.bincount(padding // max(p.sequence_length, 1), minlength=p.batch_size)


def token_offset(lengths: np.ndarray, seq: int) -> np.ndarray:
    """Return ORT's token_offset [B, S]: padded positions b*S + s of the tokens, then of the padding."""
    positions = np.arange(len(lengths) * seq).reshape(len(lengths), seq)
    valid = np.arange(seq)[None, :] < lengths[:, None]
    return np.concatenate([positions[valid], positions[~valid]]).reshape(len(lengths), seq).astype(np.int32)


def make_inputs(p: Problem, seed: int = 0) -> HostInputs:
    """Return seeded host inputs for the problem (see the module docstring); `lengths` are the B
    sequence lengths."""
    rng = np.random.default_rng(seed)
    uniform = uniform_values(rng, p.element_size)
    lengths = sequence_lengths(rng, p)
    qkv_hidden = 2 * p.hidden_size + p.v_hidden_size
    arrays: dict[str, np.ndarray] = {}
    if p.op is Op.PA:
        k = p.input_hidden_size
        arrays["input"] = uniform((p.token_count, k))
        arrays["weights"] = uniform((k, qkv_hidden), 1.0 / math.sqrt(max(k, 1)))
        arrays["bias"] = uniform((qkv_hidden,), 0.5)
    elif p.qkv_format is QkvFormat.PACKED:
        arrays["query"] = uniform((p.token_count, p.num_heads, 3, p.qk_head_size))
    else:
        arrays["query"] = uniform((p.token_count, p.hidden_size))
        arrays["key"] = uniform((p.token_count, p.hidden_size))
        arrays["value"] = uniform((p.token_count, p.v_hidden_size))
    if p.op is Op.PMHA and p.has_bias:
        arrays["bias"] = uniform((qkv_hidden,), 0.5)
    arrays["token_offset"] = token_offset(lengths, p.sequence_length)
    arrays["cumulative_sequence_length"] = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    if p.has_attention_bias:
        shape = (1 if p.broadcast_attn_bias_dim_0 else p.batch_size, 1 if p.broadcast_attn_bias_dim_1 else p.num_heads,
                 p.sequence_length, p.sequence_length)
        arrays["attention_bias"] = uniform(shape, 0.5)
    return HostInputs(arrays, tuple(int(x) for x in lengths))


def route_inputs(p: Problem, recipe: Any, host: HostInputs) -> HostInputs:
    """Return the inputs as the route reads them: as drawn (every route reads the same inputs)."""
    return host


def drawn_footprint(p: Problem, recipe: Any, fp: Footprint, host: HostInputs) -> Footprint:
    """Return the footprint of the drawn inputs: `fp`, stated for T tokens whatever their split
    into sequences."""
    return fp


@dataclass(frozen=True)
class DeviceInputs:
    """Flat device copies of the inputs by ORT name, the packing and the attention bias (or None)."""

    arrays: Mapping[str, Any]
    packing: Packing
    attention_bias: AttentionBias | None


def upload(allocator: Allocator, p: Problem, host: HostInputs) -> DeviceInputs:
    """Copy every input to the device through the allocator (purpose "input:<name>")."""
    arrays = upload_arrays(allocator, host)
    packing = Packing(arrays["cumulative_sequence_length"], arrays["token_offset"], p.batch_size,
                      p.sequence_length, p.num_heads, p.token_count)
    bias = None
    if p.has_attention_bias:
        bias = AttentionBias(arrays["attention_bias"], p.broadcast_attn_bias_dim_0, p.broadcast_attn_bias_dim_1)
    return DeviceInputs(arrays, packing, bias)
