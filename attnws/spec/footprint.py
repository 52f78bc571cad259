"""What the kernels of each route read and write, stated from ONNX Runtime's kernels by each
family (`attnws.spec.<family>.footprint`, in the vocabulary of `attnws.spec.statement`), and
which backends ORT may launch at all under the provider option, the environment and the build
(`attention_kernel_options.cc` @ 7942fa7ad20394574ccb3687d02b05c8853d2d9a as the 1.31.1 binary
decodes it, `docs/research/ort-1.31.1-pin.md` §9).

Nothing here or in a family's footprint imports a recipe, a layout or the dispatch: the
statement is what the recipes are checked against.
"""

from __future__ import annotations

from typing import Any, Mapping

from .domain import CONCRETE
from .families import family_of
from .problem import Backend, Op
from .statement import Footprint


def footprint(p: Any, backend: Backend, d: Any = CONCRETE, config: Any = None) -> Footprint:
    """Return what the route's kernels touch for problem p (the problem as the builder validated
    it, the route the one dispatch picked; `config`, a RuntimeConfig, where the launches depend on
    the device: GroupQueryAttention's)."""
    return family_of(p.op).footprint.footprint(p, backend, d, config)


def room_contract(d: Any, p: Any, r: Any, config: Any) -> list[tuple[str, Any]] | None:
    """Return the conditions under which recipe r serves the route's kernels, where the family
    states its contract as buffers within their regions' rooms (GroupQueryAttention's), or None
    where the shared statement contract applies (`attnws.solver.contract`)."""
    return family_of(p.op).footprint.room_contract(d, p, r, config)


def reads_inputs_directly(p: Any, backend: Backend) -> bool:
    """Return whether the route's attention kernel consumes the operator inputs as they are."""
    return family_of(p.op).footprint.reads_inputs_directly(p, backend)


# attention_kernel_options.cc: the provider option `sdpa_kernel` bits (AttentionBackend in
# attention_common.h), the variables that disable a backend when it is 0 and the one that enables
# cuDNN (off by default); a backend not compiled in never launches.
LAUNCH_BITS = {Backend.FLASH: 1, Backend.MEA: 2, Backend.TRT: 4, Backend.CUDNN: 8, Backend.TRT_CROSS: 64,
               Backend.PAGED_DECODE: 512}


XQA_SWITCH = "ORT_ENABLE_XQA"  # GroupQueryAttention's XQA: on unless this integer variable is 0; no sdpa_kernel bit


DISABLING_VARIABLES = {Backend.FLASH: "ORT_DISABLE_FLASH_ATTENTION",
                       Backend.MEA: "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION",
                       Backend.PAGED_DECODE: "ORT_DISABLE_DECODER_ATTENTION",
                       Backend.TRT: "ORT_DISABLE_FUSED_ATTENTION",
                       Backend.TRT_CROSS: "ORT_DISABLE_FUSED_CROSS_ATTENTION"}


ENABLING_VARIABLES = {Backend.CUDNN: "ORT_ENABLE_CUDNN_FLASH_ATTENTION"}


TRUTHY = ("1", "true", "True")


def _integer_or(text: str, default: int) -> int:
    """The integer a variable's text reads as, or the default where it is not one."""
    try:
        return int(text.strip())
    except ValueError:
        return default


def may_launch(backend: Backend, op: Op, sdpa_kernel: int, env: Mapping[str, str], built: Mapping[Backend, bool]) -> bool:
    """Return whether ORT may launch the backend's kernel at all under the provider option, the
    environment and the build, read from the raw settings. PA never consults the MEA switches
    (only the build); the unfused GEMMs always may; cuDNN (MultiHeadAttention) only when enabled
    by its bit or its variable."""
    if backend in (Backend.UNFUSED, Backend.LATENT):  # PagedAttention's MLA kernel has no switch either
        return True
    if backend in (Backend.XQA, Backend.XQA_SPEC):
        return _integer_or(env.get(XQA_SWITCH, "1"), 1) != 0
    if not built.get(backend, True):
        return False
    if op is Op.PA and backend is Backend.MEA:
        return True
    if sdpa_kernel > 0:
        return bool(sdpa_kernel & LAUNCH_BITS[backend])
    if backend in ENABLING_VARIABLES:
        return env.get(ENABLING_VARIABLES[backend], "0") in TRUTHY
    return env.get(DISABLING_VARIABLES[backend], "0") not in TRUTHY
