"""What a validation run will cost, estimated before anything is allocated or launched.

The CUDA simulator runs every CUDA thread as a Python thread and every kernel statement as Python,
so a shape's run time grows with its work: about the S^2 * N * B * (H + Hv) of attention, with
thread starts and barriers on top. `simulator_seconds` sums a cost per stage (see STAGE_COST), each
a count of work items times a per-item cost measured on tiny shapes on a 2-core machine, rounded up
(it over-predicts runs of seconds by 1.5x to 2x, tiny ones by more; tests/cli/test_validate_stream.py), plus
the allocator's sentinel fill (one Python loop iteration per root byte) and the per-stage
host <-> device copies of every root. `memory_bytes` counts the device bytes (inputs, output and
workspace roots with their guard bands) and the host bytes (the host inputs, their float64 copies
for the reference, the reference's per-sequence score matrices, and the measurement's copies of
every root: before, after, the changed-byte mask and the poison mask). Nothing here imports numba.

A shape over either limit is refused with its estimate: not run, and not a failure.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from ..spec.footprint import Footprint
from ..spec.problem import Op
from ..spec.packed.problem import Problem, QkvFormat
from .placement import Placement

GUARD_BYTES = 256  # the allocator's sentinel band on each side of a root (allocator.GUARD_BYTES)
DEFAULT_MAX_SIM_SECONDS = 60.0
DEFAULT_MEMORY_FRACTION = 4  # refuse a shape needing more than 1/4 of the machine's RAM

# Seconds, measured with the CUDA simulator on tiny shapes (B, N <= 4, S <= 128, H <= 64), rounded up.
STAGE_SECONDS = 0.15  # fixed cost of a stage: launch, one warp of thread starts, copies, diffs
THREAD_START_SECONDS = 0.2e-3  # one simulated CUDA thread of a tiled kernel that has no row to attend
STRIDE_ITEM_SECONDS = 25e-6  # one iteration of a grid-stride loop, besides its inner loop
INNER_SECONDS = 4.5e-6  # one inner-loop step (a multiply-add) of a grid-stride kernel
SOFTMAX_INNER_SECONDS = 10e-6  # one step of the softmax's three passes over a row
TILE_SECONDS = 0.8e-3  # one thread through one key tile of a tiled kernel: two barriers, a load share, and
# the per-row key limit every tiled kernel now checks (0.35e-3 and 5.5e-6 before it; raised to stay above
# the measured time: `python bench/bench_kernels.py` prints estimate / measured per route)
TILE_HEAD_SECONDS = 16e-6  # per (H + Hv) element of that thread-tile (its 4 keys' dot products)
FILL_BYTE_SECONDS = 1.2e-6  # the sentinel fill: one Python iteration per root byte
COPY_BYTE_SECONDS = 30e-9  # per root byte per stage: host <-> device copies, poison and diff
TILE_ROWS = 64  # online_softmax.BLOCK_M: query rows per block
TILE_KEYS = 4  # online_softmax.BLOCK_N: keys per shared-memory tile
MHA_TILE_FACTOR = 2  # MultiHeadAttention's tiled kernels (strided views, masks, causality) cost up to twice as much


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def stride_seconds(items: int, inner: int, inner_seconds: float = INNER_SECONDS) -> float:
    """Return the seconds of a grid-stride kernel of `items` iterations of `inner` steps each."""
    return items * (STRIDE_ITEM_SECONDS + inner * inner_seconds)


def tiled_seconds(p: Problem) -> float:
    """Return the seconds of a tiled attention kernel (TRT-, Flash- or MEA-style): one thread per
    query row in blocks of min(64, S) rows; the blocks holding rows of a sequence of L tokens run
    every thread through every tile of 4 of its keys. At most T tokens in sequences of at most S:
    counted as T // S full sequences and one of the rest (the most thread-tiles T tokens make)."""
    rows = max(1, min(TILE_ROWS, p.sequence_length))
    threads = _ceil_div(p.sequence_length, rows) * rows * p.num_heads * p.batch_size

    def thread_tiles(length: int) -> int:
        return _ceil_div(length, rows) * rows * _ceil_div(length, TILE_KEYS)

    tokens = min(p.token_count, p.batch_size * p.sequence_length)
    full, rest = divmod(tokens, max(p.sequence_length, 1))
    work = p.num_heads * (full * thread_tiles(p.sequence_length) + thread_tiles(rest))
    per_tile = TILE_SECONDS + TILE_HEAD_SECONDS * (p.qk_head_size + p.v_head_size)
    return threads * THREAD_START_SECONDS + work * per_tile


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


def root_bytes(placement: Placement) -> int:
    """Return the device bytes of every root (output and workspace), guard bands included."""
    return sum(nbytes + 2 * GUARD_BYTES for nbytes in placement.allocation_bytes.values())


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
        count += ((1 if p.broadcast_attn_bias_dim_0 else p.batch_size) * (1 if p.broadcast_attn_bias_dim_1 else p.num_heads)
                  * p.sequence_length ** 2)
    return count


@dataclass(frozen=True)
class Cost:
    """A run's estimated simulator seconds (None on a GPU), device bytes and host bytes."""

    simulator_seconds: float | None
    device_bytes: int
    host_bytes: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"simulator_seconds": None if self.simulator_seconds is None else round(self.simulator_seconds, 1),
                "device_bytes": self.device_bytes, "host_bytes": self.host_bytes}


