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
from .errors import InvalidArgument
from .mha.problem import MaskType, MhaFormat
from .problem import Op, QkvFormat


class HintState(enum.Enum):
    """WorkspaceInputShape states without a shape."""

    MISSING = "missing"
    NO_SHAPE = "no_shape"


MISSING = HintState.MISSING
NO_SHAPE = HintState.NO_SHAPE
Hint = Any  # HintState or a sequence of dimensions

PA_INPUTS = ("input", "weights", "bias", "token_offset", "cumulative_sequence_length", "attention_bias")
PMHA_INPUTS = ("query", "key", "value", "bias", "token_offset", "cumulative_sequence_length", "attention_bias")
MHA_INPUTS = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value",
              "past_sequence_length", "cache_indirection")


def input_names(op: Op) -> tuple[str, ...]:
    """Return the operator's positional input names."""
    return {Op.PA: PA_INPUTS, Op.PMHA: PMHA_INPUTS, Op.MHA: MHA_INPUTS}[op]


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
    `qkv_bias` is its [2D + Dv] bias input.
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


def attention_bias_shape(g: Geometry) -> list[int] | None:
    """Return [B or 1, N or 1, S, S] for the geometry, or None without attention bias."""
    if not g.attn_bias:
        return None
    return [1 if g.attn_bias_broadcast_batch else g.batch, 1 if g.attn_bias_broadcast_heads else g.heads,
            g.seq, g.seq]


def mha_hints(g: Geometry) -> list[Hint]:
    """Return MultiHeadAttention's ten positional input shapes for the geometry."""
    b, s, n, h, hv, kv = g.batch, g.seq, g.heads, g.head_size, g.hv, g.l
    total = g.past + kv
    if g.mha_format is MhaFormat.PACKED_QKV:
        qkv = [[b, s, n, 3, h], MISSING, MISSING]
    elif g.mha_format is MhaFormat.PACKED_KV:
        qkv = [[b, s, n * h], [b, kv, n, 2, h], MISSING]
    elif g.mha_format is MhaFormat.CROSS:
        qkv = [[b, s, n * h], [b, n, kv, h], [b, n, kv, hv]]
    else:
        qkv = [[b, s, n * h], [b, kv, n * h], [b, kv, n * hv]]
    masks = {MaskType.NONE: MISSING, MaskType.KEY_SEQ_LEN: [b], MaskType.KEY_SEQ_LEN_START: [3 * b + 2],
             MaskType.KEY_PADDING: [b, total], MaskType.ATTENTION: [b, s, total]}
    bias = MISSING
    if g.attn_bias:
        bias = [1 if g.attn_bias_broadcast_batch else b, 1 if g.attn_bias_broadcast_heads else n, s, total]
    past = [[b, n, g.past, h]] * 2 if g.with_past else [MISSING, MISSING]
    return [*qkv, [2 * n * h + n * hv] if g.qkv_bias else MISSING, masks[g.mask], bias, *past, MISSING, MISSING]


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return the positional input shapes ORT would see for the geometry."""
    if g.op is Op.MHA:
        return mha_hints(g)
    bias = attention_bias_shape(g)
    common = [[g.batch, g.seq], [g.batch + 1], bias if bias is not None else MISSING]
    if g.op is Op.PA:
        if g.qkv_hidden_sizes is not None:
            q, k, v = g.qkv_hidden_sizes
        elif g.v_head_size is not None and g.v_head_size != g.head_size:
            raise InvalidArgument(
                f"PackedAttention without qkv_hidden_sizes has equal head sizes (bias / 3 each); "
                f"head_size = {g.head_size}, v_head_size = {g.hv} needs qkv_hidden_sizes"
            )
        else:
            q = k = g.heads * g.head_size
            v = g.heads * g.hv
        hidden = g.heads * g.head_size if g.input_hidden is None else g.input_hidden
        return [[g.t, hidden], [hidden, q + k + v], [q + k + v], *common]
    q_hidden, v_hidden = g.heads * g.head_size, g.heads * g.hv
    qkv_bias = [[2 * q_hidden + v_hidden]] if g.qkv_bias else [MISSING]
    if g.pmha_format is QkvFormat.PACKED:
        if g.v_head_size is not None and g.v_head_size != g.head_size:
            raise InvalidArgument(
                f"packed QKV [T, N, 3, H] has one head size; got head_size = {g.head_size}, "
                f"v_head_size = {g.hv} (use the separate format)"
            )
        return [[g.t, g.heads, 3, g.head_size], MISSING, MISSING, *qkv_bias, *common]
    return [[g.t, q_hidden], [g.t, q_hidden], [g.t, v_hidden], *qkv_bias, *common]
