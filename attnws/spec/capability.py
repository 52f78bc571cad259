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

# The compute capabilities attnws models: those ORT 1.31.1's CUDA 13 wheel carries kernels for. Its
# libonnxruntime_providers_cuda.so holds 2,058 cubins, for sm75, sm80, sm86, sm89, sm90 and sm120,
# and no PTX, so on sm70 (CUDA 13 dropped Volta) and sm100 (B200) its kernels cannot launch. The
# TRT fused and cross-attention kernels exist for sm75 to sm89 (their tables below also keep the
# source's sm70 rows); sm90 (H100, H200) and sm120 (RTX 50xx) run Flash, MEA, cuDNN and unfused.
KNOWN_SMS = (75, 80, 86, 89, 90, 120)

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

# The TRT runner's XMMA regime (S <= 384) normalizes the requested maximum sequence length up to a
# bucket (NormalizeSequenceLength / getSFromMaxSeqLen, tensorrt_fused_multihead_attention/mha_runner.cu):
# <= 32 -> 32 (64 on sm70), <= 64 -> 64, <= 96 -> 96, <= 128 -> 128, <= 192 -> 192 (256 on sm70),
# <= 256 -> 256, <= 384 -> 384; the flash regime keeps S as it is.
TRT_XMMA_BUCKETS: dict[int, tuple[int, ...]] = {
    70: (64, 64, 96, 128, 256, 256, 384),
    **{sm: (32, 64, 96, 128, 192, 256, 384) for sm in (75, 80, 86, 89)},
}
TRT_XMMA_BUCKET_LIMITS = (32, 64, 96, 128, 192, 256, 384)  # the upper end of each bucket, in order

# Non-causal XMMA kernels the runner can look up, per sm and head size: the sequence lengths of
# sMhaKernelMetaInfosV2 (fused_multihead_attention_v2.h @ 0b87bccca826d31ca5550db5f6fd8ceada29e6a0,
# unchanged in ORT 1.31.1 but for the causal entries #29143 removed) after loadXMMAKernels' reuse of
# the kSM_80 entries on sm86 and sm89 (fused_multihead_attention.h @ 0b87bccc). kSM_80 has d = 32
# kernels for every bucket since 44101e877 (2023-08-31), so no (sm, H) that IsSupported admits
# misses a kernel; `trt_kernel_found` still checks, so a table without an entry would show it.
_ALL_BUCKETS = (32, 64, 96, 128, 192, 256, 384)
TRT_XMMA_KERNELS: dict[int, dict[int, tuple[int, ...]]] = {
    70: {64: (64, 96, 128, 256, 384)},
    **{sm: {32: _ALL_BUCKETS, 64: _ALL_BUCKETS} for sm in (75, 80, 86, 89)},
}

# FusedMHARunnerFP16v2::IsValid in the XMMA regime: isValid(s) is membership in the set of the
# sequence lengths of every kernel loaded for the sm, whatever its head size (fused_multihead_attention.h,
# loadXMMAKernels). ORT 1.31.1 loads non-causal kernels only (#29143 removed the causal ones).
TRT_XMMA_VALID_SEQUENCES: dict[int, tuple[int, ...]] = {
    sm: tuple(sorted({s for seqs in heads.values() for s in seqs})) for sm, heads in TRT_XMMA_KERNELS.items()
}

# flash::is_supported (flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03): compute
# capability major >= 8 since #24584 (4adef01e7, 2025-04-28), so sm90, sm100 and sm120 run Flash.
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


def trt_normalized_seq(d: Any, sm: int, seq: Any) -> Any:
    """Return the XMMA bucket the runner normalizes S <= 384 to (S itself above 384)."""
    buckets = TRT_XMMA_BUCKETS.get(sm, _ALL_BUCKETS)
    value: Any = seq
    for limit, bucket in reversed(list(zip(TRT_XMMA_BUCKET_LIMITS, buckets))):
        value = d.ite(seq <= limit, bucket, value)
    return value


