"""The MultiHeadAttention problem: ONNX Runtime's AttentionParameters for one node, plain integers.

Notation (counts, not bytes): B batch, S query sequence length, L new key/value sequence length,
P past sequence length, T = P + L total key/value length, N heads, H Q/K head size, Hv V head
size. Like the packed `Problem`, the geometry fields are ints for the concrete specification or
Z3 terms when the solver evaluates the same code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..problem import Backend, Op

# The family's backends, in its dispatch cascade's order.
OPS = (Op.MHA,)  # the family's operators
BACKENDS = (Backend.FLASH, Backend.CUDNN, Backend.TRT_CROSS, Backend.TRT, Backend.MEA, Backend.UNFUSED)


class MhaFormat(enum.Enum):
    """How the node receives Q, K and V (ORT's AttentionQkvFormat after CheckInputs)."""

    SEPARATE = "separate"  # Q_K_V_BSNH: query [B,S,N*H], key [B,L,N*H], value [B,L,N*Hv]
    CROSS = "cross"  # Q_K_V_BSNH_BNSH_BNSH: key and value already [B,N,L,H] / [B,N,L,Hv]
    PACKED_KV = "packed_kv"  # Q_KV_BSNH_BSN2H: key [B,L,N,2,H], value absent
    PACKED_QKV = "packed_qkv"  # QKV_BSN3H: query [B,S,N,3,H], key and value absent


class MaskType(enum.Enum):
    """The key_padding_mask kinds ORT distinguishes by shape (GetMaskType)."""

    NONE = "none"
    KEY_SEQ_LEN = "1d_key_seq_len"  # [B]
    KEY_SEQ_LEN_START = "1d_key_seq_len_start"  # [3B + 2]
    KEY_PADDING = "2d_key_padding"  # [B, T]
    ATTENTION = "3d_attention"  # [B, S, T]


@dataclass(frozen=True)
class MhaProblem:
    """One validated MultiHeadAttention problem (the output of `build_mha_problem`).

    Units: element_size in bytes; every other number is a count. `has_past` / `has_present` say
    which of the cache inputs and outputs the node has; `has_bias` is the [2D + Dv] projection
    bias input. The key padding mask is its rank (0 when absent) and, for rank 1, whether it is
    the [3B + 2] form (a condition over the shape, so that the solver can evaluate it).
    """

    element_size: int
    batch_size: Any
    sequence_length: Any
    kv_sequence_length: Any
    past_sequence_length: Any
    num_heads: Any
    qk_head_size: Any
    v_head_size: Any
    qkv_format: MhaFormat
    has_bias: bool = False
    mask_rank: int = 0
    mask_is_start: Any = False
    has_attention_bias: bool = False
    broadcast_attn_bias_dim_0: Any = False
    broadcast_attn_bias_dim_1: Any = False
    has_past: bool = False
    has_present: bool = False
    is_unidirectional: bool = False

    op = Op.MHA

    @property
    def total_sequence_length(self) -> Any:
        """T = P + L (ORT's total_sequence_length)."""
        return self.past_sequence_length + self.kv_sequence_length

    @property
    def mask_type(self) -> MaskType:
        """The mask kind of a concrete problem."""
        if self.mask_rank == 1:
            return MaskType.KEY_SEQ_LEN_START if self.mask_is_start else MaskType.KEY_SEQ_LEN
        return (MaskType.NONE, None, MaskType.KEY_PADDING, MaskType.ATTENTION)[self.mask_rank]

    @property
    def hidden_size(self) -> Any:
        """D = N * H."""
        return self.num_heads * self.qk_head_size

    @property
    def v_hidden_size(self) -> Any:
        """Dv = N * Hv."""
        return self.num_heads * self.v_head_size

    def as_dict(self) -> dict[str, Any]:
        """Return the fields under ONNX Runtime's names, enums as their string values."""
        return {
            "op": self.op.value, "element_size": self.element_size, "batch_size": self.batch_size,
            "sequence_length": self.sequence_length, "kv_sequence_length": self.kv_sequence_length,
            "past_sequence_length": self.past_sequence_length,
            "total_sequence_length": self.total_sequence_length, "num_heads": self.num_heads,
            "qk_head_size": self.qk_head_size, "v_head_size": self.v_head_size,
            "qkv_format": self.qkv_format.value, "has_bias": self.has_bias,
            "mask_type": self.mask_type.value if isinstance(self.mask_is_start, bool) else f"rank {self.mask_rank}",
            "has_attention_bias": self.has_attention_bias,
            "broadcast_attn_bias_dim_0": self.broadcast_attn_bias_dim_0,
            "broadcast_attn_bias_dim_1": self.broadcast_attn_bias_dim_1,
            "has_past": self.has_past, "has_present": self.has_present,
            "is_unidirectional": self.is_unidirectional,
        }
