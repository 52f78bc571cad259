"""What GroupQueryAttention's kernels touch in the workspace, stated from ORT's kernel and launch
sources, never from the recipes (`docs/research/gqa-footprint.md`: every formula with its file,
version and the binary evidence placing it at 1.31.1).

`footprint(p, route, d)` lists, for the route ORT runs, each buffer a kernel writes or reads:
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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..domain import CONCRETE
from ..problem import Backend
from .problem import GqaWorkspaceProblem, KvQuantization
from .recipe import Preparation, Route, effective_kv_length

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


def footprint(p: GqaWorkspaceProblem, route: Route, prep: Preparation, splits: Any = 1,
              d: Any = CONCRETE) -> tuple[list[Touch], list[Touch]]:
    """(preparation touches, backend touches) of the route's kernels."""
    return (preparation_touches(d, p, route.backend, route.fast_decode, prep),
            backend_touches(d, p, route, prep, splits))


def _room_ends(d: Any, regions: list[Any], base: Any, total: Any) -> dict[str, Any]:
    """Each region's room: where the next non-empty region starts (absolute), else the total."""
    ends: dict[str, Any] = {}
    following: Any = total
    for view in reversed(regions):
        ends[view.name] = following
        following = d.ite(view.nbytes > 0, lambda v=view: d.add(base, v.offset, what="region start"), following)
    return ends


def contract(p: GqaWorkspaceProblem, run: Any, route: Route, d: Any = CONCRETE) -> list[tuple[Touch, Any]]:
    """Each buffer the route's kernels touch, with the condition that it fits: inside its recipe
    region (or the span up to `through`), before the next non-empty region or the end. `run` is
    the route's complete recipe (`recipe.complete`)."""
    prep_touches, backend_touches_ = footprint(p, route, run.preparation, run.backend.splits, d)
    total = run.total_workspace_bytes
    checks = []
    for touches, regions, base in ((prep_touches, list(run.preparation.regions), 0),
                                   (backend_touches_, list(run.backend.regions), run.backend_offset_bytes)):
        views = {v.name: v for v in regions}
        rooms = _room_ends(d, regions, base, total)
        for touch in touches:
            view = views[touch.region]
            last = views[touch.through] if touch.through else view
            start = d.add(d.add(base, view.offset, what="region"), touch.start, what="touch start")
            end = d.add(start, touch.nbytes, what="touch end")
            room = rooms[last.name]
            fits = d.any_(touch.nbytes == 0, d.all_(view.nbytes > 0, end <= room))
            checks.append((touch, fits))
    return checks
