"""Targets: a family of problems given by discrete flags and a range per dimension.

A target is what users declare ahead of time: op, dtype, the discrete flags, the runtime
configuration and a closed range [lo, hi] per dimension (counts, not bytes). The estimator reads
the maxima (as ORT reads shapes); the solver quantifies over the whole box; property tests draw
from it. Declared once, read by all three.

Dimensions: tokens T (None: any T in [1, B*S]), batch B, seq S, heads N, head_size H, v_head_size Hv
(None: Hv = H), input_hidden (PA GEMM k; None: N*H). `qkv_hidden_sizes=True` (PA) declares the node
attribute, which makes head sizes exact: heads, head_size and v_head_size must then be points.
`expect_unavailable_estimate` declares that ORT's estimate is known to be unavailable for the
target, so theorems vacuous for that reason alone do not fail `attnws prove`. `expect_refuted`
declares theorems REFUTED by a true property of ORT 1.31.1 (a finding, with why in words: a route
whose bytes fall as the key length grows); their refutation, with its replayed counterexample, is
reported as the finding it is and does not fail `attnws prove`.
"""

from __future__ import annotations

import os
from pathlib import Path
import re
from dataclasses import Field, dataclass, field, make_dataclass, replace
from typing import Any

from .documents import DEFAULT_MAX_DOCUMENT_BYTES, DocumentError, Fields, display_path, json_type, read_user_json, short
from .errors import InvalidArgument
from .declared import own_fields
from .families import DIMENSIONS, FAMILIES, op_dimensions, op_fields
from .hints import Geometry
from .limits import INT32_MAX
from .devices import MAX_SM_COUNT
from .options import RuntimeConfig, TrtRunner
from .problem import ELEMENT_SIZES, Op

