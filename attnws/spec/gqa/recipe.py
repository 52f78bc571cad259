"""GroupQueryAttention workspace recipes, ORT 1.31.1's graph-free functions region for region.

- `preparation`: GetGQAPreparationRecipe (#32446): windowed staging (C + S rows per K and V) or
  compaction (2 * C rows in one region), the int32 sequence-length vectors, and the QKV
  preprocessing of the selected route.
- `xqa`: GetGQAXqaWorkspaceRecipe (#32453): GetXQAScratchSize's semaphores, row max / sum and
  output accumulator, then rotary Q / K and the dynamic head-sink conversion.
- `flash`: GetGQAFlashWorkspaceRecipe (#32453): softmax LSE for the N query heads, and split-KV
  accumulators when the heuristic (run over Nk heads and the window-clamped key length on the
  fast-decode path) splits.
- `mea`, `unfused`: #32454: MEA's K and V expanded from Nk to N heads over the effective
  capacity and its float32 accumulator; unfused's one combined allocation.
- `complete`: GetGQACompleteWorkspaceRecipe: preparation, then the backend root at
  align256(preparation total).

Each region is appended ORT's way: an empty region has offset 0 and does not move the cursor;
otherwise it starts at the cursor rounded up to 256. Every size is bytes; the checks are ORT's,
in its order, with its message texts (`docs/research/gqa-workspace.md`: source ids and the binary
strings that place them at 1.31.1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backends import flash as flash_backend
from ..domain import CONCRETE
from ..errors import InternalError, InvalidArgument, Unavailable
from ..layout import View, require_views_within
from ..limits import INT32_MAX, LSE_ELEMENT_BYTES, WORKSPACE_ALIGNMENT
from ..options import RuntimeConfig
from ..problem import Backend, Op, QkvLayout
from ..statement import ATTENTION
from .problem import BACKENDS, GqaProblem, GqaWorkspaceProblem, HeadSinkStorage, KvQuantization, Preprocess, XqaKvType

UINT32_MAX = 2**32 - 1
QUANTIZED_FLASH_DECODE_SLACK = 256  # kGQAQuantizedFlashDecodeSlackBytes
SEQUENCE_VECTOR_BYTES = 4  # int32 per batch entry
XQA_ALIGNMENT = 128  # GetXQAScratchSize's semaphore and row max / sum alignment
XQA_ROW_BYTES = 128  # per subsequence: row max and row sum
XQA_TILE_KEYS = 256  # keys per XQA subsequence tile
XQA_HEAD_SIZES = (64, 128, 256)
XQA_GROUPS = (1, 2, 4, 5, 8, 16, 32)
XQA_QUANTIZED_GROUPS = (4, 8, 16, 32)
WINDOWED_ROW_MULTIPLE = 16
# Routes ORT runs whose workspace no graph-free recipe states (backend -> why).
UNSIZED_ROUTES = {Backend.CUDNN: "cuDNN's frontend sizes its own workspace, and ORT 1.31.1 states no graph-free recipe "
                                 "for a cuDNN GroupQueryAttention route"}


def _fail(kind: type, message: str) -> Any:
    return lambda: kind(message)


@dataclass
class Regions:
    """AppendRegion over the domain: the cursor, and each region's (name, offset, bytes)."""

    d: Any
    cursor: Any = 0
    placed: list[View] = field(default_factory=list)

    def append(self, name: str, nbytes: Any, allocation: str = "gqa") -> Any:
        d = self.d
        start = d.align_up(self.cursor, WORKSPACE_ALIGNMENT, what=f"GQA {name} offset")
        offset = d.ite(nbytes == 0, 0, start)
        self.cursor = d.ite(nbytes == 0, self.cursor, lambda: d.add(start, nbytes, what=f"GQA {name} end"))
        self.placed.append(View(name, allocation, offset, nbytes))
        return offset


def positive_int32(d: Any, value: Any, message: str) -> None:
    d.require(d.all_(value > 0, value <= INT32_MAX), _fail(InvalidArgument, message))


# -- preparation ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Preparation:
    """GQAPreparationRecipe: bytes and offsets of the preparation regions (all bytes)."""

    effective_kv_cache_capacity: Any
    cache_row_bytes: Any
    uses_staging: Any
    uses_compaction: Any
    sequence_length_vector_count: Any
    qkv_preprocess_bytes: Any
    total_preparation_bytes: Any
    regions: tuple[View, ...]

    def region(self, name: str) -> View:
        return next(v for v in self.regions if v.name == name)


