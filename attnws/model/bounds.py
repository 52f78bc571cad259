"""User bounds on a model's dynamic shapes: `--dim NAME=MAX` and ORT's `session.max_shape_override`.

A dim bound gives the maximum of every dimension named NAME (an ONNX `dim_param`) anywhere in the
model. An override gives a graph input's whole maximum shape, in ORT's syntax
`input_ids:[8,4096];attention_mask:[8,4096]`. Values are element counts, never bytes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

from ..spec.command_line import name_value
from ..spec.errors import UsageError
from ..spec.limits import INT32_MAX
from ..spec.units import parse_integer

DEFAULT_MAX_MODEL_BYTES = 2**31 - 1  # protobuf's message limit: larger models keep weights externally
DEFAULT_MAX_MODEL_NODES = 1_000_000  # nodes in every graph and function; BERT-large has ~1,500

_OVERRIDE = re.compile(r"^\s*([^:;\[\]]+?)\s*:\s*\[([^\[\]]*)\]\s*$")


@dataclass(frozen=True)
class ShapeBounds:
    """Maxima for named dimensions (`dims`) and whole graph-input shapes (`overrides`)."""

    dims: dict[str, int] = field(default_factory=dict)
    overrides: dict[str, tuple[int, ...]] = field(default_factory=dict)


def _count(text: str, what: str) -> int:
    value = parse_integer(text.strip())
    if value is None:
        raise UsageError(f"{what}: {text.strip()!r} is not a non-negative integer in ASCII digits") from None
    if not 0 <= value <= INT32_MAX:
        raise UsageError(f"{what}: {value} must be within [0, {INT32_MAX}]")
    return value


def parse_dims(pairs: Iterable[str]) -> dict[str, int]:
    """Return the `--dim NAME=MAX` pairs as {NAME: MAX}; a name given twice is a usage error."""
    dims: dict[str, int] = {}
    for pair in pairs:
        name, value = name_value(pair, "--dim", "NAME=MAX")
        if name in dims:
            raise UsageError(f"--dim {name} is given twice")
        dims[name] = _count(value, f"--dim {name}")
    return dims


def parse_max_shape_override(text: str | None) -> dict[str, tuple[int, ...]]:
    """Return ORT's `name:[d0,d1,...];name2:[...]` as {name: dims}; empty text gives {}."""
    overrides: dict[str, tuple[int, ...]] = {}
    for entry in (text or "").split(";"):
        if not entry.strip():
            continue
        match = _OVERRIDE.match(entry)
        if match is None:
            raise UsageError(f"--max-shape-override entry {entry.strip()!r}: expected NAME:[D0,D1,...]")
        name, body = match.group(1), match.group(2)
        if name in overrides:
            raise UsageError(f"--max-shape-override names input {name!r} twice")
        dims = [d for d in body.split(",") if d.strip()] if body.strip() else []
        overrides[name] = tuple(_count(d, f"--max-shape-override {name}") for d in dims)
    return overrides


def shape_bounds(dim_pairs: Iterable[str], override_text: str | None) -> ShapeBounds:
    """Return the bounds the command-line flags describe."""
    return ShapeBounds(parse_dims(dim_pairs), parse_max_shape_override(override_text))
