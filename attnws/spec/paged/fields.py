"""How PagedAttention problems are described beyond what every family has (B, S, N, H, Hv, dtype,
the configuration): the packed token count T, the longest key length L (`kv_len`), the KV heads
Nk, the cache's block size and the block table's blocks per sequence M, and the node's options
(packed QKV, bf16, rotary, the local window, softcap, the head sink, QK-norm, the cache's
quantization and its scales, the latent layout, is_causal and whether attention_metadata is
given), read from the command line, target files and shapes documents, checked, and written back
in words.

S is the longest sequence's new tokens: decode is S = 1 with T = B, prefill S up to L. N, Nk, H,
the block size and M are fixed by the model and the serving engine's cache: a target declares them
exact; B, S, T and L range. Fields PagedAttention shares with GroupQueryAttention (Nk, the format,
rotary, window, softcap, head sink, QK-norm, kv_quant) and with the packed family (T) are one
field each; the readers of target files and records here read PagedAttention's own keys only.
"""

from __future__ import annotations

import enum
from typing import Any

from ..declared import EXACT, MAXIMUM, Flag
from ..errors import InvalidArgument, NodeRejected, WorkspaceError
from ..problem import Op
from .problem import CACHE_TYPES, METADATA, SCALES, PagedFormat, metadata_kind

FLAGS = {Op.PAGED: ("tokens", "kv_len", "kv_heads", "block_size", "max_blocks", "format", "packed_qkv", "rotary",
                    "window", "softcap", "head_sink", "qk_norm", "kv_quant", "kv_scale", "latent", "non_causal",
                    "metadata")}
DIMENSIONS = {Op.PAGED: ("tokens", "kv_len", "kv_heads", "block_size", "max_blocks")}
DIMENSION_LABELS = {"kv_len": "L", "block_size": "bs", "max_blocks": "M"}
DIMENSION_PLACES = {"kv_len": "length", "block_size": "last", "max_blocks": "last"}
DTYPES = {Op.PAGED: ("fp16", "bf16")}
REQUIRED_DIMENSIONS = {Op.PAGED: ("kv_heads", "kv_len", "block_size", "max_blocks")}
FIXED_DIMENSIONS = {Op.PAGED: ("heads", "head_size", "kv_heads", "block_size", "max_blocks")}
OWN_FIELDS = {Op.PAGED: ("tokens", "kv_len", "kv_heads", "block_size", "max_blocks", "bf16", "rotary", "window",
                         "softcap", "head_sink", "qk_norm", "kv_quant", "kv_scale", "latent", "non_causal", "metadata")}
_OPTIONS = (("paged_format", PagedFormat.SEPARATE), ("kv_scale", None), ("latent", False), ("non_causal", False),
            ("metadata", None))
