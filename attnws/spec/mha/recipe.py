"""MultiHeadAttention workspace recipes: exact bytes and every view's offset, per backend.

The allocation is ONNX Runtime's single `GetScratchBuffer(workspace_bytes)` of
`GetAttentionWorkspaceSize` (`contrib_ops/cuda/bert/attention_impl.cu`):

    qkv     = e * B * N * ((S + L) * H + L * Hv), or 0 when NoQkvWorkspace holds
    flash, cuDNN           qkv
    MEA                    qkv + (Hv > 128 and not fp32 ? 4 * B * S * N * Hv : 0)
    TRT fused runner       qkv + align256(4 * (2B + 1))
    TRT cross              qkv + 2 * align256(4 * (2B + 1))
    unfused                qkv + 2 * align256(e * B * N * S * T)

PrepareQkv (`attention_prepare_qkv.cu`) carves Q at 0, K after B*N*S*H elements, V after
B*N*L*H more, and the backend's scratch at the end of the qkv region. The recipes cover only the
workspace: the present key/value outputs and the cuDNN frontend's own workspace are separate
allocations, and so are Flash's softmax LSE and split-KV accumulators, which `side_allocations`
sizes. All sizes are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..backends import flash, mea, unfused
from ..domain import CONCRETE, fits_int32, fits_int64
from ..errors import InvalidArgument
from ..layout import ATTENTION, View, require_views_within
from ..limits import (
    FLASH_SEQUENCE_ROUNDING, GRID_DIM_YZ_MAX, INT32_MAX, MEA_LSE_ALIGNMENT, MEA_MAX_QUERIES_PER_BLOCK,
    WORKSPACE_ALIGNMENT,
)
from ..problem import Backend, Op, QkvLayout
from .problem import BACKENDS, MhaFormat, MhaProblem

# Routes ORT runs whose workspace no graph-free recipe states (backend -> why): none here (cuDNN's
# frontend workspace is its own allocation, outside ORT's; its recipe is the QKV preparation).
UNSIZED_ROUTES: dict[Backend, str] = {}
SEQUENCE_OFFSET_BYTES = 4  # sizeof(int) of the TRT kernels' cumulative sequence offsets
READS_INPUTS = (Backend.FLASH, Backend.MEA, Backend.CUDNN)  # the BSNH consumers of PrepareQkv


@dataclass(frozen=True)
class MhaRecipe:
    """One MultiHeadAttention route's workspace. Bytes throughout; `view_list` holds every range
    of the workspace the route's kernels read or write, all live together."""

    backend: Backend
    attention_workspace_bytes: Any
    qkv_bytes: Any
    no_qkv_workspace: bool
    scratch_offset_bytes: Any
    scratch_bytes: Any
    view_list: tuple[View, ...] = field(default=())

    op = Op.MHA
    projection_bytes = 0

    @property
    def qkv_layout(self) -> QkvLayout:
        """NONE when the route reads the operator's inputs directly, else PLANAR."""
        return QkvLayout.NONE if self.no_qkv_workspace else QkvLayout.PLANAR

    def allocations(self) -> list[tuple[str, Any]]:
        """The single workspace allocation, in bytes."""
        return [(ATTENTION, self.attention_workspace_bytes)]

    def route_text(self) -> str:
        """What the route does beyond its backend's name, in words ('': nothing)."""
        return ""

    def views(self) -> list[View]:
        """Every range of the workspace the route's kernels read or write; all are live together."""
        return list(self.view_list)

    def as_dict(self) -> dict[str, Any]:
        """Return the recipe's fields, views as {name: [offset, bytes]}."""
        return {
            "op": self.op.value, "backend": self.backend.value, "projection_bytes": 0,
            "attention_workspace_bytes": self.attention_workspace_bytes, "qkv_bytes": self.qkv_bytes,
            "no_qkv_workspace": self.no_qkv_workspace, "scratch_offset_bytes": self.scratch_offset_bytes,
            "scratch_bytes": self.scratch_bytes, "views": {v.name: [v.offset, v.nbytes] for v in self.view_list},
        }


