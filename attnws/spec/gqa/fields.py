"""How GroupQueryAttention problems are described beyond what every family has (B, S, N, H, dtype,
the configuration): the KV heads Nk, the total sequence length T (the key length), the cache's
capacity P (past and present share one buffer, as onnxruntime-genai binds them; with a windowed
cache, the window), the packed-QKV format, bf16, rotary embedding, the local window and the
windowed cache, the softcap, smooth softmax, the head sink, the KV cache's quantization and the
session option ORT's estimator reads (`ep.cuda.gqa_workspace_max_total_sequence_length`), read
from the command line, target files and shapes documents, checked, and written back in words.

Nk, H, N and P are fixed by the model (attributes, weights, the cache's allocation): a target
declares them exact; B, S and T range. Every function takes the objects the shared modules hold
(argparse namespaces, `Target`, `Geometry`, JSON field readers) as they are, without importing
their modules.
"""

from __future__ import annotations

import enum
from typing import Any

from ..declared import EXACT, MAXIMUM, Flag
from ..errors import InvalidArgument, NodeRejected, UsageError, WorkspaceError
from ..limits import INT32_MAX, checked_max_total_seq
from ..problem import Op
from ..units import parse_integer
from .problem import CACHE_LAYOUTS, HEAD_SINK_KINDS, KV_QUANT, GqaFormat, cache_layout, head_sink_kind, shares_buffer

# The problem flags (and target-file keys) only GroupQueryAttention has ("past" it shares with
# MultiHeadAttention, where it is the past length; "format" with the packed family and MHA).
FLAGS = {Op.GQA: ("kv_heads", "total_seq", "past", "format", "packed_qkv", "rotary", "window",
                  "sliding_window_cache", "softcap", "smooth_softmax", "head_sink", "kv_quant", "max_total_seq",
                  "cache_layout", "qk_norm")}
# The dimensions beyond B, S, N, H: Nk, T and the cache capacity P.
DIMENSIONS = {Op.GQA: ("past", "kv_heads", "total_seq")}
# How a shape names them in words ("T=2048 P=4096 Nk=8").
DIMENSION_LABELS = {"total_seq": "T", "past": "P", "kv_heads": "Nk"}
# Where a shape shows them: among the lengths after B and S, among the head counts after N, or last.
DIMENSION_PLACES = {"total_seq": "length", "past": "length", "kv_heads": "heads"}
# The element types the operators run (`--dtype`, a target's and a record's `dtype`).
DTYPES = {Op.GQA: ("fp16", "bf16")}
# The operators' own dimensions a problem cannot do without (their flags are required).
REQUIRED_DIMENSIONS = {Op.GQA: ("kv_heads", "total_seq")}
# The dimensions the model fixes, which a target file may give as a bare N (exact, N..N).
FIXED_DIMENSIONS = {Op.GQA: ("heads", "head_size", "kv_heads", "past")}
# The `Target` fields only GroupQueryAttention has (a target of another operator may not set them).
OWN_FIELDS = {Op.GQA: ("kv_heads", "total_seq", "past", "bf16", "rotary", "window", "sliding_window_cache",
                       "softcap", "smooth_softmax", "head_sink", "kv_quant", "max_total_seq", "cache_layout",
                       "qk_norm")}
# The fields GroupQueryAttention adds to the shared records, with their defaults: `Geometry` (one
# node at one step: Nk, T, the capacity P) and `Target` (ranges), and the node's options. `head_sink`
# is None (no head sink), "initializer" (a constant ORT prepacks to float32 at session creation) or
# "input" (a graph input XQA converts into its workspace at every run): `problem.head_sink_kind`
# reads it (True, a boolean's reading, is "initializer"); a model's reader sets it from the graph.
_OPTIONS = (("gqa_format", GqaFormat.SEPARATE), ("bf16", False), ("rotary", False), ("window", None),
            ("sliding_window_cache", False), ("softcap", None), ("smooth_softmax", False), ("head_sink", None),
            ("kv_quant", None), ("max_total_seq", None), ("cache_layout", None), ("qk_norm", False))