GEOMETRY_FIELDS = (("kv_len", None), ("block_size", None), ("max_blocks", None), *_OPTIONS)
TARGET_FIELDS = (("kv_len", None), ("block_size", None), ("max_blocks", None), *_OPTIONS)
FLAG_SPECS = (
    Flag("tokens", "T, the step's new tokens packed over its B sequences (a maximum; default 1..B*S)", "dimension",
         "T", reading=MAXIMUM),
    Flag("kv_heads", "kv_num_heads attribute (exact)", "dimension", "NK", reading=EXACT),
    Flag("format", "separate (default: query [T, N*H], key and value [T, Nk*H]) or packed_qkv (query "
                   "[T, (N + 2 Nk) H])", "choice", choices=tuple(f.value for f in PagedFormat)),
    Flag("packed_qkv", "query packs Q, K and V, [T, (N + 2 Nk) H] (the same as --format packed_qkv)", "switch"),
    Flag("rotary", "do_rotary=1 with cos / sin caches", "switch"),
    Flag("window", "local_window_size: a window of W > 0 keys, or -1 (the default) for none", "value", "W"),
    Flag("softcap", "softcap (default 0)", "number", "F"),
    Flag("qk_norm", "q_norm_weight and k_norm_weight [H]: the per-head RMS normalization of Q and K", "switch"),
    Flag("head_sink", "a head_sink [N] input (initializer or input: the same scratch)", "choice",
         choices=("initializer", "input"), bare="initializer"),
    Flag("kv_quant", "the cache's element type: int8, fp8 (float8e4m3fn) or int4 (two per byte); default the "
                     "query's", "choice", choices=("none", *CACHE_TYPES)),
    Flag("kv_len", "PagedAttention: the longest sequence's key length L, its past plus its new tokens (a maximum; "
                   "at most M * block size)", "dimension", "L", reading=MAXIMUM),
    Flag("block_size", "PagedAttention: the cache's block size (exact; a power of two >= 16)", "dimension", "BS",
         reading=EXACT),
    Flag("max_blocks", "PagedAttention: block_table's blocks per sequence M (exact)", "dimension", "M", reading=EXACT),
    Flag("kv_scale", "PagedAttention: a quantized cache's scales, per_tensor (default) or per_channel", "choice",
         choices=SCALES),
    Flag("latent", "PagedAttention: kv_cache_layout LATENT (absorbed MLA: one cache, Nk = 1, V its first Hv "
                   "channels)", "switch"),
    Flag("non_causal", "PagedAttention: is_causal = 0 (bidirectional among a step's new tokens)", "switch"),
    Flag("metadata", "PagedAttention: attention_metadata absent (default: ORT copies the lengths back to the host) or "
                     "bounds (given, its bounds S and L)", "choice", choices=METADATA),
)
COMMAND_LINE_ONLY: tuple[str, ...] = ("packed_qkv",)
ESTIMATE_ONLY: tuple[str, ...] = ()
CLAIMS = {
    "containment": "every buffer's view lies inside its own request (ORT makes one GetScratchBuffer per buffer: no "
                   "root, no offsets, nothing shared)",
    "kernel_contract": "every buffer the kernels touch fits the request of its name and no request exceeds its buffer "
                       "(ORT documents no slack); the backend may launch",
}
NOT_APPLICABLE: dict[str, str] = {}
WORKING_SET_TEXT = "T*N*(L+H)+2*B*L*N*H"
PATTERN_DIMS = ("batch", "seq", "tokens", "kv_len")  # what varies at run time; the rest is the model's


def format_type(op: Op) -> type[enum.Enum]:
    """The enum of the operator's input formats."""
    return PagedFormat


def working_set(p: Any) -> Any:
    """The largest working set the kernels touch, in elements: T * N * (L + H) (scores and Q) plus
    K and V of L rows per sequence expanded to N heads."""
    t, length, h = p.token_count, p.max_kv_len, p.head_size
    return t * p.num_heads * (length + h) + 2 * p.batch_size * length * p.num_heads * h


# -- words ------------------------------------------------------------------------------------------

def _cache_words(kv_quant: Any, kv_scale: Any) -> str:
    if kv_quant in (None, "none"):
        return ""
    return f"{kv_quant} cache ({(kv_scale or 'per_tensor').replace('_', '-')} scales)"


def _flag_words(g: Any) -> list[str]:
    """The node's flags that differ from the defaults, in words (a geometry or a target)."""
    window = g.window
    return [w for w, on in (
        ("latent", g.latent), ("packed QKV", g.paged_format is PagedFormat.PACKED_QKV), ("rotary", g.rotary),
        (f"window {window}", window not in (None, -1)), (f"softcap {g.softcap:g}" if g.softcap else "", g.softcap),
        ("head sink", g.head_sink), ("QK-norm", g.qk_norm), (_cache_words(g.kv_quant, g.kv_scale), g.kv_quant not in
                                                             (None, "none")),
        ("non-causal", g.non_causal), ("metadata bounds", metadata_kind(g.metadata) == "bounds")) if on]


def _on(flag: Any) -> str:
    return "on" if flag else "off"