def no_qkv_workspace(p: MhaProblem, backend: Backend) -> bool:
    """NoQkvWorkspace: whether the route reads Q, K and V from the inputs (and the present
    outputs) without a copy in the workspace."""
    if p.qkv_format is MhaFormat.PACKED_KV:
        return backend is Backend.TRT_CROSS
    if p.qkv_format is MhaFormat.PACKED_QKV:
        return backend is Backend.TRT and not p.has_bias
    if backend not in READS_INPUTS:
        return False
    if p.qkv_format is MhaFormat.SEPARATE and (p.has_past or p.has_present):
        return not p.has_bias and not p.has_past and p.has_present
    return not p.has_bias


def qkv_bytes(d: Any, p: MhaProblem) -> Any:
    """Return e * B * N * ((S + L) * H + L * Hv): the Q, K and V copies, in bytes."""
    s_plus_l = d.add(p.sequence_length, p.kv_sequence_length, what="S + L")
    qk = d.mul(s_plus_l, p.qk_head_size, what="(S + L) * H")
    v = d.mul(p.kv_sequence_length, p.v_head_size, what="L * Hv")
    per_head = d.add(qk, v, what="(S + L) * H + L * Hv")
    return d.mul(p.element_size, p.batch_size, p.num_heads, per_head, what="qkv e * B * N * ((S + L) * H + L * Hv)")


def sequence_offset_bytes(d: Any, batch: Any, has_padding: bool) -> Any:
    """GetSequenceOffsetSize: align256(4 * (2B + 1)) with padding, align256(4 * (B + 1)) without."""
    count = d.add(d.mul(2 if has_padding else 1, batch, what="offset count"), 1, what="offset count + 1")
    raw = d.mul(SEQUENCE_OFFSET_BYTES, count, what="sequence offsets")
    return d.align_up(raw, WORKSPACE_ALIGNMENT, what="sequence offsets alignment")


def scores_used_bytes(d: Any, p: MhaProblem) -> Any:
    """Return e * B * N * S * T: the bytes of one unfused score matrix."""
    return d.mul(p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.total_sequence_length,
                 what="unfused scores e * B * N * S * T")


def scores_bytes(d: Any, p: MhaProblem) -> Any:
    """GetAttentionScratchSize: align256(e * B * N * S * T), one unfused region, in bytes."""
    return unfused.scratch_region_bytes(d, scores_used_bytes(d, p))


def scratch_bytes(d: Any, p: MhaProblem, backend: Backend) -> Any:
    """Return the bytes the route adds after the qkv region (GetAttentionWorkspaceSize's branch)."""
    if backend is Backend.MEA:
        return mea.accumulator_bytes(d, p)
    if backend is Backend.TRT:
        return sequence_offset_bytes(d, p.batch_size, True)
    if backend is Backend.TRT_CROSS:
        return d.mul(2, sequence_offset_bytes(d, p.batch_size, True), what="two sequence offset regions")
    if backend is Backend.UNFUSED:
        return d.mul(2, scores_bytes(d, p), what="two unfused scratch regions")
    return 0