GEOMETRY_FIELDS = (("kv_heads", None), ("total_seq", None), ("past", 0), *_OPTIONS)
TARGET_FIELDS = (("kv_heads", None), ("total_seq", None), ("past", None), *_OPTIONS)
# Its flags, as the command line offers them.
FLAG_SPECS = (
    Flag("kv_heads", "kv_num_heads attribute (exact)", "dimension", "NK", reading=EXACT),
    Flag("total_seq", "total_sequence_length, the key length (a maximum)", "dimension", "T", reading=MAXIMUM),
    Flag("past", "the past / present cache's capacity (exact; default: T's maximum; with --sliding-window-cache, the "
                 "window)", "dimension", "P", reading=EXACT),
    Flag("format", "separate (default: query [B, S, N*H], key and value [B, S, Nk*H]) or packed_qkv (query "
                   "[B, S, (N + 2 Nk) H])", "choice", choices=tuple(f.value for f in GqaFormat)),
    Flag("packed_qkv", "query packs Q, K and V, [B, S, (N + 2 Nk) H] (the same as --format packed_qkv)", "switch"),
    Flag("rotary", "do_rotary=1 with cos / sin caches", "switch"),
    Flag("window", "local_window_size: a window of W > 0 keys, or -1 (the default) for none", "value", "W"),
    Flag("sliding_window_cache", "sliding_window_cache=1, the cache holds the window (its capacity --past = --window)",
         "switch"),
    Flag("softcap", "softcap (default 0)", "number", "F"),
    Flag("smooth_softmax", "smooth_softmax=1", "switch"),
    Flag("qk_norm", "q_norm_weight and k_norm_weight [H]: the per-head RMS normalization of Q and K (Qwen3)", "switch"),
    Flag("head_sink", "a head_sink [N]: initializer (a bare --head-sink: a constant, which ORT prepacks to float32 at "
                      "session creation, outside the workspace) or input (a graph input, which XQA converts into "
                      "its workspace at every run: align256(4 N) bytes more)", "choice",
         choices=tuple(HEAD_SINK_KINDS), bare="initializer"),
    Flag("kv_quant", "the KV cache's quantization, per-tensor scales (default none)", "choice", choices=tuple(KV_QUANT)),
    Flag("max_total_seq", "the session option ep.cuda.gqa_workspace_max_total_sequence_length, which ORT's estimator "
                          f"needs for a non-windowed cache, 0..{INT32_MAX} (default 0: unset; the option is an int64, "
                          "the CUDA kernel's total sequence length an int32)", "integer", "N"),
    Flag("cache_layout", "shared (past and present alias one buffer of P rows, as onnxruntime-genai binds them: T <= P) "
                         "or separate (present is a tensor of its own, max(T, P) rows: a growing cache, T = P + S, "
                         "as beam search or a plain InferenceSession.run has it; the past length P may then range); "
                         "default: shared where T <= P, separate where T > P (a windowed cache is always shared)",
         "choice", choices=CACHE_LAYOUTS),
)
# The flags only the command line takes (a target file or a shape record says them otherwise).
COMMAND_LINE_ONLY: tuple[str, ...] = ("packed_qkv",)
# The flags only ORT's AOT estimate reads (the session option): a command on one shape that sizes
# no estimate (dispatch, recipe, estimate --exact) refuses them.
ESTIMATE_ONLY: tuple[str, ...] = ("max_total_seq",)
# What a theorem of the one engine claims of these operators where the shared words say more than it
# checks here (theorem -> claim; the others read `attnws.solver.results.CLAIMS`).
CLAIMS: dict[str, str] = {
    "kernel_contract": "every buffer the kernels touch lies inside the room its recipe region has (up to the next "
                       "region or the allocation's end: the footprint's buffers apart); the backend may launch",
}
# The theorems of the one engine that state nothing about these operators (theorem -> why): none.
NOT_APPLICABLE: dict[str, str] = {}
WORKING_SET_TEXT = "B*N*(S*T+S*H+2*T*H)"
PATTERN_DIMS = ("batch", "seq", "total_seq")  # what varies at run time; the rest is the model's


def format_type(op: Op) -> type[enum.Enum]:
    """The enum of the operator's input formats."""
    return GqaFormat


def working_set(p: Any) -> Any:
    """The largest working set the kernels touch, in elements: B * N * (S * T + S * H + 2 * T * H)
    (scores over T keys, Q, and K and V of T rows expanded to N heads)."""
    s, t, h = p.sequence_length, p.total_sequence_length, p.head_size
    return p.batch_size * p.num_heads * (s * t + s * h + 2 * t * h)


# -- words ------------------------------------------------------------------------------------------