def options_line(g: Any) -> str:
    """The node options that change the geometry's bytes, each on or off, as one line."""
    cache = _cache_words(g.kv_quant, g.kv_scale) or "unquantized"
    words = [f"layout {'latent' if g.latent else 'separate'}", f"rotary {_on(g.rotary)}",
             f"packed QKV {_on(g.paged_format is PagedFormat.PACKED_QKV)}",
             f"window {'none' if g.window in (None, -1) else g.window}",
             f"softcap {g.softcap:g}" if g.softcap else "softcap off", f"head sink {_on(g.head_sink)}",
             f"QK-norm {_on(g.qk_norm)}", f"cache {cache}", f"causal {_on(not g.non_causal)}",
             f"attention_metadata {metadata_kind(g.metadata)}"]
    return "options: " + ", ".join(words)


def problem_text(p: Any, dtype: str) -> str:
    """A problem's dimensions and flags as one line."""
    words = [w for w, on in (("latent", p.latent), ("packed QKV", p.is_packed_qkv), ("rotary", p.do_rotary),
                             (f"window {p.local_window_size}", p.local_window_size != -1),
                             (f"softcap {p.softcap:g}" if p.softcap else "", p.softcap), ("head sink", p.has_head_sink),
                             ("QK-norm", p.use_qk_norm), (f"{p.cache_type} cache", p.quantized),
                             ("non-causal", not p.causal), ("metadata bounds", p.has_metadata)) if on]
    hv = f", Hv = {p.v_head_size}" if p.latent else ""
    return (f"B = {p.batch_size}, T = {p.token_count}, S = {p.max_query_len}, L = {p.max_kv_len}, "
            f"N = {p.num_heads}, Nk = {p.kv_num_heads}, H = {p.head_size}{hv}, block {p.block_size}, "
            f"M = {p.max_blocks_per_sequence}, " + "".join(f"{w}, " for w in words) + ("bf16" if p.is_bf16 else dtype))


def target_words(t: Any) -> list[str]:
    """The target's own flags in words, after its box."""
    return _flag_words(t) + [f"{t.config.device.sm_count} SMs"]


def name_words(t: Any) -> list[str]:
    """The words a target named after its flags adds for the flags that differ from the defaults."""
    return [w.replace(" ", "-").replace(",", "").replace("(", "").replace(")", "") for w in target_words(t)]


def record_name(s: dict[str, Any], labels: str) -> str:
    """A shapes-document record as `attnws validate` names it."""
    dims = " ".join([f"B={s['batch']}", f"T={s['tokens']}", f"S={s['seq']}", f"L={s['kv_len']}", f"N={s['heads']}",
                     f"Nk={s['kv_heads']}", f"H={s['head_size']}", f"bs={s['block_size']}", f"M={s['max_blocks']}"])
    return f"paged {s['dtype']} {dims} sm{s['sm']}" + (f" [{labels}]" if labels else "")


# -- the command line -------------------------------------------------------------------------------

def flag_problem(op: Op, ns: Any) -> str:
    """Why a V head size of its own cannot apply ('' when it can: the latent layout)."""
    return "" if getattr(ns, "latent", False) else "--v-head-size: PagedAttention has one head size but with --latent"


def _window(text: str | None) -> int | None:
    from ..units import parse_integer
    from ..errors import UsageError

    if text is None or text == "-1":
        return None
    value = parse_integer(text)
    if value is None:
        raise UsageError(f"--window {text!r}: expected -1 (no window, the default) or a window W in ASCII digits")
    return value


def _discrete(ns: Any) -> dict[str, Any]:
    packed = ns.packed_qkv or ns.format == PagedFormat.PACKED_QKV.value
    return {"paged_format": PagedFormat.PACKED_QKV if packed else PagedFormat.SEPARATE, "bf16": ns.dtype == "bf16",
            "rotary": ns.rotary, "window": _window(ns.window), "softcap": ns.softcap or None,
            "head_sink": ns.head_sink, "qk_norm": ns.qk_norm, "kv_quant": ns.kv_quant, "kv_scale": ns.kv_scale,
            "latent": ns.latent, "non_causal": ns.non_causal, "metadata": ns.metadata}


