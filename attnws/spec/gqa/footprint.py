"""What GroupQueryAttention's kernels touch in the workspace, stated from ORT's kernel and launch
sources, never from the recipes (`docs/research/gqa-footprint.md`: every formula with its file,
version and the binary evidence placing it at 1.31.1).

`touches(p, route, prep, splits, d)` lists, for the route ORT runs, each buffer a kernel writes or reads:
which recipe region it lives in (the launch points the kernel there), its first byte relative
to that region, and its extent in bytes. A contract holds when every buffer lies inside the room
its region has before the next region starts (or the allocation ends): a kernel writing past
its region into an alignment gap harms nothing, one that reaches the next region or the end
does. Bytes throughout; e = 2 (fp16 / bf16).

The Flash row stride is the kernels': `mha_fwd_kvcache` (every unquantized GQA Flash path and the
quantized decode) passes d_rounded = round32(H) for H <= 192, else 256 (binary 0x7bc770);
`mha_fwd` (the quantized prompt) passes round32(H); the kernels' tile row stride is their head
dim, the least of 32, 64, 96, 128, 192, 256 not below H (the 160 and 224 kernels are not in the
1.31.1 binary). Where the two differ the split and combine kernels step inconsistently: the
extents below are the largest addresses they reach.

The statement (`statement`) turns the touches into the shared vocabulary (`attnws.spec.statement`):

GroupQueryAttention's footprint in the shared statement vocabulary (`attnws.spec.statement`):
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
from typing import Any, Sequence

from ..domain import CONCRETE
from ..errors import InternalError
from ..problem import Backend, Op
from ..statement import ATTENTION, FLOAT32_BYTES, OUTPUT, Buffer, Footprint, Stage
from .problem import GqaProblem, GqaWorkspaceProblem, KvQuantization
from .recipe import Complete, Preparation, Route, complete, effective_kv_length, route_of

FLASH_HEAD_DIMS = (32, 64, 96, 128, 192, 256)  # the split-KV kernels' head dims in the 1.31.1 binary
SPLIT_BLOCK_ROWS = 64  # kBlockM of the split kernels
FLOAT = 4
ELEMENT = 2
XQA_CTA_KEYS = 256  # ctaTile.x = 64 * 4: keys per XQA subsequence
XQA_ROW_BYTES = 128  # one SMemWarpRowMax / row sum record per subsequence
XQA_SEMAPHORE_ALIGNMENT = 128


@dataclass(frozen=True)
class Touch:
    """One buffer a kernel touches: in recipe region `region` (of the preparation or the backend),
    from `start` bytes into it, `nbytes` long. `writer` names the kernel."""

    region: str
    start: Any
    nbytes: Any
    writer: str
    through: str = ""  # the kernel's own layout spans the recipe's views up to this one's end


def kernel_head_dim(head_size: int) -> int:
    """The split-KV kernels' head dim for H: the least compiled one not below H."""
    return next(k for k in FLASH_HEAD_DIMS if k >= head_size)


def combine_block_rows(head_dim: int) -> int:
    """The combine kernel's kBlockM: 4 when the head dim is a multiple of 128, 8 of 64, else 16."""
    return 4 if head_dim % 128 == 0 else 8 if head_dim % 64 == 0 else 16


