"""GroupQueryAttention's routes: the preparation's stages (`layouts`), then the backend's, each
named as the footprint (`attnws.spec.gqa.footprint.statement`) names it: `xqa_route`,
`flash_route` (regular or fast decode), `mea_route`, `unfused_route`.

The recipe sizes the launches: Flash runs its split count (`recipe.run.backend.splits`), XQA
carves its own scratch from the semaphores' first byte on (`Root.pointer` runs to the end of the
workspace) for the SM count of the recipe's route.

In scope: the XQA (decode), Flash (regular or fast decode), MEA and unfused routes on an
unquantized fp16 cache, with causality, a local window, a softcap, rotary embedding and packed QKV
through the Q scratch, and a windowed cache (staging at S > 1, compaction at S == 1). Out of
scope (`unmodelled`, refused before the recipe): the cuDNN route (no recipe, no kernels here),
bf16 (the simulator and NumPy have no bfloat16), a quantized cache, smooth softmax or a head sink,
QK-norm, rotary or packed QKV on Flash's fast decode (the split kernel rotates and unpacks inside
itself there), and a softcap on MEA (its kernel here has none). A windowed cache's staging ends
with ORT's write-back of the staged rows into the present cache, which writes no workspace byte
and is not run here (`launches_not_run`).
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.gqa.footprint import SEMAPHORES, WRITE_BACK, staging
from ...spec.gqa.problem import BACKENDS, GqaProblem
from ...spec.gqa.recipe import GqaRecipe, route_of
from ...spec.options import RuntimeConfig
from ...spec.problem import Backend
from ...spec.statement import OUTPUT, Footprint
from ..family_checks import without_kernels
from ..launching import Launch
from ..workspace import Workspace
from . import flash_route, mea_route, unfused_route, xqa_route
from .layouts import Prepared, prepare

KERNEL_ROUTES = (Backend.XQA, Backend.FLASH, Backend.MEA, Backend.UNFUSED)


def backend_launches(p: GqaProblem, recipe: GqaRecipe, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the backend's launches on the prepared operands."""
    route = recipe.route
    if route.backend is Backend.FLASH:
        return flash_route.launch_sequence(p, int(recipe.run.backend.splits), prepared, ws)
    if route.backend is Backend.MEA:
        return mea_route.launch_sequence(p, prepared, ws)
    if route.backend is Backend.XQA:  # the launch carves its region itself, from the semaphores' first byte
        region = ws.arrays[SEMAPHORES].view(np.uint8)
        return xqa_route.xqa_stages(p, route.sm_count, region, prepared.query, prepared.key, prepared.value,
                                    prepared.key_lengths, ws.arrays[OUTPUT])
    return unfused_route.launch_sequence(p, route, prepared, ws)


def launch_sequence(p: GqaProblem, recipe: GqaRecipe, fp: Footprint, inputs: Mapping[str, Any],
                    ws: Workspace) -> tuple[Launch, ...]:
    """Return the route's stages in launch order: the preparation's, then the backend's."""
    prepared = prepare(p, recipe.route, inputs, ws)
    return prepared.launches + backend_launches(p, recipe, prepared, ws)


def unmodelled(p: GqaProblem, config: RuntimeConfig, backend: Backend) -> str:
    """Return why the kernels here do not run the route or the problem's features ('' when they
    do; module docstring)."""
    missing = without_kernels(backend, BACKENDS, KERNEL_ROUTES, p.op.onnx_name)
    if missing or backend not in BACKENDS:
        return missing
    route = route_of(CONCRETE, p, config, backend)
    named = [text for text, value in {
        "is_bf16=True": p.is_bf16, "quantized=True": p.quantized, "use_smooth_softmax=True": p.use_smooth_softmax,
        "use_qk_norm=True": p.use_qk_norm, "do_rotary=True on fast decode": route.fast_decode and p.do_rotary,
        "is_packed_qkv=True on fast decode": route.fast_decode and p.is_packed_qkv,
        # the MEA kernel here has no softcap (how ORT's cutlass path treats one was not read)
        f"softcap={p.softcap:g} on MEA": backend is Backend.MEA and p.softcap > 0}.items() if value]
    return f"GroupQueryAttention kernels here do not model {', '.join(named)}" if named else ""


def launches_not_run(p: GqaProblem, recipe: GqaRecipe) -> tuple[str, ...]:
    """Return ORT's launches the kernels here do not run: a windowed cache's write-back."""
    return WRITE_BACK if staging(p) else ()