def _flag_words(window: Any, windowed: bool, packed: bool, rotary: bool, softcap: Any, smooth: bool, sink: Any,
                quant: Any, layout: str | None, qk_norm: bool) -> list[str]:
    """The node's flags in words, those that differ from the defaults (`sink`: a `head_sink`
    field, `layout`: a `cache_layout` one)."""
    sink = head_sink_kind(sink)
    return [w for w, on in ((f"window {window}", window not in (None, -1)), ("windowed cache", windowed),
                            ("separate present", layout == "separate"),
                            ("packed QKV", packed), ("rotary", rotary), (f"softcap {softcap:g}" if softcap else "", softcap),
                            ("smooth softmax", smooth), ("QK-norm", qk_norm), ("head sink input" if sink == "input" else "head sink", sink),
                            (f"{quant} KV cache", quant not in (None, "none")))
            if on]


def _on(flag: Any) -> str:
    return "on" if flag else "off"


def options_line(g: Any) -> str:
    """Return the node options that change the geometry's bytes, each said on or off, as one line:
    rotary, packed QKV, the local window, softcap, smooth softmax, the head sink and its kind, the
    KV cache's quantization, QK-norm and the cache's layout (past and present
    share one buffer of capacity P; a windowed cache's capacity is the window)."""
    sink = head_sink_kind(g.head_sink)
    sink_words = {None: "none", "initializer": "initializer (prepacked at session creation)",
                  "input": "input (converted into the workspace at every run)"}[sink]
    quant = "unquantized" if g.kv_quant in (None, "none") else f"{g.kv_quant} (per-tensor scales)"
    cache = _cache_words(g)
    words = [f"rotary {_on(g.rotary)}", f"packed QKV {_on(g.gqa_format is GqaFormat.PACKED_QKV)}",
             f"window {'none' if g.window in (None, -1) else g.window}",
             f"softcap {g.softcap:g}" if g.softcap else "softcap off", f"smooth softmax {_on(g.smooth_softmax)}",
             f"head sink {sink_words}", f"KV cache {quant}", f"QK-norm {_on(g.qk_norm)}", f"cache {cache}"]
    return "options: " + ", ".join(words)


def _cache_words(g: Any) -> str:
    """The geometry's cache layout in words: shared (one buffer of P rows), separate (present
    max(T, P) rows) or, left to T and P, both with where each applies."""
    if g.sliding_window_cache and g.cache_layout != "separate":
        return f"windowed, shared past/present (capacity {g.past:,}, the window)"
    shared, separate = f"shared past/present (capacity {g.past:,})", "separate past and present (present max(T, P) rows)"
    return {"shared": shared, "separate": separate}.get(
        g.cache_layout, f"{shared} where T <= P, else {separate}")


def problem_text(p: Any, dtype: str) -> str:
    """A problem's dimensions and flags as one line."""
    quant = {0: "none", 8: "fp8" if p.cache_is_fp8 else "int8", 4: "int4"}[p.kv_cache_bit_width]
    separate = p.has_past and not p.kv_share_buffer
    flags = _flag_words(p.local_window_size, p.sliding_window_cache, p.is_packed_qkv, p.do_rotary, p.softcap,
                        p.smooth_softmax, p.head_sink, quant, "separate" if separate else None,
                        p.use_qk_norm)
    return (f"B = {p.batch_size}, S = {p.sequence_length}, T = {p.total_sequence_length}, "
            f"P = {p.past_sequence_length}, N = {p.num_heads}, Nk = {p.kv_num_heads}, H = {p.head_size}, "
            + "".join(f"{w}, " for w in flags) + ("bf16" if p.is_bf16 else dtype))


def target_words(t: Any) -> list[str]:
    """The target's own flags in words, after its box."""
    words = _flag_words(t.window, t.sliding_window_cache, t.gqa_format is GqaFormat.PACKED_QKV, t.rotary, t.softcap,
                        t.smooth_softmax, t.head_sink, t.kv_quant, t.cache_layout, t.qk_norm)
    words += [f"session bound {t.max_total_seq:,}"] if t.max_total_seq else []
    return words + [f"{t.config.device.sm_count} SMs"]


def name_words(t: Any) -> list[str]:
    """The words a target named after its flags adds for the flags that differ from the defaults."""
    return [w.replace(" ", "-").replace(",", "") for w in target_words(t)]


