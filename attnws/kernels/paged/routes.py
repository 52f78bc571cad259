"""PagedAttention's routes: the shared stages (`layouts`: GetCumulativeSeqlensKV, the prologue),
then the attention stage, named as the footprint (`attnws.spec.paged.footprint.statement`) names
it: ReshapeAndCache (the step's new K / V rows into their cache slots, before any kernel reads the
cache), then the route's kernels: `decode_route` (PagedDecodeSplitKV and PagedDecodeReduce),
`mea_route` (the dense gather and cutlass fmha) or `flash_route` (the paged split-KV forward and,
with splits > 1, the combine). The recipe sizes the launches: the decode and Flash routes run its
split count (`recipe.splits`).

In scope: the portable decode, MEA and Flash routes on an unquantized fp16 cache, causal, separate
query, key and value, the slots derived from past_seqlens. Out of scope (`unmodelled`, refused
before the recipe): the latent (MLA), XQA, speculative XQA and cuDNN routes (no kernels here; XQA's
speculative and cuDNN's have no recipe either), bf16 (the simulator and NumPy have no bfloat16), a
quantized cache (int8, fp8, int4: its scales and the quantized Flash gather), QK-norm and packed
QKV (the prologue's other dense copies), a softcap, a head sink, a local window, slot_mapping, and
is_causal = 0. Rotary (non-interleaved, over the whole head) runs in the prologue
(`layouts`, `prologue`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ...spec.domain import CONCRETE
from ...spec.paged.problem import BACKENDS, PagedProblem
from ...spec.paged.recipe import UNSIZED_ROUTES, PagedRecipe, readback
from ...spec.options import RuntimeConfig
from ...spec.problem import Backend
from ...spec.statement import OUTPUT, Footprint
from ..family_checks import without_kernels
from ..launching import Launch
from ..workspace import Workspace
from . import decode_route, flash_route, mea_route
from .layouts import Prepared, chained, prepare

KERNEL_ROUTES = (Backend.PAGED_DECODE, Backend.FLASH, Backend.MEA)
ROUTES = tuple(dict.fromkeys([*BACKENDS, *UNSIZED_ROUTES]))  # every route the cascade can pick, sized or not
READBACK = ("the lengths' device-to-host readback (two cudaMemcpyAsync into pinned host buffers and a stream "
            "synchronize): no workspace bytes")


def backend_launches(p: PagedProblem, recipe: PagedRecipe, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's kernels after ReshapeAndCache."""
    if recipe.backend is Backend.PAGED_DECODE:
        return decode_route.launch_sequence(p, recipe, prepared, ws)
    if recipe.backend is Backend.MEA:
        return mea_route.launch_sequence(p, prepared, ws)
    return flash_route.launch_sequence(p, recipe, prepared, ws)


def launch_sequence(p: PagedProblem, recipe: PagedRecipe, fp: Footprint, inputs: Mapping[str, Any],
                    ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in launch order: GetCumulativeSeqlensKV, the prologue, then the
    attention stage (ReshapeAndCache and the route's kernels)."""
    prepared = prepare(p, fp, inputs, ws, ws.arrays[OUTPUT])
    kernels = backend_launches(p, recipe, prepared, ws)
    return (*prepared.launches, chained(prepared.attention, (prepared.cache_update, *kernels)))


def unmodelled(p: PagedProblem, config: RuntimeConfig, backend: Backend) -> str:
    """Return why the kernels here do not run the route or the problem's features ('' when they
    do; module docstring)."""
    missing = without_kernels(backend, ROUTES, KERNEL_ROUTES, p.op.onnx_name)
    if missing or backend not in ROUTES:
        return missing
    named = [text for text, value in {
        "is_bf16=True": p.is_bf16, f"cache_type={p.cache_type}": p.quantized, "latent=True": p.latent,
        "use_qk_norm=True": p.use_qk_norm, "is_packed_qkv=True": p.is_packed_qkv,
        f"softcap={p.softcap:g}": p.softcap > 0, "head_sink=True": p.has_head_sink,
        f"local_window_size={p.local_window_size}": p.local_window_size > 0, "slot_mapping=True": p.has_slot_mapping,
        "is_causal=0": not p.causal}.items() if value]
    return f"PagedAttention kernels here do not model {', '.join(named)}" if named else ""


def launches_not_run(p: PagedProblem, recipe: PagedRecipe) -> tuple[str, ...]:
    """Return ORT's work on the route the kernels here do not run: the lengths' readback, where ORT
    reads them back (no attention_metadata, and a dense gather)."""
    return (READBACK,) if readback(CONCRETE, p, recipe.backend) else ()
