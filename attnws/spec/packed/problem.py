"""The packed family's problem: what a PackedAttention or PackedMultiHeadAttention node computes,
in plain integers (ORT's PackedAttentionProblem).

A `Problem` carries no ONNX, ORT or CUDA type. Its geometry fields are ints for the concrete
specification, or Z3 terms when the solver evaluates the same code symbolically.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..problem import Backend, Op, parse_enum


OPS = (Op.PA, Op.PMHA)  # the family's operators
BACKENDS = (Backend.TRT, Backend.FLASH, Backend.MEA, Backend.UNFUSED)


class QkvFormat(enum.Enum):
    """How PMHA receives Q, K and V."""

    PACKED = "packed"  # query [T, N, 3, H], key and value absent
    SEPARATE = "separate"  # query [T, N*H], key [T, N*H], value [T, N*Hv]


@dataclass(frozen=True)
class Problem:
    """One validated packed attention problem (the output of a builder).

    Units: element_size in bytes; every other number is a count of elements, tokens or heads.
    `input_hidden_size` is PA's GEMM k (0 for PMHA); `qkv_format` and `has_bias` are PMHA's
    (None / False for PA). `has_bias` is PMHA's optional QKV bias; PA always folds its bias in.
    """

    op: Op
    element_size: int
    token_count: Any
    batch_size: Any
    sequence_length: Any
    num_heads: Any
    hidden_size: Any
    v_hidden_size: Any
    qk_head_size: Any
    v_head_size: Any
    qkv_materialization_index_width: Any
    input_hidden_size: Any = 0
    qkv_format: QkvFormat | None = None
    has_bias: bool = False
    has_attention_bias: bool = False
    broadcast_attn_bias_dim_0: bool = False
    broadcast_attn_bias_dim_1: bool = False

    def as_dict(self) -> dict[str, Any]:
        """Return the fields under ONNX Runtime's names, enums as their string values."""
        return {
            "op": self.op.value,
            "element_size": self.element_size,
            "token_count": self.token_count,
            "batch_size": self.batch_size,
            "sequence_length": self.sequence_length,
            "num_heads": self.num_heads,
            "input_hidden_size": self.input_hidden_size,
            "hidden_size": self.hidden_size,
            "v_hidden_size": self.v_hidden_size,
            "qk_head_size": self.qk_head_size,
            "v_head_size": self.v_head_size,
            "qkv_format": self.qkv_format.value if self.qkv_format else None,
            "has_bias": self.has_bias,
            "has_attention_bias": self.has_attention_bias,
            "broadcast_attn_bias_dim_0": self.broadcast_attn_bias_dim_0,
            "broadcast_attn_bias_dim_1": self.broadcast_attn_bias_dim_1,
            "qkv_materialization_index_width": self.qkv_materialization_index_width,
        }


def qkv_materialization_index_width(d: Any, qk_head_size: Any, v_head_size: Any) -> Any:
    """Return the vector width (4, 2 or 1 elements) of the QKV bias-add/transpose producer.

    4 when both head sizes are multiples of 4, else 2 when both are even, else 1.
    """
    return d.ite(
        d.all_(d.mod(qk_head_size, 4) == 0, d.mod(v_head_size, 4) == 0),
        4,
        lambda: d.ite(d.all_(d.mod(qk_head_size, 2) == 0, d.mod(v_head_size, 2) == 0), 2, 1),
    )


INDEX_WIDTH_NAMES = {"scalar": 1, "vector2": 2, "vector4": 4}


def problem_from_fields(op: Op, fields: dict[str, Any]) -> Problem:
    """Return a Problem from ORT's struct field names (as in a PackedAttentionProblem literal).

    The problem is taken as given, not validated: recipes validate it, as ORT's do. Enums are
    their string values; `qkv_materialization_index_width` may be scalar / vector2 / vector4 or
    an int. Unknown fields (ORT's `backend`, `trt_runner_available`) are ignored here.
    """
    width = fields.get("qkv_materialization_index_width", 1)
    width = INDEX_WIDTH_NAMES.get(width, width) if isinstance(width, str) else width
    names = {f for f in Problem.__dataclass_fields__} - {"op", "qkv_format", "qkv_materialization_index_width"}
    kwargs = {k: v for k, v in fields.items() if k in names}
    qkv_format = None
    if op is Op.PMHA:
        qkv_format = parse_enum(QkvFormat, fields.get("qkv_format", "packed"), "qkv_format")
    defaults = {"token_count": 0, "batch_size": 0, "sequence_length": 0, "num_heads": 0, "hidden_size": 0,
                "v_hidden_size": 0, "qk_head_size": 0, "v_head_size": 0}
    return Problem(op=op, qkv_format=qkv_format, qkv_materialization_index_width=width, **{**defaults, **kwargs})