def record_name(s: dict[str, Any], labels: str) -> str:
    """A shapes-document record as `attnws validate` names it."""
    dims = " ".join([f"B={s['batch']}", f"S={s['seq']}", f"T={s['total_seq']}", f"P={s['past']}",
                     f"N={s['heads']}", f"Nk={s['kv_heads']}", f"H={s['head_size']}"])
    return f"gqa {s['dtype']} {dims} sm{s['sm']}" + (f" [{labels}]" if labels else "")


# -- the command line -------------------------------------------------------------------------------

def flag_problem(op: Op, ns: Any) -> str:
    """Why a V head size of its own cannot apply: GroupQueryAttention has one head size."""
    return "--v-head-size: GroupQueryAttention has one head size for Q, K and V"


def _exact(value: Any, name: str) -> Any:
    """A model-fixed dimension (a range LO..HI with LO < HI is refused; a past length may range only
    where present is a tensor of its own, which the message says)."""
    if value is not None and not value.exact:
        why = "; a range of past lengths needs a separate present (cache_layout separate)" if name == "past" else ""
        raise InvalidArgument(f"{name} {value.lo}..{value.hi}: GroupQueryAttention's {name} is fixed by the model; "
                              f"give one value{why}")
    return value


def _window(text: str | None) -> int | None:
    """The --window flag: -1 (ORT's default: no window) or None read as no window, else the
    integer W as given (ORT's constructor checks it: 0 is its error, not a usage error)."""
    if text is None or text == "-1":
        return None
    value = parse_integer(text)
    if value is None:
        raise UsageError(f"--window {text!r}: expected -1 (no window, the default) or a window W in ASCII digits")
    return value


def _max_total_seq(value: int | None) -> int | None:
    """The --max-total-seq flag inside its domain 0..INT32_MAX (0 and None: unset)."""
    return None if value is None else checked_max_total_seq(value) or None


def _discrete(ns: Any) -> dict[str, Any]:
    """The format, dtype and node flags (--packed-qkv is --format packed_qkv)."""
    packed = ns.packed_qkv or ns.format == GqaFormat.PACKED_QKV.value
    return {"gqa_format": GqaFormat.PACKED_QKV if packed else GqaFormat.SEPARATE, "bf16": ns.dtype == "bf16",
            "rotary": ns.rotary, "window": _window(ns.window), "sliding_window_cache": ns.sliding_window_cache,
            "softcap": ns.softcap or None, "smooth_softmax": ns.smooth_softmax, "head_sink": ns.head_sink,
            "qk_norm": ns.qk_norm,
            "kv_quant": ns.kv_quant, "max_total_seq": _max_total_seq(ns.max_total_seq), "cache_layout": ns.cache_layout}


def geometry_options(t: Any, dims: dict[str, Any]) -> dict[str, Any]:
    """The `Geometry` fields of the target's own flags; a layout left to T and P (None) is the one
    every shape of the box has where T's range lies on one side of P's."""
    options = {name: getattr(t, name) for name, _ in _OPTIONS}
    if options["cache_layout"] is None and t.total_seq is not None and t.past is not None:
        windowed = t.sliding_window_cache
        if shares_buffer(None, windowed, t.total_seq.hi, t.past.lo):  # every shape of the box shares
            options["cache_layout"] = "shared"
        elif not shares_buffer(None, windowed, t.total_seq.lo, t.past.hi):  # none does
            options["cache_layout"] = "separate"
    return options


def example_words(g: Any, dtype: str) -> tuple[list[str], list[str]]:
    """A geometry's own words: T, P and Nk after B and S; the element type (bf16, or `dtype`) and
    the node's options after N and H."""
    return ([f"T = {g.total_seq}", f"P = {g.past}", f"Nk = {g.kv_heads}"],
            ["bf16" if g.bf16 else dtype, *_flag_words(g.window, g.sliding_window_cache, g.gqa_format is
                                                        GqaFormat.PACKED_QKV, g.rotary, g.softcap, g.smooth_softmax,
                                                        g.head_sink, g.kv_quant, g.cache_layout, g.qk_norm)])


def _default_past(options: dict[str, Any], total: int | None) -> int | None:
    """The capacity P without --past: a windowed cache's window, else T's maximum."""
    window = options["window"]
    return window if options["sliding_window_cache"] and window is not None and window > 0 else total