def _dims(point: dict[str, Any]) -> dict[str, Any]:
    return {name: point[name] for name in ("tokens", "kv_len", "kv_heads", "block_size", "max_blocks")}


def target_fields(op: Op, ns: Any, dims: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Target` fields of the operator's own flags (`dims`: DimRange or None per dimension;
    T defaults to 1..B*S, which the builder narrows to S..B*S)."""
    out = {**_dims(dims), **_discrete(ns)}
    if out["tokens"] is None and dims.get("batch") is not None:
        out["tokens"] = None
    return out


def geometry_fields(op: Op, ns: Any, point: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Geometry` fields of the operator's own flags (`point`: one value per dimension; T
    defaults to B * S)."""
    return {**_dims(point), **_discrete(ns)}


def geometry_options(t: Any, dims: dict[str, Any]) -> dict[str, Any]:
    """The `Geometry` fields of the target's own flags."""
    names = ("paged_format", "bf16", "rotary", "window", "softcap", "head_sink", "qk_norm", "kv_quant", "kv_scale",
             "latent", "non_causal", "metadata")
    return {name: getattr(t, name) for name in names}


def example_words(g: Any, dtype: str) -> tuple[list[str], list[str]]:
    """A geometry's own words: T and L after B and S; Nk, the block size and M, the element type
    and the node's options after N and H."""
    return ([f"T = {g.t}", f"L = {g.kv_len}"],
            [f"Nk = {g.kv_heads}", f"block {g.block_size}", f"M = {g.max_blocks}", "bf16" if g.bf16 else dtype,
             *_flag_words(g)])


# -- target files -----------------------------------------------------------------------------------

def check_target(t: Any) -> None:
    """Raise InvalidArgument where the target's own fields are missing or contradict each other,
    and NodeRejected where the node at its maxima fails ORT's checks."""
    missing = [name for name in ("kv_heads", "kv_len", "block_size", "max_blocks") if getattr(t, name) is None]
    if missing:
        raise InvalidArgument(f"PagedAttention needs {' and '.join(missing)}")
    if t.element_size != 2:
        raise InvalidArgument("PagedAttention runs fp16 and bf16 only, not fp32")
    for name in ("heads", "head_size", "kv_heads", "block_size", "max_blocks"):
        value = getattr(t, name)
        if not value.exact:
            raise InvalidArgument(f"{name} {value.lo}..{value.hi}: PagedAttention's {name} is fixed by the model and "
                                  "its cache; give one value")
    if t.kv_quant is not None and t.kv_quant != "none" and t.kv_quant not in CACHE_TYPES:
        raise InvalidArgument(f"kv_quant {t.kv_quant!r}: expected one of none, {', '.join(CACHE_TYPES)}")
    if t.kv_scale is not None and (t.kv_scale not in SCALES or t.kv_quant in (None, "none")):
        raise InvalidArgument(f"kv_scale {t.kv_scale!r}: expected {' or '.join(SCALES)}, with a quantized cache")
    if t.head_sink not in (None, False, True, "initializer", "input"):
        raise InvalidArgument(f"head_sink {t.head_sink!r}: expected true or false")
    if t.v_head_size is not None and not t.latent:
        raise InvalidArgument(flag_problem(t.op, None))
    metadata_kind(t.metadata)
    for pattern in t.patterns:
        other = [dim for dim, _ in pattern.dims if dim not in PATTERN_DIMS]
        if other:
            raise InvalidArgument(f"pattern {pattern.name} narrows {', '.join(other)}; a PagedAttention pattern "
                                  f"narrows {', '.join(PATTERN_DIMS)}")
    from .inputs import runtime_problem

    try:
        runtime_problem(t.max_geometry())
    except WorkspaceError as error:
        raise NodeRejected(f"the node at its maxima fails ORT's check: {error}", error.status) from None


