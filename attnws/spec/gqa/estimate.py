"""ORT 1.31.1's own GroupQueryAttention AOT estimate: GetGQAWorkspaceAggregateForBounds
(#32617, with #32602's windowed bound and #32696's non-windowed one) and the Level-1 / Level-2
results it feeds.

The aggregate is the maximum over the reachable routes, each sized at the bounds: MEA and
unfused by their complete recipes, regular Flash by its preparation plus an envelope at the
structural ceiling of the split count (min(128, SMs, key blocks)) instead of the heuristic,
fast decode once at the longest step, XQA by its preparation plus a padded envelope. The query
length is tried at 1 and at its bound, and the first prompt where a prompt is reachable. A
reachable cuDNN route makes the estimate Unavailable. Bytes throughout
(`docs/research/gqa-workspace.md` §7-§8 for the source ids).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from ..backends import flash as flash_backend
from ..domain import CONCRETE
from ..errors import InvalidArgument, Unavailable, WorkspaceError
from ..gates import HeadDomain
from ..hints import Geometry
from ..limits import INT32_MAX, LSE_ELEMENT_BYTES, MEA_MAX_HEAD_SIZE, WORKSPACE_ALIGNMENT
from ..options import RuntimeConfig
from ..problem import Backend, Op
from . import reachability
from .inputs import runtime_problem
from .problem import GqaProblem, GqaWorkspaceProblem, HeadSinkStorage, KvQuantization, Preprocess, XqaKvType
from .reachability import FAST_DECODE
from .recipe import (
    XQA_ALIGNMENT, XQA_HEAD_SIZES, XQA_ROW_BYTES, BackendRecipe, Route, complete, compose, flash_regions,
    preparation, xqa_m_tile,
)


@dataclass(frozen=True)
class Bounds:
    """GQAWorkspaceBounds: every dimension's upper bound, the attributes, the device, and the
    routes reachable at run time (`routes`: Backend members, and FAST_DECODE for Flash's
    single-token path)."""

    qkv_element_size: int
    cache_element_size: int
    batch_size_bound: int
    sequence_length_bound: int
    num_heads: int
    kv_num_heads: int
    head_size_bound: int
    present_kv_cache_capacity_bound: int
    routes: frozenset = frozenset()
    sm: int = 80
    sm_count: int = 108
    kv_cache_bit_width: int = 0
    k_quantization: KvQuantization = KvQuantization.NONE
    v_quantization: KvQuantization = KvQuantization.NONE
    is_windowed_kv_cache: bool = False
    do_rotary: bool = False
    is_packed_qkv: bool = False
    use_qk_norm: bool = False
    prompt_reachable: bool = True
    decode_reachable: bool = True
    local_window_size: int = -1
    is_bf16: bool = False
    xqa_kv_type: XqaKvType = XqaKvType.NONE
    head_sink: HeadSinkStorage = HeadSinkStorage.NONE
    head_sink_may_be_prepacked: bool = False


@dataclass(frozen=True)
class Aggregate:
    """The aggregate's result: the root (bytes), each sized route's bytes, and the head-sink
    prepack's persistent and initialization bytes (outside the workspace)."""

    total_workspace_bytes: int
    sized: dict = field(default_factory=dict)
    persistent_prepack_bytes: int = 0
    initialization_scratch_bytes: int = 0


def largest_multiple_of_eight(bound: int, limit: int) -> int:
    """LargestMultipleOfEight: the largest head size <= min(bound, limit) that is a multiple of 8."""
    return min(bound, limit) // 8 * 8


def _invalid(b: Bounds) -> bool:
    return (b.qkv_element_size != 2 or b.cache_element_size not in (1, 2) or
            min(b.batch_size_bound, b.sequence_length_bound, b.num_heads, b.kv_num_heads) <= 0 or
            b.num_heads % b.kv_num_heads != 0 or b.head_size_bound < 8 or b.present_kv_cache_capacity_bound <= 0 or
            b.sm_count <= 0 or not (b.prompt_reachable or b.decode_reachable))