def target_fields(op: Op, ns: Any, dims: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Target` fields of the operator's own flags (`dims`: DimRange or None per dimension;
    without --past, the capacity is the window of a windowed cache, else T's maximum; a separate
    cache's past length may range)."""
    options = _discrete(ns)
    past, total = dims["past"], dims["total_seq"]
    if past is None and total is not None:
        capacity = _default_past(options, total.hi)
        past = type(total)(capacity, capacity)
    separate = ns.cache_layout == "separate"
    return {"kv_heads": _exact(dims["kv_heads"], "kv_heads"), "total_seq": dims["total_seq"],
            "past": past if separate else _exact(past, "past"), **options}


def geometry_fields(op: Op, ns: Any, point: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Geometry` fields of the operator's own flags (`point`: one value per dimension; the
    capacity P defaults to a windowed cache's window, else to T)."""
    total = point["total_seq"]
    options = _discrete(ns)
    past = point["past"] if point["past"] is not None else _default_past(options, total)
    if options["cache_layout"] is None and total is not None:
        windowed = options["sliding_window_cache"]
        options["cache_layout"] = "shared" if shares_buffer(None, windowed, total, past) else "separate"
    return {"kv_heads": point["kv_heads"], "total_seq": total, "past": past, **options}


# -- target files -----------------------------------------------------------------------------------

def check_target(t: Any) -> None:
    """Raise InvalidArgument where the target's own fields are missing or contradict each other."""
    missing = [name for name in ("kv_heads", "total_seq", "past") if getattr(t, name) is None]
    if missing:
        raise InvalidArgument(f"GroupQueryAttention needs {' and '.join(missing)}")
    if t.element_size != 2:
        raise InvalidArgument("GroupQueryAttention runs fp16 and bf16 only, not fp32")
    cache_layout(t.cache_layout)
    fixed = ("heads", "head_size", "kv_heads") + (() if t.cache_layout == "separate" else ("past",))
    for name in fixed:
        _exact(getattr(t, name), name)
    if t.sliding_window_cache and t.cache_layout == "separate":  # ORT's check (builder D7), whatever the shapes
        raise NodeRejected("sliding_window_cache=1 requires past_key/present_key and past_value/present_value to "
                           "share the same buffer: a windowed cache's layout is shared")
    if t.v_head_size is not None:
        raise InvalidArgument(flag_problem(t.op, None))
    head_sink_kind(t.head_sink)
    if t.kv_quant is not None and t.kv_quant not in KV_QUANT:
        raise InvalidArgument(f"kv_quant {t.kv_quant!r}: expected one of {', '.join(KV_QUANT)}")
    if t.sliding_window_cache and t.window in (None, -1):
        raise InvalidArgument("sliding_window_cache needs a window (local_window_size)")
    for pattern in t.patterns:
        other = [dim for dim, _ in pattern.dims if dim not in PATTERN_DIMS]
        if other:
            raise InvalidArgument(f"pattern {pattern.name} narrows {', '.join(other)}; a GroupQueryAttention pattern "
                                  "narrows batch, seq or total_seq")
    from .estimate import node_at_maxima

    try:
        node_at_maxima(t.max_geometry())
    except WorkspaceError as error:
        raise NodeRejected(f"the node at its maxima fails ORT's check: {error}", error.status) from None


def check_head_sizes(t: Any) -> None:
    """The head size is checked by the builder."""


def contains(t: Any, g: Any) -> bool:
    """Whether the geometry's Nk, T and P are the target's (Nk exact, T and P in their ranges) and
    its cache layout one the target's allows."""
    layouts = CACHE_LAYOUTS if t.cache_layout is None else (t.cache_layout,)
    return (g.kv_heads in t.kv_heads and g.total_seq in t.total_seq and g.past in t.past
            and (g.cache_layout is None or g.cache_layout in layouts))


def file_fields(t: Any) -> dict[str, Any]:
    """The target-file keys of the target's own flags."""
    out = {"format": t.gqa_format.value, "dtype": "bf16" if t.bf16 else "fp16", "rotary": t.rotary,
           "sliding_window_cache": t.sliding_window_cache, "smooth_softmax": t.smooth_softmax, "qk_norm": t.qk_norm,
           "head_sink": _head_sink_value(t.head_sink)}
    optional = {"window": t.window, "softcap": t.softcap, "kv_quant": t.kv_quant, "max_total_seq": t.max_total_seq,
                "cache_layout": t.cache_layout}
    return {**out, **{k: v for k, v in optional.items() if v is not None}}


def read_own_fields(f: Any, dim: Any, op: Op) -> dict[str, Any]:
    """The `OWN_FIELDS` a target file of `op` gives, whatever the operator (`f`: its field reader,
    `dim`: its range reader; the capacity `past` MultiHeadAttention's reading gives, its past
    length's): another operator's target that sets one is refused by name."""
    return {"kv_heads": dim("kv_heads", False), "total_seq": dim("total_seq", False),
            "bf16": f.raw("dtype") == "bf16", "rotary": f.boolean("rotary"),
            "window": f.integer("window", optional=True, lo=-1), "sliding_window_cache": f.boolean("sliding_window_cache"),
            "softcap": f.number("softcap", optional=True), "smooth_softmax": f.boolean("smooth_softmax"),
            "qk_norm": f.boolean("qk_norm"),
            "head_sink": _head_sink(f), "kv_quant": _kv_quant(f),
            "max_total_seq": f.integer("max_total_seq", optional=True, lo=0, hi=INT32_MAX),
            "cache_layout": _cache_layout(f)}


def _cache_layout(f: Any) -> str | None:
    """The cache layout a file gives (absent or null: from T and P)."""
    return None if f.raw("cache_layout") is None else f.string("cache_layout", None, list(CACHE_LAYOUTS))


def _head_sink_value(value: Any) -> bool | str:
    """A head sink as files and shape records write it: false (none), true (an initializer, as
    target files have always said it) or "input"."""
    kind = head_sink_kind(value)
    return "input" if kind == "input" else kind == "initializer"


def _head_sink(f: Any) -> str | None:
    """The head sink a file gives: absent, null or false none; true or "initializer" a constant
    initializer; "input" a graph input."""
    raw = f.raw("head_sink")
    if raw is None or isinstance(raw, bool):
        return head_sink_kind(raw)
    if not isinstance(raw, str):
        raise f.wrong("head_sink", "true, false, null, \"initializer\" or \"input\"")
    return f.string("head_sink", None, list(HEAD_SINK_KINDS))


def _kv_quant(f: Any) -> str | None:
    """The KV cache's quantization a file gives (absent or null: none)."""
    return None if f.raw("kv_quant") is None else f.string("kv_quant", None, list(KV_QUANT))


def read_format(op: Op, f: Any) -> dict[str, Any]:
    """The `Target` format field a target file of the operator gives."""
    return {"gqa_format": GqaFormat(f.string("format", "separate", [m.value for m in GqaFormat]))}


# -- shapes documents -------------------------------------------------------------------------------

def record_fields(g: Any) -> dict[str, Any]:
    """A shape record's keys for the geometry's own dimensions and flags (no token count)."""
    return {"tokens": None, "format": g.gqa_format.value, "dtype": "bf16" if g.bf16 else "fp16",
            "kv_heads": g.kv_heads, "total_seq": g.total_seq, "past": g.past, "rotary": g.rotary,
            "window": g.window, "sliding_window_cache": g.sliding_window_cache, "softcap": g.softcap,
            "smooth_softmax": g.smooth_softmax, "qk_norm": g.qk_norm, "head_sink": _head_sink_value(g.head_sink),
            "kv_quant": g.kv_quant,
            "max_total_seq": g.max_total_seq, "cache_layout": g.cache_layout}


def read_record_fields(op: Op, f: Any) -> dict[str, Any]:
    """The `Geometry` fields a shape record's own keys give."""
    return {"gqa_format": GqaFormat(f.string("format", "separate", [m.value for m in GqaFormat])),
            "bf16": f.raw("dtype") == "bf16", "kv_heads": f.integer("kv_heads", required=True),
            "total_seq": f.integer("total_seq", required=True), "past": f.integer("past", required=True),
            "rotary": f.boolean("rotary"), "window": f.integer("window", optional=True, lo=-1),
            "sliding_window_cache": f.boolean("sliding_window_cache"), "softcap": f.number("softcap", optional=True),
            "smooth_softmax": f.boolean("smooth_softmax"), "qk_norm": f.boolean("qk_norm"), "head_sink": _head_sink(f),
            "kv_quant": _kv_quant(f), "max_total_seq": f.integer("max_total_seq", optional=True, lo=0, hi=INT32_MAX),
            "cache_layout": _cache_layout(f)}