def _check_preparation(d: Any, p: GqaWorkspaceProblem, mode: Preprocess, fast_decode: Any) -> None:
    inv = lambda m: _fail(InvalidArgument, m)  # noqa: E731
    d.require(p.qkv_element_size == 2, inv("GQA preparation element size must match FP16 or BF16 storage."))
    d.require(p.cache_element_size in (1, 2), inv("GQA cache element size must be one or two bytes."))
    for value, what in ((p.batch_size, "batch size"), (p.sequence_length, "sequence length"),
                        (p.num_heads, "head count"), (p.kv_num_heads, "KV head count"), (p.head_size, "head size"),
                        (p.present_kv_cache_capacity, "present KV cache capacity")):
        positive_int32(d, value, f"GQA {what} must be positive and fit int32.")
    d.require(d.mod(p.num_heads, p.kv_num_heads) == 0, inv("GQA num_heads must be a multiple of kv_num_heads."))
    d.require(d.mod(p.head_size, 8) == 0, inv("GQA head size must be a multiple of eight."))
    bits = p.kv_cache_bit_width
    d.require(bits in (0, 4, 8), inv("GQA KV cache bit width must be zero, four, or eight."))
    d.require(bits == 0 or p.cache_element_size == 1, inv("Packed GQA KV cache storage must use one-byte elements."))
    if p.is_windowed_kv_cache and bits == 8:
        d.require(d.mod(p.head_size, 16) == 0,
                  inv("Windowed eight-bit GQA KV cache rows require head size divisible by 16."))
    if p.is_windowed_kv_cache and bits == 4:
        d.require(d.mod(p.head_size, 32) == 0, inv("Windowed INT4 GQA KV cache rows require head size divisible by 32."))
    d.ite(fast_decode, lambda: _check_fast_decode(d, p, mode), None)
    if mode is Preprocess.XQA:
        k_q, v_q = p.k_quantization is not KvQuantization.NONE, p.v_quantization is not KvQuantization.NONE
        d.require(d.all_(d.not_(p.is_first_prompt), p.sequence_length == 1),
                  inv("GQA XQA preprocessing requires a single-token decode after the first prompt."))
        d.require(k_q == v_q, inv("GQA XQA preprocessing requires K and V to both be quantized or both be unquantized."))
        if k_q:
            d.require(bits == 8, inv("Quantized GQA XQA preprocessing requires one-byte, eight-bit KV-cache storage."))
            d.require(not p.use_qk_norm, inv("Quantized GQA XQA preprocessing is incompatible with QK-Norm."))
        else:
            d.require(bits == 0, inv("Unquantized GQA XQA preprocessing requires unpacked two-byte KV-cache storage."))
        # 1.31.1 adds these two (binary strings; their place in the order is not read).
        d.require(d.member(p.head_size, XQA_HEAD_SIZES), inv("GQA XQA preprocessing requires head size 64, 128, or 256."))
        d.require(xqa_group_supported(d, p, k_q),
                  inv("GQA XQA preprocessing requires group size 1, 2, 4, 5, 8, 16, or 32 (4, 8, 16, or 32 when "
                      "quantized)."))


def _check_fast_decode(d: Any, p: GqaWorkspaceProblem, mode: Preprocess) -> None:
    inv = lambda m: _fail(InvalidArgument, m)  # noqa: E731
    d.require(mode is Preprocess.FLASH, inv("GQA Flash fast decode requires the Flash preprocess mode."))
    d.require(d.not_(p.is_first_prompt), inv("GQA Flash fast decode is incompatible with the first prompt."))
    d.require(not p.is_windowed_kv_cache, inv("GQA Flash fast decode is incompatible with a windowed KV cache."))
    d.require(not p.quantized, inv("GQA Flash fast decode requires unquantized K and V."))
    d.require(not p.use_qk_norm, inv("GQA Flash fast decode is incompatible with QK-Norm."))


def xqa_group_supported(d: Any, p: GqaWorkspaceProblem, quantized: bool) -> Any:
    """IsSupportedGQAXqaGroupSize: N == g * Nk for a group g XQA has kernels for."""
    groups = XQA_QUANTIZED_GROUPS if quantized else XQA_GROUPS
    return d.any_(*(p.num_heads == d.mul(g, p.kv_num_heads, what="XQA group g * Nk") for g in groups))


def cache_row_bytes(d: Any, p: GqaWorkspaceProblem) -> Any:
    """Bytes per cache row (one token of one KV head): H * element size, or H * bits / 8 packed."""
    if p.kv_cache_bit_width == 0:
        return d.mul(p.head_size, p.cache_element_size, what="GQA cache row H * element size")
    return d.div(d.mul(p.head_size, p.kv_cache_bit_width, what="GQA packed cache row H * bits"), 8)


