"""What validating a packed operator's route costs (the hooks `attnws.kernels.budget` calls): each
stage's simulator seconds, the input elements, and the float64 reference's host bytes.

Per stage (`cost_model` for the per-item seconds): the projection and the unfused GEMMs as grid-
stride loops of dot products, the materialization one item per element moved, the softmax three
passes over each row, and the tiled attention one thread per query row in blocks of min(64, S)
rows, the blocks holding rows of a sequence of L tokens running every thread through every tile of
4 of its keys.
"""

from __future__ import annotations

from typing import Callable

from ...spec.statement import Footprint
from ...spec.problem import Op
from ...spec.packed.problem import Problem, QkvFormat
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


def tiled_seconds(p: Problem) -> float:
    """Return the seconds of a tiled attention kernel (TRT-, Flash- or MEA-style). At most T tokens
    in sequences of at most S: counted as T // S full sequences and one of the rest (the most
    thread-tiles T tokens make)."""
    rows = tile_rows(p.sequence_length)
    threads = ceil_div(p.sequence_length, rows) * rows * p.num_heads * p.batch_size

    def thread_tiles(length: int) -> int:
        return ceil_div(length, rows) * rows * ceil_div(length, TILE_KEYS)

    tokens = min(p.token_count, p.batch_size * p.sequence_length)
    full, rest = divmod(tokens, max(p.sequence_length, 1))
    work = p.num_heads * (full * thread_tiles(p.sequence_length) + thread_tiles(rest))
    return threads * THREAD_START_SECONDS + work * tile_seconds(p.qk_head_size, p.v_head_size)


def _materialize(rows: Callable[[Problem], int], parts: int = 1) -> Callable[[Problem], float]:
    return lambda p: parts * stride_seconds(rows(p) * p.num_heads * max(p.qk_head_size, p.v_head_size), 1)


def _padded_rows(p: Problem) -> int:
    return p.batch_size * p.sequence_length


def _token_rows(p: Problem) -> int:
    return p.token_count


STAGE_COST: dict[str, Callable[[Problem], float]] = {
    "projection": lambda p: stride_seconds(p.token_count * (2 * p.hidden_size + p.v_hidden_size),
                                           p.input_hidden_size),
    "materialize_qkv": _materialize(_token_rows, 3),
    "scores": lambda p: stride_seconds(p.batch_size * p.num_heads * p.sequence_length ** 2, p.qk_head_size),
    "softmax": lambda p: stride_seconds(p.batch_size * p.num_heads * p.sequence_length, 3 * p.sequence_length,
                                        SOFTMAX_INNER_SECONDS),
    "context": lambda p: stride_seconds(p.batch_size * p.num_heads * p.sequence_length * p.v_head_size,
                                        p.sequence_length),
    "transpose": lambda p: stride_seconds(p.token_count * p.num_heads * p.v_head_size, 1),
    "attention": tiled_seconds,
}


def stage_seconds(p: Problem, fp: Footprint, name: str) -> float:
    """Return the simulator seconds of one footprint stage (fixed cost included)."""
    if name.startswith("materialize_") and name != "materialize_qkv":
        rows = _padded_rows if any(s.name == "scores" for s in fp.stages) else _token_rows
        return STAGE_SECONDS + _materialize(rows)(p)
    return STAGE_SECONDS + STAGE_COST[name](p)


def input_elements(p: Problem) -> int:
    """Return the element count of the operator's inputs (token_offset and cu_seqlens included)."""
    qkv_hidden = 2 * p.hidden_size + p.v_hidden_size
    if p.op is Op.PA:
        count = p.token_count * p.input_hidden_size + p.input_hidden_size * qkv_hidden + qkv_hidden
    elif p.qkv_format is QkvFormat.PACKED:
        count = p.token_count * 3 * p.hidden_size + (qkv_hidden if p.has_bias else 0)
    else:
        count = p.token_count * qkv_hidden + (qkv_hidden if p.has_bias else 0)
    count += p.batch_size * p.sequence_length + p.batch_size + 1
    if p.has_attention_bias:
        count += ((1 if p.broadcast_attn_bias_dim_0 else p.batch_size)
                  * (1 if p.broadcast_attn_bias_dim_1 else p.num_heads) * p.sequence_length ** 2)
    return count


def reference_bytes(p: Problem) -> int:
    """Return the host bytes of the float64 reference: the inputs' float64 copies, Q, K, V twice
    over, one sequence's score matrices three times over, and the output twice."""
    return (8 * (input_elements(p) + 2 * p.token_count * (2 * p.hidden_size + p.v_hidden_size))
            + 3 * 8 * p.num_heads * p.sequence_length ** 2 + 2 * 8 * p.token_count * p.v_hidden_size)