def effective_kv_bound(b: Bounds, seq: int, d: Any = CONCRETE) -> int:
    """The key length a route is sized at: the capacity bound, or C + S for a windowed prompt."""
    if not b.is_windowed_kv_cache or seq == 1:
        return b.present_kv_cache_capacity_bound
    staged = d.add(b.present_kv_cache_capacity_bound, seq, what="GQA effective key length bound C + S")
    d.require(staged <= INT32_MAX, lambda: InvalidArgument("Windowed GQA effective KV length bound must fit int32."))
    return staged


def _problem(b: Bounds, head: int, seq: int, first: bool) -> GqaWorkspaceProblem:
    return GqaWorkspaceProblem(
        b.qkv_element_size, b.cache_element_size, b.batch_size_bound, seq, b.num_heads, b.kv_num_heads, head,
        b.present_kv_cache_capacity_bound, b.kv_cache_bit_width, b.k_quantization, b.v_quantization,
        b.is_windowed_kv_cache, first, b.do_rotary, b.is_packed_qkv, b.use_qk_norm)


def flash_envelope(d: Any, p: GqaWorkspaceProblem, kv: Any, sm_count: int, window: int, fast: bool) -> BackendRecipe:
    """FlashBackendEnvelope: Flash's regions at min(128, SMs, key blocks) splits, the most the
    heuristic can choose, instead of the heuristic's own choice."""
    if fast and window > 0:
        kv = d.min_(kv, window)
    ceiling = d.min_(min(flash_backend.MAX_SPLITS, sm_count), flash_backend.key_blocks(d, p.head_size, kv))
    return flash_regions(d, p, ceiling)


def xqa_envelope(d: Any, p: GqaWorkspaceProblem, sm_count: int, head_sink: HeadSinkStorage) -> int:
    """XqaBackendEnvelope: GetXQAScratchSize at the most subsequences (max(B * Nk, SMs)) with the
    worst alignment padding, plus rotary Q / K and the dynamic head sink."""
    sequences = d.mul(p.batch_size, p.kv_num_heads, what="XQA sequences")
    subsequences = d.max_(sequences, sm_count)
    vector = d.mul(p.head_size, xqa_m_tile(d, p), 2, what="XQA vector")
    rows = d.mul(XQA_ROW_BYTES, subsequences, what="XQA rows")
    total = d.align_up(d.mul(4, sequences, what="XQA semaphores"), XQA_ALIGNMENT, what="XQA semaphores")
    for part in (rows, XQA_ALIGNMENT - 1, rows, vector - 1, d.mul(vector, subsequences, what="XQA accumulator")):
        total = d.add(total, part, what="XQA envelope")
    extras = []
    if p.do_rotary:
        extras += [d.mul(p.batch_size, p.num_heads, p.head_size, p.qkv_element_size, what="rotary Q"),
                   d.mul(p.batch_size, p.kv_num_heads, p.head_size, p.qkv_element_size, what="rotary K")]
    if head_sink is HeadSinkStorage.DYNAMIC_CONVERSION:
        extras.append(d.mul(p.num_heads, 4, what="head sink"))
    for part in extras:
        total = d.add(total, d.align_up(part, WORKSPACE_ALIGNMENT, what="XQA extra"), what="XQA envelope")
    return total