def qkv_preprocess_bytes(d: Any, p: GqaWorkspaceProblem, mode: Preprocess, fast_decode: Any, capacity: Any) -> Any:
    """The route's QKV materialization scratch (bytes); capacity is the effective C."""
    return d.ite(fast_decode, 0, lambda: _materialized_bytes(d, p, mode, capacity))


def _materialized_bytes(d: Any, p: GqaWorkspaceProblem, mode: Preprocess, capacity: Any) -> Any:
    e, b, s, n, nk, h = p.qkv_element_size, p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size
    q = d.mul(b, s, n, h, what="GQA Q elements B * S * N * H")
    k = d.mul(b, s, nk, h, what="GQA K elements B * S * Nk * H")
    reshaped = p.do_rotary or p.is_packed_qkv or p.use_qk_norm
    if mode is Preprocess.XQA:
        return d.mul(e, q, what="GQA XQA Q scratch") if reshaped or p.k_quantization is KvQuantization.PER_CHANNEL else 0
    if mode is Preprocess.FLASH and p.quantized:
        def decode() -> Any:
            cache = d.mul(2, b, capacity, nk, h, what="GQA dequantized cache 2 * B * C * Nk * H")
            return d.add(d.mul(e, d.add(q, cache, what="Q + 2 caches"), what="GQA quantized Flash decode scratch"),
                         QUANTIZED_FLASH_DECODE_SLACK, what="GQA quantized Flash decode slack")
        return d.ite(p.is_first_prompt, lambda: d.mul(e, d.add(q, d.mul(2, k, what="2 * K"), what="Q + 2K"),
                                                      what="GQA quantized Flash prompt scratch"), decode)
    if mode is Preprocess.MEA:
        if p.is_packed_qkv:
            return d.mul(e, d.add(q, d.mul(2, k, what="2 * K"), what="Q + 2K"), what="GQA MEA unpacked QKV")
        if p.do_rotary:
            return d.mul(e, d.add(q, k, what="Q + K"), what="GQA MEA rotary Q and K")
        return d.mul(e, q, what="GQA MEA normalized Q") if p.use_qk_norm else 0
    return d.mul(e, q, what="GQA Q scratch") if reshaped else 0


def preparation(p: GqaWorkspaceProblem, mode: Preprocess, fast_decode: Any = False, d: Any = CONCRETE) -> Preparation:
    """GetGQAPreparationRecipe for the route the runtime selected, or raise ORT's error."""
    _check_preparation(d, p, mode, fast_decode)
    row = cache_row_bytes(d, p)
    if p.is_windowed_kv_cache:
        d.require(d.mod(row, WINDOWED_ROW_MULTIPLE) == 0,
                  _fail(InvalidArgument, "Windowed GQA KV cache row size must be a multiple of 16 bytes."))
    b, s, nk, c = p.batch_size, p.sequence_length, p.kv_num_heads, p.present_kv_cache_capacity
    staging = p.is_windowed_kv_cache and d.not_(s == 1)
    regions = Regions(d)
    capacity = c
    if p.is_windowed_kv_cache:
        staged_capacity = d.add(c, s, what="GQA staged capacity C + S")
        capacity = d.ite(staging, staged_capacity, c)
        d.ite(staging, lambda: _staged_fits(d, staged_capacity), None)
        staged = d.ite(staging, lambda: staged_cache_bytes(d, p, staged_capacity, row), 0)
        regions.append("staged_key", staged)
        regions.append("staged_value", staged)
        half = d.ite(staging, 0, lambda: d.mul(b, nk, c, row, what="GQA compaction half B * Nk * C * row"))
        regions.append("compaction", d.mul(2, half, what="GQA compaction 2 * half"))
    vectors = 6 if p.is_windowed_kv_cache else d.ite(d.all_(fast_decode, s == 1), 0, 3)
    regions.append("sequence_lengths", d.mul(vectors, b, SEQUENCE_VECTOR_BYTES, what="GQA sequence vectors"))
    preprocess = qkv_preprocess_bytes(d, p, mode, fast_decode, capacity)
    regions.append("qkv_preprocess", preprocess)
    compaction = d.all_(p.is_windowed_kv_cache, d.not_(staging))
    return Preparation(capacity, row, staging, compaction, vectors, preprocess, regions.cursor, tuple(regions.placed))


def staged_cache_bytes(d: Any, p: GqaWorkspaceProblem, staged_capacity: Any, row: Any) -> Any:
    """One staged cache (K or V): B * Nk * (C + S) rows of `row` bytes."""
    return d.mul(p.batch_size, p.kv_num_heads, staged_capacity, row, what="GQA staged cache B * Nk * (C + S) * row")