def _qkv_views(d: Any, p: MhaProblem, backend: Backend) -> list[View]:
    """The Q / K / V copies PrepareQkv writes for this route and format (workspace present)."""
    e, b, n = p.element_size, p.batch_size, p.num_heads
    q = d.mul(e, b, n, p.sequence_length, p.qk_head_size, what="Q copy e * B * N * S * H")
    k = d.mul(e, b, n, p.kv_sequence_length, p.qk_head_size, what="K copy e * B * N * L * H")
    v = d.mul(e, b, n, p.kv_sequence_length, p.v_head_size, what="V copy e * B * N * L * Hv")
    k_offset = q
    v_offset = d.add(q, k, what="V offset")
    if backend is Backend.TRT:
        return [View("qkv_packed", ATTENTION, 0, d.add(v_offset, v, what="packed QKV"))]
    if backend is Backend.TRT_CROSS:
        return [View("q", ATTENTION, 0, q), View("kv_packed", ATTENTION, k_offset, d.add(k, v, what="packed KV"))]
    fmt = p.qkv_format
    if fmt is MhaFormat.CROSS:
        names = ("q",)
    elif fmt is MhaFormat.PACKED_KV and backend in READS_INPUTS:
        names = ("k", "v")
    elif fmt is MhaFormat.SEPARATE and (p.has_past or p.has_present):
        # Without a past, K and V go straight into the present outputs; Q is copied when a bias is
        # added or the unfused route transposes it.
        copies_q = p.has_bias or backend is Backend.UNFUSED
        names = (("q",) if copies_q else ()) + (("k", "v") if p.has_past else ())
    else:
        names = ("q", "k", "v")
    all_views = {"q": View("q", ATTENTION, 0, q), "k": View("k", ATTENTION, k_offset, k),
                 "v": View("v", ATTENTION, v_offset, v)}
    return [all_views[name] for name in names]


def _scratch_views(d: Any, p: MhaProblem, backend: Backend, offset: Any) -> list[View]:
    if backend is Backend.MEA:
        return [View("mea_accumulator", ATTENTION, offset, mea.accumulator_bytes(d, p))]
    if backend is Backend.TRT:
        return [View("sequence_offsets", ATTENTION, offset, sequence_offset_bytes(d, p.batch_size, True))]
    if backend is Backend.TRT_CROSS:
        each = sequence_offset_bytes(d, p.batch_size, False)
        return [View("q_sequence_offsets", ATTENTION, offset, each),
                View("kv_sequence_offsets", ATTENTION, d.add(offset, each, what="kv offsets offset"), each)]
    if backend is Backend.UNFUSED:
        region = scores_bytes(d, p)
        return [View("scores", ATTENTION, offset, region),
                View("probabilities", ATTENTION, d.add(offset, region, what="second scratch offset"), region)]
    return []


def kv_in_bnsh(p: MhaProblem) -> bool:
    """Return whether K and V reach the attention kernels as [B, N, T, H] (cross attention, or a
    key/value cache: ORT's Q_K_V_BSNH_BNSH_BNSH) rather than [B, T, N, H]."""
    return p.qkv_format is MhaFormat.CROSS or p.has_past or p.has_present


def validate_geometry(d: Any, p: MhaProblem, backend: Backend) -> None:
    """The grid and integer-width checks the route's kernels need (the CUDA ABI)."""
    b, n, s, t = p.batch_size, p.num_heads, p.sequence_length, p.total_sequence_length
    if backend in (Backend.FLASH, Backend.MEA):
        d.require(d.all_(b <= GRID_DIM_YZ_MAX, n <= GRID_DIM_YZ_MAX), lambda: InvalidArgument(
            f"{backend.value}: B = {b} or N = {n} exceeds CUDA gridDim.y/z ({GRID_DIM_YZ_MAX})"))
    if backend is Backend.FLASH:
        for what, value in (("S", s), ("T", t)):
            d.require(value <= INT32_MAX - (FLASH_SEQUENCE_ROUNDING - 1), lambda what=what, value=value: InvalidArgument(
                f"flash: {what} = {value} rounded up to a multiple of {FLASH_SEQUENCE_ROUNDING} exceeds int32"))
    if backend is Backend.MEA:
        for multiple in (MEA_MAX_QUERIES_PER_BLOCK, MEA_LSE_ALIGNMENT):
            d.require(s <= INT32_MAX - (multiple - 1), lambda multiple=multiple: InvalidArgument(
                f"mea: S = {s} rounded up to a multiple of {multiple} exceeds int32"))
        # fmha_launch_template.h: with K and V in BNSH (cross, or a cache) the batch and head strides
        # are int products, widened only afterwards; with BSNH the batch strides are int64.
        fits = fits_int32 if kv_in_bnsh(p) else fits_int64
        fits(d, n, p.qk_head_size, s, what="mea query batch stride N * H * S")
        fits(d, n, p.qk_head_size, t, what="mea key batch stride N * H * T")
        fits(d, n, p.v_head_size, t, what="mea value batch stride N * Hv * T")
        if kv_in_bnsh(p):
            fits_int32(d, t, p.qk_head_size, what="mea key head stride T * H")
            fits_int32(d, t, p.v_head_size, what="mea value head stride T * Hv")
    if backend is Backend.UNFUSED:
        # UnfusedAttention (attention_impl.cu) forms its strided-batched GEMM strides and the softmax
        # element index as int products, unchecked: past INT32_MAX they wrap (negative strides).
        h, hv = p.qk_head_size, p.v_head_size
        d.require(b <= GRID_DIM_YZ_MAX, lambda: InvalidArgument(
            f"unfused: B = {b} exceeds CUDA gridDim.y ({GRID_DIM_YZ_MAX}) of the softmax and LaunchTransCtx"))
        for operands, what in (((b, n), "unfused GEMM batch count B * N"), ((t, h), "unfused GEMM stride T * H"),
                               ((t, hv), "unfused GEMM stride T * Hv"), ((s, h), "unfused GEMM stride S * H"),
                               ((s, t), "unfused GEMM stride S * T"), ((s, hv), "unfused GEMM stride S * Hv"),
                               ((b, n, s, t), "unfused softmax element index B * N * S * T")):
            fits_int32(d, *operands, what=what)