def mha_stage_seconds(p: Any, fp: Footprint, name: str) -> float:
    """Return the simulator seconds of one MultiHeadAttention stage (fixed cost included): copies
    move their buffers' elements; the unfused stages as the packed ones with S queries over
    T = P + L keys; the tiled attention one thread per query row through every tile of T keys."""
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
    rows = max(1, min(TILE_ROWS, s))
    threads = _ceil_div(s, rows) * rows * n * b * (2 if fp.backend.value == "trt" and p.mask_rank else 1)
    per_tile = MHA_TILE_FACTOR * (TILE_SECONDS + TILE_HEAD_SECONDS * (h + hv))
    return STAGE_SECONDS + threads * (THREAD_START_SECONDS + _ceil_div(t, TILE_KEYS) * per_tile)


def mha_input_elements(p: Any) -> int:
    """Return the element count of a MultiHeadAttention problem's inputs."""
    b, s, l, n, h, hv, t = (p.batch_size, p.sequence_length, p.kv_sequence_length, p.num_heads, p.qk_head_size,
                            p.v_head_size, p.total_sequence_length)
    count = b * s * n * h + b * l * n * (h + hv) + (2 * n * h + n * hv if p.has_bias else 0)
    count += {0: 0, 1: 3 * b + 2, 2: b * t, 3: b * s * t}[p.mask_rank]
    if p.has_attention_bias:
        count += (1 if p.broadcast_attn_bias_dim_0 else b) * (1 if p.broadcast_attn_bias_dim_1 else n) * s * t
    if p.has_past:
        count += 2 * b * n * p.past_sequence_length * h
    return count


def run_cost(p: Problem, fp: Footprint, placement: Placement, simulator: bool) -> Cost:
    """Return the estimated cost of validating the placed route (see the module docstring)."""
    if p.op is Op.MHA:
        return mha_run_cost(p, fp, placement, simulator)
    inputs = input_elements(p)
    reference = (8 * (inputs + 2 * p.token_count * (2 * p.hidden_size + p.v_hidden_size))
                 + 3 * 8 * p.num_heads * p.sequence_length ** 2 + 2 * 8 * p.token_count * p.v_hidden_size)
    return assemble_cost(p, fp, placement, simulator, inputs, reference, stage_seconds)


def assemble_cost(p: Any, fp: Footprint, placement: Placement, simulator: bool, inputs: int, reference: int,
                  stage_cost: Callable[[Any, Footprint, str], float]) -> Cost:
    """Return the cost of a run from its input elements and float64 reference bytes: device bytes
    (the roots and the inputs), host bytes (copies, inputs, reference; the simulator's device
    memory too) and, on the simulator, the stages' seconds plus the roots' fill, copies and diffs."""
    roots = root_bytes(placement)
    device = roots + inputs * max(p.element_size, 4)
    host = 4 * roots + inputs * p.element_size + reference + (device if simulator else 0)
    seconds = None
    if simulator:
        seconds = (sum(stage_cost(p, fp, stage.name) for stage in fp.stages)
                   + roots * (FILL_BYTE_SECONDS + COPY_BYTE_SECONDS * len(fp.stages)))
    return Cost(seconds, device, host)


def physical_memory_bytes() -> int | None:
    """Return the machine's RAM in bytes, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def default_max_memory_bytes() -> int:
    """Return the default memory limit of one shape: a quarter of the machine's RAM (4 GiB when unknown)."""
    total = physical_memory_bytes()
    return (total if total else 16 * 2**30) // DEFAULT_MEMORY_FRACTION


@dataclass(frozen=True)
class RunLimits:
    """The most a shape may cost: simulator seconds (None: no limit) and bytes of host or device memory."""

    max_sim_seconds: float | None = DEFAULT_MAX_SIM_SECONDS
    max_memory_bytes: int | None = None

    def refusal(self, cost: Cost) -> str:
        """Return why a run of this cost is refused, or '' when it fits."""
        from ..spec.units import format_bytes

        memory = max(cost.device_bytes, cost.host_bytes)
        if self.max_memory_bytes is not None and memory > self.max_memory_bytes:
            where = "host" if cost.host_bytes >= cost.device_bytes else "device"
            return (f"too large for this machine's memory: needs about {format_bytes(memory)} of {where} memory, "
                    f"over --max-memory-bytes {format_bytes(self.max_memory_bytes)}: run on a larger machine "
                    f"or shrink the shape")
        if (self.max_sim_seconds is not None and cost.simulator_seconds is not None
                and cost.simulator_seconds > self.max_sim_seconds):
            return (f"too large for the simulator: about {cost.simulator_seconds:,.0f} s estimated, over "
                    f"--max-sim-seconds {self.max_sim_seconds:g}: run on a GPU or shrink the shape")
        return ""


def mha_run_cost(p: Any, fp: Footprint, placement: Placement, simulator: bool) -> Cost:
    """Return the estimated cost of validating a MultiHeadAttention route: as `run_cost`, with its
    inputs and a reference of B * S rows over T keys."""
    inputs = mha_input_elements(p)
    b, s, n, t = p.batch_size, p.sequence_length, p.num_heads, p.total_sequence_length
    reference = 8 * (2 * inputs + 3 * b * s * n * t + 2 * b * s * n * p.v_head_size)
    return assemble_cost(p, fp, placement, simulator, inputs, reference, mha_stage_seconds)