def _staged_fits(d: Any, staged_capacity: Any) -> None:
    d.require(staged_capacity <= INT32_MAX, _fail(InvalidArgument, "Windowed GQA staged capacity must fit int32."))


# -- backends ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class BackendRecipe:
    """One backend's own allocation(s): its regions relative to the backend root, and the split
    count for Flash (1 when it does not split). Bytes."""

    backend: Backend
    total_backend_bytes: Any
    regions: tuple[View, ...]
    splits: Any = 1

    def region(self, name: str) -> View:
        return next(v for v in self.regions if v.name == name)


def _backend_geometry(d: Any, p: GqaWorkspaceProblem, storage: str) -> None:
    """ValidateCommonGeometry of the backend recipes; `storage` is the recipe's own text for a
    Q/K/V element that is not two bytes."""
    d.require(p.qkv_element_size == 2, _fail(InvalidArgument, storage))
    for value, what in ((p.batch_size, "batch size"), (p.sequence_length, "sequence length"),
                        (p.num_heads, "query head count"), (p.kv_num_heads, "KV head count"),
                        (p.head_size, "head size")):
        positive_int32(d, value, f"GQA {what} must be positive and fit int32.")
    d.require(d.mod(p.num_heads, p.kv_num_heads) == 0,
              _fail(InvalidArgument, "GQA query head count must be a multiple of KV head count."))


FUSED_STORAGE = "GQA fused backends require FP16 or BF16 storage."
MEA_UNFUSED_STORAGE = "GQA MEA and unfused recipes require FP16 or BF16 storage."


@dataclass(frozen=True)
class XqaConfig:
    """GQAXqaConfig: the device and the XQA kernel flavour."""

    sm: int
    sm_count: int
    kv_type: XqaKvType = XqaKvType.NONE
    head_sink: HeadSinkStorage = HeadSinkStorage.NONE
    is_bf16: bool = False


def xqa_m_tile(d: Any, p: GqaWorkspaceProblem) -> Any:
    """XQA's query tile: 8 rows for groups up to 8, 16 up to 16, else 32."""
    group = d.div(p.num_heads, p.kv_num_heads)
    return d.ite(group <= 8, 8, lambda: d.ite(group <= 16, 16, 32))