def row_stride(head_size: int, kvcache_api: bool) -> int:
    """params.d_rounded: round32(H), or 256 above 192 through mha_fwd_kvcache."""
    rounded = -(-head_size // 32) * 32
    return 256 if kvcache_api and head_size > 192 else rounded


def _tiled_end(d: Any, rows: Any, tile: int, stride: int, head_dim: int) -> Any:
    """The largest (tile start) * stride + (row in tile) * head_dim over rows 0..rows-1 (a row r sits
    at (r - r mod tile) * stride + (r mod tile) * head_dim): the last row, or the last row of the
    tile before it, whichever is further."""
    last = rows - 1
    base = d.mul(d.div(last, tile), tile, what="tile base")
    at_last = d.add(d.mul(base, stride, what="tile offset"), d.mul(last - base, head_dim, what="row"), what="end")
    if head_dim <= stride:
        return at_last
    before = d.ite(base > 0, lambda: d.add(d.mul(base - tile, stride, what="tile offset"),
                                           (tile - 1) * head_dim, what="end"), 0)
    return d.max_(at_last, before)


def flash_touches(d: Any, p: GqaWorkspaceProblem, splits: Any, kvcache_api: bool) -> list[Touch]:
    """Flash's LSE, and with splits > 1 its LSE and output accumulators as the split and combine
    kernels address them (N query heads in every path)."""
    h = p.head_size
    if not isinstance(h, int):
        raise TypeError("Flash's footprint needs a concrete head size")
    head_dim, stride = kernel_head_dim(h), row_stride(h, kvcache_api)
    rows = d.mul(p.batch_size, p.num_heads, p.sequence_length, what="B * N * S")
    k = combine_block_rows(head_dim)
    no_split = [Touch("softmax_lse", 0, d.mul(FLOAT, rows, what="LSE"), "flash_fwd (non-split LSE)")]

    def split() -> list[Touch]:
        lse = d.mul(FLOAT, d.mul(d.div(rows + k - 1, k), k, what="combine tiles"), what="combined LSE")
        slabs = d.mul(splits, rows, what="splits * B * N * S")
        written = d.add(d.mul(d.mul(splits, p.batch_size, p.num_heads, what="slabs") - 1, p.sequence_length,
                              stride, what="slab base"),
                        _tiled_end(d, p.sequence_length, SPLIT_BLOCK_ROWS, stride, head_dim), what="split rows")
        read = d.add(d.mul(splits - 1, rows, stride, what="split base"), _tiled_end(d, rows, k, stride, head_dim),
                     what="combine rows")
        return [Touch("softmax_lse", 0, lse, "combine (LSE tiles)"),
                Touch("softmax_lse_accumulator", 0, d.mul(FLOAT, slabs, what="LSE accumulator"), "flash_fwd_splitkv"),
                Touch("output_accumulator", 0, d.mul(FLOAT, d.add(d.max_(written, read), h, what="out end"),
                                                     what="out_accum"), "flash_fwd_splitkv and combine")]
    if isinstance(splits, int):
        return split() if splits > 1 else no_split
    return choose(d, splits > 1, split(), no_split)


def choose(d: Any, cond: Any, then: list[Touch], other: list[Touch]) -> list[Touch]:
    """The touches of one of two layouts, chosen by a (symbolic) condition, region by region: a
    region only one layout touches is untouched (0 bytes) in the other."""
    first = {(t.region, t.through): t for t in then}
    second = {(t.region, t.through): t for t in other}
    out = []
    for key in dict.fromkeys([*first, *second]):
        a, b = first.get(key), second.get(key)
        writer = (a or b).writer
        out.append(Touch(key[0], d.ite(cond, a.start if a else 0, b.start if b else 0),
                         d.ite(cond, a.nbytes if a else 0, b.nbytes if b else 0), writer, key[1]))
    return out


def preparation_touches(d: Any, p: GqaWorkspaceProblem, backend: Backend, fast_decode: Any,
                        prep: Preparation) -> list[Touch]:
    """Staging, compaction, the sequence-length vectors and the Q scratch the route's kernels use."""
    b, s, n, nk, h = p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    row = d.mul(h, p.cache_element_size, what="row") if p.kv_cache_bit_width == 0 else \
        d.div(d.mul(h, p.kv_cache_bit_width, what="row bits"), 8)
    c = p.present_kv_cache_capacity
    out: list[Touch] = []
    if p.is_windowed_kv_cache:
        staged = d.mul(b, nk, c + s, row, what="staged rows B * Nk * (C + S) * row")
        out.append(Touch("staged_key", 0, d.ite(s == 1, 0, staged), "CopyKvCacheRows (K)"))
        out.append(Touch("staged_value", 0, d.ite(s == 1, 0, staged), "CopyKvCacheRows (V)"))
        half = d.mul(b, nk, c, row, what="compaction half")
        out.append(Touch("compaction", 0, d.ite(s == 1, d.mul(2, half, what="K and V"), 0), "CompactKvCacheRows"))
    vectors = 6 if p.is_windowed_kv_cache else d.ite(d.all_(fast_decode, s == 1), 0, 3)
    out.append(Touch("sequence_lengths", 0, d.mul(vectors, b, FLOAT, what="int32 vectors"), "GetSequenceLengths"))
    q = d.mul(ELEMENT, b, s, n, h, what="Q [B, S, N, H]")
    reshaped = p.do_rotary or p.is_packed_qkv or p.use_qk_norm
    if p.quantized and backend is Backend.FLASH:
        kv_prompt = d.mul(2, ELEMENT, b, s, nk, h, what="K and V [B, S, Nk, H]")
        kv_decode = d.mul(2, ELEMENT, b, prep.effective_kv_cache_capacity, nk, h, what="dequantized K and V")
        out.append(Touch("qkv_preprocess", 0, d.add(q, d.ite(p.is_first_prompt, kv_prompt, kv_decode), what="Q+KV"),
                         "UnpackRoPEAppend and DequantizeKV"))
    elif backend is Backend.XQA:
        per_channel = p.k_quantization is KvQuantization.PER_CHANNEL
        out.append(Touch("qkv_preprocess", 0, q if reshaped or per_channel else 0, "UnpackRoPEAppend (XQA Q)"))
    else:
        out.append(Touch("qkv_preprocess", 0, d.ite(fast_decode, 0, q if reshaped else 0), "UnpackRoPEAppend (Q)"))
    return out


@dataclass(frozen=True)
class XqaCarving:
    """XQA's launch carving of its region (bytes from the semaphores' first byte): `per` subsequences
    per sequence, `start` the scratch base past the semaphores, `records` the row max and sum
    records' bytes, `partials` where the partial outputs start past `start`, `end` the scratch's
    end past `start` when it is used (per > 1)."""

    semaphores: Any
    per: Any
    start: Any
    records: Any
    partials: Any
    end: Any


def xqa_carving(d: Any, p: GqaWorkspaceProblem, sm_count: int) -> XqaCarving:
    """XQA's carving for the launch on `sm_count` SMs (the partials aligned to 2 * G * H bytes)."""
    sequences = d.mul(p.batch_size, p.kv_num_heads, what="B * Nk")
    per = d.min_(d.max_(1, d.div(sm_count, sequences)), d.div(p.present_kv_cache_capacity + XQA_CTA_KEYS - 1,
                                                                 XQA_CTA_KEYS))
    n = d.mul(sequences, per, what="subsequences")
    partial = d.mul(2, d.div(p.num_heads, p.kv_num_heads), p.head_size, what="2 * G * H")
    semaphores = d.mul(FLOAT, sequences, what="semaphores")
    start = d.align_up(semaphores, XQA_SEMAPHORE_ALIGNMENT, what="scratch base")
    records = d.mul(2 * XQA_ROW_BYTES, n, what="row max and sum")
    partials = d.mul(d.div(records + partial - 1, partial), partial, what="partials start")
    return XqaCarving(semaphores, per, start, records, partials, d.add(partials, d.mul(partial, n, what="partials"),
                                                                      what="multi-block end"))


def xqa_touches(d: Any, p: GqaWorkspaceProblem, sm_count: int) -> list[Touch]:
    """XQA's semaphores and, with several subsequences per sequence, its multi-block scratch, as
    the launch carves it; the whole scratch is one region (its segments align to themselves)."""
    c = xqa_carving(d, p, sm_count)
    scratch_end = d.add(c.start, d.ite(c.per > 1, c.end, 0), what="scratch end")
    return [Touch("semaphores", 0, c.semaphores, "xqa (memset)"),
            Touch("semaphores", 0, scratch_end, "kernel_mha multi-block epilogue", through="output_accumulator")]


def xqa_scratch_gap(d: Any, p: GqaWorkspaceProblem, sm_count: int) -> Any:
    """The bytes of XQA's multi-block scratch its kernel never writes: the gap aligning the partial
    outputs after the records (0 when the scratch is not used)."""
    c = xqa_carving(d, p, sm_count)
    return d.ite(c.per > 1, c.partials - c.records, 0)


def backend_touches(d: Any, p: GqaWorkspaceProblem, route: Route, prep: Preparation, splits: Any) -> list[Touch]:
    """The backend kernels' buffers, relative to the backend root."""
    b, s, n, h = p.batch_size, p.sequence_length, p.num_heads, p.head_size
    if route.backend is Backend.FLASH:
        kvcache = flash_touches(d, p, splits, kvcache_api=True)
        if not p.quantized:
            return kvcache
        # A quantized cache's first prompt runs mha_fwd (FlashAttentionAndQuantizeKV), later steps
        # the kvcache API over the dequantized cache.
        return choose(d, p.is_first_prompt, flash_touches(d, p, splits, kvcache_api=False), kvcache)
    if route.backend is Backend.XQA:
        return xqa_touches(d, p, route.sm_count)
    if route.backend is Backend.MEA:
        out = []
        if not (isinstance(n, int) and n == p.kv_num_heads):
            expanded = d.mul(ELEMENT, b, n, prep.effective_kv_cache_capacity, h, what="Ungroup [B, N, Ce, H]")
            expanded = d.ite(n == p.kv_num_heads, 0, expanded)
            out += [Touch("expanded_key", 0, expanded, "Ungroup (K)"), Touch("expanded_value", 0, expanded, "Ungroup (V)")]
        out.append(Touch("output_accumulator", 0, d.ite(h > 128, lambda: d.mul(FLOAT, b, s, n, h, what="fp32 O"), 0),
                         "cutlass fmha (accumulator)"))
        return out
    tk = effective_kv_length(d, route.total_sequence_length, prep.effective_kv_cache_capacity, p.is_windowed_kv_cache)
    bnsh = d.mul(ELEMENT, b, n, s, h, what="[B, N, S, H]")
    return [Touch("q_bnsh", 0, bnsh, "Transpose_BSNH_to_BNSH"), Touch("y_bnsh", 0, bnsh, "AV GEMM"),
            Touch("scores", 0, d.mul(FLOAT, b, n, s, tk, what="fp32 QK [B, N, S, Tk]"), "QK GEMM"),
            Touch("softmax", 0, d.mul(ELEMENT, b, n, s, tk, what="softmax [B, N, S, Tk]"), "UnfusedSoftmaxKernel")]


def touches(p: GqaWorkspaceProblem, route: Route, prep: Preparation, splits: Any = 1,
            d: Any = CONCRETE) -> tuple[list[Touch], list[Touch]]:
    """(preparation touches, backend touches) of the route's kernels."""
    return (preparation_touches(d, p, route.backend, route.fast_decode, prep),
            backend_touches(d, p, route, prep, splits))


@dataclass(frozen=True)
class Room:
    """A recipe region in the allocation: its first byte (absolute), its bytes, and where its room
    ends: the next non-empty region's first byte, the preparation's regions first and the
    backend's after them at its root, else the end of the allocation."""

    start: Any
    nbytes: Any
    end: Any


def region_rooms(d: Any, run: Complete) -> dict[str, Room]:
    """Each region of the complete recipe `run`, by name, with its room (`Room`)."""
    regions = [(0, v) for v in run.preparation.regions]
    regions += [(run.backend_offset_bytes, v) for v in run.backend.regions]
    rooms: dict[str, Room] = {}
    following: Any = run.total_workspace_bytes
    for base, view in reversed(regions):
        start = d.add(base, view.offset, what="region start")
        rooms[view.name] = Room(start, view.nbytes, following)
        following = d.ite(view.nbytes > 0, start, following)
    return rooms


def contract(p: GqaWorkspaceProblem, run: Complete, route: Route, d: Any = CONCRETE) -> list[tuple[Touch, Any]]:
    """Each buffer the route's kernels touch, with the condition that it fits: inside its recipe
    region (or the span up to `through`), before the next non-empty region of the allocation or
    its end. `run` is the route's complete recipe (`recipe.complete`)."""
    prep_touches, backend_touches_ = touches(p, route, run.preparation, run.backend.splits, d)
    rooms = region_rooms(d, run)
    checks = []
    for touch in prep_touches + backend_touches_:
        room = rooms[touch.region]
        start = d.add(room.start, touch.start, what="touch start")
        end = d.add(start, touch.nbytes, what="touch end")
        fits = d.any_(touch.nbytes == 0, d.all_(room.nbytes > 0, end <= rooms[touch.through or touch.region].end))
        checks.append((touch, fits))
    return checks


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


def xqa_scratch(touches: list[Touch]) -> list[Touch]:
    """Return the touches with XQA's kernel touch (from the semaphores `through` the partials)
    cut to its multi-block scratch: from the semaphores' end aligned to the footprint's 128 bytes
    on (nothing when the launch has one subsequence per sequence)."""
    semaphores = next((t.nbytes for t in touches if t.region == SEMAPHORES and not t.through), 0)
    alignment = XQA_SEMAPHORE_ALIGNMENT
    start = -(-semaphores // alignment) * alignment
    return [replace(t, start=t.start + start, nbytes=max(t.nbytes - start, 0)) if t.through else t for t in touches]


def _buffer(p: GqaProblem, route: Route, touch: Touch, splits: int, lengths: Sequence[int]) -> Buffer:
    """The touch as a buffer of the workspace (module docstring)."""
    if touch.through:
        # XQA's scratch holds float32 records and fp16 partials: counted in 2-byte elements.
        gap = xqa_scratch_gap(CONCRETE, p.workspace_problem(CONCRETE), route.sm_count)
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
    prep, backend = touches(p.workspace_problem(CONCRETE), route, run.preparation, splits, CONCRETE)
    buffers = [_buffer(p, route, t, splits, lengths) for t in xqa_scratch(prep + backend) if t.nbytes > 0]
    touched = {b.name for b in buffers}
    stages = tuple(preparation_stages(p, route, touched) + backend_stages(p, route, splits, touched))
    staged = {name for stage in stages for name in stage.reads + stage.writes}
    if touched - staged:
        raise InternalError(f"the footprint's {sorted(touched - staged)} are in no stage of {route.backend.value}")
    output = Buffer(OUTPUT, OUTPUT, OUTPUT, ELEMENT_BYTES,
                    p.batch_size * p.sequence_length * p.num_heads * p.head_size, ELEMENT_BYTES)
    return Footprint(Op.GQA, route.backend, False, (output, *buffers), stages, (), (), ((OUTPUT, output.nbytes()),))

# -- the family's hooks -----------------------------------------------------------------------
def footprint(p: GqaProblem, backend: Backend, d: Any = CONCRETE, config: Any = None) -> Footprint:
    """Return what the route's kernels touch for the concrete problem p on `backend` under
    `config` (a RuntimeConfig: the SM count and fast-decode switch decide the launches): the
    statement, on the complete recipe's split count."""
    if config is None:
        raise InternalError("GroupQueryAttention's footprint needs the runtime configuration (its SM count)")
    route = route_of(CONCRETE, p, config, backend)
    return statement(p, route, complete(p.workspace_problem(CONCRETE), route))


def room_contract(d: Any, p: GqaProblem, r: Any, config: Any) -> list[tuple[str, Any]]:
    """The conditions under which the route's complete recipe (r, a `recipe.GqaRecipe`) serves the
    kernels: each touch (`contract`) inside the room of its region. GroupQueryAttention documents
    no slack, and a kernel writing into an alignment gap harms nothing, so the kernels are held
    to the rooms rather than to the statement's buffers (what the recipe reserves beyond them
    is measured by `attnws validate` and reported, not failed)."""
    return [(f"{t.writer}'s {t.region} buffer lies inside the room of its region", fits)
            for t, fits in contract(p.workspace_problem(d), r.run, r.route, d)]


def reads_inputs_directly(p: GqaProblem, backend: Backend) -> bool:
    """Whether the route's attention kernel consumes the operator inputs as they are: every route
    reads the present cache, appended first, and the query or its scratch copy."""
    return False
