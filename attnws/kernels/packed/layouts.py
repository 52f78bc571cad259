"""The packed operators' layouts: where Q, K, V lie as the operator gives them, the kernels and
stages that move them into the layout each route reads, and the unfused context back into the output.

`projection_gemm` (PackedAttention's input projection with bias): projection = input @ weights +
bias, input [T, k], weights [k, n], bias [n], projection [T, n] (n = 2 * hidden + v_hidden), all
row-major in the element type; each output element a float32 dot product, grid-stride over T * n.

`qkv_materialize` (the QKV producer, bias add plus transpose of one of Q, K, V): reads token-major
source elements (t, n, h) (see plans.TokenMatrix), adds the optional QKV bias
bias[bias_base + n * head_size + h], and writes one of three layouts:
- PADDED: planar [B, N, S, H] over all B * S rows (unfused); row i of token_offset holds padded
  position b * S + s; rows i >= T are padding and are written as zeros.
- TOKENS: planar [T, N, H] (Flash, MEA).
- INTERLEAVED: [T, N, 3, H] (TRT), `which` = 0, 1, 2 for Q, K, V.
Each work item moves `width` consecutive elements (the index width 1, 2 or 4); the grid strides
over rows * N * head_size / width items.

`transpose_remove_padding` (ORT's TransposeRemovePadding): the padded context [B, N, S, Hv] packed
into output [T, N * Hv]. Token t sits at padded position token_offset[t] = b * S + s; rows of
padding positions are not read. Element type in and out; grid-stride over T * N * Hv.

The stages (`projection`, `materialize`) carry the names the footprint gives them: PA first
projects (projection); unless the route reads its inputs directly, the producer then materializes
Q, K, V (plus PMHA's optional QKV bias) padded planar for unfused, token planar for Flash / MEA,
one stage per destination (materialize_q, _k, _v); interleaved for TRT, its three launches one
stage (materialize_qkv).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from numba import cuda, float32

from ...spec.problem import Backend, Op
from ...spec.packed.problem import Problem, QkvFormat
from ..launching import Launch, stride_launch
from ..plans import Packing, TokenMatrix
from ..strided_dot import strided_dot
from ..workspace import Workspace
from .inputs import DeviceInputs

PADDED = 0
TOKENS = 1
INTERLEAVED = 2
PLANAR_PARTS = ("q", "k", "v")


@cuda.jit
def projection_gemm(x, weights, bias, projection, rows, n, k):
    """projection[i * n + j] = bias[j] + sum_l x[i * k + l] * weights[l * n + j]."""
    for index in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        i = index // n
        j = index - i * n
        projection[index] = float32(bias[j]) + strided_dot(x, i * k, 1, weights, j, n, k)


@dataclass(frozen=True)
class ProjectionPlan:
    """GEMM m = T, n = 2 * hidden + v_hidden, k = input hidden; arrays flat, row-major."""

    input: Any
    weights: Any
    bias: Any
    projection: Any
    m: int
    n: int
    k: int


def launch_projection(plan: ProjectionPlan) -> None:
    blocks, threads = stride_launch(plan.m * plan.n)
    projection_gemm[blocks, threads](plan.input, plan.weights, plan.bias, plan.projection, plan.m, plan.n, plan.k)


@cuda.jit(device=True)
def destination(layout, which, position, n, h, heads, seq, head_size):
    """Return the element offset of (position, n, h) in the destination layout."""
    if layout == PADDED:
        b = position // seq
        return ((b * heads + n) * seq + position - b * seq) * head_size + h
    if layout == TOKENS:
        return (position * heads + n) * head_size + h
    return ((position * heads + n) * 3 + which) * head_size + h


@cuda.jit
def qkv_materialize(src, src_base, token_stride, head_stride, bias, bias_base, dst, layout, which,
                    token_offset, rows, tokens, heads, seq, head_size, width):
    """Write dst from src (+ bias) for rows [0, rows); see the module docstring for the layouts."""
    per_row = heads * (head_size // width)
    for item in range(cuda.grid(1), rows * per_row, cuda.gridsize(1)):
        row = item // per_row
        n = (item - row * per_row) // (head_size // width)
        h = (item - row * per_row - n * (head_size // width)) * width
        position = token_offset[row] if layout == PADDED else row
        out = destination(layout, which, position, n, h, heads, seq, head_size)
        for e in range(width):
            value = float32(0.0)
            if row < tokens:
                value = float32(src[src_base + row * token_stride + n * head_stride + h + e])
                if bias is not None:
                    value += float32(bias[bias_base + n * head_size + h + e])
            dst[out + e] = value


@dataclass(frozen=True)
class MaterializePlan:
    """Materialize part `which` (0 Q, 1 K, 2 V) of head size `head_size` into `destination`.

    `bias` is the QKV bias [2*N*H + N*Hv] or None; `bias_base` is this part's first element in it.
    """

    source: TokenMatrix
    bias: Any
    bias_base: int
    destination: Any
    layout: int
    which: int
    packing: Packing
    head_size: int
    width: int

    @property
    def rows(self) -> int:
        p = self.packing
        return p.batch * p.seq if self.layout == PADDED else p.tokens


def launch_materialize(plan: MaterializePlan) -> None:
    p, s = plan.packing, plan.source
    blocks, threads = stride_launch(plan.rows * p.heads * (plan.head_size // plan.width))
    qkv_materialize[blocks, threads](
        s.array, s.base, s.token_stride, s.head_stride, plan.bias, plan.bias_base, plan.destination, plan.layout,
        plan.which, p.token_offset, plan.rows, p.tokens, p.heads, p.seq, plan.head_size, plan.width,
    )


@cuda.jit
def transpose_remove_padding(context, out, token_offset, tokens, heads, seq, v_head_size):
    """out[(t * N + n) * Hv + h] = context[((b * N + n) * S + s) * Hv + h] where b * S + s = token_offset[t]."""
    for index in range(cuda.grid(1), tokens * heads * v_head_size, cuda.gridsize(1)):
        t = index // (heads * v_head_size)
        n = (index // v_head_size) - t * heads
        h = index - (index // v_head_size) * v_head_size
        b = token_offset[t] // seq
        out[index] = context[((b * heads + n) * seq + token_offset[t] - b * seq) * v_head_size + h]


@dataclass(frozen=True)
class TransposePlan:
    """The context buffer [B, N, S, Hv], the output [T, N * Hv], the packing and Hv."""

    context: Any
    out: Any
    packing: Packing
    v_head_size: int


def launch_transpose(plan: TransposePlan) -> None:
    p = plan.packing
    blocks, threads = stride_launch(p.tokens * p.heads * plan.v_head_size)
    transpose_remove_padding[blocks, threads](plan.context, plan.out, p.token_offset, p.tokens, p.heads, p.seq,
                                              plan.v_head_size)


def operator_qkv(p: Problem, inputs: DeviceInputs, ws: Workspace) -> tuple[TokenMatrix, ...]:
    """Return Q, K, V as the operator provides them: PA's projection, PMHA's packed or separate inputs."""
    n, h, hv = p.num_heads, p.qk_head_size, p.v_head_size
    if p.op is Op.PA:
        proj, stride = ws.arrays["projection"], 2 * p.hidden_size + p.v_hidden_size
        return (TokenMatrix(proj, 0, stride, h), TokenMatrix(proj, n * h, stride, h),
                TokenMatrix(proj, 2 * n * h, stride, hv))
    a = inputs.arrays
    if p.qkv_format is QkvFormat.PACKED:
        return tuple(TokenMatrix(a["query"], i * h, 3 * n * h, 3 * h) for i in range(3))
    return (TokenMatrix(a["query"], 0, n * h, h), TokenMatrix(a["key"], 0, n * h, h),
            TokenMatrix(a["value"], 0, n * hv, hv))


def projection(p: Problem, inputs: DeviceInputs, ws: Workspace) -> Launch:
    """Return PA's projection GEMM stage: m = T, n = 2 * hidden + v_hidden, k = input hidden."""
    a = inputs.arrays
    plan = ProjectionPlan(a["input"], a["weights"], a["bias"], ws.arrays["projection"], p.token_count,
                          2 * p.hidden_size + p.v_hidden_size, p.input_hidden_size)
    return Launch("projection", partial(launch_projection, plan))


def launch_each(plans: list[MaterializePlan]) -> None:
    """Enqueue one producer launch per plan (TRT's three into the interleaved buffer)."""
    for plan in plans:
        launch_materialize(plan)


def materialize(p: Problem, backend: Backend, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return the producer's stages for Q, K and V into the route's layout."""
    layout = {Backend.UNFUSED: PADDED, Backend.TRT: INTERLEAVED}.get(backend, TOKENS)
    bias = inputs.arrays.get("bias") if p.op is Op.PMHA else None
    sizes = (p.qk_head_size, p.qk_head_size, p.v_head_size)
    bias_bases = (0, p.hidden_size, 2 * p.hidden_size)
    plans = [MaterializePlan(
        source, bias, bias_bases[which], ws.arrays["qkv_interleaved" if layout == INTERLEAVED else PLANAR_PARTS[which]],
        layout, which, inputs.packing, sizes[which], p.qkv_materialization_index_width)
        for which, source in enumerate(operator_qkv(p, inputs, ws))]
    if layout == INTERLEAVED:
        return [Launch("materialize_qkv", partial(launch_each, plans))]
    return [Launch(f"materialize_{part}", partial(launch_materialize, plan)) for part, plan in zip(PLANAR_PARTS, plans)]
