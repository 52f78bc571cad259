"""The packed operators' routes: the launch sequence of each route over the carved buffers, as named stages.

Each stage carries the name the footprint (`attnws.spec.packed.footprint`) gives it, so the
validator can hold what the stage touches against what the footprint says it reads and writes:
PA's projection and the materialization of Q, K, V (`layouts`), then the attention: one stage for
the fused backends (TRT, Flash, MEA), and scores, softmax, context (over Q) and transpose for
unfused.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from ...spec.packed.problem import BACKENDS, Problem
from ...spec.problem import Backend, Op
from ...spec.statement import OUTPUT, Footprint
from ..backends import flash, mea, trt, unfused
from ..family_checks import without_kernels
from ..launching import Launch
from ..plans import softmax_scale
from ..workspace import Workspace
from . import layouts
from .inputs import DeviceInputs


def planar_qkv(fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> tuple[Any, Any, Any]:
    """Return the planar Q, K, V a Flash / MEA kernel reads: the buffers, or the separate inputs."""
    if fp.reads_inputs_directly:
        return inputs.arrays["query"], inputs.arrays["key"], inputs.arrays["value"]
    return ws.arrays["q"], ws.arrays["k"], ws.arrays["v"]


def trt_stages(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return TRT's attention: interleaved Q/K/V, the workspace buffer or the packed input."""
    qkv = inputs.arrays["query"] if fp.reads_inputs_directly else ws.arrays["qkv_interleaved"]
    plan = trt.TrtPlan(qkv, ws.arrays[OUTPUT], inputs.packing, p.qk_head_size, softmax_scale(p.qk_head_size))
    return [Launch("attention", partial(trt.launch, plan))]


def flash_stages(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return Flash's attention, writing the LSE buffer."""
    q, k, v = planar_qkv(fp, inputs, ws)
    plan = flash.FlashPlan(q, k, v, ws.arrays[OUTPUT], ws.arrays["softmax_lse"], inputs.packing, p.qk_head_size,
                           softmax_scale(p.qk_head_size))
    return [Launch("attention", partial(flash.launch, plan))]


def mea_stages(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return MEA's attention, with its float32 accumulator when the route has one."""
    q, k, v = planar_qkv(fp, inputs, ws)
    plan = mea.MeaPlan(q, k, v, ws.arrays[OUTPUT], inputs.attention_bias, ws.arrays.get("mea_accumulator"),
                       inputs.packing, p.qk_head_size, p.v_head_size, softmax_scale(p.qk_head_size))
    return [Launch("attention", partial(mea.launch, plan))]


def unfused_stages(p: Problem, fp: Footprint, inputs: DeviceInputs, ws: Workspace) -> list[Launch]:
    """Return unfused's scores, softmax, context (over Q) and the transpose into the output."""
    a, packing, batch_heads = ws.arrays, inputs.packing, p.batch_size * p.num_heads
    return [
        Launch("scores", partial(unfused.launch_scores, unfused.ScoresPlan(
            a["q"], a["k"], a["scores"], batch_heads, p.sequence_length, p.qk_head_size,
            softmax_scale(p.qk_head_size)))),
        Launch("softmax", partial(unfused.launch_softmax, unfused.SoftmaxPlan(
            a["scores"], a["probabilities"], inputs.attention_bias, packing))),
        Launch("context", partial(unfused.launch_context, unfused.ContextPlan(
            a["probabilities"], a["v"], a["context"], batch_heads, p.sequence_length, p.v_head_size))),
        Launch("transpose", partial(layouts.launch_transpose, layouts.TransposePlan(
            a["context"], a[OUTPUT], packing, p.v_head_size))),
    ]


AttentionStages = Callable[[Problem, Footprint, DeviceInputs, Workspace], list[Launch]]
ATTENTION: dict[Backend, AttentionStages] = {
    Backend.TRT: trt_stages, Backend.FLASH: flash_stages, Backend.MEA: mea_stages, Backend.UNFUSED: unfused_stages,
}


def launch_sequence(p: Problem, recipe: Any, fp: Footprint, inputs: DeviceInputs,
                    ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in launch order: projection (PA), materialization (unless the
    route reads its inputs directly), attention. The footprint names the backend; the recipe
    sizes nothing the launches take."""
    stages = [layouts.projection(p, inputs, ws)] if p.op is Op.PA else []
    if not fp.reads_inputs_directly:
        stages += layouts.materialize(p, fp.backend, inputs, ws)
    return tuple(stages + ATTENTION[fp.backend](p, fp, inputs, ws))


def unmodelled(p: Problem, config: Any, backend: Backend) -> str:
    """Return why the kernels here do not run the route ('' when they do): a route of the packed
    operators without an attention stage here."""
    return without_kernels(backend, BACKENDS, tuple(ATTENTION), p.op.onnx_name)


def launches_not_run(p: Problem, recipe: Any) -> tuple[str, ...]:
    """Return ORT's launches on the route the kernels here do not run: none (every stage of the
    footprint is one of ORT's launches, run here)."""
    return ()