def trt_flash_regime(seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the runner uses its flash kernels (TRT flash enabled and S >= 385)."""
    return seq >= TRT_FLASH_MIN_SEQUENCE if trt_flash_enabled else False


def trt_runner_valid(d: Any, sm: int, seq: Any, trt_flash_enabled: bool) -> Any:
    """FusedMHARunnerFP16v2::IsValid(normalized S) once IsSupported holds (the 'auto' runner):
    in the flash regime, a flash kernel is loaded for the sm; else the bucket is one of the
    sm's valid sequence lengths (any head size)."""
    flash = bool(TRT_FLASH_HEAD_SIZES.get(sm))
    valid = TRT_XMMA_VALID_SEQUENCES.get(sm, ())
    return d.ite(trt_flash_regime(seq, trt_flash_enabled), flash,
                 lambda: d.member(trt_normalized_seq(d, sm, seq), valid))


def trt_kernel_found(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the runner finds the non-causal kernel it looks up at run time: in the
    flash regime always (has_flash_attention_kernel covers every supported H); in the XMMA
    regime, a kernel for (normalized S, H) on the sm ('Failed to find kernel' otherwise)."""
    kernels = TRT_XMMA_KERNELS.get(sm, {})

    def xmma() -> Any:
        bucket = trt_normalized_seq(d, sm, seq)
        return d.any_(*(d.all_(head_size == h, d.member(bucket, seqs)) for h, seqs in kernels.items()))

    return d.ite(trt_flash_regime(seq, trt_flash_enabled), True, xmma)


def trt_heads_without_kernels(sm: int) -> tuple[int, ...]:
    """Return the XMMA head sizes IsSupported admits on the sm but no kernel serves at any bucket."""
    return tuple(h for h in TRT_XMMA_HEAD_SIZES.get(sm, ()) if h not in TRT_XMMA_KERNELS.get(sm, {}))


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


# has_fused_cross_attention_kernel (cross_attention/fmha_cross_attention.h): the TRT fused cross
# attention kernels of MultiHeadAttention. The kernel loaded for the sm has no sequence limit
# (isValid(S) only says whether it loaded), so attnws takes it as valid wherever it exists.
TRT_CROSS_SMS = (75, 80, 86, 89)
TRT_CROSS_MAX_KV_SEQUENCE = 128


def trt_cross_max_head_size(sm: int) -> int:
    """The largest head size of the cross-attention kernels on the sm (64 on sm75, else 256)."""
    return 64 if sm == 75 else 256


def trt_cross_supported(d: Any, sm: int, head_size: Any, kv_sequence_length: Any) -> Any:
    """has_fused_cross_attention_kernel: sm in {75, 80, 86, 89}, 0 < H <= max, L <= 128."""
    if sm not in TRT_CROSS_SMS:
        return False
    return d.all_(head_size > 0, head_size <= trt_cross_max_head_size(sm),
                  kv_sequence_length <= TRT_CROSS_MAX_KV_SEQUENCE)


# cudnn_sdpa::is_supported (cudnn_fmha/cudnn_flash_attention.cu), the non-causal rules: compute
# capability major >= 8, both head sizes multiples of 8 and <= 256.
CUDNN_MIN_SM_MAJOR = 8
CUDNN_MAX_HEAD_SIZE = 256


def cudnn_supported(d: Any, sm: int, head_size: Any, v_head_size: Any) -> Any:
    """cudnn_sdpa::is_supported for non-causal attention with N_kv = N."""
    if sm // 10 < CUDNN_MIN_SM_MAJOR:
        return False
    return d.all_(d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0, d.mod(v_head_size, HEAD_SIZE_MULTIPLE) == 0,
                  head_size <= CUDNN_MAX_HEAD_SIZE, v_head_size <= CUDNN_MAX_HEAD_SIZE)