def xqa(p: GqaWorkspaceProblem, config: XqaConfig, d: Any = CONCRETE) -> BackendRecipe:
    """GetGQAXqaWorkspaceRecipe: GetXQAScratchSize's layout, then rotary Q / K and the dynamic
    head-sink conversion, contiguous. Raises ORT's InvalidArgument or Unavailable."""
    inv = lambda m: _fail(InvalidArgument, m)  # noqa: E731
    una = lambda m: _fail(Unavailable, m)  # noqa: E731
    _backend_geometry(d, p, FUSED_STORAGE)
    positive_int32(d, p.present_kv_cache_capacity, "XQA present KV cache capacity must be positive and fit int32.")
    d.require(p.sequence_length == 1, una("XQA supports single-token decode."))
    d.require(d.not_(p.is_first_prompt), inv("A selected XQA route cannot be the first prompt."))
    major, minor = divmod(config.sm, 10)
    d.require(major >= 8, una("XQA requires device major version 8 or newer."))
    d.require(0 < config.sm_count <= UINT32_MAX, inv("XQA multiprocessor count must be positive and fit uint32."))
    d.require(p.kv_cache_bit_width != 4, inv("XQA does not support a four-bit KV cache."))
    if config.kv_type is XqaKvType.NONE:
        d.require(not p.quantized and p.cache_element_size == 2 and p.kv_cache_bit_width == 0,
                  inv("Non-quantized XQA requires bit width zero and unquantized two-byte K and V storage."))
    else:
        d.require(p.cache_element_size == 1 and p.kv_cache_bit_width == 8
                  and KvQuantization.NONE not in (p.k_quantization, p.v_quantization),
                  inv("Quantized XQA requires bit width eight and quantized one-byte K and V storage."))
        d.require(not p.use_qk_norm, inv("Quantized XQA does not support QK-Norm."))
    if config.kv_type is XqaKvType.FP8:
        d.require(major >= 9 or config.sm == 89, una("FP8 XQA requires SM89 or device major version 9 or newer."))
    del minor
    d.require(d.member(p.head_size, XQA_HEAD_SIZES), una("XQA supports head sizes 64, 128, and 256."))
    d.require(xqa_group_supported(d, p, config.kv_type is not XqaKvType.NONE),
              una("XQA does not support this query-to-KV head group."))
    sequences = d.mul(p.batch_size, p.kv_num_heads, what="XQA sequences B * Nk")
    d.require(sequences <= UINT32_MAX, inv("XQA batch and KV-head sequence count must fit uint32."))
    tiles = d.div(p.present_kv_cache_capacity + XQA_TILE_KEYS - 1, XQA_TILE_KEYS)
    per_sequence = d.min_(d.max_(1, d.div(config.sm_count, sequences)), tiles)
    subsequences = d.mul(sequences, per_sequence, what="XQA subsequences")
    d.require(subsequences <= UINT32_MAX, inv("XQA subsequence count must fit uint32."))
    semaphores = d.align_up(d.mul(4, sequences, what="XQA semaphores"), XQA_ALIGNMENT, what="XQA semaphores align128")
    row_bytes = d.mul(XQA_ROW_BYTES, subsequences, what="XQA row max / sum")
    row_sum = d.add(semaphores, d.align_up(row_bytes, XQA_ALIGNMENT, what="XQA row max align128"), what="XQA row sum")
    vector = d.mul(p.head_size, xqa_m_tile(d, p), 2, what="XQA accumulator vector H * tile * 2")
    in_scratch = d.add(d.align_up(row_bytes, XQA_ALIGNMENT, what="XQA row max"), row_bytes, what="XQA rows end")
    output = d.add(semaphores, d.mul(d.div(in_scratch + vector - 1, vector), vector, what="XQA accumulator offset"),
                   what="XQA accumulator offset")
    output_bytes = d.mul(vector, subsequences, what="XQA output accumulator")
    cursor = d.add(output, output_bytes, what="XQA internal scratch")
    views = [View("semaphores", "xqa", 0, d.mul(4, sequences, what="XQA semaphores")),
             View("row_max", "xqa", semaphores, row_bytes), View("row_sum", "xqa", row_sum, row_bytes),
             View("output_accumulator", "xqa", output, output_bytes)]
    extras = []
    if p.do_rotary:
        extras += [("rotary_q", d.mul(p.batch_size, p.num_heads, p.head_size, p.qkv_element_size, what="XQA rotary Q")),
                   ("rotary_k", d.mul(p.batch_size, p.kv_num_heads, p.head_size, p.qkv_element_size,
                                      what="XQA rotary K"))]
    if config.head_sink is HeadSinkStorage.DYNAMIC_CONVERSION:
        extras.append(("head_sink", d.mul(p.num_heads, 4, what="XQA head sink N * 4")))
    for name, nbytes in extras:
        aligned = d.align_up(nbytes, WORKSPACE_ALIGNMENT, what=f"XQA {name}")
        views.append(View(name, "xqa", cursor, aligned))
        cursor = d.add(cursor, aligned, what=f"XQA {name} end")
    return BackendRecipe(Backend.XQA, cursor, tuple(views))


@dataclass(frozen=True)
class FlashConfig:
    """GQAFlashConfig: the key length, the local window (-1: none), the device's SM count and
    whether the route is the single-token fast decode."""

    total_sequence_length: Any
    sm_count: int
    local_window_size: int = -1
    fast_decode: Any = False


def flash_split_inputs(d: Any, p: GqaWorkspaceProblem, config: FlashConfig) -> tuple[Any, Any]:
    """(rows, key_blocks) the split heuristic sees: fast decode runs it over the Nk heads and
    the key length clamped to the window; the regular route over N heads and T."""
    heads = d.ite(config.fast_decode, p.kv_num_heads, p.num_heads)
    kv = config.total_sequence_length
    if config.local_window_size > 0:
        kv = d.ite(config.fast_decode, lambda: d.min_(kv, config.local_window_size), kv)
    rows = flash_backend.split_rows(d, p.batch_size, heads, p.sequence_length)
    return rows, flash_backend.key_blocks(d, p.head_size, kv)


def flash(p: GqaWorkspaceProblem, config: FlashConfig, d: Any = CONCRETE) -> BackendRecipe:
    """GetGQAFlashWorkspaceRecipe: LSE [B, N, S] float32, then, when the heuristic splits, the
    LSE and output accumulators, each 256-aligned. Raises ORT's InvalidArgument or Unavailable."""
    inv = lambda m: _fail(InvalidArgument, m)  # noqa: E731
    _backend_geometry(d, p, FUSED_STORAGE)
    positive_int32(d, config.total_sequence_length, "Flash total sequence length must be positive and fit int32.")
    d.require(config.sm_count > 0, inv("Flash multiprocessor count must be positive."))
    window = config.local_window_size
    d.require(window == -1 or 0 < window <= INT32_MAX, inv("Flash local window size must be -1 or a positive int32."))
    d.require(d.all_(p.head_size <= flash_backend.FLASH_MAX_HEAD_SIZE, d.mod(p.head_size, 8) == 0),
              _fail(Unavailable, "Flash requires a head size no greater than 256 and divisible by eight."))
    d.ite(config.fast_decode, lambda: _check_selected_fast_decode(d, p), None)  # 1.31.1's checks (binary strings)
    rows, blocks = flash_split_inputs(d, p, config)
    step = p.kv_num_heads if isinstance(p.kv_num_heads, int) else 1  # rows = B * heads * ceil(S / 64), Nk | heads
    splits = flash_backend.split_count(d, rows, blocks, config.sm_count, step)
    return flash_regions(d, p, splits)


