"""ORT-style positional input shapes ("hints") and their translation to problem shapes.

A hint for input i is `MISSING` (optional input omitted), `NO_SHAPE` (present, shape unknown) or
a sequence of dimensions (present with shape; -1 is an unknown dimension). This mirrors ORT's
WorkspaceInputShape. `Geometry` is the user-facing description (T, B, S, N, H, Hv and the flags)
and `geometry_hints` turns it into the positional shapes ORT's adapter would see.
"""

from __future__ import annotations

import enum
from dataclasses import field, make_dataclass
from typing import Any, Sequence

from .declared import own_fields
from .documents import DocumentError, json_type, parse_json_text, short


class HintState(enum.Enum):
    """WorkspaceInputShape states without a shape."""

    MISSING = "missing"
    NO_SHAPE = "no_shape"


MISSING = HintState.MISSING
NO_SHAPE = HintState.NO_SHAPE
Hint = Any  # HintState or a sequence of dimensions


def hint_at(hints: Sequence[Hint], index: int) -> Hint:
    """Return hint `index`, MISSING past the end (ORT's GetWorkspaceInputShape)."""
    return hints[index] if index < len(hints) else MISSING


def shape_of(hint: Hint) -> list[Any] | None:
    """Return the dimensions of a present-with-shape hint, else None."""
    return None if isinstance(hint, HintState) else list(hint)


def parse_hint(raw: Any, position: int) -> Hint:
    """Return the hint for one JSON value: null (missing), "no_shape" / "?" or a list of integers,
    each -1 (unknown) or non-negative."""
    if raw is None or (isinstance(raw, str) and raw == "missing"):
        return MISSING
    if isinstance(raw, str) and raw in ("no_shape", "?"):
        return NO_SHAPE
    if isinstance(raw, list) and all(isinstance(x, int) and not isinstance(x, bool) and x >= -1 for x in raw):
        return tuple(raw)
    raise DocumentError(
        f"input shape hint {position} = {short(raw)}: expected null, \"no_shape\" or a list of integers "
        f"(-1 for an unknown dimension)"
    )


def parse_input_shapes(text: str, what: str = "--input-shapes") -> list[Hint]:
    """Return the positional hints of a JSON list (ORT's input shapes, as `--input-shapes` takes
    them), parsed with bounded depth and integer length; raise DocumentError naming `what`."""
    raw = parse_json_text(text, what)
    if not isinstance(raw, list):
        raise DocumentError(f"{what} is {json_type(raw)}; expected a JSON list of positional input shapes")
    return [parse_hint(h, i) for i, h in enumerate(raw)]


class GeometryBase:
    """A problem described by its dimensions (counts, not bytes) and discrete flags: `Geometry`,
    whose fields are these common ones and each family's own (`attnws.spec.declared`).

    Common: the operator, the element size, B, S, N, H, Hv (None: Hv = H), the QKV bias and the
    attention bias (with its broadcast dimensions). The packed operators add the token count T
    (None: B * S), PA's GEMM k (`input_hidden`, None: N * H), the qkv_hidden_sizes attribute
    (which makes head sizes exact for the estimator) and PMHA's `pmha_format`; MultiHeadAttention
    (`attnws.spec.mha`) L (`kv_seq`, None: L = S), its past P, its format, the key padding mask,
    the past / present inputs and `unidirectional`; GroupQueryAttention (`attnws.spec.gqa`) the KV
    heads Nk, the total sequence length T (`total_seq`), the cache's capacity P (`past`), its
    format, bf16, the node's options and the session option `max_total_seq` (None: unset).
    """

    @property
    def l(self) -> int:
        """MultiHeadAttention's new key/value length L (S when not given)."""
        return self.seq if self.kv_seq is None else self.kv_seq

    @property
    def t(self) -> int:
        return self.batch * self.seq if self.tokens is None else self.tokens

    @property
    def hv(self) -> int:
        return self.head_size if self.v_head_size is None else self.v_head_size


COMMON_GEOMETRY_FIELDS = (("v_head_size", None), ("qkv_bias", False), ("attn_bias", False),
                          ("attn_bias_broadcast_batch", False), ("attn_bias_broadcast_heads", False))
Geometry = make_dataclass(
    "Geometry", [("op", Any), ("element_size", int), ("batch", int), ("seq", int), ("heads", int), ("head_size", int),
                 *((name, Any, field(default=default)) for name, default in
                   (*COMMON_GEOMETRY_FIELDS, *own_fields("GEOMETRY")))],
    bases=(GeometryBase,), frozen=True)
Geometry.__module__, Geometry.__doc__ = __name__, GeometryBase.__doc__


def required_shapes(hints: Sequence[Hint], required: Sequence[int], optional: Sequence[int]) -> str:
    """Return why the required inputs lack a shape or an optional one is present without one ('' when
    neither)."""
    for index in required:
        if hint_at(hints, index) is MISSING:
            return f"required input {index} is missing"
        if shape_of(hint_at(hints, index)) is None:
            return f"required input {index} has no known shape"
    for index in optional:
        if hint_at(hints, index) is HintState.NO_SHAPE:
            return f"optional input {index} is present without a known shape"
    return ""
