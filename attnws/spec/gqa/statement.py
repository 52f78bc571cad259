"""GroupQueryAttention's footprint in the shared statement vocabulary (`attnws.spec.statement`):
the route's buffers and launch stages, for the kernels to be measured against and the recipes
to be checked against.

`footprint` states what each kernel touches as `Touch`es in recipe regions; here every touch
with bytes becomes a `Buffer` of the workspace allocation ("attention") named after its region
and placed at it (`placed_at`, from `start` bytes in), the output [B, S, N, H] a buffer of its own
allocation. Elements are float32 in the Flash and MEA float32 regions and the unfused scores,
int32 in `sequence_lengths`, the element type (2 bytes) elsewhere. XQA's kernel carves one
scratch from the semaphores through the partial outputs (`through`); past the semaphores (which
it leaves as the memset left them) that span is the buffer `xqa_scratch`.

The launch sequence becomes `Stage`s, the preparation's first (`preparation_stages`):
`GetSequenceLengths` (when its touch has bytes), `CompactKvCacheRows` (a windowed cache's decode
step), `UnpackRoPEAppend (Q)` into the Q scratch (rotary or packed QKV), then the new K / V rows
into the cache: `UnpackRoPEAppend (K, V)`, or, staging a windowed cache, `CopyKvCacheRows and
UnpackRoPEAppend (K, V)` into the staged regions (one stage: both write the staged rows), or, on
Flash's fast decode, `Append_KV` (the split kernel's own append, a stage of its own). Then the
backend's (`backend_stages`):

- Flash, one split: `attention` writes `softmax_lse` and the output; splits > 1: `split_kv` writes
  the LSE and output accumulators, `combine` reads them and writes `softmax_lse` (whole combine
  tiles) and the output;
- MEA: `Ungroup (K)`, `Ungroup (V)` (N != Nk) into the expanded regions, then
  `cutlass fmha (accumulator)` writes the float32 accumulator (H > 128) and the output;
- unfused: `Transpose_BSNH_to_BNSH`, `QK GEMM`, `UnfusedSoftmaxKernel`, `AV GEMM`,
  `Transpose_BNSH_to_BSNH`, each writing one region (the last the output);
- XQA: `xqa (memset)` zeroes the semaphores, `kernel_mha multi-block epilogue` writes the scratch
  and the output.

Each attention stage reads the key lengths from `sequence_lengths` (not on fast decode), the
query from the Q scratch when it is used and the staged regions when staging.

What a writer legitimately leaves unwritten of its extent (`unwritten`): Flash's output
accumulator, all but H columns of each of its splits * B * N * S rows; XQA's scratch, the gap
aligning its partial outputs after the row max / sum records; the staged regions, the rows past
max(C, cache_past_b + S) of each batch entry's C + S (the seed copies rows below C, the append
rows cache_past_b .. cache_past_b + S - 1); the compaction scratch, all but the cache_past_b
retained rows of both halves for each batch entry that evicts. The last two depend on the key
lengths L_b of the batch entries (`WindowRows`). Counts are elements, sizes bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ..domain import CONCRETE
from ..errors import InternalError
from ..problem import Backend
from ..statement import ATTENTION, FLOAT32_BYTES, OUTPUT, Buffer, Footprint, Stage
from . import footprint as touches_of
from .problem import GqaProblem
from .recipe import Complete, Route

ELEMENT_BYTES = 2  # GroupQueryAttention runs fp16 / bf16 only
SEQUENCE_LENGTHS = "sequence_lengths"
Q_SCRATCH = "qkv_preprocess"
STAGED = ("staged_key", "staged_value")
COMPACTION = "compaction"
SOFTMAX_LSE = "softmax_lse"
LSE_ACCUMULATOR = "softmax_lse_accumulator"
OUTPUT_ACCUMULATOR = "output_accumulator"
EXPANDED = ("expanded_key", "expanded_value")
Q_BNSH, SCORES, SOFTMAX, Y_BNSH = "q_bnsh", "scores", "softmax", "y_bnsh"
SEMAPHORES = "semaphores"
XQA_SCRATCH = "xqa_scratch"
# ORT's last staging launch: it reads the staged regions and writes only the present cache.
WRITE_BACK = ("CopyKvCacheRows (write back): the staged rows into the present cache, no workspace bytes written",)
# 4-byte elements: float32, and the int32 sequence-length vectors.
FOUR_BYTE_REGIONS = (SOFTMAX_LSE, LSE_ACCUMULATOR, OUTPUT_ACCUMULATOR, SCORES, SEQUENCE_LENGTHS, SEMAPHORES)


@dataclass(frozen=True)
class WindowRows:
    """A windowed cache's rows for one batch entry of `past` earlier tokens, S new ones, capacity
    C (GetSequenceLengths with the capacity in use C + S while staging, C at S == 1): `evicted`
    the rows compaction shifts out, `cache_past` the row the append starts at (the rows
    compaction keeps). The cache holds min(past, C) earlier rows."""

    evicted: int
    cache_past: int

    @classmethod
    def of(cls, past: int, seq: int, capacity: int) -> "WindowRows":
        """Return the rows for `past` earlier tokens (counts of rows)."""
        resident = min(past, capacity)
        if seq > 1:
            return cls(max(resident + seq - capacity, 0), resident)
        evicted = int(past >= capacity)
        return cls(evicted, resident - evicted)


def window_rows(p: GqaProblem, lengths: Sequence[int]) -> list[WindowRows]:
    """Return each batch entry's windowed rows for key lengths L_b (past = L_b - S)."""
    c = p.present_capacity(CONCRETE)
    return [WindowRows.of(length - p.sequence_length, p.sequence_length, c) for length in lengths]