def _check_selected_fast_decode(d: Any, p: GqaWorkspaceProblem) -> None:
    inv = lambda m: _fail(InvalidArgument, m)  # noqa: E731
    d.require(d.not_(p.is_first_prompt), inv("A selected Flash fast-decode route cannot be the first prompt."))
    d.require(not p.is_windowed_kv_cache, inv("A selected Flash fast-decode route cannot use a windowed KV cache."))
    d.require(not p.quantized, inv("A selected Flash fast-decode route requires unquantized K and V."))
    d.require(not p.use_qk_norm, inv("A selected Flash fast-decode route cannot use QK-Norm."))


def flash_regions(d: Any, p: GqaWorkspaceProblem, splits: Any) -> BackendRecipe:
    """Flash's regions for a split count (the recipe's, or the envelope's largest)."""
    regions = Regions(d)
    lse = d.mul(p.batch_size, p.num_heads, p.sequence_length, LSE_ELEMENT_BYTES, what="Flash LSE B * N * S * 4")
    regions.append("softmax_lse", lse, "flash")
    def accumulators() -> tuple[Any, Any]:
        return flash_backend.split_accumulator_bytes(d, splits, p.batch_size, p.sequence_length, p.num_heads,
                                                     p.head_size)

    lse_acc = d.ite(splits > 1, lambda: accumulators()[0], 0)
    out_acc = d.ite(splits > 1, lambda: accumulators()[1], 0)
    regions.append("softmax_lse_accumulator", lse_acc, "flash")
    regions.append("output_accumulator", out_acc, "flash")
    return BackendRecipe(Backend.FLASH, regions.cursor, tuple(regions.placed), splits)


def _mea_unfused_geometry(d: Any, p: GqaWorkspaceProblem, what: str) -> None:
    _backend_geometry(d, p, MEA_UNFUSED_STORAGE)
    d.require(not p.quantized, _fail(Unavailable, f"{what} does not support a quantized KV cache."))


def expanded_kv_bytes(d: Any, p: GqaWorkspaceProblem, capacity: Any) -> Any:
    """One of MEA's expanded K / V: e * B * N * C * H, the N query heads over the capacity."""
    return d.mul(p.qkv_element_size, p.batch_size, p.num_heads, capacity, p.head_size,
                 what="MEA expanded K / V e * B * N * C * H")


def mea(p: GqaWorkspaceProblem, capacity: Any, d: Any = CONCRETE) -> BackendRecipe:
    """GetGQAMemoryEfficientWorkspaceRecipe over the effective capacity: K and V expanded to N
    heads when N != Nk (e * B * N * C * H each), then the float32 accumulator 4 * B * S * N * H
    when H > 128."""
    _mea_unfused_geometry(d, p, "GQA MEA")
    positive_int32(d, capacity, "MEA effective KV cache capacity must be positive and fit int32.")
    expanded = d.ite(p.num_heads == p.kv_num_heads, 0, lambda: expanded_kv_bytes(d, p, capacity))
    accumulator = d.ite(p.head_size > 128, lambda: d.mul(
        LSE_ELEMENT_BYTES, p.batch_size, p.sequence_length, p.num_heads, p.head_size,
        what="MEA accumulator 4 * B * S * N * H"), 0)
    regions = Regions(d)
    regions.append("expanded_key", expanded, "mea")
    regions.append("expanded_value", expanded, "mea")
    regions.append("output_accumulator", accumulator, "mea")
    return BackendRecipe(Backend.MEA, regions.cursor, tuple(regions.placed))