def _route_bytes(b: Bounds, route: Any, d: Any) -> int:
    """The largest complete workspace of one reachable route over the bounds' candidates."""
    seqs = [s for s in dict.fromkeys((1, b.sequence_length_bound))
            if not (s == 1 and not b.decode_reachable and b.sequence_length_bound != 1)
            and not (s > 1 and not b.prompt_reachable)]
    firsts = (False, True) if b.prompt_reachable else (False,)
    if route is Backend.XQA:
        heads = [h for h in XQA_HEAD_SIZES if h <= b.head_size_bound]
        if not heads:
            raise Unavailable("No XQA head geometry is reachable in the supplied bounds.")
        sizes = []
        for head in heads:
            p = _problem(b, head, 1, False)
            prep = preparation(p, Preprocess.XQA, False, d)
            backend = BackendRecipe(Backend.XQA, xqa_envelope(d, p, b.sm_count, b.head_sink), ())
            sizes.append(compose(d, prep, backend).total_workspace_bytes)
        return max(sizes)
    if route == FAST_DECODE:
        p = _problem(b, largest_multiple_of_eight(b.head_size_bound, flash_backend.FLASH_MAX_HEAD_SIZE),
                     b.sequence_length_bound, False)
        prep = preparation(p, Preprocess.FLASH, True, d)
        kv = effective_kv_bound(b, p.sequence_length, d)
        return compose(d, prep, flash_envelope(d, p, kv, b.sm_count, b.local_window_size, True)).total_workspace_bytes
    limit = {Backend.FLASH: flash_backend.FLASH_MAX_HEAD_SIZE, Backend.MEA: MEA_MAX_HEAD_SIZE,
             Backend.UNFUSED: INT32_MAX}[route]
    head = largest_multiple_of_eight(b.head_size_bound, limit)
    sizes = []
    for seq in seqs:
        for first in firsts:
            p = _problem(b, head, seq, first)
            kv = effective_kv_bound(b, seq, d)
            if route is Backend.FLASH:
                prep = preparation(p, Preprocess.FLASH, False, d)
                backend = flash_envelope(d, p, kv, b.sm_count, b.local_window_size, False)
                sizes.append(compose(d, prep, backend).total_workspace_bytes)
            else:
                whole = Route(route, b.sm, b.sm_count, kv, b.local_window_size)
                sizes.append(complete(p, whole, d).total_workspace_bytes)
    return max(sizes)


ROUTE_ORDER = (Backend.XQA, Backend.FLASH, FAST_DECODE, Backend.MEA, Backend.UNFUSED)


def aggregate_for_bounds(b: Bounds, d: Any = CONCRETE) -> Aggregate:
    """GetGQAWorkspaceAggregateForBounds, or raise ORT's error (InvalidArgument, Overflow,
    Unavailable); the first route that fails decides the error."""
    if _invalid(b):
        raise InvalidArgument("GQA workspace bounds are incomplete or invalid.")
    if Backend.CUDNN in b.routes:
        raise Unavailable("A reachable cuDNN GQA route has no graph-free workspace oracle.")
    prepacked = b.head_sink_may_be_prepacked or b.head_sink is HeadSinkStorage.PREPACKED_FP32
    sized = {r: _route_bytes(b, r, d) for r in ROUTE_ORDER if r in b.routes}
    if not sized:
        raise Unavailable("No GQA backend route can be sized.")
    return Aggregate(max(sized.values()), sized, b.num_heads * LSE_ELEMENT_BYTES if prepacked else 0,
                     b.num_heads * b.qkv_element_size if prepacked else 0)


@dataclass(frozen=True)
class Level1:
    """The Level-1 memory estimate's fields attnws models (bytes; None is ORT's nullopt)."""

    runtime_workspace_bytes: int | None
    persistent_prepack_bytes: int
    initialization_scratch_bytes: int


def level1(result: Aggregate | WorkspaceError) -> Level1 | None:
    """SetGroupQueryAttentionLevel1MemoryEstimate: the workspace only when the estimate is OK and
    non-zero; the prepack figures whenever it is OK."""
    if isinstance(result, WorkspaceError):
        return None
    total = result.total_workspace_bytes or None
    return Level1(total, result.persistent_prepack_bytes, result.initialization_scratch_bytes)


