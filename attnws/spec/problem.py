"""What every family's problem shares: the operators, ORT's backends, the layouts of the
materialized Q/K/V, the element types and the families' folder names. Each family's own problem
is in its folder (`attnws.spec.<family>.problem`).
"""

from __future__ import annotations

import enum
from typing import Any

from .errors import InvalidArgument


# The operator families' folders (`attnws/spec/<name>/`), in the registry's order: a new family adds
# its name here, with its operators (`Op`) and any backend of its own (`Backend`) below.
# `attnws.spec.families` loads each folder; the shared records read each family's own fields from
# its `fields` module (`attnws.spec.declared`).
FAMILY_NAMES = ("packed", "mha", "gqa", "paged")


class Op(enum.Enum):
    """The operators the specification covers."""

    PA = "pa"  # com.microsoft PackedAttention
    PMHA = "pmha"  # com.microsoft PackedMultiHeadAttention
    MHA = "mha"  # com.microsoft MultiHeadAttention (its own family: attnws.spec.mha)
    GQA = "gqa"  # com.microsoft GroupQueryAttention (its own family: attnws.spec.gqa)
    PAGED = "paged"  # com.microsoft PagedAttention (its own family: attnws.spec.paged)

    @property
    def onnx_name(self) -> str:
        return {Op.PA: "PackedAttention", Op.PMHA: "PackedMultiHeadAttention", Op.MHA: "MultiHeadAttention",
                Op.GQA: "GroupQueryAttention", Op.PAGED: "PagedAttention"}[self]


class Backend(enum.Enum):
    """Attention backends, in ONNX Runtime's enumeration order (also the aggregate's order)."""

    TRT = "trt"  # TensorRT-style fused runner (FusedMHARunnerFP16v2)
    FLASH = "flash"  # Flash attention (PMHA only)
    MEA = "mea"  # CUTLASS memory-efficient attention
    UNFUSED = "unfused"  # GEMM + softmax + GEMM with two S^2 scratch regions
    TRT_CROSS = "trt_cross"  # TensorRT-style fused cross attention (MultiHeadAttention only)
    CUDNN = "cudnn"  # cuDNN SDPA (MultiHeadAttention and GroupQueryAttention)
    XQA = "xqa"  # XQA decode kernels (GroupQueryAttention; PagedAttention's paged XQA)
    XQA_SPEC = "xqa_spec_decode"  # PagedAttention's speculative-decode paged XQA (2..8 query tokens)
    PAGED_DECODE = "paged_decode"  # PagedAttention's portable split-KV paged decode kernel
    LATENT = "latent"  # PagedAttention's unfused latent (MLA) kernel


class QkvLayout(enum.Enum):
    """Layout of the materialized Q/K/V inside the attention workspace."""

    NONE = "none"  # not materialized: the backend reads the operator inputs directly
    PLANAR = "planar"  # Q, K, V one after another
    INTERLEAVED = "interleaved_tn3h"  # [T, N, 3, H] for the TRT fused runner


ELEMENT_SIZES = {"fp16": 2, "fp32": 4, "bf16": 2}  # bf16: GroupQueryAttention only (its `bf16` field)


def parse_enum(enum_type: type[enum.Enum], raw: Any, what: str) -> Any:
    """Return the member of enum_type named by raw (its value string), or raise InvalidArgument."""
    for member in enum_type:
        if raw == member.value or raw is member:
            return member
    raise InvalidArgument(f"{what} = {raw!r} is invalid; expected one of {[m.value for m in enum_type]}")
