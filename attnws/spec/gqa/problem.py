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

from ..errors import InvalidArgument
from ..problem import Backend, Op

# GroupQueryAttention's backends, in its runtime cascade's order (group_query_attention.cc).
OPS = (Op.GQA,)  # the family's operators
BACKENDS = (Backend.XQA, Backend.CUDNN, Backend.FLASH, Backend.MEA, Backend.UNFUSED)


# The KV cache's quantizations (per-tensor scales): their bit width and the builder's cache dtype.
KV_QUANT = {"none": (0, "same"), "int8": (8, "int8"), "int4": (4, "uint8"), "fp8": (8, "fp8")}


class GqaFormat(enum.Enum):
    """Where GroupQueryAttention's new K and V come from."""

    SEPARATE = "separate"  # query [B, S, N H], key and value [B, S, Nk H]
    PACKED_QKV = "packed_qkv"  # query [B, S, (N + 2 Nk) H], no key or value input


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


# What a head sink [N] is to the session, as a `Geometry`'s or a `Target`'s `head_sink` says it:
# a constant initializer, which ORT prepacks to float32 at session creation (no workspace), or a
# graph input, which XQA converts into its workspace at every run (align256(4 N) bytes).
HEAD_SINK_KINDS = {"initializer": HeadSinkStorage.PREPACKED_FP32, "input": HeadSinkStorage.DYNAMIC_CONVERSION}


def head_sink_kind(value: Any) -> str | None:
    """Return the head sink a `head_sink` field holds: None (no head sink), "initializer" or
    "input"; True (a boolean field's reading, as target files wrote it) is "initializer", False
    None. Raise InvalidArgument for anything else, naming the value."""
    if value is None or value is False:
        return None
    if value is True:
        return "initializer"
    if isinstance(value, str) and value in HEAD_SINK_KINDS:
        return value
    raise InvalidArgument(f"head_sink {value!r}: expected {' or '.join(map(repr, HEAD_SINK_KINDS))} "
                          "(a constant initializer ORT prepacks, or a graph input converted at every run), or none")


# How past and present hold the cache, as a `Geometry`'s or a `Target`'s `cache_layout` says it:
# "shared" (past_key / present_key and past_value / present_value alias one buffer of P rows each,
# onnxruntime-genai's binding: T <= P) or "separate" (present is an output of its own, max(T, P)
# rows: a growing cache T = P + L, or a static one T <= P); None: shared where T <= P, separate
# where T > P. A windowed cache is always shared (ORT refuses it otherwise).
CACHE_LAYOUTS = ("shared", "separate")


def cache_layout(value: Any) -> str | None:
    """Return the layout a `cache_layout` field holds (None: from T and P), or raise
    InvalidArgument naming the value."""
    if value is None or value in CACHE_LAYOUTS:
        return value
    raise InvalidArgument(f"cache_layout {value!r}: expected {' or '.join(map(repr, CACHE_LAYOUTS))} (past and "
                          "present alias one buffer, or present is a tensor of its own), or none (from T and P)")


def shares_buffer(layout: str | None, windowed: bool, total: Any, past: Any) -> Any:
    """Whether past and present alias under the layout (see CACHE_LAYOUTS): a condition on T and P
    (the solver's term when they are) where the layout is None; a windowed cache shares unless the
    layout says separate, which ORT's builder then refuses."""
    layout = cache_layout(layout)
    if layout is not None:
        return layout == "shared"
    return True if windowed else total <= past


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
    is_first_prompt: Any = False  # a condition (S == T) when the solver evaluates it
    do_rotary: bool = False
    is_packed_qkv: bool = False
    use_qk_norm: bool = False

    @property
    def quantized(self) -> bool:
        """Whether K or V is quantized."""
        return KvQuantization.NONE is not self.k_quantization or KvQuantization.NONE is not self.v_quantization

    def with_(self, **changes: Any) -> "GqaWorkspaceProblem":
        return replace(self, **changes)


