"""Backend capability tables and support predicates, kept as data in one place.

Each table names the upstream source it restates (paths relative to
`onnxruntime/contrib_ops/cuda/bert/`). Predicates take a domain so that the solver evaluates them
over symbolic head sizes and sequence lengths; `sm` and options are always concrete.
"""

from __future__ import annotations

from typing import Any

from .limits import (
    FLASH_MAX_HEAD_SIZE,
    HEAD_SIZE_MULTIPLE,
    MEA_MAX_HEAD_SIZE,
    TRT_FLASH_MIN_SEQUENCE,
    TRT_XMMA_MAX_SEQUENCE,
)

# FusedMHARunnerFP16v2::IsSupported, non-flash (XMMA) regime, S <= 384 (mha_runner.cu).
TRT_XMMA_HEAD_SIZES: dict[int, tuple[int, ...]] = {
    70: (64,),  # sm70 rejects H = 32
    75: (32, 64),
    80: (32, 64),
    86: (32, 64),
    89: (32, 64),
}

# has_flash_attention_kernel (tensorrt_fused_multihead_attention/flash_attention/fmha_flash_attention.h):
# TRT-flash regime, S >= 385, only when TRT flash is enabled.
_TRT_FLASH_HEADS = (16, 32, 40, 64, 80, 128, 160, 256)
TRT_FLASH_HEAD_SIZES: dict[int, tuple[int, ...]] = {
    70: (64,),
    75: _TRT_FLASH_HEADS,
    80: _TRT_FLASH_HEADS,
    86: _TRT_FLASH_HEADS,
    89: _TRT_FLASH_HEADS,
}

# FusedMHARunnerFP16v2::IsValid: SMs whose XMMA (S <= 384) regime loads no cubin although
# IsSupported admits it. Validity is keyed on the normalized sequence length only
# (fused_multihead_attention_v2.h kernel table; fact sheet section 11, item 4).
TRT_XMMA_SMS_WITHOUT_CUBINS: frozenset[int] = frozenset({89})

# flash::is_supported (flash_attention/flash_api.h): compute capability major >= 8.
FLASH_MIN_SM_MAJOR = 8

# has_memory_efficient_attention (cutlass_fmha/memory_efficient_attention.h): minimum sm per dtype.
MEA_MIN_SM_FP16 = 53
MEA_MIN_SM_FP32 = 50


def trt_xmma_supported(d: Any, sm: int, head_size: Any, seq: Any) -> Any:
    """Return whether the TRT runner's XMMA kernels support (sm, H, S): H listed for sm, S <= 384."""
    heads = TRT_XMMA_HEAD_SIZES.get(sm, ())
    if not heads:
        return False
    return d.all_(d.member(head_size, heads), seq <= TRT_XMMA_MAX_SEQUENCE)


def trt_flash_supported(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the TRT-flash kernels support (sm, H, S): enabled, S >= 385, H listed for sm."""
    heads = TRT_FLASH_HEAD_SIZES.get(sm, ())
    if not trt_flash_enabled or not heads:
        return False
    return d.all_(seq >= TRT_FLASH_MIN_SEQUENCE, d.member(head_size, heads))


def trt_supported(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """FusedMHARunnerFP16v2::IsSupported for the non-causal case."""
    return d.any_(
        trt_flash_supported(d, sm, head_size, seq, trt_flash_enabled),
        trt_xmma_supported(d, sm, head_size, seq),
    )


def trt_any_head_supported(d: Any, sm: int, head_bound: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """IsAnySupportedHeadSize: some head size 1 <= h <= head_bound is supported at S."""
    xmma = TRT_XMMA_HEAD_SIZES.get(sm, ())
    flash = TRT_FLASH_HEAD_SIZES.get(sm, ())
    return d.any_(
        d.all_(trt_flash_enabled, seq >= TRT_FLASH_MIN_SEQUENCE, head_bound >= min(flash)) if flash else False,
        d.all_(seq <= TRT_XMMA_MAX_SEQUENCE, head_bound >= min(xmma)) if xmma else False,
    )


def trt_runner_has_cubin(d: Any, sm: int, seq: Any) -> Any:
    """Return whether IsValid finds a kernel once IsSupported holds (the 'auto' runner model)."""
    if sm not in TRT_XMMA_SMS_WITHOUT_CUBINS:
        return True
    return seq >= TRT_FLASH_MIN_SEQUENCE


def flash_sm_supported(sm: int) -> bool:
    """flash::is_supported's device rule: compute capability major >= 8."""
    return sm // 10 >= FLASH_MIN_SM_MAJOR


def flash_supported(d: Any, sm: int, head_size: Any) -> Any:
    """flash::is_supported with N_kv = N: sm major >= 8, H % 8 == 0, H <= 256."""
    if not flash_sm_supported(sm):
        return False
    return d.all_(d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0, head_size <= FLASH_MAX_HEAD_SIZE)


def flash_any_head_supported(d: Any, sm: int, head_bound: Any) -> Any:
    """flash::is_any_supported_head_size: the sm rule holds and some multiple of 8 is <= head_bound."""
    if not flash_sm_supported(sm):
        return False
    return head_bound >= HEAD_SIZE_MULTIPLE


def mea_sm_supported(sm: int, is_half: bool) -> bool:
    """has_memory_efficient_attention's device rule (bf16 is not registered for PA / PMHA)."""
    return sm >= (MEA_MIN_SM_FP16 if is_half else MEA_MIN_SM_FP32)


def mea_supported(d: Any, sm: int, is_half: bool, head_size: Any, v_head_size: Any) -> Any:
    """has_memory_efficient_attention: sm rule, H and Hv multiples of 8 and <= 1024."""
    if not mea_sm_supported(sm, is_half):
        return False
    return d.all_(
        d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0,
        d.mod(v_head_size, HEAD_SIZE_MULTIPLE) == 0,
        head_size <= MEA_MAX_HEAD_SIZE,
        v_head_size <= MEA_MAX_HEAD_SIZE,
    )


def mea_any_head_supported(d: Any, sm: int, is_half: bool, head_bound: Any, v_head_bound: Any) -> Any:
    """has_memory_efficient_attention_for_head_size_bounds: some (h, hv) <= bounds are supported."""
    if not mea_sm_supported(sm, is_half):
        return False
    return d.all_(head_bound >= HEAD_SIZE_MULTIPLE, v_head_bound >= HEAD_SIZE_MULTIPLE)