def check_route_gates(d: Any, p: MhaProblem, backend: Backend) -> None:
    """The conditions without which a route's recipe means nothing (the dispatch gates that fix
    its layout): the fused routes need H == Hv; the fused runner also S == L."""
    if backend in (Backend.TRT, Backend.TRT_CROSS, Backend.FLASH):
        d.require(p.qk_head_size == p.v_head_size, lambda: InvalidArgument(
            f"{backend.value} route needs H == Hv, H = {p.qk_head_size}, Hv = {p.v_head_size}"))
    if backend is Backend.TRT:
        d.require(p.sequence_length == p.kv_sequence_length, lambda: InvalidArgument(
            f"the TRT fused runner is self attention only: S = {p.sequence_length}, L = {p.kv_sequence_length}"))


def validate_views(d: Any, r: MhaRecipe) -> None:
    """Containment: every view's end (checked addition) lies within the workspace."""
    require_views_within(d, list(r.view_list), r.attention_workspace_bytes)


def recipe(p: MhaProblem, backend: Backend, *, trt_runner_available: bool = True, route_gates: bool = True,
           d: Any = CONCRETE, config: Any = None) -> MhaRecipe:
    """Return the exact workspace recipe of p on backend, or raise ORT's error. MultiHeadAttention
    sizes its TRT routes without a runner, so `trt_runner_available` does not apply, and its
    workspace without the runtime configuration `config` (Flash's side allocations need it:
    `side_allocations`)."""
    if backend not in BACKENDS:
        raise InvalidArgument(f"MultiHeadAttention has no {backend.value} route")
    if route_gates:
        check_route_gates(d, p, backend)
    validate_geometry(d, p, backend)
    direct = no_qkv_workspace(p, backend)
    qkv = 0 if direct else qkv_bytes(d, p)
    scratch = scratch_bytes(d, p, backend)
    total = d.add(qkv, scratch, what="MultiHeadAttention workspace")
    views = ([] if direct else _qkv_views(d, p, backend)) + _scratch_views(d, p, backend, qkv)
    r = MhaRecipe(backend, total, qkv, direct, qkv, scratch, tuple(views))
    validate_views(d, r)
    return r


def aligned_quantities(r: MhaRecipe) -> list[tuple[str, Any]]:
    """Return (name, bytes) of each region ORT sizes with AlignSize, which must be a multiple of
    256: the unfused regions and the TRT sequence offsets."""
    aligned = ("scores", "probabilities", "sequence_offsets", "q_sequence_offsets", "kv_sequence_offsets")
    return [(f"{v.name} region", v.nbytes) for v in r.view_list if v.name in aligned]