# -- the node adapter: EstimateGroupQueryAttentionWorkspace ---------------------------------------
def reachable_routes(p: Any, config: Any) -> frozenset:
    """The routes ORT's estimator counts as reachable for a node whose dimensions are upper
    bounds (`p`: a `GqaProblem` at the bounds; `config`: a `RuntimeConfig`): those whose gates
    (`attnws.spec.gqa.reachability.route_gates`) all hold."""
    return frozenset(route for route, v in reachability.route_verdicts(p, config) if v.reachable)


def ort_bounds(p: Any, config: Any, max_total_sequence_length: int = 0,
               head_sink_prepacked: bool | None = None) -> Bounds:
    """ORT's GQAWorkspaceBounds for a node whose dimensions are at their bounds, or raise
    Unavailable where ORT's estimator returns nullopt: a non-windowed cache without the session
    option `ep.cuda.gqa_workspace_max_total_sequence_length` (0: unset), a windowed cache whose
    capacity is not the window, a windowed cache with an attention bias.

    `head_sink_prepacked` is the estimator's `head_sink_is_constant_initializer` (None: the
    problem's own storage, prepacked for an initializer): a prepacked sink is sized at
    PrepackedFp32 (no workspace; its prepack reported), any other at DynamicConversion."""
    if head_sink_prepacked is None:
        head_sink_prepacked = p.head_sink_storage is HeadSinkStorage.PREPACKED_FP32
    if p.sliding_window_cache:
        if p.past_sequence_length != p.local_window_size:
            raise Unavailable(f"the windowed cache's capacity {p.past_sequence_length} is not the local window "
                              f"{p.local_window_size}: ORT's estimator declares nothing (CUDA requires them equal)")
        if p.has_attention_bias:
            raise Unavailable("an attention bias with a windowed cache: ORT's estimator declares nothing")
        capacity = p.past_sequence_length
    else:
        if max_total_sequence_length <= 0:
            raise Unavailable("a cache that is not windowed (sliding_window_cache 0; a local window alone does not bound "
                              "the cache): ORT's estimator needs the session option "
                              "ep.cuda.gqa_workspace_max_total_sequence_length (unset)")
        capacity = max(max_total_sequence_length, p.past_sequence_length)
    sink = (HeadSinkStorage.NONE if not p.has_head_sink else
            HeadSinkStorage.PREPACKED_FP32 if head_sink_prepacked else HeadSinkStorage.DYNAMIC_CONVERSION)
    kv_type = XqaKvType.NONE if not p.quantized else XqaKvType.FP8 if p.cache_is_fp8 else XqaKvType.INT8
    return Bounds(
        2, p.cache_element_size, p.batch_size, p.sequence_length, p.num_heads, p.kv_num_heads, p.head_size, capacity,
        reachable_routes(p, config), config.device.sm, config.device.sm_count, p.kv_cache_bit_width,
        p.k_quantization, p.v_quantization, p.sliding_window_cache, p.do_rotary, p.is_packed_qkv, p.use_qk_norm,
        True, True, p.local_window_size, p.is_bf16, kv_type, sink, head_sink_prepacked)


def ort_estimate(p: Any, config: Any, max_total_sequence_length: int = 0,
                 head_sink_prepacked: bool | None = None) -> Aggregate:
    """ORT 1.31.1's AOT estimate for the node (EstimateGroupQueryAttentionWorkspace), or raise its
    Unavailable / InvalidArgument / WorkspaceOverflow (`head_sink_prepacked`: as `ort_bounds`)."""
    return aggregate_for_bounds(ort_bounds(p, config, max_total_sequence_length, head_sink_prepacked))


# -- the family's hooks -----------------------------------------------------------------------
ORT_ESTIMATOR = True  # ORT 1.31.1 estimates GroupQueryAttention's workspace itself
WHOSE = "ORT's"
BOUND_NAME = "ORT's estimate"
READING = "ORT's estimate, the node read at its maxima as EstimateGroupQueryAttentionWorkspace reads it"


