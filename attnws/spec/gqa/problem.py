"""The GroupQueryAttention workspace problem: ORT 1.31.1's GQAWorkspaceProblem, plain integers.

`group_query_attention_workspace.h` (#32446; index id 68733897936, placed in
`docs/research/gqa-workspace.md`). Notation (counts, not bytes): B batch, S new tokens, N query
heads, Nk key/value heads (N % Nk == 0), H head size, C the present cache capacity before any
windowed staging. Element sizes are bytes. The geometry fields are ints for the concrete
specification or Z3 terms when the solver evaluates the same code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from ..problem import Backend

# GroupQueryAttention's backends, in its runtime cascade's order (group_query_attention.cc).
BACKENDS = (Backend.XQA, Backend.CUDNN, Backend.FLASH, Backend.MEA, Backend.UNFUSED)


class KvQuantization(enum.Enum):
    """GQAKvQuantizationType: the K or V cache's scale granularity (NONE: unquantized)."""

    NONE = "none"
    PER_TENSOR = "per_tensor"
    PER_CHANNEL = "per_channel"


class Preprocess(enum.Enum):
    """GQAPreprocessMode: the QKV preprocessing of the route the runtime finally selected."""

    XQA = "xqa"
    FLASH = "flash"
    MEA = "mea"
    UNFUSED = "unfused"


class XqaKvType(enum.Enum):
    """GQAXqaKvType: the XQA kernel's cache element."""

    NONE = "none"
    INT8 = "int8"
    FP8 = "fp8"


class HeadSinkStorage(enum.Enum):
    """GQAXqaHeadSinkStorage: how XQA gets the float32 head sink."""

    NONE = "none"
    PREPACKED_FP32 = "prepacked_fp32"  # persistent, prepacked at session creation
    DYNAMIC_CONVERSION = "dynamic_conversion"  # converted into the workspace at every run


@dataclass(frozen=True)
class GqaWorkspaceProblem:
    """The plain facts ORT's GQA recipes size from (GQAWorkspaceProblem, field for field).

    `kv_cache_bit_width` is 0 for unpacked caches, else 4 or 8 (packed one-byte storage);
    `present_kv_cache_capacity` is C before windowed staging changes it.
    """

    qkv_element_size: int
    cache_element_size: int
    batch_size: Any
    sequence_length: Any
    num_heads: Any
    kv_num_heads: Any
    head_size: Any
    present_kv_cache_capacity: Any
    kv_cache_bit_width: int = 0
    k_quantization: KvQuantization = KvQuantization.NONE
    v_quantization: KvQuantization = KvQuantization.NONE
    is_windowed_kv_cache: bool = False
    is_first_prompt: bool = False
    do_rotary: bool = False
    is_packed_qkv: bool = False
    use_qk_norm: bool = False

    @property
    def quantized(self) -> bool:
        """Whether K or V is quantized."""
        return KvQuantization.NONE is not self.k_quantization or KvQuantization.NONE is not self.v_quantization

    def with_(self, **changes: Any) -> "GqaWorkspaceProblem":
        return replace(self, **changes)
