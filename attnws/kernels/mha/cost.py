"""What validating a MultiHeadAttention route costs (the hooks `attnws.kernels.budget` calls): each
stage's simulator seconds, the input elements, and the float64 reference's host bytes.

Per stage (`cost_model` for the per-item seconds): copies move their buffers' elements; the unfused
stages as the packed ones with S queries over T = P + L keys; the tiled attention one thread per
query row through every tile of T keys (twice the rows for the TRT runner with a mask, whose
padding rows are sequences of their own).
"""

from __future__ import annotations

from ...spec.statement import Footprint
from ...spec.mha.problem import MhaProblem
from ...spec.problem import Backend
from ..cost_model import (
    SOFTMAX_INNER_SECONDS,
    STAGE_SECONDS,
    THREAD_START_SECONDS,
    TILE_KEYS,
    stride_seconds,
    tile_rows,
    tile_seconds,
)
from ..plans import ceil_div

TILE_FACTOR = 2  # the tiled kernels here (strided views, masks, causality) cost up to twice the packed ones


def stage_seconds(p: MhaProblem, fp: Footprint, name: str) -> float:
    """Return the simulator seconds of one footprint stage (fixed cost included)."""
    b, s, n, t = p.batch_size, p.sequence_length, p.num_heads, p.total_sequence_length
    h, hv = p.qk_head_size, p.v_head_size
    stage = next(st for st in fp.stages if st.name == name)
    if name.startswith("materialize_") or name in ("concat_past", "sequence_offsets"):
        items = sum(fp.buffer(w).elements for w in stage.writes)
        return STAGE_SECONDS + stride_seconds(items, 1)
    if name == "scores":
        return STAGE_SECONDS + stride_seconds(b * n * s * t, h)
    if name == "softmax":
        return STAGE_SECONDS + stride_seconds(b * n * s, 3 * t, SOFTMAX_INNER_SECONDS)
    if name == "context":
        return STAGE_SECONDS + stride_seconds(b * n * s * hv, t)
    if name == "transpose":
        return STAGE_SECONDS + stride_seconds(b * s * n * hv, 1)
    rows = tile_rows(s)
    threads = ceil_div(s, rows) * rows * n * b * (2 if fp.backend is Backend.TRT and p.mask_rank else 1)
    per_tile = TILE_FACTOR * tile_seconds(h, hv)
    return STAGE_SECONDS + threads * (THREAD_START_SECONDS + ceil_div(t, TILE_KEYS) * per_tile)


def input_elements(p: MhaProblem) -> int:
    """Return the element count of the operator's inputs."""
    b, s, l, n, h, hv, t = (p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size,
                            p.v_head_size, p.total_sequence_length)
    count = b * s * n * h + b * l * n * (h + hv) + (2 * n * h + n * hv if p.has_bias else 0)
    count += {0: 0, 1: 3 * b + 2, 2: b * t, 3: b * s * t}[p.mask_rank]
    if p.has_attention_bias:
        count += (1 if p.broadcast_attn_bias_dim_0 else b) * (1 if p.broadcast_attn_bias_dim_1 else n) * s * t
    if p.has_past:
        count += 2 * b * n * p.past_sequence_length * h
    return count


def reference_bytes(p: MhaProblem) -> int:
    """Return the host bytes of the float64 reference: the inputs twice over, three [B, S, N, T]
    score arrays and the output twice."""
    b, s, n, t = p.batch_size, p.sequence_length, p.num_heads, p.total_sequence_length
    return 8 * (2 * input_elements(p) + 3 * b * s * n * t + 2 * b * s * n * p.v_head_size)