# -- Flash's side allocations -------------------------------------------------------------------
# When the cascade picks Flash, multihead_attention.cc (@ 541d5daff6b39db7204fc4bb43c92df5b95f0a46)
# takes three more buffers, each with its own GetScratchBuffer call beside the workspace and live
# with it while Flash runs (flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03):
#   softmax_lse        get_softmax_lse_size(S, B, N)                        4 * B * N * S
#   softmax_lse_accum  get_num_splits_and_buffer_sizes(B, S, T, N, H, SMs)  4 * splits * B * S * N
#   out_accum          the same call                                        4 * splits * B * S * N * round32(H)
# The accumulators exist only when the split-KV heuristic splits; otherwise ORT gets (0, 0, 0).


@dataclass(frozen=True, slots=True)
class FlashSideAllocations:
    """Flash's buffers outside the workspace: the split count (1 when the heuristic does not
    split; ORT then stores 0) and the bytes of each buffer and of all three."""

    splits: Any
    softmax_lse_bytes: Any
    softmax_lse_accum_bytes: Any
    out_accum_bytes: Any
    total_bytes: Any


def _flash_side(d: Any, splits: Any, lse: Any, accumulators: tuple[Any, Any]) -> FlashSideAllocations:
    lse_accum, out_accum = accumulators
    total = d.add(d.add(lse, lse_accum, what="Flash LSE + LSE accumulator"), out_accum,
                  what="Flash side allocations")
    return FlashSideAllocations(splits, lse, lse_accum, out_accum, total)


def side_allocations(p: MhaProblem, sm_count: int, d: Any = CONCRETE) -> FlashSideAllocations:
    """Return what Flash allocates beside the workspace for p on a device with sm_count
    multiprocessors: the heuristic's split count over B, S, T = P + L, N query heads and H, then
    the LSE and, when it splits, the two float32 accumulators. Bytes."""
    rows = flash.split_rows(d, p.batch_size, p.num_heads, p.sequence_length)
    blocks = flash.key_blocks(d, p.qk_head_size, p.total_sequence_length)
    step = p.num_heads if isinstance(p.num_heads, int) else 1  # rows = B * N * ceil(S / 64)
    splits = flash.split_count(d, rows, blocks, sm_count, step)
    return _flash_side(d, splits, flash.softmax_lse_bytes(d, p), flash.split_buffer_bytes(
        d, splits, p.batch_size, p.sequence_length, p.num_heads, p.qk_head_size))


def side_allocation_bound(p: MhaProblem, sm_count: int, d: Any = CONCRETE) -> FlashSideAllocations:
    """Return an upper bound of `side_allocations`, field by field, over every problem whose B,
    S, N, H and T are each at most p's. Bytes.

    The split count is not monotonic in T (a longer key can pick fewer splits), so the bound does
    not run the heuristic at p: its `splits` is the loop's cap min(128, SMs, key blocks), the key
    blocks being most at p's H and T (the block shrinks as H grows). A problem the heuristic splits
    has at most `most_split_lse_rows` LSE rows B * S * N, so the accumulators are bounded at that
    cap over min(B * S * N, those) rows and round32(H) at p; the LSE is p's. `splits` is 1 when no
    such problem splits, and then there are no accumulators.
    """
    most_rows = flash.most_split_lse_rows(sm_count)
    cap = flash.split_cap(d, flash.key_blocks(d, p.qk_head_size, p.total_sequence_length), sm_count)
    splits = cap if most_rows else 1
    rows = d.min_(d.mul(p.batch_size, p.sequence_length, p.num_heads, what="LSE rows B * S * N"), most_rows)
    # The B * S * N rows folded into one count: batch 1, `rows` queries, one head.
    return _flash_side(d, splits, flash.softmax_lse_bytes(d, p),
                       flash.split_buffer_bytes(d, splits, 1, rows, 1, p.qk_head_size))
