"""MultiHeadAttention's routes: each route's stages in the footprint's order, name for name
(`attnws.spec.mha.footprint`).

The copies come from `layouts`; then the TRT kernels' sequence offsets (sequence_offsets), and the
attention: the TRT runner on the offsets it is given (with a [B] mask, 2B + 1 offsets: each
sequence's padding a sequence of its own), the TRT cross attention, the strided fused attention
for Flash (with its LSE), MEA (with its float32 accumulator when it has one) and cuDNN, or
unfused's scores, softmax, context and the transpose into the output (a strided copy).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...spec.mha.footprint import SOFTMAX_LSE
from ...spec.mha.problem import BACKENDS, MhaProblem
from ...spec.problem import Backend
from ...spec.statement import OUTPUT, Footprint
from .. import strided_copy
from ..backends import strided, trt, unfused
from ..family_checks import without_kernels
from ..launching import Launch
from ..plans import Packing, softmax_scale
from ..strided_copy import CopyPlan, bnsh, bsnh
from ..workspace import Workspace
from .inputs import DeviceInputs
from .layouts import RouteLayouts

# The routes with kernels here: the fused runners' own, the strided attention for Flash, MEA and
# cuDNN, and the unfused stages.
KERNEL_ROUTES = (Backend.TRT, Backend.TRT_CROSS, Backend.FLASH, Backend.MEA, Backend.CUDNN, Backend.UNFUSED)
MASK_KINDS = {0: unfused.MASK_NONE, 1: unfused.MASK_KEY_LENGTHS, 2: unfused.MASK_KEY_PADDING,
              3: unfused.MASK_ATTENTION}  # the mask's rank -> how the unfused softmax reads it


def offsets(lay: RouteLayouts) -> Launch:
    """Return the sequence offsets stage: the runner's (2B + 1 with a [B] mask), or cross's q and kv."""
    p, a = lay.p, lay.ws.arrays
    if lay.fp.backend is Backend.TRT:
        lengths = lay.inputs.arrays.get("key_padding_mask") if p.mask_rank == 1 else None
        plans = [trt.OffsetsPlan(a["sequence_offsets"], p.batch_size, p.sequence_length, lengths)]
    else:
        plans = [trt.OffsetsPlan(a["q_sequence_offsets"], p.batch_size, p.sequence_length),
                 trt.OffsetsPlan(a["kv_sequence_offsets"], p.batch_size, p.kv_sequence_length)]
    return Launch("sequence_offsets", partial(trt.launch_offsets, plans))


def attention(lay: RouteLayouts) -> Launch:
    """Return the fused attention stage of the route's backend."""
    p, a, backend, names = lay.p, lay.ws.arrays, lay.fp.backend, lay.names
    b, s, n, h = p.batch_size, p.sequence_length, p.num_heads, p.qk_head_size
    scale, out = softmax_scale(h), a[OUTPUT]
    if backend is Backend.TRT:
        qkv = a["qkv_packed"] if "qkv_packed" in names else lay.inputs.arrays["query"]
        sequences = 2 * b if p.mask_rank else b
        packing = Packing(a["sequence_offsets"], None, sequences, s, n, b * s)
        return Launch("attention", partial(trt.launch, trt.TrtPlan(qkv, out, packing, h, scale)))
    if backend is Backend.TRT_CROSS:
        q = a["q"] if "q" in names else lay.inputs.arrays["query"]
        kv = a["kv_packed"] if "kv_packed" in names else lay.inputs.arrays["key"]
        cross = trt.TrtCrossPlan(q, kv, out, a["q_sequence_offsets"], a["kv_sequence_offsets"], b, s, n, h, scale)
        return Launch("attention", partial(trt.launch_cross, cross))
    q, k, v = lay.attention_views()
    mask = lay.inputs.arrays.get("key_padding_mask")
    fused = strided.StridedAttentionPlan(
        q, k, v, out, b, s, p.total_sequence_length, n, h, p.v_head_size, scale,
        bias=lay.inputs.arrays.get("attention_bias"), bias_broadcast_batch=bool(p.broadcast_attn_bias_dim_0),
        bias_broadcast_heads=bool(p.broadcast_attn_bias_dim_1), key_lengths=mask if p.mask_rank == 1 else None,
        causal=p.is_unidirectional, past=p.past_sequence_length, lse=a.get(SOFTMAX_LSE),
        accumulator=a.get("mea_accumulator"))
    return Launch("attention", partial(strided.launch, fused))


def unfused_stages(lay: RouteLayouts) -> list[Launch]:
    """Return unfused's scores, softmax, context and the transpose of the context into the output."""
    p, a = lay.p, lay.ws.arrays
    b, s, n, t, hv = p.batch_size, p.sequence_length, p.num_heads, p.total_sequence_length, p.v_head_size
    q, k, v = lay.attention_views()
    mask = lay.inputs.arrays.get("key_padding_mask")
    softmax = unfused.KeySoftmaxPlan(
        a["scores"], a["probabilities"], b, n, s, t, lay.inputs.arrays.get("attention_bias"),
        bool(p.broadcast_attn_bias_dim_0), bool(p.broadcast_attn_bias_dim_1), mask, MASK_KINDS[p.mask_rank],
        p.is_unidirectional, p.past_sequence_length)
    transpose = CopyPlan(bnsh(a["context"], s, n, hv), bsnh(a[OUTPUT], s, n, hv), b, s, n, hv)
    return [
        Launch("scores", partial(unfused.launch_scores, unfused.ScoresPlan(
            q.array, k.array, a["scores"], b * n, s, p.qk_head_size, softmax_scale(p.qk_head_size), t))),
        Launch("softmax", partial(unfused.launch_key_softmax, softmax)),
        Launch("context", partial(unfused.launch_context, unfused.ContextPlan(
            a["probabilities"], v.array, a["context"], b * n, s, hv, t))),
        Launch("transpose", partial(strided_copy.launch, transpose)),
    ]


def launch_sequence(p: MhaProblem, recipe: Any, fp: Footprint, inputs: DeviceInputs,
                    ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in the footprint's order (module docstring); the footprint names
    the backend, the recipe sizes nothing the launches take."""
    lay = RouteLayouts(p, fp, inputs, ws)
    launches: list[Launch] = []
    for stage in fp.stages:
        if stage.name.startswith("materialize_"):
            launches.append(lay.materialize(stage.name))
        elif stage.name == "concat_past":
            launches.append(lay.concat_past())
        elif stage.name == "sequence_offsets":
            launches.append(offsets(lay))
        elif stage.name == "attention":
            launches.append(attention(lay))
        elif stage.name == "scores":
            launches += unfused_stages(lay)
    return tuple(launches)


def unmodelled(p: MhaProblem, config: Any, backend: Backend) -> str:
    """Return why the kernels here do not run the route ('' when they do: every route in `KERNEL_ROUTES`)."""
    return without_kernels(backend, BACKENDS, KERNEL_ROUTES, p.op.onnx_name)


def launches_not_run(p: MhaProblem, recipe: Any) -> tuple[str, ...]:
    """Return ORT's launches on the route the kernels here do not run: none (every stage of the
    footprint is one of ORT's launches, run here)."""
    return ()
