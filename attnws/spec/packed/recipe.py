"""The packed family's workspace recipes: exact bytes and every view's offset for one problem on
one backend.

A recipe mirrors ONNX Runtime's GetPackedAttentionWorkspaceRecipe /
GetPackedMultiHeadAttentionWorkspaceRecipe field for field and check for check. All sizes are
bytes. The attention workspace is one allocation; PA additionally owns a projection allocation
that is live at the same time.

Layout of the attention allocation (C = qkv_capacity_bytes, the legacy B*S capacity):
- TRT: interleaved [T, N, 3, H] at 0 (or nothing when PMHA reads its packed input directly).
- Flash / MEA: planar Q, K, V of T tokens from 0, then the LSE / FP32 accumulator right after
  the views; the allocation still counts all of C.
- Unfused: planar Q, K, V of B*S tokens ending exactly at C, then two scratch regions of
  align256(es*B*N*S*S) bytes each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..backends import flash, mea, unfused
from ..domain import CONCRETE, fits_int32, fits_int64
from ..errors import InvalidArgument
from ..layout import Recipe
from ..limits import (
    FLASH_SEQUENCE_ROUNDING,
    GRID_DIM_YZ_MAX,
    INT32_MAX,
    MEA_LSE_ALIGNMENT,
    MEA_MAX_QUERIES_PER_BLOCK,
)
from ..problem import Backend, Op, QkvLayout
from ..validation import validate_element_size
from .builder import validate_core_geometry
from .problem import BACKENDS, Problem, QkvFormat


# Routes ORT runs whose workspace no graph-free recipe states (backend -> why): none here.
UNSIZED_ROUTES: dict[Backend, str] = {}


def _zero(*values: Any) -> list[Any]:
    return [v == 0 for v in values]


def validate_range(d: Any, r: Recipe, offset: Any, nbytes: Any, name: str) -> None:
    """Check offset + nbytes (checked) <= attention_workspace_bytes."""
    end = d.add(offset, nbytes, what=f"end of view {name}")
    d.require(
        end <= r.attention_workspace_bytes,
        lambda: InvalidArgument(
            f"view {name} [{offset}, {end}) exceeds its allocation of {r.attention_workspace_bytes} bytes"
        ),
    )


def validate_views(d: Any, r: Recipe) -> None:
    """Containment (ORT's ValidatePackedAttentionWorkspaceRecipe): raise InvalidArgument unless
    the recipe's layout fields agree and every view's end, computed with checked addition, lies
    within its allocation."""
    d.require(
        r.qkv_capacity_bytes <= r.attention_workspace_bytes,
        lambda: InvalidArgument(
            f"QKV capacity {r.qkv_capacity_bytes} exceeds the attention allocation {r.attention_workspace_bytes}"
        ),
    )
    planar = (r.q_offset_bytes, r.q_bytes, r.k_offset_bytes, r.k_bytes, r.v_offset_bytes, r.v_bytes)
    interleaved = (r.interleaved_qkv_offset_bytes, r.interleaved_qkv_bytes)
    if r.qkv_layout is QkvLayout.NONE:
        if not r.no_qkv_workspace:
            raise InvalidArgument("a recipe without QKV layout must be a no-QKV-workspace recipe")
        d.require(d.all_(*_zero(*planar, *interleaved)),
                  lambda: InvalidArgument("a no-QKV-workspace recipe exposes QKV workspace views"))
    elif r.qkv_layout is QkvLayout.PLANAR:
        if r.no_qkv_workspace:
            raise InvalidArgument("a planar QKV recipe is marked no-QKV-workspace")
        d.require(d.all_(*_zero(*interleaved)),
                  lambda: InvalidArgument("a planar QKV recipe has interleaved view fields"))
        validate_range(d, r, r.q_offset_bytes, r.q_bytes, "q")
        validate_range(d, r, r.k_offset_bytes, r.k_bytes, "k")
        validate_range(d, r, r.v_offset_bytes, r.v_bytes, "v")
    elif r.qkv_layout is QkvLayout.INTERLEAVED:
        if r.no_qkv_workspace:
            raise InvalidArgument("an interleaved QKV recipe is marked no-QKV-workspace")
        d.require(d.all_(*_zero(*planar)),
                  lambda: InvalidArgument("an interleaved QKV recipe exposes planar Q/K/V views"))
        validate_range(d, r, r.interleaved_qkv_offset_bytes, r.interleaved_qkv_bytes, "qkv_interleaved")
    else:
        raise InvalidArgument(f"QKV workspace layout {r.qkv_layout!r} is invalid")
    validate_range(d, r, r.backend_workspace_offset_bytes, r.backend_workspace_bytes, "backend workspace")
    if r.has_second_scratch:
        validate_range(d, r, r.second_scratch_offset_bytes, r.backend_workspace_bytes, "second scratch")
    else:
        d.require(
            r.second_scratch_offset_bytes == 0,
            lambda: InvalidArgument(
                f"a recipe without a second scratch region has second-scratch offset {r.second_scratch_offset_bytes}"
            ),
        )


def validate_index_width(d: Any, p: Problem) -> Any:
    """Check the materialization index width is 1, 2 or 4 and divides both head sizes; return it."""
    width = p.qkv_materialization_index_width
    d.require(
        d.all_(
            d.member(width, (1, 2, 4)),
            d.mod(p.qk_head_size, width) == 0,
            d.mod(p.v_head_size, width) == 0,
        ),
        lambda: InvalidArgument(
            f"QKV materialization index width {width} is invalid for head sizes "
            f"H = {p.qk_head_size}, Hv = {p.v_head_size}"
        ),
    )
    return width


def producer_qkv_head_size(d: Any, p: Problem) -> Any:
    """Return (2H + Hv) / w: the producer's per-head row in index-width elements."""
    width = validate_index_width(d, p)
    h, hv = d.div(p.qk_head_size, width), d.div(p.v_head_size, width)
    return d.add(d.add(h, h, what="2 * H / w"), hv, what="(2H + Hv) / w")


def validate_qkv_materialization(d: Any, p: Problem) -> None:
    """Check the bias-add/transpose producer's int32 offsets: N*(2H+Hv)/w and T*N*(2H+Hv)/w."""
    per_head = producer_qkv_head_size(d, p)
    fits_int32(d, p.num_heads, per_head, what="materialization N * (2H + Hv) / w")
    fits_int32(d, p.token_count, p.num_heads, per_head, what="materialization T * N * (2H + Hv) / w")


def validate_fused_grid(d: Any, p: Problem, backend_name: str) -> None:
    """Check B and N fit CUDA gridDim.y / gridDim.z (65535)."""
    d.require(
        d.all_(p.batch_size <= GRID_DIM_YZ_MAX, p.num_heads <= GRID_DIM_YZ_MAX),
        lambda: InvalidArgument(
            f"{backend_name}: B = {p.batch_size} or N = {p.num_heads} exceeds CUDA gridDim.y/z "
            f"({GRID_DIM_YZ_MAX})"
        ),
    )


def validate_rounded_int32(d: Any, value: Any, multiple: int, what: str) -> None:
    """Check value rounded up to `multiple` still fits int32 (value <= INT32_MAX - (multiple - 1))."""
    d.require(
        value <= INT32_MAX - (multiple - 1),
        lambda: InvalidArgument(f"{what}: S = {value} rounded up to a multiple of {multiple} exceeds int32"),
    )


def validate_flash_geometry(d: Any, p: Problem) -> None:
    """Flash: B, N within gridDim; S rounded to 128 fits int32."""
    validate_fused_grid(d, p, "flash")
    validate_rounded_int32(d, p.sequence_length, FLASH_SEQUENCE_ROUNDING, "flash sequence rounding")


def validate_mea_geometry(d: Any, p: Problem) -> None:
    """MEA: gridDim; S + 63 and S + 31 fit int32; N*H*S, N*Hv*S and the attention-bias strides fit int64."""
    validate_fused_grid(d, p, "mea")
    validate_rounded_int32(d, p.sequence_length, MEA_MAX_QUERIES_PER_BLOCK, "mea query-block rounding")
    validate_rounded_int32(d, p.sequence_length, MEA_LSE_ALIGNMENT, "mea LSE rounding")
    fits_int64(d, p.num_heads, p.qk_head_size, p.sequence_length, what="mea BSNH batch stride N * H * S")
    fits_int64(d, p.num_heads, p.v_head_size, p.sequence_length, what="mea BSNH batch stride N * Hv * S")
    if not p.has_attention_bias:
        return
    matrix = fits_int64(d, p.sequence_length, p.sequence_length, what="mea attention-bias head stride S * S")
    heads = d.ite(p.broadcast_attn_bias_dim_1, 1, p.num_heads)
    stride = fits_int64(d, heads, matrix, what="mea attention-bias batch stride")
    batches = d.ite(p.broadcast_attn_bias_dim_0, 1, p.batch_size)
    extent = fits_int64(d, batches, stride, what="mea attention-bias extent")
    d.mul(extent, p.element_size, what="mea attention-bias bytes")


def validate_unfused_geometry(d: Any, p: Problem) -> None:
    """Unfused: B <= gridDim.y and every int32 product its kernels form (S*S among them)."""
    d.require(
        p.batch_size <= GRID_DIM_YZ_MAX,
        lambda: InvalidArgument(f"unfused: B = {p.batch_size} exceeds CUDA gridDim.y ({GRID_DIM_YZ_MAX})"),
    )
    width = validate_index_width(d, p)
    b, s, n, t = p.batch_size, p.sequence_length, p.num_heads, p.token_count
    producer_h, producer_hv = d.div(p.qk_head_size, width), d.div(p.v_head_size, width)
    fits_int32(d, b, s, what="unfused B * S")
    fits_int32(d, s, s, what="unfused S * S")
    fits_int32(d, b, n, what="unfused B * N")
    fits_int32(d, b, n, s, what="unfused B * N * S")
    fits_int32(d, s, p.qk_head_size, what="unfused S * H")
    fits_int32(d, s, p.v_head_size, what="unfused S * Hv")
    fits_int32(d, b, n, s, producer_h, what="unfused B * N * S * H / w")
    fits_int32(d, b, n, s, producer_hv, what="unfused B * N * S * Hv / w")
    per_head = d.add(d.add(producer_h, producer_h, what="2 * H / w"), producer_hv, what="(2H + Hv) / w")
    fits_int32(d, t, n, per_head, what="unfused T * N * (2H + Hv) / w")
    fits_int32(d, b, s, n, per_head, what="unfused B * S * N * (2H + Hv) / w")


def validate_backend_geometry(d: Any, p: Problem, backend: Backend) -> None:
    """Run the ABI / grid checks ORT makes for one backend (TRT makes none)."""
    if backend is Backend.FLASH:
        validate_flash_geometry(d, p)
    elif backend is Backend.MEA:
        validate_mea_geometry(d, p)
    elif backend is Backend.UNFUSED:
        validate_unfused_geometry(d, p)


def qkv_head_size(d: Any, p: Problem) -> Any:
    """Return 2H + Hv, the elements of Q, K and V per token and head."""
    return d.add(d.add(p.qk_head_size, p.qk_head_size, what="2H"), p.v_head_size, what="2H + Hv")


def qkv_capacity_bytes(d: Any, p: Problem) -> Any:
    """Return es * B * S * N * (2H + Hv): the legacy B*S capacity of materialized Q/K/V, in bytes."""
    return d.mul(p.element_size, p.batch_size, p.sequence_length, p.num_heads, qkv_head_size(d, p),
                 what="QKV capacity es * B * S * N * (2H + Hv)")


def unfused_scratch_used_bytes(d: Any, p: Problem) -> Any:
    """Return es * B * N * S * S: the bytes of one unfused scratch region the kernels write."""
    return d.mul(p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.sequence_length,
                 what="unfused scratch es * B * N * S * S")


def unfused_scratch_bytes(d: Any, p: Problem) -> Any:
    """Return align256(es * B * N * S * S): one of the unfused route's two scratch regions, in bytes."""
    return unfused.scratch_region_bytes(d, unfused_scratch_used_bytes(d, p))


def projection_n(d: Any, p: Problem) -> Any:
    """Return PA's GEMM n = 2 * hidden + v_hidden, checked to fit the int32 GEMM ABI."""
    n = d.add(d.add(p.hidden_size, p.hidden_size, what="2 * hidden"), p.v_hidden_size, what="projection n")
    d.require(n <= INT32_MAX, lambda: InvalidArgument(f"PA projection n = {n} does not fit the int32 GEMM ABI"))
    return n


def projection_bytes(d: Any, p: Problem, n: Any) -> Any:
    """Return es * T * n, n = 2 * hidden + v_hidden: PA's projection GEMM output, in bytes."""
    elements = d.mul(p.token_count, n, what="projection T * n")
    return d.mul(elements, p.element_size, what="projection bytes")


def _attention_recipe(d: Any, p: Problem, backend: Backend, no_qkv_workspace: bool) -> Recipe:
    """The attention allocation shared by PA and PMHA (ORT's ComputeWorkspaceRecipe)."""
    if not no_qkv_workspace:
        validate_qkv_materialization(d, p)
        qkv_head_size(d, p)
    validate_backend_geometry(d, p, backend)
    capacity = 0 if no_qkv_workspace else qkv_capacity_bytes(d, p)
    views: dict[str, Any] = {}
    if not no_qkv_workspace:
        if backend is Backend.TRT:
            views["qkv_layout"] = QkvLayout.INTERLEAVED
            views["interleaved_qkv_bytes"] = d.mul(
                p.element_size, p.token_count, p.num_heads, qkv_head_size(d, p),
                what="interleaved view es * T * N * (2H + Hv)",
            )
        else:
            tokens = (d.mul(p.batch_size, p.sequence_length, what="B * S")
                      if backend is Backend.UNFUSED else p.token_count)
            q = d.mul(p.element_size, tokens, p.num_heads, p.qk_head_size, what="Q view bytes")
            v_offset = d.add(q, q, what="V view offset")
            v = d.mul(p.element_size, tokens, p.num_heads, p.v_head_size, what="V view bytes")
            views.update(
                qkv_layout=QkvLayout.PLANAR, q_bytes=q, k_offset_bytes=q, k_bytes=q,
                v_offset_bytes=v_offset, v_bytes=v,
                backend_workspace_offset_bytes=d.add(v_offset, v, what="backend offset"),
            )
    offset = views.get("backend_workspace_offset_bytes", 0)
    if backend is Backend.UNFUSED:
        region = unfused_scratch_bytes(d, p)
        d.require(
            offset == capacity,
            lambda: InvalidArgument(f"unfused Q/K/V views end at {offset}, not at the QKV capacity {capacity}"),
        )
        second = d.add(offset, region, what="second scratch offset")
        total = d.add(capacity, d.mul(region, 2, what="two scratch regions"), what="unfused workspace")
        views.update(has_second_scratch=True, second_scratch_offset_bytes=second)
    else:
        region = (flash.softmax_lse_bytes(d, p) if backend is Backend.FLASH
                  else mea.accumulator_bytes(d, p) if backend is Backend.MEA else 0)
        total = d.add(capacity, region, what="attention workspace")
    recipe = Recipe(
        op=p.op, backend=backend, attention_workspace_bytes=total, no_qkv_workspace=no_qkv_workspace,
        qkv_capacity_bytes=capacity, backend_workspace_bytes=region, **views,
    )
    validate_views(d, recipe)
    return recipe


def check_route_gates(d: Any, p: Problem, backend: Backend, trt_runner_available: bool) -> None:
    """The recipe-level route gates ORT applies before sizing (not dispatch: an error, not a fallback)."""
    if backend is Backend.FLASH and p.op is Op.PA:
        raise InvalidArgument("PackedAttention has no Flash route")
    if backend is Backend.TRT:
        if not trt_runner_available:
            raise InvalidArgument("TRT workspace sizing requires an existing validated runner (runner unavailable)")
        d.require(
            p.qk_head_size == p.v_head_size,
            lambda: InvalidArgument(f"TRT route needs equal head sizes, H = {p.qk_head_size}, Hv = {p.v_head_size}"),
        )
    if backend is Backend.FLASH:
        d.require(
            d.all_(p.qk_head_size == p.v_head_size, not p.has_attention_bias),
            lambda: InvalidArgument(
                f"flash route needs equal head sizes and no attention bias: H = {p.qk_head_size}, "
                f"Hv = {p.v_head_size}, attention bias {'present' if p.has_attention_bias else 'absent'}"
            ),
        )


def reads_inputs_directly(p: Problem, backend: Backend) -> bool:
    """Return True when PMHA's backend reads Q/K/V from its inputs (no QKV workspace).

    TRT with packed [T, N, 3, H] input, or Flash / MEA with separate inputs, and no QKV bias.
    """
    if p.op is Op.PA or p.has_bias:
        return False
    if backend is Backend.TRT:
        return p.qkv_format is QkvFormat.PACKED
    return backend in (Backend.FLASH, Backend.MEA) and p.qkv_format is QkvFormat.SEPARATE


def recipe(
    p: Problem,
    backend: Backend,
    *,
    trt_runner_available: bool = True,
    route_gates: bool = True,
    d: Any = CONCRETE,
    config: Any = None,
) -> Recipe:
    """Return the exact workspace recipe of problem p on backend, or raise ORT's error (the
    runtime configuration `config` does not size it).

    `route_gates=False` skips the equal-head and runner gates, as ORT's bounds aggregate does when
    it sizes a route that is reachable below unequal maximum head sizes.
    """
    if backend not in BACKENDS:
        raise InvalidArgument(f"{p.op.onnx_name} has no {backend.value} route")
    validate_element_size(p.element_size)
    validate_core_geometry(d, p)
    if p.op is Op.PA:
        d.require(
            p.input_hidden_size >= 0,
            lambda: InvalidArgument(f"PA input hidden size = {p.input_hidden_size} must be non-negative"),
        )
    if route_gates:
        check_route_gates(d, p, backend, trt_runner_available)
    elif backend is Backend.FLASH and p.op is Op.PA:
        raise InvalidArgument("PackedAttention has no Flash route")
    attention = _attention_recipe(d, p, backend, reads_inputs_directly(p, backend))
    if p.op is Op.PMHA:
        return attention
    n = projection_n(d, p)
    return replace(
        attention,
        projection_bytes=projection_bytes(d, p, n),
        projection_m=p.token_count,
        projection_n=n,
        projection_k=p.input_hidden_size,
    )


def aligned_quantities(r: Recipe) -> list[tuple[str, Any]]:
    """Return (name, bytes) of each quantity that must be a multiple of 256: the unfused scratch
    region size (its offsets follow C, which ORT does not align)."""
    if not r.has_second_scratch:
        return []
    return [("unfused scratch region", r.backend_workspace_bytes)]
