"""CUTLASS memory-efficient attention (`cutlass_fmha/`): where ORT runs it, and its float32 output
accumulator, allocated in the workspace when the V head size exceeds 128 and the element type is
not fp32 (MemoryEfficientAttentionParams::need_workspace)."""

from __future__ import annotations

from typing import Any

from ..limits import HEAD_SIZE_MULTIPLE, LSE_ELEMENT_BYTES, MEA_ACCUMULATOR_MIN_V_HEAD, MEA_MAX_HEAD_SIZE

# has_memory_efficient_attention (cutlass_fmha/memory_efficient_attention.h): minimum sm per dtype.
MIN_SM_FP16 = 53
MIN_SM_FP32 = 50
MIN_SM_BF16 = 80  # bf16 kernels are built for sm80 and later (GroupQueryAttention runs bf16)


def sm_supported(sm: int, is_half: bool, is_bf16: bool = False) -> bool:
    """has_memory_efficient_attention's device rule (bf16 is not registered for PA / PMHA)."""
    return sm >= (MIN_SM_BF16 if is_bf16 else MIN_SM_FP16 if is_half else MIN_SM_FP32)


def supported(d: Any, sm: int, is_half: bool, head_size: Any, v_head_size: Any, is_bf16: bool = False) -> Any:
    """has_memory_efficient_attention: sm rule, H and Hv multiples of 8 and <= 1024."""
    if not sm_supported(sm, is_half, is_bf16):
        return False
    return d.all_(
        d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0,
        d.mod(v_head_size, HEAD_SIZE_MULTIPLE) == 0,
        head_size <= MEA_MAX_HEAD_SIZE,
        v_head_size <= MEA_MAX_HEAD_SIZE,
    )


def any_head_supported(d: Any, sm: int, is_half: bool, head_bound: Any, v_head_bound: Any,
                       is_bf16: bool = False) -> Any:
    """has_memory_efficient_attention_for_head_size_bounds: some (h, hv) <= bounds are supported."""
    if not sm_supported(sm, is_half, is_bf16):
        return False
    return d.all_(head_bound >= HEAD_SIZE_MULTIPLE, v_head_bound >= HEAD_SIZE_MULTIPLE)


def accumulator_bytes(d: Any, p: Any) -> Any:
    """Return MEA's float32 output accumulator [B, S, N, Hv]: 4 * B * S * N * Hv bytes when
    Hv > 128 and the element type is not fp32, else 0 (`p`: any family's problem)."""
    if p.element_size == LSE_ELEMENT_BYTES:
        return 0
    return d.ite(
        p.v_head_size > MEA_ACCUMULATOR_MIN_V_HEAD,
        lambda: d.mul(LSE_ELEMENT_BYTES, p.batch_size, p.sequence_length, p.num_heads, p.v_head_size,
                      what="mea accumulator 4 * B * S * N * Hv"),
        0,
    )
