"""The TensorRT-style fused kernels ORT ships: the fused runner (FusedMHARunnerFP16v2: XMMA below
S = 385, TRT-flash from it) and MultiHeadAttention's fused cross attention. Their kernel tables and
support predicates, kept as data (paths relative to `onnxruntime/contrib_ops/cuda/bert/`); every
predicate takes a domain so that the solver evaluates it over symbolic head sizes and sequence
lengths, while `sm` and the options are always concrete.
"""

from __future__ import annotations

from typing import Any

from ..limits import TRT_FLASH_MIN_SEQUENCE, TRT_XMMA_MAX_SEQUENCE

# FusedMHARunnerFP16v2::IsSupported, non-flash (XMMA) regime, S <= 384 (mha_runner.cu).
XMMA_HEAD_SIZES: dict[int, tuple[int, ...]] = {
    70: (64,),  # sm70 rejects H = 32
    75: (32, 64),
    80: (32, 64),
    86: (32, 64),
    89: (32, 64),
}

# has_flash_attention_kernel (tensorrt_fused_multihead_attention/flash_attention/fmha_flash_attention.h):
# TRT-flash regime, S >= 385, only when TRT flash is enabled.
_FLASH_HEADS = (16, 32, 40, 64, 80, 128, 160, 256)
FLASH_HEAD_SIZES: dict[int, tuple[int, ...]] = {
    70: (64,),
    75: _FLASH_HEADS,
    80: _FLASH_HEADS,
    86: _FLASH_HEADS,
    89: _FLASH_HEADS,
}

# The TRT runner's XMMA regime (S <= 384) normalizes the requested maximum sequence length up to a
# bucket (NormalizeSequenceLength / getSFromMaxSeqLen, tensorrt_fused_multihead_attention/mha_runner.cu):
# <= 32 -> 32 (64 on sm70), <= 64 -> 64, <= 96 -> 96, <= 128 -> 128, <= 192 -> 192 (256 on sm70),
# <= 256 -> 256, <= 384 -> 384; the flash regime keeps S as it is.
XMMA_BUCKETS: dict[int, tuple[int, ...]] = {
    70: (64, 64, 96, 128, 256, 256, 384),
    **{sm: (32, 64, 96, 128, 192, 256, 384) for sm in (75, 80, 86, 89)},
}
XMMA_BUCKET_LIMITS = (32, 64, 96, 128, 192, 256, 384)  # the upper end of each bucket, in order

# Non-causal XMMA kernels the runner can look up, per sm and head size: the sequence lengths of
# sMhaKernelMetaInfosV2 (fused_multihead_attention_v2.h @ 0b87bccca826d31ca5550db5f6fd8ceada29e6a0,
# unchanged in ORT 1.31.1 but for the causal entries #29143 removed) after loadXMMAKernels' reuse of
# the kSM_80 entries on sm86 and sm89 (fused_multihead_attention.h @ 0b87bccc). kSM_80 has d = 32
# kernels for every bucket since 44101e877 (2023-08-31), so no (sm, H) that IsSupported admits
# misses a kernel; `kernel_found` still checks, so a table without an entry would show it.
_ALL_BUCKETS = (32, 64, 96, 128, 192, 256, 384)
XMMA_KERNELS: dict[int, dict[int, tuple[int, ...]]] = {
    70: {64: (64, 96, 128, 256, 384)},
    **{sm: {32: _ALL_BUCKETS, 64: _ALL_BUCKETS} for sm in (75, 80, 86, 89)},
}

# FusedMHARunnerFP16v2::IsValid in the XMMA regime: isValid(s) is membership in the set of the
# sequence lengths of every kernel loaded for the sm, whatever its head size (fused_multihead_attention.h,
# loadXMMAKernels). ORT 1.31.1 loads non-causal kernels only (#29143 removed the causal ones).
XMMA_VALID_SEQUENCES: dict[int, tuple[int, ...]] = {
    sm: tuple(sorted({s for seqs in heads.values() for s in seqs})) for sm, heads in XMMA_KERNELS.items()
}

def xmma_supported(d: Any, sm: int, head_size: Any, seq: Any) -> Any:
    """Return whether the TRT runner's XMMA kernels support (sm, H, S): H listed for sm, S <= 384."""
    heads = XMMA_HEAD_SIZES.get(sm, ())
    if not heads:
        return False
    return d.all_(d.member(head_size, heads), seq <= TRT_XMMA_MAX_SEQUENCE)