def staging(p: GqaProblem) -> bool:
    """Return whether the step stages a windowed cache (S > 1): the attention runs on C + S rows."""
    return p.sliding_window_cache and p.sequence_length > 1


def preparation_stages(p: GqaProblem, route: Route, touched: set[str]) -> list[Stage]:
    """Return the preparation's stages for the regions with bytes (module docstring)."""
    stages = []
    lengths = (SEQUENCE_LENGTHS,) if SEQUENCE_LENGTHS in touched else ()
    if lengths:
        stages.append(Stage("GetSequenceLengths", (), lengths))
    if COMPACTION in touched:
        stages.append(Stage("CompactKvCacheRows", lengths, (COMPACTION,)))
    if Q_SCRATCH in touched:
        stages.append(Stage("UnpackRoPEAppend (Q)", lengths, (Q_SCRATCH,)))
    if staging(p):
        stages.append(Stage("CopyKvCacheRows and UnpackRoPEAppend (K, V)", lengths, STAGED))
    elif route.fast_decode:
        stages.append(Stage("Append_KV", (), ()))
    else:
        stages.append(Stage("UnpackRoPEAppend (K, V)", lengths, ()))
    return stages


def attention_reads(p: GqaProblem, route: Route, touched: set[str]) -> tuple[str, ...]:
    """Return the preparation's buffers an attention stage reads: key lengths, Q scratch, staged K / V."""
    reads = () if route.fast_decode else (SEQUENCE_LENGTHS,)
    reads += (Q_SCRATCH,) if Q_SCRATCH in touched else ()
    return reads + (STAGED if staging(p) else ())


def backend_stages(p: GqaProblem, route: Route, splits: int, touched: set[str]) -> list[Stage]:
    """Return the backend's stages (module docstring)."""
    reads = attention_reads(p, route, touched)
    if route.backend is Backend.FLASH:
        if splits == 1:
            return [Stage("attention", reads, (SOFTMAX_LSE, OUTPUT))]
        return [Stage("split_kv", reads, (LSE_ACCUMULATOR, OUTPUT_ACCUMULATOR)),
                Stage("combine", (LSE_ACCUMULATOR, OUTPUT_ACCUMULATOR), (SOFTMAX_LSE, OUTPUT))]
    if route.backend is Backend.MEA:
        expanded = tuple(name for name in EXPANDED if name in touched)
        ungroup = [Stage(f"Ungroup ({part})", reads, (name,)) for part, name in zip("KV", expanded)]
        accumulator = (OUTPUT_ACCUMULATOR,) if OUTPUT_ACCUMULATOR in touched else ()
        return ungroup + [Stage("cutlass fmha (accumulator)", reads + expanded, accumulator + (OUTPUT,))]
    if route.backend is Backend.UNFUSED:
        return [Stage("Transpose_BSNH_to_BNSH", reads, (Q_BNSH,)), Stage("QK GEMM", (Q_BNSH, *reads), (SCORES,)),
                Stage("UnfusedSoftmaxKernel", (SCORES, *reads), (SOFTMAX,)),
                Stage("AV GEMM", (SOFTMAX, *reads), (Y_BNSH,)), Stage("Transpose_BNSH_to_BSNH", (Y_BNSH,), (OUTPUT,))]
    if route.backend is Backend.XQA:
        scratch = (XQA_SCRATCH,) if XQA_SCRATCH in touched else ()
        return [Stage("xqa (memset)", (), (SEMAPHORES,)),
                Stage("kernel_mha multi-block epilogue", reads + (SEMAPHORES,), scratch + (OUTPUT,))]
    raise InternalError(f"route={route.backend.value} has no stages here")


