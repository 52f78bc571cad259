"""How MultiHeadAttention problems are described beyond what every family has (B, S, N, H, Hv,
dtype, the attention bias, the configuration): the new key/value length L, the past length P, the
format, the key padding mask, the cache inputs and outputs and the direction, read from the
command line, target files and shapes documents, checked, and written back in words.

Every function takes the objects the shared modules hold (argparse namespaces, `Target`,
`Geometry`, JSON field readers) as they are, without importing their modules.
"""

from __future__ import annotations

import enum
from typing import Any

from ..declared import FROM_ZERO, MAXIMUM, Flag
from ..errors import InvalidArgument, UsageError
from ..problem import Op
from .problem import MaskType, MhaFormat

# The problem flags (and target-file keys) only MultiHeadAttention has.
FLAGS = {Op.MHA: ("format", "qkv_bias", "kv_seq", "past", "mask", "with_past", "with_present", "unidirectional")}
# The dimensions beyond B, S, N, H, Hv: L (default S) and P (default 0).
DIMENSIONS = {Op.MHA: ("kv_seq", "past")}
# How a shape names them in words ("L=64 P=0").
DIMENSION_LABELS = {"kv_seq": "L", "past": "P"}
# Where a shape shows them: among the lengths after B and S, among the head counts after N, or last.
DIMENSION_PLACES = {"kv_seq": "length", "past": "length"}
# The element types the operators run (`--dtype`, a target's and a record's `dtype`).
DTYPES = {Op.MHA: ("fp16", "fp32")}
# The operators' own dimensions a problem cannot do without (their flags are required).
REQUIRED_DIMENSIONS = {Op.MHA: ()}
# The dimensions the model fixes, which a target file may give as a bare N (exact, N..N).
FIXED_DIMENSIONS = {Op.MHA: ()}
# The `Target` fields only MultiHeadAttention has (a target of another operator may not set them).
OWN_FIELDS = {Op.MHA: ("kv_seq", "past", "with_past", "with_present", "unidirectional", "mask")}
# The fields MultiHeadAttention adds to the shared records, with their defaults: `Geometry` (L
# None is S; the past length P) and `Target` (ranges; P None is no past).
_OPTIONS = (("mha_format", MhaFormat.SEPARATE), ("mask", MaskType.NONE), ("with_past", False),
            ("with_present", False), ("unidirectional", False))
GEOMETRY_FIELDS = (("kv_seq", None), ("past", 0), *_OPTIONS)
TARGET_FIELDS = (("kv_seq", None), ("past", None), *_OPTIONS)
# The dimensions a memory pattern may narrow (what varies from run to run).
PATTERN_DIMS = ("batch", "seq", "kv_seq", "past")
# Its flags, as the command line offers them.
FLAG_SPECS = (
    Flag("format", "separate (default, [B, S, N*H] query, key, value), cross (key and value [B, N, L, H]), packed_kv "
                   "(key [B, L, N, 2, H]) or packed_qkv (query [B, S, N, 3, H])", "choice",
         choices=tuple(f.value for f in MhaFormat)),
    Flag("qkv_bias", "the QKV bias input is present", "switch"),
    Flag("kv_seq", "new key/value sequence length (a maximum; default: L = S)", "dimension", "L", reading=MAXIMUM),
    Flag("past", "past key/value length (N is 0..N; implies --with-past)", "dimension", "P", reading=FROM_ZERO),
    Flag("mask", "the key_padding_mask kind ([B], [3B+2], [B, T], [B, S, T]; default none)", "choice",
         choices=tuple(m.value for m in MaskType)),
    Flag("with_past", "the past_key and past_value inputs are present (implies --with-present)", "switch"),
    Flag("with_present", "the present_key and present_value outputs are present", "switch"),
    Flag("unidirectional", "the unidirectional (causal) attribute", "switch"),
)
# The flags only the command line takes (a target file or a shape record says them otherwise).
COMMAND_LINE_ONLY: tuple[str, ...] = ()
# The flags only ORT's AOT estimate reads (a session option), which a command on one shape refuses: none.
ESTIMATE_ONLY: tuple[str, ...] = ()
# What a theorem of the one engine claims of these operators where the shared words say more than it
# checks here (theorem -> claim; the others read `attnws.solver.results.CLAIMS`).
CLAIMS: dict[str, str] = {}
# The theorems of the one engine that state nothing about these operators (theorem -> why): none.
NOT_APPLICABLE: dict[str, str] = {}
WORKING_SET_TEXT = "B*N*(S*T+S*H+T*(H+Hv))"