def flash_supported(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the TRT-flash kernels support (sm, H, S): enabled, S >= 385, H listed for sm."""
    heads = FLASH_HEAD_SIZES.get(sm, ())
    if not trt_flash_enabled or not heads:
        return False
    return d.all_(seq >= TRT_FLASH_MIN_SEQUENCE, d.member(head_size, heads))


def supported(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """FusedMHARunnerFP16v2::IsSupported for the non-causal case."""
    return d.any_(
        flash_supported(d, sm, head_size, seq, trt_flash_enabled),
        xmma_supported(d, sm, head_size, seq),
    )


def any_head_supported(d: Any, sm: int, head_bound: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """IsAnySupportedHeadSize: some head size 1 <= h <= head_bound is supported at S."""
    xmma = XMMA_HEAD_SIZES.get(sm, ())
    flash = FLASH_HEAD_SIZES.get(sm, ())
    return d.any_(
        d.all_(trt_flash_enabled, seq >= TRT_FLASH_MIN_SEQUENCE, head_bound >= min(flash)) if flash else False,
        d.all_(seq <= TRT_XMMA_MAX_SEQUENCE, head_bound >= min(xmma)) if xmma else False,
    )


def normalized_seq(d: Any, sm: int, seq: Any) -> Any:
    """Return the XMMA bucket the runner normalizes S <= 384 to (S itself above 384)."""
    buckets = XMMA_BUCKETS.get(sm, _ALL_BUCKETS)
    value: Any = seq
    for limit, bucket in reversed(list(zip(XMMA_BUCKET_LIMITS, buckets))):
        value = d.ite(seq <= limit, bucket, value)
    return value


def flash_regime(seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the runner uses its flash kernels (TRT flash enabled and S >= 385)."""
    return seq >= TRT_FLASH_MIN_SEQUENCE if trt_flash_enabled else False


def runner_valid(d: Any, sm: int, seq: Any, trt_flash_enabled: bool) -> Any:
    """FusedMHARunnerFP16v2::IsValid(normalized S) once IsSupported holds (the 'auto' runner):
    in the flash regime, a flash kernel is loaded for the sm; else the bucket is one of the
    sm's valid sequence lengths (any head size)."""
    flash = bool(FLASH_HEAD_SIZES.get(sm))
    valid = XMMA_VALID_SEQUENCES.get(sm, ())
    return d.ite(flash_regime(seq, trt_flash_enabled), flash,
                 lambda: d.member(normalized_seq(d, sm, seq), valid))


def kernel_found(d: Any, sm: int, head_size: Any, seq: Any, trt_flash_enabled: bool) -> Any:
    """Return whether the runner finds the non-causal kernel it looks up at run time: in the
    flash regime always (has_flash_attention_kernel covers every supported H); in the XMMA
    regime, a kernel for (normalized S, H) on the sm ('Failed to find kernel' otherwise)."""
    kernels = XMMA_KERNELS.get(sm, {})

    def xmma() -> Any:
        bucket = normalized_seq(d, sm, seq)
        return d.any_(*(d.all_(head_size == h, d.member(bucket, seqs)) for h, seqs in kernels.items()))

    return d.ite(flash_regime(seq, trt_flash_enabled), True, xmma)


def heads_without_kernels(sm: int) -> tuple[int, ...]:
    """Return the XMMA head sizes IsSupported admits on the sm but no kernel serves at any bucket."""
    return tuple(h for h in XMMA_HEAD_SIZES.get(sm, ()) if h not in XMMA_KERNELS.get(sm, {}))


# has_fused_cross_attention_kernel (cross_attention/fmha_cross_attention.h): the TRT fused cross
# attention kernels of MultiHeadAttention. The kernel loaded for the sm has no sequence limit
# (isValid(S) only says whether it loaded), so attnws takes it as valid wherever it exists.
CROSS_SMS = (75, 80, 86, 89)
CROSS_MAX_KV_SEQUENCE = 128


def cross_max_head_size(sm: int) -> int:
    """The largest head size of the cross-attention kernels on the sm (64 on sm75, else 256)."""
    return 64 if sm == 75 else 256


def cross_supported(d: Any, sm: int, head_size: Any, kv_sequence_length: Any) -> Any:
    """has_fused_cross_attention_kernel: sm in {75, 80, 86, 89}, 0 < H <= max, L <= 128."""
    if sm not in CROSS_SMS:
        return False
    return d.all_(head_size > 0, head_size <= cross_max_head_size(sm),
                  kv_sequence_length <= CROSS_MAX_KV_SEQUENCE)
