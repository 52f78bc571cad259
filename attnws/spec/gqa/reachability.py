"""GroupQueryAttention's AOT reachability: the route bits ORT 1.31.1's estimator sets for a node
whose dimensions are upper bounds (`group_query_attention_workspace_estimate.cc`, id 68290011414;
`docs/research/gqa-workspace.md` §8), each route's conditions stated once as gates.

The estimator keeps only the runtime gates that do not depend on the sequence lengths, and reads
the head size as an upper bound: a route whose kernels need some head size is kept when one up
to the bound passes. Where a runtime gate of `dispatch` is the estimator's condition too, it is
that gate, taken by name. Flash's fast decode is a route bit of its own (`FAST_DECODE`): Flash's
gates and the fast decode's. `estimate.reachable_routes` reads the same gates.
"""

from __future__ import annotations

from typing import Any, Callable

from ..backends import flash, mea
from ..domain import CONCRETE
from ..errors import InternalError
from ..gates import Gate, HeadDomain, RouteReachability, verdict
from ..limits import HEAD_SIZE_MULTIPLE
from ..options import ENV_DISABLE_FLASH_DECODE, RuntimeConfig
from ..problem import Backend
from . import dispatch
from .problem import BACKENDS, GqaProblem
from .recipe import XQA_GROUPS, XQA_HEAD_SIZES, XQA_QUANTIZED_GROUPS

FAST_DECODE = "flash_fast_decode"  # the reachable-route bit ORT keeps apart from regular Flash
CUDNN_AUTO_MIN_SM_MAJOR = 9  # AllowCudnnFlashAttentionAuto: cuDNN by default from sm90 (in words only)


def _runtime(gates: list[Gate], *names: str) -> list[Gate]:
    """The runtime cascade's gates of these names, in the order named."""
    by_name = {g.name: g for g in gates}
    missing = [name for name in names if name not in by_name]
    if missing:
        raise InternalError(f"the runtime cascade has no gate named {', '.join(missing)}")
    return [by_name[name] for name in names]


def _worded(gate: Gate, reason: Callable[[], str]) -> Gate:
    """The runtime gate's condition with the estimator's reason (the values it fails on)."""
    return Gate(gate.name, gate.cond, reason)


def _one_of(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values[:-1])) + f" or {values[-1]}"


