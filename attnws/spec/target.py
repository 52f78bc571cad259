"""Targets: a family of problems given by discrete flags and a range per dimension.

A target is what users declare ahead of time: op, dtype, the discrete flags, the runtime
configuration and a closed range [lo, hi] per dimension (counts, not bytes). The estimator reads
the maxima (as ORT reads shapes); the solver quantifies over the whole box; property tests draw
from it. Declared once, read by all three.

Dimensions: tokens T (None: any T in [1, B*S]), batch B, seq S, heads N, head_size H, v_head_size Hv
(None: Hv = H), input_hidden (PA GEMM k; None: N*H). `qkv_hidden_sizes=True` (PA) declares the node
attribute, which makes head sizes exact: heads, head_size and v_head_size must then be points.
`expect_unavailable_estimate` declares that ORT's estimate is known to be unavailable for the
target, so theorems vacuous for that reason alone do not fail `attnws prove`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from .errors import InvalidArgument
from .hints import Geometry
from .limits import INT32_MAX
from .options import RuntimeConfig
from .problem import ELEMENT_SIZES, Op, QkvFormat, parse_enum


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
    def parse(cls, text: Any, what: str) -> "DimRange":
        """Parse `7` (a maximum: 1..7), `3..7` (a range) or `7..7` (exact); ints mean maxima."""
        if isinstance(text, int) and not isinstance(text, bool):
            return cls(min(1, text), text)
        if isinstance(text, list) and len(text) == 2:
            return cls(*text)
        raw = str(text).strip()
        try:
            if ".." in raw:
                lo, hi = raw.split("..", 1)
                return cls(int(lo), int(hi))
            value = int(raw)
        except ValueError:
            raise InvalidArgument(f"{what} = {text!r}: expected N, LO..HI or N..N") from None
        return cls(min(1, value), value)


@dataclass(frozen=True)
class Target:
    """A declared family of problems (see the module docstring)."""

    op: Op
    element_size: int
    batch: DimRange
    seq: DimRange
    heads: DimRange
    head_size: DimRange
    v_head_size: DimRange | None = None
    tokens: DimRange | None = None
    input_hidden: DimRange | None = None
    qkv_hidden_sizes: bool = False
    pmha_format: QkvFormat = QkvFormat.PACKED
    qkv_bias: bool = False
    attn_bias: bool = False
    attn_bias_broadcast_batch: bool = False
    attn_bias_broadcast_heads: bool = False
    config: RuntimeConfig = field(default_factory=RuntimeConfig)
    env: tuple[tuple[str, str], ...] = ()
    name: str = "custom"
    description: str = ""
    expect_unavailable_estimate: bool = False

    def __post_init__(self) -> None:
        if self.element_size not in (2, 4):
            raise InvalidArgument(f"element_size = {self.element_size} must be 2 (fp16) or 4 (fp32)")
        if self.qkv_hidden_sizes:
            if self.op is not Op.PA:
                raise InvalidArgument("qkv_hidden_sizes is a PackedAttention attribute")
            fixed = [self.heads, self.head_size] + ([self.v_head_size] if self.v_head_size else [])
            if not all(r.exact for r in fixed):
                raise InvalidArgument("with qkv_hidden_sizes, heads and head sizes must be exact (N..N)")
        if self.op is Op.PMHA and self.pmha_format is QkvFormat.PACKED and self.v_head_size is not None \
                and self.v_head_size != self.head_size:
            raise InvalidArgument("packed QKV [T, N, 3, H] has one head size: drop v_head_size or use separate")

    @property
    def hv(self) -> DimRange:
        """The V head size range (equal to H's when not declared: Hv = H)."""
        return self.v_head_size or self.head_size

    def max_geometry(self) -> Geometry:
        """Return the geometry at every dimension's maximum: what ORT's estimator is given."""
        return self.geometry(
            batch=self.batch.hi, seq=self.seq.hi, heads=self.heads.hi, head_size=self.head_size.hi,
            v_head_size=None if self.v_head_size is None else self.v_head_size.hi,
            tokens=None if self.tokens is None else self.tokens.hi,
            input_hidden=None if self.input_hidden is None else self.input_hidden.hi,
        )

    def geometry(self, **dims: Any) -> Geometry:
        """Return a geometry with this target's flags and the given dimensions."""
        q = dims["heads"] * dims["head_size"]
        v = dims["heads"] * (dims.get("v_head_size") or dims["head_size"])
        return Geometry(
            op=self.op, element_size=self.element_size,
            qkv_hidden_sizes=(q, q, v) if self.qkv_hidden_sizes else None,
            pmha_format=self.pmha_format, qkv_bias=self.qkv_bias, attn_bias=self.attn_bias,
            attn_bias_broadcast_batch=self.attn_bias_broadcast_batch,
            attn_bias_broadcast_heads=self.attn_bias_broadcast_heads, **dims,
        )

    def contains(self, g: Geometry) -> bool:
        """Return whether a concrete geometry with the same flags lies inside the target's box."""
        return (
            g.batch in self.batch and g.seq in self.seq and g.heads in self.heads
            and g.head_size in self.head_size and g.hv in self.hv
            and (g.t in self.tokens if self.tokens else 1 <= g.t <= g.batch * g.seq)
            and (self.input_hidden is None or g.input_hidden is None or g.input_hidden in self.input_hidden)
        )

    def as_dict(self) -> dict[str, Any]:
        """Return the target as the JSON data that `target_from_dict` reads back."""
        out: dict[str, Any] = {
            "name": self.name, "description": self.description, "op": self.op.value,
            "dtype": "fp16" if self.element_size == 2 else "fp32",
        }
        for dim in ("batch", "seq", "heads", "head_size", "v_head_size", "tokens", "input_hidden"):
            value = getattr(self, dim)
            if value is not None:
                out[dim] = f"{value.lo}..{value.hi}"
        out.update(
            qkv_hidden_sizes=self.qkv_hidden_sizes, format=self.pmha_format.value, qkv_bias=self.qkv_bias,
            attn_bias=self.attn_bias, attn_bias_broadcast_batch=self.attn_bias_broadcast_batch,
            attn_bias_broadcast_heads=self.attn_bias_broadcast_heads,
            sm=self.config.device.sm, sdpa_kernel=self.config.options.sdpa_kernel, env=dict(self.env),
            flash_build=self.config.build.flash, mea_build=self.config.build.mea,
            trt_runner=self.config.trt_runner.value,
        )
        if self.expect_unavailable_estimate:
            out["expect_unavailable_estimate"] = True
        return out


TARGET_KEYS = {
    "name", "description", "op", "dtype", "batch", "seq", "heads", "head_size", "v_head_size", "tokens",
    "input_hidden", "qkv_hidden_sizes", "format", "qkv_bias", "attn_bias", "attn_bias_broadcast_batch",
    "attn_bias_broadcast_heads", "sm", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_runner",
    "expect_unavailable_estimate",
}


def target_from_dict(data: Mapping[str, Any]) -> Target:
    """Return the target a JSON object describes (keys as in `Target.as_dict`; ranges as "lo..hi"
    strings, [lo, hi] lists, or a bare maximum)."""
    unknown = set(data) - TARGET_KEYS
    if unknown:
        raise InvalidArgument(f"unknown target keys {sorted(unknown)}; known: {sorted(TARGET_KEYS)}")
    dtype = data.get("dtype", "fp16")
    if dtype not in ELEMENT_SIZES:
        raise InvalidArgument(f"dtype = {dtype!r} must be fp16 or fp32")

    def dim(name: str, required: bool = True) -> DimRange | None:
        if name not in data or data[name] is None:
            if required:
                raise InvalidArgument(f"target needs {name}")
            return None
        return DimRange.parse(data[name], name)

    expect = data.get("expect_unavailable_estimate", False)
    if not isinstance(expect, bool):
        raise InvalidArgument(f"expect_unavailable_estimate = {expect!r} must be a JSON boolean (true or false)")
    config = RuntimeConfig.make(
        sm=data.get("sm", 80), sdpa_kernel=data.get("sdpa_kernel", 0), env=data.get("env"),
        flash_build=data.get("flash_build", True), mea_build=data.get("mea_build", True),
        trt_runner=data.get("trt_runner", "auto"),
    )
    return Target(
        op=parse_enum(Op, data.get("op"), "op"), element_size=ELEMENT_SIZES[dtype],
        batch=dim("batch"), seq=dim("seq"), heads=dim("heads"), head_size=dim("head_size"),
        v_head_size=dim("v_head_size", False), tokens=dim("tokens", False), input_hidden=dim("input_hidden", False),
        qkv_hidden_sizes=bool(data.get("qkv_hidden_sizes", False)),
        pmha_format=parse_enum(QkvFormat, data.get("format", "packed"), "format"),
        qkv_bias=bool(data.get("qkv_bias", False)), attn_bias=bool(data.get("attn_bias", False)),
        attn_bias_broadcast_batch=bool(data.get("attn_bias_broadcast_batch", False)),
        attn_bias_broadcast_heads=bool(data.get("attn_bias_broadcast_heads", False)),
        config=config, env=tuple(sorted((data.get("env") or {}).items())), name=str(data.get("name", "custom")),
        description=str(data.get("description", "")), expect_unavailable_estimate=expect,
    )


def load_target(path: str | Path) -> Target:
    """Read a target JSON file."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidArgument(f"cannot read target file {path}: {error}") from None
    return target_from_dict(data)


# The built-in default target: a BERT-base-like packed encoder, PMHA fp16 on sm80.
DEFAULT_TARGET = Target(
    op=Op.PMHA, element_size=2, batch=DimRange(1, 32), seq=DimRange(1, 512), heads=DimRange(12, 12),
    head_size=DimRange(64, 64), name="bert-base-pmha-fp16-sm80",
    description="BERT-base-like packed encoder: PMHA fp16, sm80, B <= 32, S <= 512, N = 12, H = 64",
)


def with_config(target: Target, config: RuntimeConfig) -> Target:
    """Return the target under another runtime configuration."""
    return replace(target, config=config)