# "7" (a maximum) or "3..7": ASCII digits only (int() would also take "1_000" and other scripts' digits).
_DIM_TEXT = re.compile(r"\s*(-?[0-9]{1,20})\s*(?:\.\.\s*(-?[0-9]{1,20})\s*)?")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class DimRange:
    """A closed range of a dimension, lo <= hi, both within [0, INT32_MAX]."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if not (isinstance(self.lo, int) and isinstance(self.hi, int)) or not 0 <= self.lo <= self.hi <= INT32_MAX:
            raise InvalidArgument(f"range {self.lo}..{self.hi} must satisfy 0 <= lo <= hi <= {INT32_MAX}")

    @property
    def exact(self) -> bool:
        return self.lo == self.hi

    def __contains__(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def __str__(self) -> str:
        return str(self.lo) if self.exact else f"{self.lo}..{self.hi}"

    @classmethod
    def parse(cls, text: Any, what: str, from_zero: bool = False, exact: bool = False) -> "DimRange":
        """Parse `7` (a maximum: 1..7, or 0..7 `from_zero`, as the past length; 7..7 `exact`, a
        dimension the model fixes), `3..7` (a range) or `7..7` (exact), given as a string, an
        integer or a [lo, hi] list of integers; `what` names the flag or field."""
        shown = repr(text) if isinstance(text, str) else short(text)
        least = 0 if from_zero else 1
        if _is_int(text):
            lo, hi = (text if exact else min(least, text)), text
        elif isinstance(text, (list, tuple)) and len(text) == 2 and all(_is_int(v) for v in text):
            lo, hi = text
        elif isinstance(text, str) and (match := _DIM_TEXT.fullmatch(text)):
            hi = int(match.group(2) or match.group(1))
            lo = int(match.group(1)) if match.group(2) or exact else min(least, hi)
        else:
            kind = "" if isinstance(text, str) else " (an integer, a \"LO..HI\" string or a [LO, HI] list of integers)"
            raise InvalidArgument(f"{what} = {shown}: expected N, LO..HI or N..N{kind}")
        if not 0 <= lo <= hi <= INT32_MAX:
            raise InvalidArgument(f"{what} = {shown}: range {lo}..{hi} must satisfy 0 <= lo <= hi <= {INT32_MAX}")
        return cls(lo, hi)


# The dimensions a memory pattern may set: those that vary from run to run, each family's.
PATTERN_DIMS = tuple(dict.fromkeys(dim for family in FAMILIES for dim in family.fields.PATTERN_DIMS))
_PATTERN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class Pattern:
    """A memory pattern: a named sub-box of a target (for example decode: S = 1, P 0..4095), each
    listed dimension a range inside the target's, the others the target's own."""

    name: str
    dims: tuple[tuple[str, DimRange], ...]

    @classmethod
    def parse(cls, text: str, what: str = "pattern") -> "Pattern":
        """Parse `NAME:DIM=RANGE[,DIM=RANGE...]`; each RANGE reads as the flag of that dimension
        does (N a maximum, past from 0; LO..HI a range)."""
        name, sep, body = text.partition(":")
        if not sep or not body:
            raise InvalidArgument(f"{what} {text!r}: expected NAME:DIM=RANGE[,DIM=RANGE...]")
        return cls.from_mapping(name, dict(item.partition("=")[::2] for item in body.split(",")), what)

    @classmethod
    def from_mapping(cls, name: str, ranges: Any, what: str = "pattern") -> "Pattern":
        """Return the pattern of a name and {dimension: range text, integer or [lo, hi]}."""
        if not isinstance(name, str) or not _PATTERN_NAME.fullmatch(name):
            raise InvalidArgument(f"{what} name {name!r}: letters, digits, '_', '-' and '.', up to 64")
        if not isinstance(ranges, dict) or not ranges:
            raise InvalidArgument(f"{what} {name}: expected at least one DIM=RANGE")
        dims = []
        for dim, raw in ranges.items():
            if dim not in PATTERN_DIMS:
                raise InvalidArgument(f"{what} {name}: {dim!r} is not a dimension a pattern sets "
                                      f"(one of {', '.join(PATTERN_DIMS)})")
            dims.append((dim, DimRange.parse(raw, f"{what} {name}: {dim}", from_zero=dim == "past")))
        return cls(name, tuple(dims))

    def as_dict(self) -> dict[str, str]:
        return {dim: f"{r.lo}..{r.hi}" for dim, r in self.dims}


def parse_patterns(texts: Any, what: str = "--pattern") -> tuple[Pattern, ...]:
    """Return patterns written `NAME:DIM=RANGE[,...]`; a malformed one or a name given twice raises
    InvalidArgument."""
    patterns = tuple(Pattern.parse(text, what) for text in texts)
    names = [p.name for p in patterns]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InvalidArgument(f"{what}: the name {twice[0]!r} is given twice")
    return patterns


class TargetBase:
    """A declared family of problems (see the module docstring): `Target`, whose fields are these
    common ones and each family's own, with their defaults (`attnws.spec.declared`): the
    operator, the element size, the ranges of B, S, N, H and Hv (None: Hv = H), the QKV and
    attention biases, the runtime configuration and its environment, the name, description and
    source, what the target expects of its theorems, and its memory patterns."""

    def expected_refutation(self, theorem: str) -> str:
        """Return why the target declares the theorem REFUTED ('' when it does not)."""
        return dict(self.expect_refuted).get(theorem, "")

    def __post_init__(self) -> None:
        if self.element_size not in (2, 4):
            raise InvalidArgument(f"element_size = {self.element_size} must be 2 (fp16) or 4 (fp32)")
        foreign = foreign_fields(self)
        if foreign:
            raise InvalidArgument(foreign)
        fields = op_fields(self.op)
        fields.check_target(self)
        if self.qkv_hidden_sizes:
            fixed = [self.heads, self.head_size] + ([self.v_head_size] if self.v_head_size else [])
            if not all(r.exact for r in fixed):
                raise InvalidArgument("with qkv_hidden_sizes, heads and head sizes must be exact (N..N)")
        self._check_patterns()
        fields.check_head_sizes(self)

    def _check_patterns(self) -> None:
        names = [p.name for p in self.patterns]
        if len(set(names)) != len(names):
            raise InvalidArgument(f"patterns: a name is given twice ({', '.join(names)})")
        for pattern in self.patterns:
            for dim, r in pattern.dims:
                own = getattr(self, dim)
                if own is None and not (dim == "tokens" and dim in op_fields(self.op).DIMENSIONS[self.op]):
                    raise InvalidArgument(f"pattern {pattern.name}: {dim} is not a range of the target (declare it "
                                          "there first)")
                if own is not None and not own.lo <= r.lo <= r.hi <= own.hi:
                    raise InvalidArgument(f"pattern {pattern.name}: {dim} {r.lo}..{r.hi} is not inside the target's "
                                          f"{own.lo}..{own.hi}")

    def restrict(self, pattern: Pattern) -> "Target":
        """Return the sub-target of one of its patterns (its box narrowed, no patterns of its own)."""
        return replace(self, name=f"{self.name} [{pattern.name}]", patterns=(), **dict(pattern.dims))

    @property
    def hv(self) -> DimRange:
        """The V head size range (equal to H's when not declared: Hv = H)."""
        return self.v_head_size or self.head_size

    def max_geometry(self) -> Geometry:
        """Return the geometry at every dimension's maximum: what ORT's estimator is given."""
        return self.geometry(**{dim: getattr(self, dim).hi for dim in op_dimensions(self.op)
                                if getattr(self, dim) is not None})

    def geometry(self, **dims: Any) -> Geometry:
        """Return a geometry with this target's flags and the given dimensions."""
        return Geometry(
            op=self.op, element_size=self.element_size, qkv_bias=self.qkv_bias, attn_bias=self.attn_bias,
            attn_bias_broadcast_batch=self.attn_bias_broadcast_batch,
            attn_bias_broadcast_heads=self.attn_bias_broadcast_heads,
            **op_fields(self.op).geometry_options(self, dims), **dims,
        )

    def contains(self, g: Geometry) -> bool:
        """Return whether a concrete geometry with the same flags lies inside the target's box."""
        return (
            g.batch in self.batch and g.seq in self.seq and g.heads in self.heads
            and g.head_size in self.head_size and g.hv in self.hv and op_fields(self.op).contains(self, g)
        )

    def as_dict(self) -> dict[str, Any]:
        """Return the target as the JSON data that `target_from_dict` reads back."""
        out: dict[str, Any] = {
            "name": self.name, "description": self.description, "op": self.op.value,
            "dtype": "fp16" if self.element_size == 2 else "fp32",
        }
        for dim in DIMENSIONS:
            value = getattr(self, dim)
            if value is not None:
                out[dim] = f"{value.lo}..{value.hi}"
        own = op_fields(self.op).file_fields(self)
        out.update(
            qkv_hidden_sizes=self.qkv_hidden_sizes, format=own.pop("format"), qkv_bias=self.qkv_bias,
            attn_bias=self.attn_bias, attn_bias_broadcast_batch=self.attn_bias_broadcast_batch,
            attn_bias_broadcast_heads=self.attn_bias_broadcast_heads,
            sm=self.config.device.sm, sm_count=self.config.device.sm_count,
            sdpa_kernel=self.config.options.sdpa_kernel, env=dict(self.env),
            flash_build=self.config.build.flash, mea_build=self.config.build.mea, trt_build=self.config.build.trt,
            trt_runner=self.config.trt_runner.value,
        )
        if self.expect_unavailable_estimate:
            out["expect_unavailable_estimate"] = True
        if self.expect_refuted:
            out["expect_refuted"] = dict(self.expect_refuted)
        if self.source:
            out["source"] = self.source
        out.update(own)
        if self.patterns:
            out["patterns"] = {p.name: p.as_dict() for p in self.patterns}
        return out


COMMON_TARGET_FIELDS = (
    ("v_head_size", None), ("qkv_bias", False), ("attn_bias", False), ("attn_bias_broadcast_batch", False),
    ("attn_bias_broadcast_heads", False), ("config", field(default_factory=RuntimeConfig)), ("env", ()),
    ("name", "custom"), ("description", ""), ("expect_unavailable_estimate", False), ("source", ""),
    ("patterns", ()), ("expect_refuted", ()),  # expect_refuted: (theorem, why ORT has this property) pairs
)
Target = make_dataclass(
    "Target", [("op", Any), ("element_size", int), ("batch", Any), ("seq", Any), ("heads", Any), ("head_size", Any),
               *((name, Any, default if isinstance(default, Field) else field(default=default))
                 for name, default in (*COMMON_TARGET_FIELDS, *own_fields("TARGET")))],
    bases=(TargetBase,), frozen=True)
Target.__module__, Target.__doc__ = __name__, TargetBase.__doc__


def foreign_fields(t: Any) -> str:
    """Return why the target sets fields only other operators have ('' when it sets none): the
    first such field's owners, with every field set that they alone own."""
    owners: dict[str, list[Op]] = {}
    for family in FAMILIES:
        for op, names in family.fields.OWN_FIELDS.items():
            for name in names:
                owners.setdefault(name, []).append(op)
    defaults = dict(own_fields("TARGET"))
    set_fields = [name for name, ops in owners.items() if t.op not in ops and getattr(t, name) != defaults[name]]
    if not set_fields:
        return ""
    first = owners[set_fields[0]]
    same = [name for name in set_fields if owners[name] == first]
    return f"{', '.join(same)}: {' and '.join(f'{o.onnx_name} (op {o.value})' for o in first)} only"


# A target file's keys: the common ones, and every family's flags but those only the command line has.
TARGET_KEYS = {
    "name", "description", "op", "dtype", "batch", "seq", "heads", "head_size", "v_head_size", "attn_bias",
    "attn_bias_broadcast_batch", "attn_bias_broadcast_heads", "sm", "sm_count", "sdpa_kernel", "env", "flash_build",
    "mea_build", "trt_build", "trt_runner", "expect_unavailable_estimate", "patterns", "source", "expect_refuted",
    *(name for family in FAMILIES for names in family.fields.FLAGS.values() for name in names
      if name not in family.fields.COMMAND_LINE_ONLY),
}


def target_from_dict(data: Any, what: str = "target", default_name: str = "custom") -> Target:
    """Return the target a JSON object describes (keys as in `Target.as_dict`; ranges as "lo..hi"
    strings, [lo, hi] lists, or a bare maximum; flags as JSON booleans). `what` names the source
    in messages; every field is type-checked and raises DocumentError naming it."""
    f = Fields(data, what, known=TARGET_KEYS)
    op = Op(f.string("op", choices=[o.value for o in Op], required=True))

    def dim(name: str, required: bool = True) -> DimRange | None:
        raw = f.raw(name)
        if raw is None:
            if required:
                raise DocumentError(f"{what}: field {name} is required (N, \"LO..HI\" or [LO, HI])")
            return None
        try:
            # MultiHeadAttention's past P is a length (N: 0..N); GroupQueryAttention's its cache's capacity
            return DimRange.parse(raw, f"{what}: field {name}", from_zero=name == "past" and op is Op.MHA,
                                  exact=name in op_fields(op).FIXED_DIMENSIONS[op])
        except InvalidArgument as error:
            raise DocumentError(str(error)) from None

    config = RuntimeConfig.make(
        sm=f.integer("sm", 80), sdpa_kernel=f.integer("sdpa_kernel", 0), env=f.string_map("env"),
        sm_count=f.integer("sm_count", None, optional=True, lo=1, hi=MAX_SM_COUNT),
        flash_build=f.boolean("flash_build", True), mea_build=f.boolean("mea_build", True),
        trt_build=f.boolean("trt_build", True),
        trt_runner=f.string("trt_runner", "auto", [r.value for r in TrtRunner]),
    )
    own_fields = {k: v for family in FAMILIES for k, v in family.fields.read_own_fields(f, dim, op).items()}
    return Target(
        op=op,
        element_size=ELEMENT_SIZES[f.string("dtype", "fp16", ELEMENT_SIZES)],
        batch=dim("batch"), seq=dim("seq"), heads=dim("heads"), head_size=dim("head_size"),
        v_head_size=dim("v_head_size", False), **own_fields, **op_fields(op).read_format(op, f),
        qkv_bias=f.boolean("qkv_bias"), attn_bias=f.boolean("attn_bias"),
        attn_bias_broadcast_batch=f.boolean("attn_bias_broadcast_batch"),
        attn_bias_broadcast_heads=f.boolean("attn_bias_broadcast_heads"),
        config=config, env=tuple(sorted(f.string_map("env").items())), name=f.string("name", default_name),
        description=f.string("description", ""), source=f.string("source", ""),
        expect_unavailable_estimate=f.boolean("expect_unavailable_estimate"),
        patterns=_patterns(f.raw("patterns"), what), expect_refuted=_expect_refuted(f.raw("expect_refuted"), what),
    )


# The theorems a target may declare REFUTED (those stating a property ORT may lack); the names
# are the solver's (`attnws.solver.theorems.THEOREMS`), which the spec does not import.
REFUTABLE_BY_ORT = ("route_monotonicity", "nonmonotonic_dispatch", "naive_cascade", "no_runtime_failure")


def _expect_refuted(raw: Any, what: str) -> tuple[tuple[str, str], ...]:
    """Read a target file's `"expect_refuted": {THEOREM: "why ORT has this property", ...}`."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or not all(isinstance(v, str) and v.strip() for v in raw.values()):
        raise DocumentError(f"{what}: field expect_refuted is {json_type(raw)}; expected an object of "
                            "{\"THEOREM\": \"why ORT has this property\"}")
    unknown = [name for name in raw if name not in REFUTABLE_BY_ORT]
    if unknown:
        raise DocumentError(f"{what}: expect_refuted names {unknown[0]!r}; a target may expect only "
                            f"{', '.join(REFUTABLE_BY_ORT)} refuted (findings about ORT)")
    return tuple(sorted(raw.items()))


def _patterns(raw: Any, what: str) -> tuple[Pattern, ...]:
    """Read a target file's `"patterns": {NAME: {DIM: RANGE, ...}, ...}`."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise DocumentError(f"{what}: field patterns is {json_type(raw)}; expected an object of "
                            "{\"NAME\": {\"DIM\": RANGE, ...}}")
    try:
        return tuple(Pattern.from_mapping(name, ranges, f"{what}: pattern") for name, ranges in raw.items())
    except InvalidArgument as error:
        raise DocumentError(str(error)) from None


def load_target(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Target:
    """Read a target JSON file ('-': standard input) through `documents`: a regular file, UTF-8,
    at most `max_bytes`, every field type-checked."""
    source = "standard input" if path == "-" else display_path(path)
    default_name = "target from standard input" if path == "-" else Path(path).stem
    return target_from_dict(read_user_json(path, "target file", max_bytes), f"target file {source}", default_name)


# The built-in default target: a BERT-base-like packed encoder, PMHA fp16 on sm80.
DEFAULT_TARGET = Target(
    op=Op.PMHA, element_size=2, batch=DimRange(1, 32), seq=DimRange(1, 512), heads=DimRange(12, 12),
    head_size=DimRange(64, 64), name="bert-base-pmha-fp16-sm80",
    description="BERT-base-like packed encoder: PMHA fp16, sm80, B <= 32, S <= 512, N = 12, H = 64",
)


def with_config(target: Target, config: RuntimeConfig) -> Target:
    """Return the target under another runtime configuration."""
    return replace(target, config=config)