def unwritten_elements(p: GqaProblem, backend: Backend, region: str, elements: int, splits: int,
                       lengths: Sequence[int]) -> int:
    """Return the elements of a touch's extent its writers legitimately leave unwritten (module docstring)."""
    h, nk = p.head_size, p.kv_num_heads
    if region == OUTPUT_ACCUMULATOR and backend is Backend.FLASH:
        return elements - splits * p.batch_size * p.num_heads * p.sequence_length * h
    c, s = p.present_capacity(CONCRETE), p.sequence_length
    if region in STAGED:
        return sum(c + s - max(c, rows.cache_past + s) for rows in window_rows(p, lengths)) * nk * h
    if region == COMPACTION:
        return elements - 2 * sum(rows.cache_past for rows in window_rows(p, lengths) if rows.evicted) * nk * h
    return 0


def xqa_scratch(touches: list[touches_of.Touch]) -> list[touches_of.Touch]:
    """Return the touches with XQA's kernel touch (from the semaphores `through` the partials)
    cut to its multi-block scratch: from the semaphores' end aligned to the footprint's 128 bytes
    on (nothing when the launch has one subsequence per sequence)."""
    semaphores = next((t.nbytes for t in touches if t.region == SEMAPHORES and not t.through), 0)
    alignment = touches_of.XQA_SEMAPHORE_ALIGNMENT
    start = -(-semaphores // alignment) * alignment
    return [replace(t, start=t.start + start, nbytes=max(t.nbytes - start, 0)) if t.through else t for t in touches]


def _buffer(p: GqaProblem, route: Route, touch: touches_of.Touch, splits: int, lengths: Sequence[int]) -> Buffer:
    """The touch as a buffer of the workspace (module docstring)."""
    if touch.through:
        # XQA's scratch holds float32 records and fp16 partials: counted in 2-byte elements.
        gap = touches_of.xqa_scratch_gap(CONCRETE, p.workspace_problem(CONCRETE), route.sm_count)
        return Buffer(XQA_SCRATCH, ATTENTION, touch.region, ELEMENT_BYTES, touch.nbytes // ELEMENT_BYTES, ELEMENT_BYTES,
                      gap // ELEMENT_BYTES, touch.writer, touch.start, touch.through)
    size = FLOAT32_BYTES if touch.region in FOUR_BYTE_REGIONS else ELEMENT_BYTES
    elements = touch.nbytes // size
    unwritten = unwritten_elements(p, route.backend, touch.region, elements, splits, lengths)
    return Buffer(touch.region, ATTENTION, touch.region, size, elements, size, unwritten, touch.writer, touch.start)


def statement(p: GqaProblem, route: Route, run: Complete, lengths: Sequence[int] | None = None) -> Footprint:
    """Return what the route's kernels touch (module docstring), with the split count the recipe
    `run` gives (the kernels run the recipe's heuristic). `lengths`: each batch entry's key
    length L_b (default: every entry at T)."""
    lengths = [p.total_sequence_length] * p.batch_size if lengths is None else lengths
    splits = int(run.backend.splits)
    prep, backend = touches_of.footprint(p.workspace_problem(CONCRETE), route, run.preparation, splits, CONCRETE)
    buffers = [_buffer(p, route, t, splits, lengths) for t in xqa_scratch(prep + backend) if t.nbytes > 0]
    touched = {b.name for b in buffers}
    stages = tuple(preparation_stages(p, route, touched) + backend_stages(p, route, splits, touched))
    staged = {name for stage in stages for name in stage.reads + stage.writes}
    if touched - staged:
        raise InternalError(f"the footprint's {sorted(touched - staged)} are in no stage of {route.backend.value}")
    output = Buffer(OUTPUT, OUTPUT, OUTPUT, ELEMENT_BYTES,
                    p.batch_size * p.sequence_length * p.num_heads * p.head_size, ELEMENT_BYTES)
    # GroupQueryAttention has no `Op` member until the family registers: the statement names none.
    return Footprint(None, route.backend, False, (output, *buffers), stages, (), (), ((OUTPUT, output.nbytes()),))