@dataclass(frozen=True)
class GqaProblem:
    """One validated GroupQueryAttention node at run time (the output of `build_gqa_problem`).

    Counts, not bytes, except the element sizes: B batch, S new query tokens, L new key/value
    tokens (S, or 0 for a shared KV step), P the past buffer's length (past_key dim 2; 0 without
    past), T the total_sequence_length input, N / Nk the query / key-value heads, H the head size.
    `kv_share_buffer`: past and present alias (one buffer each for K and V), which XQA, Flash's
    fast decode and the windowed cache need. The cache holds `cache_element_size`-byte elements
    (2 unquantized; 1 for int8, fp8 and packed int4, `kv_cache_bit_width` 8 or 4).
    `head_sink_is_input`: the head sink is a graph input, which XQA converts to float32 into its
    workspace at every run; False: a constant initializer ORT prepacked at session creation (the
    shapes do not say which: the builder leaves it False, the session's reader sets it).
    """

    batch_size: Any
    sequence_length: Any
    kv_sequence_length: Any
    past_sequence_length: Any
    total_sequence_length: Any
    num_heads: Any
    kv_num_heads: Any
    head_size: Any
    is_bf16: bool = False
    has_past: bool = True
    kv_share_buffer: bool = True
    is_packed_qkv: bool = False
    do_rotary: bool = False
    local_window_size: int = -1
    sliding_window_cache: bool = False
    causal: bool = True
    softcap: float = 0.0
    smooth_softmax: bool = False
    has_head_sink: bool = False
    head_sink_is_input: bool = False
    use_qk_norm: bool = False
    has_attention_bias: bool = False
    cache_element_size: int = 2
    kv_cache_bit_width: int = 0
    k_quantization: KvQuantization = KvQuantization.NONE
    v_quantization: KvQuantization = KvQuantization.NONE
    cache_is_fp8: bool = False

    op = Op.GQA
    element_size = 2  # GroupQueryAttention runs fp16 and bf16 only

    @property
    def quantized(self) -> bool:
        """Whether K or V is quantized."""
        return KvQuantization.NONE is not self.k_quantization or KvQuantization.NONE is not self.v_quantization

    def present_capacity(self, d: Any) -> Any:
        """C: the present cache's length. A windowed cache keeps its capacity P whatever T is;
        otherwise max(T, P) (a static shared cache keeps P >= T, a dynamic one grows to T = P + L)."""
        if self.sliding_window_cache:
            return self.past_sequence_length
        return d.max_(self.total_sequence_length, self.past_sequence_length)

    def as_dict(self) -> dict[str, Any]:
        """Return the fields under ONNX Runtime's names, enums as their string values."""
        out: dict[str, Any] = {"op": self.op.value, "element_size": self.element_size}
        for name, value in vars(self).items():
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out

    @property
    def head_sink(self) -> str | None:
        """Return the head sink's kind as a `head_sink` field says it: None, "initializer" or "input"."""
        if not self.has_head_sink:
            return None
        return "input" if self.head_sink_is_input else "initializer"

    @property
    def head_sink_storage(self) -> HeadSinkStorage:
        """How XQA gets the float32 head sink: none, prepacked (a constant initializer) or
        converted into the workspace at every run (a graph input)."""
        return HeadSinkStorage.NONE if self.head_sink is None else HEAD_SINK_KINDS[self.head_sink]

    @property
    def use_smooth_softmax(self) -> bool:
        """The smooth-softmax kernels run for the attribute or a head sink."""
        return self.smooth_softmax or self.has_head_sink

    def is_first_prompt(self, d: Any) -> Any:
        """S == T: the prompt fills the cache from its start."""
        return self.sequence_length == self.total_sequence_length

    def workspace_problem(self, d: Any) -> GqaWorkspaceProblem:
        """The plain facts ORT's workspace recipes size this run from."""
        return GqaWorkspaceProblem(
            self.element_size, self.cache_element_size, self.batch_size, self.sequence_length, self.num_heads,
            self.kv_num_heads, self.head_size, self.present_capacity(d), self.kv_cache_bit_width, self.k_quantization,
            self.v_quantization, self.sliding_window_cache, self.is_first_prompt(d), self.do_rotary,
            self.is_packed_qkv, self.use_qk_norm)