def format_type(op: Op) -> type[enum.Enum]:
    """The enum of the operator's input formats."""
    return MhaFormat


def working_set(p: Any) -> Any:
    """The largest working set the kernels touch, in elements: B * N * (S * T + S * H + T * (H + Hv))
    (scores over T keys, Q, and K and V of T rows)."""
    s, t = p.sequence_length, p.total_sequence_length
    return p.batch_size * p.num_heads * (s * t + s * p.qk_head_size + t * (p.qk_head_size + p.v_head_size))


# -- words ------------------------------------------------------------------------------------------

def problem_text(p: Any, dtype: str) -> str:
    """A problem's dimensions and flags as one line."""
    flags = [p.qkv_format.value, f"mask {p.mask_type.value}"]
    flags += [name for name, on in (("bias", p.has_bias), ("attention bias", p.has_attention_bias),
                                    ("past", p.has_past), ("present", p.has_present),
                                    ("unidirectional", p.is_unidirectional)) if on]
    return (f"B = {p.batch_size}, S = {p.sequence_length}, L = {p.kv_sequence_length}, "
            f"P = {p.past_sequence_length}, T = {p.total_sequence_length}, N = {p.num_heads}, "
            f"H = {p.qk_head_size}, Hv = {p.v_head_size}, {', '.join(flags)}, {dtype}")


def options_line(g: Any) -> str:
    """Return the node options line ('': its problem line and the target's words say every flag)."""
    return ""


def target_words(t: Any) -> list[str]:
    """The target's own flags in words, after its box."""
    words = [t.mha_format.value + " key/value", f"mask {t.mask.value}"]
    return words + [name for name, on in (("bias", t.qkv_bias), ("attention bias", t.attn_bias),
                                          ("past", t.with_past), ("present", t.with_present),
                                          ("unidirectional", t.unidirectional)) if on]


def name_words(t: Any) -> list[str]:
    """The words a target named after its flags adds for the flags that differ from the defaults."""
    return [w for w, on in ((t.mha_format.value, t.mha_format is not MhaFormat.SEPARATE),
                            (f"mask={t.mask.value}", t.mask is not MaskType.NONE), ("past", t.with_past),
                            ("present", t.with_present and not t.with_past),
                            ("unidirectional", t.unidirectional)) if on]


def record_name(s: dict[str, Any], labels: str) -> str:
    """A shapes-document record as `attnws validate` names it: B, S, L, P, N, H, Hv and the flags
    the record carries."""
    extra = [f"{short}={s[key]}" for key, short in (("kv_seq", "L"), ("past", "P")) if s.get(key)]
    flags = [str(s[k]) for k in ("format", "mask") if s.get(k) not in (None, "separate", "none", "packed")]
    flags += [k for k in ("with_past", "with_present", "unidirectional", "qkv_bias", "attn_bias") if s.get(k)]
    dims = " ".join([f"B={s['batch']}", f"S={s['seq']}", *extra, f"N={s['heads']}", f"H={s['head_size']}",
                     f"Hv={s['v_head_size']}", *flags])
    return f"mha {s['dtype']} {dims} sm{s['sm']}" + (f" [{labels}]" if labels else "")


# -- the command line -------------------------------------------------------------------------------

def flag_problem(op: Op, ns: Any) -> str:
    """Why a V head size of its own cannot apply to the flags ('' when it can)."""
    if (ns.format or "separate") in ("packed_qkv", "packed_kv", "cross"):
        return (f"--v-head-size: the {ns.format or 'packed'} format has one head size; "
                "add --format separate for a V head size of its own")
    return ""


def _discrete(ns: Any) -> dict[str, Any]:
    """The format, mask, past / present (--past implies --with-past, which implies --with-present)
    and direction flags."""
    with_past = ns.with_past or ns.past is not None
    return {"mha_format": MhaFormat(ns.format or "separate"), "mask": MaskType(ns.mask or "none"),
            "with_past": with_past, "with_present": with_past or ns.with_present, "unidirectional": ns.unidirectional}


def geometry_options(t: Any, dims: dict[str, Any]) -> dict[str, Any]:
    """The `Geometry` fields of the target's own flags."""
    return {name: getattr(t, name) for name, _ in _OPTIONS}


