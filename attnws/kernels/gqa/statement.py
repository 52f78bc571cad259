"""GroupQueryAttention's route in the shared footprint vocabulary, laid on its complete recipe.

`attnws.spec.gqa.footprint` states what the route's kernels touch as `Touch`es, each in a recipe
region, from ORT's kernel sources; `attnws.spec.gqa.recipe.complete` says where the regions are.
Here every touch with bytes, of the preparation and of the backend, becomes a `Buffer` of the
workspace allocation ("attention") named after its region, placed at its region's offset (the
backend's offset by the backend root) plus the touch's start; the output [B, S, N, H] is its own
allocation. Elements are float32 in the Flash and MEA float32 regions and the unfused scores,
int32 in `sequence_lengths`, the element type (2 bytes) elsewhere.

The launch sequence becomes `Stage`s, the preparation's first (`preparation_stages`):
`GetSequenceLengths` (when its touch has bytes), `CompactKvCacheRows` (a windowed cache's decode
step), `UnpackRoPEAppend (Q)` into the Q scratch (rotary or packed QKV), then the new K / V rows
into the cache: `UnpackRoPEAppend (K, V)`, or, staging a windowed cache, `CopyKvCacheRows and
UnpackRoPEAppend (K, V)` into the staged regions (one stage: both write the staged rows), or, on
Flash's fast decode, `Append_KV` (the split kernel's own append, run as its own stage here). Then
the backend's (`backend_stages`):

- Flash, one split: `attention` writes `softmax_lse` and the output; splits > 1: `split_kv` writes
  the LSE and output accumulators, `combine` reads them and writes `softmax_lse` (whole combine
  tiles) and the output;
- MEA: `Ungroup (K)`, `Ungroup (V)` (N != Nk) into the expanded regions, then
  `cutlass fmha (accumulator)` writes the float32 accumulator (H > 128) and the output;
- unfused: `Transpose_BSNH_to_BNSH`, `QK GEMM`, `UnfusedSoftmaxKernel`, `AV GEMM`,
  `Transpose_BNSH_to_BSNH`, each writing one region (the last the output).

Each attention stage reads the key lengths from `sequence_lengths` (not on fast decode), the
query from the Q scratch when it is used and the staged regions when staging.

What a writer legitimately leaves unwritten of its extent (`unwritten`): Flash's output
accumulator, all but H columns of each of its splits * B * N * S rows; the staged regions, the
rows past max(C, cache_past_b + S) of each batch entry's C + S (the seed copies rows below C, the
append rows cache_past_b .. cache_past_b + S - 1); the compaction scratch, all but the
cache_past_b retained rows of both halves for each batch entry that evicts. The last two depend
on the key lengths drawn (`lengths`), through the windowed cache's row counts (`WindowRows`).

A buffer is outside its region when it ends past the room its region has: up to the next
non-empty region of the allocation, or its end. Bytes throughout, offsets from the start of the
allocation's payload.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from ...spec.domain import CONCRETE
from ...spec.errors import InternalError
from ...spec.gqa import footprint as gqa_footprint
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Complete, Route
from ...spec.layout import View
from ...spec.problem import Backend
from ...spec.statement import ATTENTION, FLOAT32_BYTES, OUTPUT, Buffer, Footprint, Stage
from ..placement import PlacedBuffer, Placement
from .xqa_route import xqa_geometry

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
# XQA's kernel touches its region from the semaphores through the partial outputs; past the
# semaphores (which it leaves as the memset left them) that span is its multi-block scratch.
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


@dataclass(frozen=True)
class GqaStatement:
    """The route's footprint on its recipe: `placement` (buffers and allocation bytes), the split
    count the kernels run and the buffers outside their regions' room; `not_run`, ORT's launches
    this harness does not run; `untouched`, the recipe's non-empty regions no kernel touches
    (name, bytes), and `spare_bytes`, the workspace bytes no footprint buffer covers (alignment
    gaps, over-reserved regions): what the recipe reserves beyond the footprint."""

    placement: Placement
    splits: int
    not_run: tuple[str, ...]
    outside_regions: tuple[str, ...]
    untouched: tuple[tuple[str, int], ...] = ()
    spare_bytes: int = 0


def covered_bytes(spans: list[tuple[int, int]]) -> int:
    """Return the bytes the union of [start, end) spans covers."""
    covered, reach = 0, 0
    for start, end in sorted(spans):
        covered += max(end - max(start, reach), 0)
        reach = max(reach, end)
    return covered


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


def xqa_scratch(touches: list[gqa_footprint.Touch]) -> list[gqa_footprint.Touch]:
    """Return the touches with XQA's kernel touch (from the semaphores `through` the partials)
    cut to its multi-block scratch: from the semaphores' end aligned to the footprint's 128 bytes
    on (nothing when the launch has one subsequence per sequence)."""
    semaphores = next((t.nbytes for t in touches if t.region == SEMAPHORES and not t.through), 0)
    start = -(-semaphores // gqa_footprint.XQA_SEMAPHORE_ALIGNMENT) * gqa_footprint.XQA_SEMAPHORE_ALIGNMENT
    return [replace(t, start=t.start + start, nbytes=max(t.nbytes - start, 0)) if t.through else t for t in touches]


def xqa_unwritten_bytes(p: GqaProblem, route: Route, extent: int) -> int:
    """Return the bytes of XQA's multi-block scratch its kernel leaves unwritten: all but the row
    max / sum records and the partial outputs of its carving (the gap aligning the partials)."""
    _, layout = xqa_geometry(p, route.sm_count)
    return extent - (layout.records_end - layout.row_max) - (layout.end - layout.partials)


def room_end(offset: int, starts: list[int], total: int) -> int:
    """Return where the room of a region starting at `offset` ends: the next region start, or the total."""
    return min((start for start in starts if start > offset), default=total)


def gqa_statement(p: GqaProblem, route: Route, run: Complete, lengths: Sequence[int]) -> GqaStatement:
    """Return the route's footprint laid on `run`, its complete recipe (module docstring).

    `run.backend.splits` is the split count the kernels run (the recipe's heuristic); `lengths`
    the key lengths L_b of the inputs."""
    splits = int(run.backend.splits)
    wp = p.workspace_problem(CONCRETE)
    prep_touches, backend_touches = gqa_footprint.footprint(wp, route, run.preparation, splits, CONCRETE)
    regions: dict[str, tuple[int, View]] = {v.name: (0, v) for v in run.preparation.regions}
    regions.update({v.name: (run.backend_offset_bytes, v) for v in run.backend.regions})
    starts = [base + v.offset for base, v in regions.values() if v.nbytes > 0]
    total = run.total_workspace_bytes
    output = Buffer(OUTPUT, OUTPUT, OUTPUT, ELEMENT_BYTES,
                    p.batch_size * p.sequence_length * p.num_heads * p.head_size, ELEMENT_BYTES)
    placed = [PlacedBuffer(output, 0, output.nbytes())]
    unplaced, outside = [], []
    touches = [t for t in xqa_scratch(prep_touches + backend_touches) if t.nbytes > 0]
    for touch in touches:
        name = XQA_SCRATCH if touch.through else touch.region
        # XQA's scratch holds float32 records and fp16 partials: counted in 2-byte elements.
        size = ELEMENT_BYTES if touch.through else FLOAT32_BYTES if touch.region in FOUR_BYTE_REGIONS else ELEMENT_BYTES
        elements = touch.nbytes // size
        unwritten = (xqa_unwritten_bytes(p, route, touch.nbytes) // size if touch.through else
                     unwritten_elements(p, route.backend, touch.region, elements, splits, lengths))
        buffer = Buffer(name, ATTENTION, touch.region, size, elements, size, unwritten, touch.writer)
        base, view = regions[touch.region]
        if view.nbytes == 0:
            unplaced.append(name)
            continue
        offset = base + view.offset + touch.start
        last = regions[touch.through][1] if touch.through else view
        end = room_end(base + last.offset, starts, total)
        placed.append(PlacedBuffer(buffer, offset, end - offset))
        if offset + buffer.nbytes() > end:
            outside.append(name)
    touched = {t.region if not t.through else XQA_SCRATCH for t in touches}
    stages = tuple(preparation_stages(p, route, touched) + backend_stages(p, route, splits, touched))
    staged = {name for stage in stages for name in stage.reads + stage.writes}
    if touched - staged:
        raise InternalError(f"the footprint's {sorted(touched - staged)} are in no stage of {route.backend.value}")
    # GroupQueryAttention has no `Op` member until the family registers: the statement names none.
    fp = Footprint(None, route.backend, False, tuple(b.buffer for b in placed), stages, (), (),
                   ((OUTPUT, output.nbytes()), (ATTENTION, total)))
    placement = Placement(fp, {OUTPUT: output.nbytes(), ATTENTION: total}, tuple(placed), tuple(unplaced))
    spans = [(b.offset, b.end) for b in placed if b.allocation == ATTENTION and b.nbytes]
    untouched = tuple((name, view.nbytes) for name, (base, view) in regions.items() if view.nbytes > 0 and not any(
        start < base + view.offset + view.nbytes and base + view.offset < end for start, end in spans))
    spare = total - covered_bytes([(start, min(end, total)) for start, end in spans])
    return GqaStatement(placement, splits, WRITE_BACK if staging(p) else (), tuple(outside), untouched, spare)
