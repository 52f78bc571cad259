"""PagedAttention's scratch as a list of allocations (ORT 1.31.1; `docs/research/paged-workspace.md`
§3-§4). ORT states no recipe and no root: ComputeInternal makes one `GetScratchBuffer` request per
buffer, unaligned and unpacked, each live to the end of the compute (a request of 0 bytes
allocates nothing). `recipe` lists them for a backend: each buffer, its bytes, and whether its
size comes from device data (the gathered key length after a readback, bounded here by B * L).

The values the kernel sizes with (§2.3): with attention_metadata, its bounds (S, L; the lower
bound on L taken as L); without it, the step's own maxima where ORT copies the lengths back (MEA,
Flash over a quantized cache, an XQA candidate), else the static capacities (T queries, M * bs
keys, lower bound 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..backends import flash as flash_backend
from ..domain import CONCRETE
from ..errors import InternalError, InvalidArgument, Unavailable
from ..layout import View
from ..limits import INT32_MAX, LSE_ELEMENT_BYTES
from ..options import RuntimeConfig
from ..problem import Backend, Op, QkvLayout
from .dispatch import XQA_PAGE, group
from .problem import BACKENDS, KvQuantization, PagedProblem

FLOAT_BYTES = 4
INT_BYTES = 4
FLASH_SPLIT_MIN_KV = 512  # kFlashSplitKvMinSequenceLength: the lower bound must exceed it
DECODE_TILE = 128  # kPagedDecodeTile
DECODE_MAX_SPLITS = 32  # kPagedDecodeMaxSplits
MEA_ACCUMULATOR_ABOVE = 128  # need_workspace: H > 128
XQA_ALIGNMENT = 128
XQA_ROW_BYTES = 128
XQA_TILE_KEYS = 256
UNSIZED_ROUTES = {
    Backend.CUDNN: "cuDNN's frontend sizes its own workspace (graph->get_workspace_size()) inside run_paged, and ORT "
                   "1.31.1 states no graph-free recipe for it",
    Backend.XQA_SPEC: "the speculative-decode XQA workspace (GetXQAPagedSpecDecWorkspaceSize) is not stored at the pin",
}


@dataclass(frozen=True)
class Allocation:
    """One `GetScratchBuffer` request: its name, bytes, and where its size comes from ('' : the
    shapes; else the device data that sizes it, in words, and the bound used)."""

    name: str
    nbytes: Any
    device_sized: str = ""


def readback(d: Any, p: PagedProblem, backend: Backend) -> Any:
    """Whether ORT copies the lengths back to the host for the route: no metadata, and a dense
    gather (MEA, Flash over a quantized cache) or an XQA candidate."""
    if p.has_metadata:
        return False
    return backend in (Backend.MEA, Backend.XQA) or (backend is Backend.FLASH and p.quantized)


def sizing(d: Any, p: PagedProblem, backend: Backend) -> tuple[Any, Any, Any]:
    """(Qx, Kx, Kl): the query length, key length and key lower bound the kernel sizes with."""
    if p.has_metadata or readback(d, p, backend):
        return p.max_query_len, p.max_kv_len, p.max_kv_len
    capacity = d.mul(p.max_blocks_per_sequence, p.block_size, what="M * block_size")
    return p.token_count, capacity, 0


def kv_tokens(d: Any, p: PagedProblem, backend: Backend, kx: Any) -> tuple[Any, str]:
    """Ktok, the gathered key rows: the read-back sum (at most B * L: every sequence at most L),
    or min(INT32_MAX, B * Kx) without a readback."""
    rows = d.mul(p.batch_size, kx, what="B * key length")
    if readback(d, p, backend):
        return rows, "the key lengths ORT copies back (their sum, at most B * L)"
    return d.min_(rows, INT32_MAX), ""


def common(d: Any, p: PagedProblem) -> list[Allocation]:
    """Every backend: the cumulative key lengths (B + 1 int32) and the prologue's dense Q (and K
    with rotary or QK-norm; Q alone for packed QKV)."""
    q = d.mul(p.token_count, p.num_heads, p.head_size, what="T * N * H")
    k = d.mul(p.token_count, p.kv_num_heads, p.head_size, what="T * Nk * H")
    prologue = (d.mul(2, q + k, what="prologue Q and K") if p.do_rotary or p.use_qk_norm
                else d.mul(2, q, what="prologue Q") if p.is_packed_qkv else 0)
    return [Allocation("cumulative_seqlens_kv", d.mul(INT_BYTES, p.batch_size + 1, what="4 * (B + 1)")),
            Allocation("prologue", prologue)]


def decode_splits(d: Any, p: PagedProblem, kx: Any, sm_count: int) -> Any:
    """ComputePagedDecodeSplits(T, N, Kx, SMs): 1 when T * N >= 2 * SMs, else
    clamp(min(ceil(2 * SMs / (T * N)), ceil(Kx / 128)), 1, 32)."""
    base = d.mul(p.token_count, p.num_heads, what="T * N")
    by_sms = d.div(2 * sm_count + base - 1, base)
    by_keys = d.div(kx + DECODE_TILE - 1, DECODE_TILE)
    chosen = d.max_(1, d.min_(DECODE_MAX_SPLITS, d.min_(by_sms, by_keys)))
    return d.ite(base >= 2 * sm_count, 1, chosen)


def flash_splits(d: Any, p: PagedProblem, qx: Any, kx: Any, kl: Any, sm_count: int) -> Any:
    """Flash's split count on the paged decode path: the heuristic over (B, 1, Kx, N, H) when T ==
    B, one query token, no head sink, no window and a key lower bound above 512; else 1."""
    gate = d.all_(p.token_count == p.batch_size, qx == 1, not p.has_head_sink, p.local_window_size <= 0,
                  kl > FLASH_SPLIT_MIN_KV)
    rows = flash_backend.split_rows(d, p.batch_size, p.num_heads, 1)
    blocks = flash_backend.key_blocks(d, p.head_size, kx)
    return d.ite(gate, lambda: flash_backend.split_count(d, rows, blocks, sm_count, rows_step=p.num_heads), 1)


def xqa_scratch(d: Any, p: PagedProblem, sm_count: int) -> Any:
    """GetXQAScratchSize at the static capacity M * bs: semaphores, row max / sum and the output
    accumulator over B * Nk * min(max(1, SMs / (B * Nk)), ceil(M * bs / 256)) subsequences."""
    sequences = d.mul(p.batch_size, p.kv_num_heads, what="XQA sequences B * Nk")
    capacity = d.mul(p.max_blocks_per_sequence, p.block_size, what="M * block_size")
    tiles = d.div(capacity + XQA_TILE_KEYS - 1, XQA_TILE_KEYS)
    subsequences = d.mul(sequences, d.min_(d.max_(1, d.div(sm_count, sequences)), tiles), what="XQA subsequences")
    tile = d.ite(group(d, p) <= 8, 8, lambda: d.ite(group(d, p) <= 16, 16, 32))
    vector = d.mul(p.head_size, tile, 2, what="XQA accumulator vector")
    rows = d.mul(XQA_ROW_BYTES, subsequences, what="XQA row max / sum")
    scratch = d.add(d.align_up(rows, XQA_ALIGNMENT, what="XQA row max"), rows, what="XQA rows")
    scratch = d.add(d.mul(d.div(scratch + vector - 1, vector), vector, what="XQA accumulator offset"),
                    d.mul(vector, subsequences, what="XQA output accumulator"), what="XQA scratch")
    semaphores = d.align_up(d.mul(4, sequences, what="XQA semaphores"), XQA_ALIGNMENT, what="XQA semaphores")
    return d.add(semaphores, scratch, what="XQA workspace")


def route_allocations(d: Any, p: PagedProblem, backend: Backend, config: RuntimeConfig,
                      flash_split_count: Any = None) -> tuple[list[Allocation], Any]:
    """The route's allocations beyond `common`, and its split count (1 where it has none).
    `flash_split_count`: Flash's split count to size with instead of the heuristic's (the
    estimate's envelope)."""
    qx, kx, kl = sizing(d, p, backend)
    sm_count = config.device.sm_count
    t, n, h = p.token_count, p.num_heads, p.head_size
    if backend is Backend.LATENT:
        return [], 1
    if backend is Backend.FLASH:
        splits = flash_split_count if flash_split_count is not None else flash_splits(d, p, qx, kx, kl, sm_count)
        lse_accum, out_accum = flash_backend.split_buffer_bytes(d, splits, p.batch_size, 1, n, h)
        out = [Allocation("softmax_lse", d.mul(LSE_ELEMENT_BYTES, t, n, what="4 * T * N")),
               Allocation("softmax_lse_accum", lse_accum), Allocation("out_accum", out_accum)]
        if p.quantized:
            rows, why = kv_tokens(d, p, backend, kx)
            gathered = d.mul(2, rows, p.kv_num_heads, h, what="gathered K")
            out += [Allocation("gathered_key", gathered, why), Allocation("gathered_value", gathered, why)]
        return out, splits
    if backend is Backend.MEA:
        rows, why = kv_tokens(d, p, backend, kx)
        gathered = d.mul(2, rows, n, h, what="gathered K expanded to N heads")
        accumulator = d.ite(h > MEA_ACCUMULATOR_ABOVE, lambda: d.mul(FLOAT_BYTES, t, n, h, what="MEA accumulator"), 0)
        return [Allocation("gathered_key", gathered, why), Allocation("gathered_value", gathered, why),
                Allocation("mea_accumulator", accumulator)], 1
    if backend is Backend.PAGED_DECODE:
        splits = decode_splits(d, p, kx, sm_count)
        partial = d.mul(FLOAT_BYTES, splits, t, n, what="4 * splits * T * N")
        return [Allocation("decode_partial_out", d.mul(partial, h, what="4 * splits * T * N * H")),
                Allocation("decode_partial_max", partial), Allocation("decode_partial_sum", partial)], splits
    if backend is Backend.XQA:
        pages = d.mul(p.max_blocks_per_sequence, d.div(p.block_size, XQA_PAGE), what="XQA pages per sequence")
        out = [Allocation("xqa_workspace", xqa_scratch(d, p, sm_count)),
               Allocation("xqa_page_table", d.ite(p.block_size > XQA_PAGE,
                                                  lambda: d.mul(INT_BYTES, p.batch_size, pages, what="4 * B * P"), 0)),
               Allocation("xqa_head_sink", d.mul(FLOAT_BYTES, n, what="4 * N") if p.has_head_sink else 0)]
        if p.k_quantization is KvQuantization.PER_CHANNEL:
            out += [Allocation("xqa_query", d.mul(2, t, n, h, what="2 * T * N * H")), Allocation("xqa_k_scale_norm", 4)]
        return out, 1
    raise InternalError(f"PagedAttention's {backend.value} route has no graph-free recipe")


@dataclass(frozen=True)
class PagedRecipe:
    """One PagedAttention route's scratch: its allocations, each its own request (bytes)."""

    backend: Backend
    buffers: tuple[Allocation, ...]
    splits: Any = 1

    op = Op.PAGED
    projection_bytes = 0
    qkv_layout = QkvLayout.NONE

    @property
    def attention_workspace_bytes(self) -> Any:
        """The bytes of every request together (all live to the end of the compute)."""
        total: Any = 0
        for b in self.buffers:
            total = total + b.nbytes
        return total

    def allocations(self) -> list[tuple[str, Any]]:
        """Each request, in ORT's order, with its bytes."""
        return [(b.name, b.nbytes) for b in self.buffers]

    def device_sized(self) -> dict[str, str]:
        """Each request whose size comes from device data, with where (in words)."""
        return {b.name: b.device_sized for b in self.buffers if b.device_sized}

    def route_text(self) -> str:
        """The split count of the split routes, in words ('' elsewhere)."""
        if self.backend not in (Backend.FLASH, Backend.PAGED_DECODE):
            return ""
        return f"{self.splits} split{'s' if self.splits != 1 else ''}"

    def views(self) -> list[View]:
        """Each non-empty request as a view over its own allocation, from 0."""
        return [View(b.name, b.name, 0, b.nbytes) for b in self.buffers if not isinstance(b.nbytes, int) or b.nbytes]

    def as_dict(self) -> dict[str, Any]:
        return {"op": self.op.value, "backend": self.backend.value, "projection_bytes": 0,
                "attention_workspace_bytes": self.attention_workspace_bytes, "splits": self.splits,
                "allocations": [{"name": b.name, "bytes": b.nbytes, "device_sized": b.device_sized}
                                for b in self.buffers]}


def recipe(p: Any, backend: Backend, *, trt_runner_available: bool = True, route_gates: bool = True,
           d: Any = CONCRETE, config: Any = None) -> PagedRecipe:
    """Return the route's allocations under `config` (its SM count sizes the split routes and
    XQA), or raise InvalidArgument for a backend the family lacks or one with no recipe."""
    if backend not in BACKENDS:
        raise InvalidArgument(f"PagedAttention has no {backend.value} route")
    if backend in UNSIZED_ROUTES:
        raise Unavailable(f"PagedAttention's {backend.value} route: {UNSIZED_ROUTES[backend]}")
    if config is None:
        raise InternalError("PagedAttention's recipe needs the runtime configuration (its SM count)")
    extra, splits = route_allocations(d, p, backend, config)
    return PagedRecipe(backend, tuple(common(d, p) + extra), splits)


def validate_views(d: Any, r: PagedRecipe) -> None:
    """Containment: each view is its own allocation, from 0 to its bytes (each request is sized
    for the one buffer it holds); the bytes must be non-negative."""
    for v in r.views():
        d.require(v.nbytes >= 0, lambda v=v: InvalidArgument(f"allocation {v.name} has {v.nbytes} bytes"))


def aligned_quantities(r: PagedRecipe) -> list[tuple[str, Any]]:
    """Nothing must be a multiple of 256: each request is its own allocation."""
    return []
