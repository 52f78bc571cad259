"""How PackedAttention and PackedMultiHeadAttention problems are described beyond what every
family has (B, S, N, H, Hv, dtype, the attention bias, the configuration): their own dimensions
(T, and PA's GEMM k), flags and format, read from the command line, target files and shapes
documents, checked, and written back in words.

Every function takes the objects the shared modules hold (argparse namespaces, `Target`,
`Geometry`, JSON field readers) as they are, without importing their modules.
"""

from __future__ import annotations

import enum
from typing import Any

from ..declared import EXACT, MAXIMUM, Flag
from ..errors import InvalidArgument
from ..problem import Op
from .problem import QkvFormat

# The problem flags (and target-file keys) only these operators have.
FLAGS = {Op.PA: ("tokens", "input_hidden", "qkv_hidden_sizes"), Op.PMHA: ("tokens", "format", "qkv_bias")}
# The dimensions of these operators beyond B, S, N, H, Hv (T; K, PA's GEMM k, defaults to N * H).
DIMENSIONS = {Op.PA: ("tokens", "input_hidden"), Op.PMHA: ("tokens", "input_hidden")}
# How a shape names them in words ("T=15 K=768").
DIMENSION_LABELS = {"tokens": "T", "input_hidden": "K"}
# Where a shape shows them: among the lengths after B and S, among the head counts after N, or last.
DIMENSION_PLACES = {"tokens": "last", "input_hidden": "last"}
# The element types the operators run (`--dtype`, a target's and a record's `dtype`).
DTYPES = {Op.PA: ("fp16", "fp32"), Op.PMHA: ("fp16", "fp32")}
# The operators' own dimensions a problem cannot do without (their flags are required).
REQUIRED_DIMENSIONS = {Op.PA: (), Op.PMHA: ()}
# The dimensions the model fixes, which a target file may give as a bare N (exact, N..N).
FIXED_DIMENSIONS = {Op.PA: (), Op.PMHA: ()}
# The `Target` fields only these operators have (a target of another operator may not set them).
OWN_FIELDS = {Op.PA: ("tokens", "input_hidden", "qkv_hidden_sizes"), Op.PMHA: ("tokens", "input_hidden")}
# The fields these operators add to the shared records, with their defaults: `Geometry` (one
# problem: T None is B * S, K None is N * H, the qkv_hidden_sizes attribute's values) and
# `Target` (a box: ranges, and whether the node carries qkv_hidden_sizes).
GEOMETRY_FIELDS = (("tokens", None), ("input_hidden", None), ("qkv_hidden_sizes", None),
                   ("pmha_format", QkvFormat.PACKED))
TARGET_FIELDS = (("tokens", None), ("input_hidden", None), ("qkv_hidden_sizes", False),
                 ("pmha_format", QkvFormat.PACKED))