def head_domain(op: Op, qkv_hidden_sizes: Sequence[int] | None) -> HeadDomain:
    """The head size is an upper bound (the node has no qkv_hidden_sizes)."""
    return HeadDomain.UPPER_BOUND


def note(p: Any, config: RuntimeConfig, backends: Sequence[Backend], failures: str) -> str:
    """Return what ORT's estimate covers: its workspace root; Flash's LSE and split accumulators
    and XQA's scratch are inside it."""
    return ("ORT's estimate covers its one workspace root, Flash's LSE and split-KV accumulators and XQA's scratch "
            "included; the present key/value cache is not workspace")


def side_allocations_of(p: Any, config: RuntimeConfig, backend: Backend) -> tuple[str, dict[str, int]] | None:
    """Nothing beside the workspace that attnws sizes: GroupQueryAttention's recipes hold Flash's
    LSE and accumulators and XQA's scratch inside it."""
    return None


def routes_apart(p: Any, config: RuntimeConfig) -> list[tuple[str, bool, str]]:
    """The routes ORT's estimator sizes apart from their backend's (name, reachable, why not):
    Flash's single-token fast decode."""
    verdict = reachability.fast_decode_reachability(p, config)
    return [(FAST_DECODE, verdict.reachable, verdict.reason)]


def has_projection(op: Op) -> bool:
    """GroupQueryAttention's root is its one workspace allocation (no projection GEMM)."""
    return False


def node_at_maxima(g: Geometry, d: Any = CONCRETE) -> GqaProblem:
    """The node as ORT's estimator reads the geometry's dimensions as maxima: built at its first
    prompt of the longest query (T = S), then T at its maximum (ORT does not read T; the windowed
    capacity or the session option bounds the keys)."""
    prompt = runtime_problem(replace(g, total_seq=g.seq), d)
    return replace(prompt, total_sequence_length=g.total_seq)


def session_bound_advice(g: Any) -> str:
    """Return what makes ORT's estimate available for a geometry whose cache is not windowed and
    which gives no session bound (ORT's estimator declares nothing then): the flag (or target-file
    key) that sets the bound and, with a local window, what a windowed cache would change; '' where
    the geometry needs no bound or has one."""
    if g.sliding_window_cache or g.max_total_seq:
        return ""
    words = ("; pass --max-total-seq N (a target file's \"max_total_seq\"), the longest total sequence a session "
             "runs")
    if g.window not in (None, -1):
        words += (f"; or, with the window of {g.window:,}, --sliding-window-cache (a windowed cache holding the "
                  f"window's {g.window:,} rows, its capacity --past {g.window}), which needs no session bound")
    return words


def own_estimate(g: Geometry, config: RuntimeConfig,
                 keep: Sequence[Backend] | None = None) -> tuple[GqaProblem, Aggregate | WorkspaceError]:
    """The node read at the geometry's maxima (or raise the builder's error) and ORT 1.31.1's
    estimate for it (the session option `max_total_seq`, None: unset; a head sink prepacked where
    the geometry's is an initializer, converted where it is an input), or its Unavailable /
    InvalidArgument / WorkspaceOverflow. `keep`: only these of its reachable routes (Flash's fast
    decode goes with Flash), as the tight policy's route-dropping bound sizes them."""
    p = node_at_maxima(g)
    try:
        try:
            bounds = ort_bounds(p, config, g.max_total_seq or 0)
        except Unavailable as error:  # said with the flag that makes it available, where one does
            raise Unavailable(f"{error}{session_bound_advice(g)}") from None
        if keep is not None:
            bounds = replace(bounds, routes=frozenset(
                r for r in bounds.routes if (Backend.FLASH if r == FAST_DECODE else r) in keep))
        return p, aggregate_for_bounds(bounds)
    except WorkspaceError as error:
        return p, error


OWN_ESTIMATE = own_estimate  # ORT's own GroupQueryAttention estimator, not the shared aggregate