def unfused(p: GqaWorkspaceProblem, total_sequence_length: Any, d: Any = CONCRETE) -> BackendRecipe:
    """GetGQAUnfusedWorkspaceRecipe: one allocation of align256 parts, back to back: Q and Y in
    BNSH (e * B * N * S * H each), the float32 scores and softmax (4 * B * N * S * T each)."""
    _mea_unfused_geometry(d, p, "GQA unfused attention")
    positive_int32(d, total_sequence_length, "Unfused total KV sequence length must be positive and fit int32.")
    bnsh = d.align_up(d.mul(p.qkv_element_size, p.batch_size, p.num_heads, p.sequence_length, p.head_size,
                            what="unfused Q e * B * N * S * H"), WORKSPACE_ALIGNMENT, what="unfused Q")
    scores = d.align_up(d.mul(p.batch_size, p.num_heads, p.sequence_length, total_sequence_length, LSE_ELEMENT_BYTES,
                              what="unfused scores B * N * S * T * 4"), WORKSPACE_ALIGNMENT, what="unfused scores")
    views, cursor = [], 0
    for name, nbytes in (("q_bnsh", bnsh), ("y_bnsh", bnsh), ("scores", scores), ("softmax", scores)):
        views.append(View(name, "unfused", cursor, nbytes))
        cursor = d.add(cursor, nbytes, what=f"unfused {name} end")
    return BackendRecipe(Backend.UNFUSED, cursor, tuple(views))


# -- a complete route -------------------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """GQAConcreteRoute: the backend the runtime selected and the facts its recipe needs."""

    backend: Backend
    sm: int = 80
    sm_count: int = 108
    total_sequence_length: Any = 0
    local_window_size: int = -1
    fast_decode: Any = False
    xqa_kv_type: XqaKvType = XqaKvType.NONE
    head_sink: HeadSinkStorage = HeadSinkStorage.NONE
    is_bf16: bool = False


def xqa_kv_type(p: GqaProblem) -> XqaKvType:
    """The XQA kernel's cache element: none (fp16 / bf16), int8 or fp8."""
    if not p.quantized:
        return XqaKvType.NONE
    return XqaKvType.FP8 if p.cache_is_fp8 else XqaKvType.INT8


def takes_fast_decode(d: Any, p: GqaProblem, config: RuntimeConfig) -> Any:
    """Whether a Flash run takes the fast-decode path (FlashDecoding): not only S == 1."""
    return d.all_(config.options.use_flash_decode, d.not_(p.is_first_prompt(d)), p.kv_sequence_length > 0,
                  p.kv_share_buffer, not p.quantized, not p.use_qk_norm, not p.sliding_window_cache)


def route_of(d: Any, p: GqaProblem, config: RuntimeConfig, backend: Backend) -> Route:
    """The facts the recipe of `backend` needs for p under the configuration (fast decode when the
    backend is Flash and the step takes it; XQA's head sink prepacked or converted at every run)."""
    return Route(backend, config.device.sm, config.device.sm_count, p.total_sequence_length, p.local_window_size,
                 backend is Backend.FLASH and takes_fast_decode(d, p, config), xqa_kv_type(p), p.head_sink_storage,
                 p.is_bf16)


PREPROCESS = {Backend.XQA: Preprocess.XQA, Backend.FLASH: Preprocess.FLASH, Backend.MEA: Preprocess.MEA,
              Backend.UNFUSED: Preprocess.UNFUSED}


@dataclass(frozen=True)
class Complete:
    """GQACompleteWorkspaceRecipe: preparation at 0, the backend root at
    align256(preparation) (0 when the backend needs nothing), the total. Bytes."""

    preparation: Preparation
    backend: BackendRecipe
    backend_offset_bytes: Any
    total_workspace_bytes: Any


def effective_kv_length(d: Any, total: Any, capacity: Any, windowed: bool) -> Any:
    """GetGQAEffectiveWorkspaceKvLength: a windowed cache holds at most its effective capacity."""
    return d.min_(total, capacity) if windowed else total


def complete(p: GqaWorkspaceProblem, route: Route, d: Any = CONCRETE) -> Complete:
    """GetGQACompleteWorkspaceRecipe, or raise ORT's error (a cuDNN route is Unavailable)."""
    if route.backend is Backend.CUDNN:
        raise Unavailable("A graph-free cuDNN GQA workspace recipe is not provided.")
    prep = preparation(p, PREPROCESS[route.backend], route.fast_decode, d)
    capacity = prep.effective_kv_cache_capacity
    if route.backend is Backend.XQA:
        backend = xqa(p, XqaConfig(route.sm, route.sm_count, route.xqa_kv_type, route.head_sink, route.is_bf16), d)
    elif route.backend is Backend.FLASH:
        kv = effective_kv_length(d, route.total_sequence_length, capacity, p.is_windowed_kv_cache)
        backend = flash(p, FlashConfig(kv, route.sm_count, route.local_window_size, route.fast_decode), d)
    elif route.backend is Backend.MEA:
        backend = mea(p, capacity, d)
    else:
        kv = effective_kv_length(d, route.total_sequence_length, capacity, p.is_windowed_kv_cache)
        backend = unfused(p, kv, d)
    return compose(d, prep, backend)