def xqa_gates(p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    """XQA's estimator gates: the runtime's but for the step's shape, its cache and head checks
    read as the estimator reads them. N % Nk == 0 is checked before (the group gate needs it)."""
    sm, runtime = config.device.sm, dispatch.xqa_gates(CONCRETE, p, config)
    (group,), groups = _runtime(runtime, "group size"), XQA_QUANTIZED_GROUPS if p.quantized else XQA_GROUPS
    return [
        *_runtime(runtime, "enabled", "causal", "no attention bias", "device", "no softcap"),
        Gate("smooth softmax has a head sink", not p.smooth_softmax or p.has_head_sink,
             lambda: "smooth softmax without a head sink"),
        *_runtime(runtime, "QK-norm"),
        Gate("8-bit quantized cache", not p.quantized or p.kv_cache_bit_width == 8,
             lambda: f"a quantized cache needs 8-bit elements: kv_cache_bit_width = {p.kv_cache_bit_width}"),
        Gate("some head size", p.head_size >= min(XQA_HEAD_SIZES),
             lambda: f"needs a head size {_one_of(XQA_HEAD_SIZES)} up to the bound: H <= {p.head_size}"),
        _worded(group, lambda: f"needs a group size N / Nk of {_one_of(groups)}"
                               f"{' with a quantized cache' if p.quantized else ''}: N = {p.num_heads}, "
                               f"Nk = {p.kv_num_heads}"),
        Gate("fp8 device", not p.cache_is_fp8 or sm == 89 or sm >= 90,
             lambda: f"an fp8 cache needs sm89 or sm >= 90: sm{sm}"),
    ]


def _cudnn_off(config: RuntimeConfig) -> str:
    sm, off = config.device.sm, config.options.disabled_reason("use_cudnn")
    if sm // 10 < CUDNN_AUTO_MIN_SM_MAJOR:
        return f"{off}, and not automatic before sm{CUDNN_AUTO_MIN_SM_MAJOR}0: sm{sm}"
    return f"{off}, which also turns off its automatic choice on sm{sm}"


def cudnn_gates(p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    """cuDNN's estimator gates: the runtime's but for its device, head and causal-alignment checks."""
    runtime = dispatch.cudnn_gates(CONCRETE, p, config)
    (enabled,) = _runtime(runtime, "enabled")
    return [_worded(enabled, lambda: _cudnn_off(config)),
            *_runtime(runtime, "no attention bias", "unquantized", "no softcap", "plain softmax", "no window")]


def flash_gates(p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    """Flash's estimator gates (flash::is_any_supported_head_size for the head bound)."""
    sm = config.device.sm
    return [
        *_runtime(dispatch.flash_gates(CONCRETE, p, config), "enabled", "no attention bias"),
        Gate("device and some head size", flash.any_head_supported(CONCRETE, sm, p.head_size),
             lambda: f"needs sm >= {flash.MIN_SM_MAJOR}0 and a head size >= {HEAD_SIZE_MULTIPLE}: "
                     f"sm{sm}, H <= {p.head_size}"),
    ]


def fast_decode_gates(p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    """The fast decode's own estimator gates, after Flash's (the partial-alias case is not modelled)."""
    return [
        Gate("decode enabled", config.options.use_flash_decode, lambda: f"disabled by {ENV_DISABLE_FLASH_DECODE}"),
        Gate("unquantized", not p.quantized, lambda: "quantized cache"),
        Gate("no QK-norm", not p.use_qk_norm, lambda: "QK-norm"),
        Gate("no windowed cache", not p.sliding_window_cache, lambda: "a windowed cache (sliding_window_cache = 1)"),
    ]


def mea_gates(p: GqaProblem, config: RuntimeConfig) -> list[Gate]:
    """MEA's estimator gates (has_memory_efficient_attention_for_head_size_bounds for the head bound)."""
    sm, dtype = config.device.sm, "bf16" if p.is_bf16 else "fp16"
    min_sm = mea.MIN_SM_BF16 if p.is_bf16 else mea.MIN_SM_FP16
    return [
        *_runtime(dispatch.mea_gates(CONCRETE, p, config), "enabled", "no attention bias", "unquantized"),
        Gate("device and some head size",
             mea.any_head_supported(CONCRETE, sm, True, p.head_size, p.head_size, p.is_bf16),
             lambda: f"needs sm >= {min_sm} ({dtype}) and a head size >= {HEAD_SIZE_MULTIPLE}: "
                     f"sm{sm}, H <= {p.head_size}"),
    ]


def route_gates(p: GqaProblem, config: RuntimeConfig) -> list[tuple[Any, list[Gate]]]:
    """Every route bit of ORT's estimator with its gates, in the cascade's order: XQA, cuDNN,
    Flash, Flash's fast decode (`FAST_DECODE`: Flash's gates, then its own), MEA, unfused. A
    route is reachable when all its gates hold (`p`: a `GqaProblem` at the bounds)."""
    regular = flash_gates(p, config)
    return [(Backend.XQA, xqa_gates(p, config)), (Backend.CUDNN, cudnn_gates(p, config)), (Backend.FLASH, regular),
            (FAST_DECODE, regular + fast_decode_gates(p, config)), (Backend.MEA, mea_gates(p, config)),
            (Backend.UNFUSED, dispatch.unfused_gates(p))]


def route_verdicts(p: GqaProblem, config: RuntimeConfig) -> list[tuple[Any, RouteReachability]]:
    """Return every route bit of `route_gates` with its verdict (fast decode's a verdict of
    `Backend.FLASH`): reachable, or the first failing gate's reason."""
    return [(route, verdict(Backend.FLASH if route == FAST_DECODE else route, gates))
            for route, gates in route_gates(p, config)]


def abi_scope(d: Any, p: GqaProblem, config: RuntimeConfig, backend: Backend) -> Any:
    """Where ORT's estimate sizes a route of its reachable set: wherever the route's own runtime
    gates admit the shape (ORT's estimator sizes each route at the step shapes the route runs:
    XQA and fast decode at one new token, Flash, MEA and unfused at 1 and at the query bound),
    whichever route an earlier gate of the cascade takes there."""
    gates = dict(dispatch.cascade_gates(d, p, config))[backend]
    return d.all_(*(g.cond for g in gates)) if gates else True


def reachability(p: GqaProblem, config: RuntimeConfig, domain: HeadDomain) -> list[RouteReachability]:
    """Return every GroupQueryAttention backend (`BACKENDS`, cascade order) with the estimator's
    verdict. The head size is always an upper bound (ORT's GQA estimator has no
    qkv_hidden_sizes: its head bound comes from the query's width), so `domain`, taken for the
    hook's shape, changes nothing."""
    return [v for route, v in route_verdicts(p, config) if route in BACKENDS]


def fast_decode_reachability(p: GqaProblem, config: RuntimeConfig) -> RouteReachability:
    """Return the estimator's verdict on Flash's fast decode (a verdict of `Backend.FLASH`)."""
    return dict(route_verdicts(p, config))[FAST_DECODE]


def unreachable_routes(p: GqaProblem, config: RuntimeConfig) -> list[tuple[str, str]]:
    """Return (route name, reason) for each route bit the estimator leaves unset, in cascade order."""
    return [(str(getattr(route, "value", route)), v.reason) for route, v in route_verdicts(p, config)
            if not v.reachable]