def example_words(g: Any, dtype: str) -> tuple[list[str], list[str]]:
    """A geometry's own words: L after B and S; the element type `dtype`, the format, mask,
    direction and bias after N and H."""
    flags = [dtype, g.mha_format.value] + ([f"mask {g.mask.value}"] if g.mask is not MaskType.NONE else [])
    return [f"L = {g.l}"], flags + ["unidirectional"] * g.unidirectional + ["attention bias"] * g.attn_bias


def target_fields(op: Op, ns: Any, dims: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Target` fields of the operator's own flags (`dims`: DimRange or None per dimension)."""
    return {"kv_seq": dims["kv_seq"], "past": dims["past"], **_discrete(ns)}


def geometry_fields(op: Op, ns: Any, point: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Geometry` fields of the operator's own flags (`point`: one value per dimension). Packed
    QKV has one sequence length: a --kv-seq other than --seq is refused (UsageError), never read
    as L = S."""
    discrete = _discrete(ns)
    kv_seq = point["kv_seq"]
    if discrete["mha_format"] is MhaFormat.PACKED_QKV and kv_seq is not None and kv_seq != point["seq"]:
        raise UsageError(f"--kv-seq {kv_seq} with --seq {point['seq']}: packed QKV [B, S, N, 3, H] has one sequence "
                         "length (L = S); drop --kv-seq or use another --format")
    return {"kv_seq": kv_seq, "past": point["past"] or 0, **discrete}


# -- target files -----------------------------------------------------------------------------------

def check_target(t: Any) -> None:
    """Raise InvalidArgument where the target's own fields contradict each other."""
    if t.mha_format is MhaFormat.PACKED_QKV and t.kv_seq is not None:
        raise InvalidArgument(f"kv_seq {t.kv_seq.lo}..{t.kv_seq.hi}: packed QKV [B, S, N, 3, H] has one "
                              "sequence length (L = S); drop kv_seq or use another format")
    if t.past is not None and not t.with_past:
        raise InvalidArgument("a past range needs with_past (the past_key and past_value inputs)")


def check_head_sizes(t: Any) -> None:
    """Head sizes are checked by the builder, per format."""


def contains(t: Any, g: Any) -> bool:
    """Whether the geometry's L and P lie in the target's box (L = S and P = 0 when not declared)."""
    return (g.l in t.kv_seq if t.kv_seq is not None else g.l == g.seq) and \
        (g.past in t.past if t.past is not None else g.past == 0)


def file_fields(t: Any) -> dict[str, Any]:
    """The target-file keys of the target's own flags."""
    return {"format": t.mha_format.value, "mask": t.mask.value, "with_past": t.with_past,
            "with_present": t.with_present, "unidirectional": t.unidirectional}


def read_own_fields(f: Any, dim: Any, op: Op) -> dict[str, Any]:
    """The `OWN_FIELDS` a target file of `op` gives, whatever the operator (`f`: its field reader,
    `dim`: its range reader; a MultiHeadAttention past range implies the past inputs, which imply
    the present outputs): another operator's target that sets one is refused by name."""
    with_past = f.boolean("with_past", op is Op.MHA and f.raw("past") is not None)
    return {"kv_seq": dim("kv_seq", False), "past": dim("past", False),
            "mask": MaskType(f.string("mask", "none", [m.value for m in MaskType])),
            "with_past": with_past, "with_present": f.boolean("with_present", with_past),
            "unidirectional": f.boolean("unidirectional")}


def read_format(op: Op, f: Any) -> dict[str, Any]:
    """The `Target` format field a target file of the operator gives."""
    return {"mha_format": MhaFormat(f.string("format", "separate", [m.value for m in MhaFormat]))}


# -- shapes documents -------------------------------------------------------------------------------

def record_fields(g: Any) -> dict[str, Any]:
    """A shape record's keys for the geometry's own dimensions and flags (no token count)."""
    return {"tokens": None, "format": g.mha_format.value, "kv_seq": g.l, "past": g.past, "mask": g.mask.value,
            "with_past": g.with_past, "with_present": g.with_present, "unidirectional": g.unidirectional}


def read_record_fields(op: Op, f: Any) -> dict[str, Any]:
    """The `Geometry` fields a shape record's own keys give."""
    return {"mha_format": MhaFormat(f.string("format", "separate", [m.value for m in MhaFormat])),
            "kv_seq": f.integer("kv_seq", optional=True), "past": f.integer("past", 0),
            "mask": MaskType(f.string("mask", "none", [m.value for m in MaskType])),
            "with_past": f.boolean("with_past"), "with_present": f.boolean("with_present"),
            "unidirectional": f.boolean("unidirectional")}
