"""Backend runs: the launch sequence of each route over the carved buffers, as named stages.

Each stage carries the name the footprint (`attnws.spec.footprint`) gives it, so the validator can
hold what the stage touches against what the footprint says it reads and writes. PA first projects
input @ weights + bias (projection). Unless the route reads its inputs directly, the producer then
materializes Q, K, V (plus PMHA's optional QKV bias): padded planar for unfused, token planar for
Flash / MEA, one stage per destination (materialize_q, _k, _v); interleaved for TRT, its three
launches one stage (materialize_qkv). Then the attention: one stage for the fused backends, and
scores, softmax, context (over Q) and transpose for unfused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..spec.statement import OUTPUT
from ..spec.footprint import Footprint
from ..spec.problem import Backend, Op
from ..spec.packed.problem import Problem, QkvFormat
from . import (
    flash_attention,
    mea_attention,
    projection_gemm,
    qkv_materialize,
    transpose_remove_padding,
    trt_fused,
    unfused_context,
    unfused_scores,
    unfused_softmax,
)
from .inputs import DeviceInputs
from .plans import TokenMatrix
from .workspace import Workspace

PLANAR_PARTS = ("q", "k", "v")


@dataclass(frozen=True)
class Launch:
    """One stage: its name in the footprint and the call that enqueues its kernels (asynchronously)."""

    stage: str
    enqueue: Callable[[], None]


def scale(p: Problem) -> float:
    """Return the softmax scale 1 / sqrt(H) (ORT's default when the scale attribute is 0)."""
    return 1.0 / math.sqrt(p.qk_head_size)


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
    plan = projection_gemm.ProjectionPlan(a["input"], a["weights"], a["bias"], ws.arrays["projection"], p.token_count,
                                          2 * p.hidden_size + p.v_hidden_size, p.input_hidden_size)
    return Launch("projection", partial(projection_gemm.launch, plan))


def launch_each(plans: list[qkv_materialize.MaterializePlan]) -> None:
    """Enqueue one producer launch per plan (TRT's three into the interleaved buffer)."""
    for plan in plans:
        qkv_materialize.launch(plan)


def materialize(p: Problem, backend: Backend, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return the producer's stages for Q, K and V into the route's layout."""
    layout = {Backend.UNFUSED: qkv_materialize.PADDED, Backend.TRT: qkv_materialize.INTERLEAVED}.get(
        backend, qkv_materialize.TOKENS)
    bias = inputs.arrays.get("bias") if p.op is Op.PMHA else None
    sizes = (p.qk_head_size, p.qk_head_size, p.v_head_size)
    bias_bases = (0, p.hidden_size, 2 * p.hidden_size)
    plans = [qkv_materialize.MaterializePlan(
        source, bias, bias_bases[which],
        ws.arrays["qkv_interleaved" if layout == qkv_materialize.INTERLEAVED else PLANAR_PARTS[which]],
        layout, which, inputs.packing, sizes[which], p.qkv_materialization_index_width)
        for which, source in enumerate(operator_qkv(p, inputs, ws))]
    if layout == qkv_materialize.INTERLEAVED:
        return [Launch("materialize_qkv", partial(launch_each, plans))]
    return [Launch(f"materialize_{part}", partial(qkv_materialize.launch, plan))
            for part, plan in zip(PLANAR_PARTS, plans)]


def planar_qkv(fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> tuple[Any, Any, Any]:
    """Return the planar Q, K, V a Flash / MEA kernel reads: the buffers, or the separate inputs."""
    if fp.reads_inputs_directly:
        return inputs.arrays["query"], inputs.arrays["key"], inputs.arrays["value"]
    return ws.arrays["q"], ws.arrays["k"], ws.arrays["v"]


def trt(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    qkv = inputs.arrays["query"] if fp.reads_inputs_directly else ws.arrays["qkv_interleaved"]
    plan = trt_fused.TrtPlan(qkv, ws.arrays[OUTPUT], inputs.packing, p.qk_head_size, scale(p))
    return [Launch("attention", partial(trt_fused.launch, plan))]


def flash(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    q, k, v = planar_qkv(fp, inputs, ws)
    plan = flash_attention.FlashPlan(q, k, v, ws.arrays[OUTPUT], ws.arrays["softmax_lse"], inputs.packing,
                                     p.qk_head_size, scale(p))
    return [Launch("attention", partial(flash_attention.launch, plan))]


def mea(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    q, k, v = planar_qkv(fp, inputs, ws)
    plan = mea_attention.MeaPlan(q, k, v, ws.arrays[OUTPUT], inputs.attention_bias, ws.arrays.get("mea_accumulator"),
                                 inputs.packing, p.qk_head_size, p.v_head_size, scale(p))
    return [Launch("attention", partial(mea_attention.launch, plan))]


def unfused(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    a, packing, batch_heads = ws.arrays, inputs.packing, p.batch_size * p.num_heads
    return [
        Launch("scores", partial(unfused_scores.launch, unfused_scores.ScoresPlan(
            a["q"], a["k"], a["scores"], batch_heads, p.sequence_length, p.qk_head_size, scale(p)))),
        Launch("softmax", partial(unfused_softmax.launch, unfused_softmax.SoftmaxPlan(
            a["scores"], a["probabilities"], inputs.attention_bias, packing))),
        Launch("context", partial(unfused_context.launch, unfused_context.ContextPlan(
            a["probabilities"], a["v"], a["context"], batch_heads, p.sequence_length, p.v_head_size))),
        Launch("transpose", partial(transpose_remove_padding.launch, transpose_remove_padding.TransposePlan(
            a["context"], a[OUTPUT], packing, p.v_head_size))),
    ]


AttentionStages = Callable[[Problem, Footprint, DeviceInputs, Workspace], list[Launch]]
ATTENTION: dict[Backend, AttentionStages] = {
    Backend.TRT: trt, Backend.FLASH: flash, Backend.MEA: mea, Backend.UNFUSED: unfused,
}


def launch_sequence(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in launch order: projection (PA), materialization (unless the
    route reads its inputs directly), attention."""
    stages = [projection(p, inputs, ws)] if p.op is Op.PA else []
    if not fp.reads_inputs_directly:
        stages += materialize(p, fp.backend, inputs, ws)
    return tuple(stages + ATTENTION[fp.backend](p, fp, inputs, ws))