# The dimensions a memory pattern may narrow (what varies from run to run).
PATTERN_DIMS = ("batch", "seq", "tokens")
# Their flags, as the command line offers them (`FLAGS` says which operator takes which).
FLAG_SPECS = (
    Flag("tokens", "packed token count (a maximum; default 1..B*S)", "dimension", "T", reading=MAXIMUM),
    Flag("input_hidden", "input hidden size, the projection GEMM's k (N is exact; LO..HI a range; default N*H)",
         "dimension", "K", reading=EXACT),
    Flag("qkv_hidden_sizes", "the qkv_hidden_sizes attribute (makes the head sizes exact)", metavar="Q,K,V"),
    Flag("format", "packed query [T, N, 3, H] (default) or separate", "choice", choices=tuple(f.value for f in QkvFormat)),
    Flag("qkv_bias", "the QKV bias input is present", "switch"),
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
WORKING_SET_TEXT = "B*N*S*(S+2H+Hv)"


def format_type(op: Op) -> type[enum.Enum]:
    """The enum of the operator's input formats."""
    return QkvFormat


def geometry_options(t: Any, dims: dict[str, Any]) -> dict[str, Any]:
    """The `Geometry` fields of the target's own flags at the dimensions `dims` (PA's
    qkv_hidden_sizes attribute N * H, N * H, N * Hv where the target declares it)."""
    q = dims["heads"] * dims["head_size"]
    v = dims["heads"] * (dims.get("v_head_size") or dims["head_size"])
    return {"qkv_hidden_sizes": (q, q, v) if t.qkv_hidden_sizes else None, "pmha_format": t.pmha_format}


def example_words(g: Any, dtype: str) -> tuple[list[str], list[str]]:
    """A geometry's own words: its dimensions after B and S; the element type `dtype` and its flags
    after N and H."""
    return [f"T = {g.t}"], [dtype]


def working_set(p: Any) -> Any:
    """The largest working set the kernels touch, in elements: B * N * S * (S + 2H + Hv)."""
    return p.batch_size * p.num_heads * p.sequence_length * (p.sequence_length + 2 * p.qk_head_size + p.v_head_size)


# -- words ------------------------------------------------------------------------------------------

def problem_text(p: Any, dtype: str) -> str:
    """A problem's dimensions as one line."""
    extra = f", K = {p.input_hidden_size}" if p.op is Op.PA else f", {p.qkv_format.value} QKV"
    return (f"T = {p.token_count}, B = {p.batch_size}, S = {p.sequence_length}, N = {p.num_heads}, "
            f"H = {p.qk_head_size}, Hv = {p.v_head_size}{extra}, {dtype}")


def options_line(g: Any) -> str:
    """Return the node options line ('': its problem line and the target's box say every flag)."""
    return ""


def target_words(t: Any) -> list[str]:
    """The target's own flags in words, after its box (none: the box says all)."""
    return []


def name_words(t: Any) -> list[str]:
    """The words a target named after its flags adds for the flags that differ from the defaults."""
    return [t.pmha_format.value] if t.op is Op.PMHA and t.pmha_format is not QkvFormat.PACKED else []


def record_name(s: dict[str, Any], labels: str) -> str:
    """A shapes-document record as `attnws validate` names it."""
    return (f"{s['op']} {s['dtype']} T={s['tokens']} B={s['batch']} S={s['seq']} N={s['heads']} H={s['head_size']} "
            f"Hv={s['v_head_size']} sm{s['sm']}" + (f" [{labels}]" if labels else ""))


# -- the command line -------------------------------------------------------------------------------

def flag_problem(op: Op, ns: Any) -> str:
    """Why a V head size of its own cannot apply to the flags ('' when it can)."""
    if op is Op.PA:
        if not getattr(ns, "qkv_hidden_sizes", None):
            return ("--v-head-size: without --qkv-hidden-sizes PackedAttention's head sizes are equal "
                    "(the bias holds 3 * N * H); give --qkv-hidden-sizes Q,K,V")
        return ""
    if (ns.format or "packed") == "packed":
        return (f"--v-head-size: the {ns.format or 'packed'} format has one head size; "
                "add --format separate for a V head size of its own")
    return ""


def target_fields(op: Op, ns: Any, dims: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Target` fields of the operator's own flags (`dims`: DimRange or None per dimension)."""
    return {"tokens": dims["tokens"], "input_hidden": dims["input_hidden"], "qkv_hidden_sizes": sizes is not None,
            "pmha_format": QkvFormat(ns.format or "packed")}


def geometry_fields(op: Op, ns: Any, point: dict[str, Any], sizes: Any) -> dict[str, Any]:
    """The `Geometry` fields of the operator's own flags (`point`: one value per dimension)."""
    return {"tokens": point["tokens"], "input_hidden": point["input_hidden"], "qkv_hidden_sizes": sizes,
            "pmha_format": QkvFormat(ns.format or "packed")}


# -- target files -----------------------------------------------------------------------------------

def check_target(t: Any) -> None:
    """Raise InvalidArgument where the target's own fields contradict each other."""
    if t.op is Op.PA and not t.qkv_hidden_sizes and t.v_head_size is not None and t.v_head_size != t.head_size:
        raise InvalidArgument("v_head_size: without qkv_hidden_sizes PackedAttention's head sizes are equal (the "
                              "bias holds 3 * N * H); drop v_head_size or give qkv_hidden_sizes")


def check_head_sizes(t: Any) -> None:
    """Raise InvalidArgument when packed QKV is given two head sizes."""
    if t.op is Op.PMHA and t.pmha_format is QkvFormat.PACKED and t.v_head_size is not None \
            and t.v_head_size != t.head_size:
        raise InvalidArgument("packed QKV [T, N, 3, H] has one head size: drop v_head_size or use separate")


def contains(t: Any, g: Any) -> bool:
    """Whether the geometry's own dimensions lie in the target's box (T <= B * S by default)."""
    return (g.t in t.tokens if t.tokens else 1 <= g.t <= g.batch * g.seq) and \
        (t.input_hidden is None or g.input_hidden is None or g.input_hidden in t.input_hidden)


def file_fields(t: Any) -> dict[str, Any]:
    """The target-file keys of the target's own flags."""
    return {"format": t.pmha_format.value}


def read_own_fields(f: Any, dim: Any, op: Op) -> dict[str, Any]:
    """The `OWN_FIELDS` a target file of `op` gives, whatever the operator (`f`: its field reader,
    `dim`: its range reader): another operator's target that sets one is refused by name."""
    return {"tokens": dim("tokens", False), "input_hidden": dim("input_hidden", False),
            "qkv_hidden_sizes": f.boolean("qkv_hidden_sizes")}


def read_format(op: Op, f: Any) -> dict[str, Any]:
    """The `Target` format field a target file of the operator gives."""
    return {"pmha_format": QkvFormat(f.string("format", "packed", [q.value for q in QkvFormat]))}


# -- shapes documents -------------------------------------------------------------------------------

def record_fields(g: Any) -> dict[str, Any]:
    """A shape record's keys for the geometry's own dimensions and flags."""
    return {"tokens": g.t, "input_hidden": g.input_hidden,
            "qkv_hidden_sizes": list(g.qkv_hidden_sizes) if g.qkv_hidden_sizes else None,
            "format": g.pmha_format.value}


def read_record_fields(op: Op, f: Any) -> dict[str, Any]:
    """The `Geometry` fields a shape record's own keys give."""
    return {"tokens": f.integer("tokens", optional=True), "input_hidden": f.integer("input_hidden", optional=True),
            "qkv_hidden_sizes": f.int_list("qkv_hidden_sizes", 3),
            "pmha_format": QkvFormat(f.string("format", "packed", [q.value for q in QkvFormat]))}