def check_head_sizes(t: Any) -> None:
    """The head sizes are checked by the builder."""


def contains(t: Any, g: Any) -> bool:
    """Whether the geometry's own dimensions lie in the target's box."""
    tokens_ok = g.t in t.tokens if t.tokens is not None else True
    return (tokens_ok and g.kv_len in t.kv_len and g.kv_heads in t.kv_heads and g.block_size in t.block_size
            and g.max_blocks in t.max_blocks)


def file_fields(t: Any) -> dict[str, Any]:
    """The target-file keys of the target's own flags."""
    out = {"format": t.paged_format.value, "dtype": "bf16" if t.bf16 else "fp16", "rotary": t.rotary,
           "qk_norm": t.qk_norm, "head_sink": bool(t.head_sink), "latent": t.latent, "non_causal": t.non_causal}
    optional = {"window": t.window, "softcap": t.softcap, "kv_quant": t.kv_quant, "kv_scale": t.kv_scale,
                "metadata": t.metadata}
    return {**out, **{k: v for k, v in optional.items() if v is not None}}


def read_own_fields(f: Any, dim: Any, op: Op) -> dict[str, Any]:
    """PagedAttention's own keys a target file gives (those it shares with GroupQueryAttention and the
    packed family are read by theirs)."""
    return {"kv_len": dim("kv_len", False), "block_size": dim("block_size", False),
            "max_blocks": dim("max_blocks", False),
            "kv_scale": None if f.raw("kv_scale") is None else f.string("kv_scale", None, list(SCALES)),
            "latent": f.boolean("latent"), "non_causal": f.boolean("non_causal"),
            "metadata": None if f.raw("metadata") is None else f.string("metadata", None, list(METADATA))}


def read_format(op: Op, f: Any) -> dict[str, Any]:
    """The `Target` format field a target file of the operator gives."""
    return {"paged_format": PagedFormat(f.string("format", "separate", [m.value for m in PagedFormat]))}


# -- shapes documents -------------------------------------------------------------------------------

def record_fields(g: Any) -> dict[str, Any]:
    """A shape record's keys for the geometry's own dimensions and flags."""
    return {"tokens": g.t, "format": g.paged_format.value, "dtype": "bf16" if g.bf16 else "fp16",
            "kv_len": g.kv_len, "kv_heads": g.kv_heads, "block_size": g.block_size, "max_blocks": g.max_blocks,
            "rotary": g.rotary, "window": g.window, "softcap": g.softcap, "head_sink": bool(g.head_sink),
            "qk_norm": g.qk_norm, "kv_quant": g.kv_quant, "kv_scale": g.kv_scale, "latent": g.latent,
            "non_causal": g.non_causal, "metadata": g.metadata}


def read_record_fields(op: Op, f: Any) -> dict[str, Any]:
    """The `Geometry` fields a shape record's own keys give."""
    return {"paged_format": PagedFormat(f.string("format", "separate", [m.value for m in PagedFormat])),
            "bf16": f.raw("dtype") == "bf16", "tokens": f.integer("tokens", required=True),
            "kv_len": f.integer("kv_len", required=True), "kv_heads": f.integer("kv_heads", required=True),
            "block_size": f.integer("block_size", required=True), "max_blocks": f.integer("max_blocks", required=True),
            "rotary": f.boolean("rotary"), "window": f.integer("window", optional=True, lo=-1),
            "softcap": f.number("softcap", optional=True), "head_sink": f.boolean("head_sink") or None,
            "qk_norm": f.boolean("qk_norm"),
            "kv_quant": None if f.raw("kv_quant") is None else f.string("kv_quant", None, ["none", *CACHE_TYPES]),
            "kv_scale": None if f.raw("kv_scale") is None else f.string("kv_scale", None, list(SCALES)),
            "latent": f.boolean("latent"), "non_causal": f.boolean("non_causal"),
            "metadata": None if f.raw("metadata") is None else f.string("metadata", None, list(METADATA))}
