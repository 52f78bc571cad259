"""Backend runs: the launch sequence of each route over the carved workspace.

PA first projects input @ weights + bias into the projection allocation. Unless the recipe reads
its inputs directly, the producer then materializes Q, K, V (plus PMHA's optional QKV bias) into
the recipe's layout: padded planar for unfused, token planar for Flash / MEA, interleaved for TRT.
The attention kernels follow. `RUNNERS` maps each backend to its run.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from ..spec.layout import Recipe
from ..spec.problem import Backend, Op, Problem, QkvFormat
from . import (
    flash_attention,
    mea_attention,
    projection_gemm,
    qkv_materialize,
    trt_fused,
    unfused_context,
    unfused_scores,
    unfused_softmax,
)
from .inputs import DeviceInputs
from .plans import TokenMatrix
from .workspace import Workspace

PLANAR_VIEWS = ("q", "k", "v")


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


def materialize(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace) -> None:
    """Run the producer for Q, K and V into the recipe's layout."""
    layout = {Backend.UNFUSED: qkv_materialize.PADDED, Backend.TRT: qkv_materialize.INTERLEAVED}.get(
        r.backend, qkv_materialize.TOKENS)
    bias = inputs.arrays.get("bias") if p.op is Op.PMHA else None
    sizes = (p.qk_head_size, p.qk_head_size, p.v_head_size)
    bias_bases = (0, p.hidden_size, 2 * p.hidden_size)
    for which, source in enumerate(operator_qkv(p, inputs, ws)):
        destination = ws.arrays["qkv_interleaved" if layout == qkv_materialize.INTERLEAVED else PLANAR_VIEWS[which]]
        qkv_materialize.launch(qkv_materialize.MaterializePlan(
            source, bias, bias_bases[which], destination, layout, which, inputs.packing, sizes[which],
            p.qkv_materialization_index_width))


def planar_qkv(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace) -> tuple[Any, Any, Any]:
    """Return the planar Q, K, V arrays a Flash / MEA kernel reads: the views, or the separate inputs."""
    if r.no_qkv_workspace:
        return inputs.arrays["query"], inputs.arrays["key"], inputs.arrays["value"]
    return ws.arrays["q"], ws.arrays["k"], ws.arrays["v"]


def run_trt(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace, out: Any) -> None:
    qkv = inputs.arrays["query"] if r.no_qkv_workspace else ws.arrays["qkv_interleaved"]
    trt_fused.launch(trt_fused.TrtPlan(qkv, out, inputs.packing, p.qk_head_size, scale(p)))


def run_flash(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace, out: Any) -> None:
    q, k, v = planar_qkv(p, r, inputs, ws)
    flash_attention.launch(flash_attention.FlashPlan(q, k, v, out, ws.arrays["softmax_lse"], inputs.packing,
                                                     p.qk_head_size, scale(p)))


def run_mea(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace, out: Any) -> None:
    q, k, v = planar_qkv(p, r, inputs, ws)
    mea_attention.launch(mea_attention.MeaPlan(q, k, v, out, inputs.attention_bias, ws.arrays.get("mea_accumulator"),
                                               inputs.packing, p.qk_head_size, p.v_head_size, scale(p)))


def run_unfused(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace, out: Any) -> None:
    a, packing = ws.arrays, inputs.packing
    unfused_scores.launch(unfused_scores.ScoresPlan(a["q"], a["k"], a["scores"], p.batch_size * p.num_heads,
                                                    p.sequence_length, p.qk_head_size, scale(p)))
    unfused_softmax.launch(unfused_softmax.SoftmaxPlan(a["scores"], a["probabilities"], inputs.attention_bias,
                                                       packing))
    unfused_context.launch(unfused_context.ContextPlan(a["probabilities"], a["v"], out, packing, p.v_head_size))


Runner = Callable[[Problem, Recipe, DeviceInputs, Workspace, Any], None]
RUNNERS: dict[Backend, Runner] = {
    Backend.TRT: run_trt, Backend.FLASH: run_flash, Backend.MEA: run_mea, Backend.UNFUSED: run_unfused,
}


def scale(p: Problem) -> float:
    """Return the softmax scale 1 / sqrt(H) (ORT's default when the scale attribute is 0)."""
    return 1.0 / math.sqrt(p.qk_head_size)


def run(p: Problem, r: Recipe, inputs: DeviceInputs, ws: Workspace, out: Any) -> None:
    """Run route r end to end: projection (PA), materialization (unless direct), attention."""
    if p.op is Op.PA:
        projection_gemm.launch(projection_gemm.ProjectionPlan(
            inputs.arrays["input"], inputs.arrays["weights"], inputs.arrays["bias"], ws.arrays["projection"],
            p.token_count, r.projection_n, r.projection_k))
    if not r.no_qkv_workspace:
        materialize(p, r, inputs, ws)
    RUNNERS[r.backend](p, r, inputs, ws, out)
