"""The PagedAttention problem: one validated com.microsoft PagedAttention node at one step (ORT
1.31.1, `docs/research/paged-attention.md` for the schema and the binary's texts,
`docs/research/paged-workspace.md` for the kernel's buffers).

Notation (counts, not bytes): B sequences, T packed new tokens over them, S the longest
sequence's new tokens (the query-length value the kernel sizes with), L the longest sequence's
key length (its past plus its new tokens, the key-length value the kernel sizes with), N / Nk
query / key-value heads, H the Q/K head size, Hv the V head size (H but under the latent layout),
bs the cache's block size, M the block table's blocks per sequence (so L <= M * bs). Fields are
ints for the concrete specification or Z3 terms when the solver evaluates the same code.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgument
from ..problem import Backend, Op

OPS = (Op.PAGED,)  # the family's operators
# PagedAttention's backends, in the order its selection considers them (`dispatch.cascade_gates`):
# the latent (MLA) kernel, XQA and speculative XQA inside the paged decode kernel, the portable
# paged decode kernel, cuDNN's paged SDPA, Flash, MEA.
BACKENDS = (Backend.LATENT, Backend.XQA, Backend.XQA_SPEC, Backend.PAGED_DECODE, Backend.CUDNN, Backend.FLASH,
            Backend.MEA)


class PagedFormat(enum.Enum):
    """Where the new K and V come from."""

    SEPARATE = "separate"  # query [T, N H], key and value [T, Nk H]
    PACKED_QKV = "packed_qkv"  # query [T, (N + 2 Nk) H], no key or value input


class KvQuantization(enum.Enum):
    """k_quant_type / v_quant_type: the cache's scale granularity (NONE: unquantized)."""

    NONE = "NONE"
    PER_TENSOR = "PER_TENSOR"
    PER_CHANNEL = "PER_CHANNEL"


# The cache's element types (`k_cache_dtype` / the cache tensor's type) as a `kv_quant` field names
# them: (the attribute's string, bytes per stored element, elements stored per value): int4 and fp4
# pack two values per uint8 byte.
CACHE_TYPES = {"int8": ("int8", 1, 1), "fp8": ("float8e4m3fn", 1, 1), "int4": ("int4", 1, 2)}
SCALES = ("per_tensor", "per_channel")
# What ORT's attention_metadata input holds, as a `metadata` field says it: absent (ORT copies the
# lengths back to the host and sizes with the step's own maxima), or given with its upper bounds
# (the values the kernel sizes with; the lower bound on the key length, which gates Flash's
# split-KV decode, is the step's own).
METADATA = ("absent", "bounds")


def metadata_kind(value: Any) -> str:
    """Return the metadata a `metadata` field holds (None: "absent"), or raise InvalidArgument."""
    if value is None:
        return "absent"
    if value in METADATA:
        return value
    raise InvalidArgument(f"metadata {value!r}: expected {' or '.join(map(repr, METADATA))}")


@dataclass(frozen=True)
class PagedProblem:
    """One validated PagedAttention node at one step (the builder's output).

    `max_query_len` (S) and `max_kv_len` (L) are the values the kernel sizes with: the
    attention_metadata bounds when the input is given, the step's own maxima (copied back from the
    device) when not. `kv_lower_bound` is the metadata's third entry (0: not given), which Flash's
    split-KV decode reads. The cache holds `cache_element_size`-byte elements, `cache_pack` values
    each (2 for int4). `latent`: kv_cache_layout LATENT (one cache, Nk = 1, V its first Hv channels).
    """

    batch_size: Any
    token_count: Any
    max_query_len: Any
    max_kv_len: Any
    num_heads: Any
    kv_num_heads: Any
    head_size: Any
    v_head_size: Any
    block_size: Any
    max_blocks_per_sequence: Any
    num_blocks: Any
    is_bf16: bool = False
    is_packed_qkv: bool = False
    latent: bool = False
    do_rotary: bool = False
    causal: bool = True
    local_window_size: int = -1
    softcap: float = 0.0
    has_head_sink: bool = False
    use_qk_norm: bool = False
    has_slot_mapping: bool = False
    cache_type: str | None = None  # None: the query's own type; else a CACHE_TYPES key
    k_quantization: KvQuantization = KvQuantization.NONE
    v_quantization: KvQuantization = KvQuantization.NONE
    metadata: str = "absent"
    kv_lower_bound: Any = 0

    op = Op.PAGED
    element_size = 2  # PagedAttention runs fp16 and bf16 only

    @property
    def quantized(self) -> bool:
        """Whether the cache holds quantized values (int8, fp8 or packed int4)."""
        return self.cache_type is not None

    @property
    def cache_element_size(self) -> int:
        return 2 if self.cache_type is None else CACHE_TYPES[self.cache_type][1]

    @property
    def cache_pack(self) -> int:
        return 1 if self.cache_type is None else CACHE_TYPES[self.cache_type][2]

    @property
    def has_metadata(self) -> bool:
        return self.metadata == "bounds"

    @property
    def sequence_length(self) -> Any:
        """S under the name every family's problem gives its query length (the model layer's
        targets read it): the longest sequence's new tokens, as the kernel sizes with it."""
        return self.max_query_len

    def decode_shaped(self, d: Any) -> Any:
        """T <= B: at most one new token per sequence on average (the selection's decode test)."""
        return self.token_count <= self.batch_size

    def as_dict(self) -> dict[str, Any]:
        """Return the fields under ORT's names, enums as their string values."""
        out: dict[str, Any] = {"op": self.op.value, "element_size": self.element_size}
        for name, value in vars(self).items():
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out