def compose(d: Any, prep: Preparation, backend: BackendRecipe) -> Complete:
    """Preparation, then the backend root at align256(preparation total) unless it is empty."""
    offset = d.ite(backend.total_backend_bytes == 0, 0, lambda: d.align_up(
        prep.total_preparation_bytes, WORKSPACE_ALIGNMENT, what="GQA backend root offset"))
    total = d.ite(backend.total_backend_bytes == 0, prep.total_preparation_bytes,
                  lambda: d.add(offset, backend.total_backend_bytes, what="GQA complete total"))
    return Complete(prep, backend, offset, total)


# -- the family's hooks -----------------------------------------------------------------------
@dataclass(frozen=True)
class GqaRecipe:
    """One GroupQueryAttention route's workspace as the shared entry points read a recipe: the
    route and its complete recipe (`run`), one allocation ("attention"), the preparation's regions
    from 0 and the backend's from its root. Bytes."""

    route: Route
    run: Complete

    op = Op.GQA
    projection_bytes = 0

    @property
    def backend(self) -> Backend:
        return self.route.backend

    @property
    def attention_workspace_bytes(self) -> Any:
        return self.run.total_workspace_bytes

    @property
    def qkv_layout(self) -> QkvLayout:
        """NONE when no Q scratch is carved (the kernels read the query input and the present
        cache), else PLANAR (the rotated or unpacked Q)."""
        q = self.run.preparation.region("qkv_preprocess").nbytes
        return QkvLayout.NONE if isinstance(q, int) and q == 0 else QkvLayout.PLANAR

    def allocations(self) -> list[tuple[str, Any]]:
        """The single workspace allocation, in bytes."""
        return [(ATTENTION, self.run.total_workspace_bytes)]

    def route_text(self) -> str:
        """Flash's fast decode and split count, in words ('' on the other routes)."""
        if self.backend is not Backend.FLASH:
            return ""
        splits = self.run.backend.splits
        return ("fast decode, " if self.route.fast_decode else "") + f"{splits} split{'s' if splits != 1 else ''}"

    def views(self) -> list[View]:
        """Every non-empty region, at its offset from the allocation's start."""
        prep = [View(v.name, ATTENTION, v.offset, v.nbytes) for v in self.run.preparation.regions]
        base = self.run.backend_offset_bytes
        backend = [View(v.name, ATTENTION, base + v.offset, v.nbytes) for v in self.run.backend.regions]
        return [v for v in prep + backend if not isinstance(v.nbytes, int) or v.nbytes > 0]

    def as_dict(self) -> dict[str, Any]:
        """Return the recipe's fields, views as {name: [offset, bytes]}."""
        return {"op": self.op.value, "backend": self.backend.value, "projection_bytes": 0,
                "attention_workspace_bytes": self.run.total_workspace_bytes,
                "preparation_bytes": self.run.preparation.total_preparation_bytes,
                "backend_offset_bytes": self.run.backend_offset_bytes,
                "backend_bytes": self.run.backend.total_backend_bytes, "splits": self.run.backend.splits,
                "fast_decode": bool(self.route.fast_decode),
                "views": {v.name: [v.offset, v.nbytes] for v in self.views()}}


def recipe(p: Any, backend: Backend, *, trt_runner_available: bool = True, route_gates: bool = True,
           d: Any = CONCRETE, config: Any = None) -> GqaRecipe:
    """Return the complete recipe of the GqaProblem p on `backend` under `config` (a RuntimeConfig:
    the device's SM count and the fast-decode switch size it), or raise ORT's error. There is no
    TRT runner, and ORT sizes any selected route: `trt_runner_available` and `route_gates` do
    not apply."""
    if backend not in BACKENDS:
        raise InvalidArgument(f"GroupQueryAttention has no {backend.value} route")
    if config is None:
        raise InternalError("GroupQueryAttention's recipe needs the runtime configuration (its SM count)")
    route = route_of(d, p, config, backend)
    r = GqaRecipe(route, complete(p.workspace_problem(d), route, d))
    validate_views(d, r)
    return r


def validate_views(d: Any, r: GqaRecipe) -> None:
    """Containment: every view's end (checked addition) lies within the workspace."""
    require_views_within(d, r.views(), r.attention_workspace_bytes)


def aligned_quantities(r: GqaRecipe) -> list[tuple[str, Any]]:
    """Return (name, bytes) of what must be a multiple of 256: the backend root's offset."""
    return [("backend root offset", r.run.backend_offset_bytes)]
