"""ORT-style positional input shapes ("hints") and their translation to problem shapes.

A hint for input i is `MISSING` (optional input omitted), `NO_SHAPE` (present, shape unknown) or
a sequence of dimensions (present with shape; -1 is an unknown dimension). This mirrors ORT's
WorkspaceInputShape. `Geometry` is the user-facing description (T, B, S, N, H, Hv and the flags)
and `geometry_hints` turns it into the positional shapes ORT's adapter would see.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Sequence

from .documents import DocumentError, json_type, parse_json_text, short
from .gqa.problem import GqaFormat
from .mha.problem import MaskType, MhaFormat
from .problem import Op
from .packed.problem import QkvFormat


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


@dataclass(frozen=True)
class Geometry:
    """A problem described by its dimensions (counts, not bytes) and discrete flags.

    tokens defaults to batch * seq, v_head_size to head_size, input_hidden (PA) to N * H.
    `qkv_hidden_sizes` (PA) records the node attribute, which makes head sizes exact for the
    estimator. PMHA `pmha_format` is packed or separate; `qkv_bias` adds PMHA's QKV bias input.
    MultiHeadAttention (`attnws.spec.mha`) adds kv_seq L (None: L = S), past P (with `with_past`),
    its own `mha_format`, the key padding `mask` kind, the present outputs and `unidirectional`;
    `qkv_bias` is its [2D + Dv] bias input. GroupQueryAttention (`attnws.spec.gqa`) adds the KV
    heads Nk, the total sequence length T (`total_seq`), the cache's capacity P (`past`), its
    `gqa_format`, bf16 and the node's flags (rotary, the local window, the windowed cache, the
    softcap, smooth softmax, the head sink, the KV cache's quantization) and the session option
    `max_total_seq` (None: unset).
    """

    op: Op
    element_size: int
    batch: int
    seq: int
    heads: int
    head_size: int
    v_head_size: int | None = None
    tokens: int | None = None
    input_hidden: int | None = None
    qkv_hidden_sizes: tuple[int, int, int] | None = None
    pmha_format: QkvFormat = QkvFormat.PACKED
    qkv_bias: bool = False
    attn_bias: bool = False
    attn_bias_broadcast_batch: bool = False
    attn_bias_broadcast_heads: bool = False
    kv_seq: int | None = None
    past: int = 0
    mha_format: MhaFormat = MhaFormat.SEPARATE
    mask: MaskType = MaskType.NONE
    with_past: bool = False
    with_present: bool = False
    unidirectional: bool = False
    kv_heads: int | None = None
    total_seq: int | None = None
    gqa_format: GqaFormat = GqaFormat.SEPARATE
    bf16: bool = False
    rotary: bool = False
    window: int | None = None
    sliding_window_cache: bool = False
    softcap: float | None = None
    smooth_softmax: bool = False
    head_sink: bool = False
    kv_quant: str | None = None
    max_total_seq: int | None = None

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
