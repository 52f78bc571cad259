"""Numeric limits and thresholds of the CUDA ABI and of ONNX Runtime, written as formula and value.

Every constant names where ONNX Runtime takes it from (paths relative to
`onnxruntime/contrib_ops/cuda/bert/`), so that a correction is a one-line change.
"""

from __future__ import annotations

from .units import in_range

SIZE_MAX = 2**64 - 1  # size_t on every CUDA host ONNX Runtime supports
INT32_MAX = 2**31 - 1  # int32 CUDA kernel arguments and GEMM dimensions
INT64_MAX = 2**63 - 1  # int64 strides (CUTLASS MEA batch strides)

WORKSPACE_ALIGNMENT = 256  # kPackedAttentionWorkspaceAlignment, packed_attention_workspace.h
GRID_DIM_YZ_MAX = 2**16 - 1  # CUDA gridDim.y / gridDim.z limit, 65535

FLASH_SEQUENCE_ROUNDING = 128  # Flash rounds S up to a multiple of 128 (recipe check S <= INT32_MAX - 127)
MEA_MAX_QUERIES_PER_BLOCK = 64  # fmha_launch_template.h DispatchBlockSize: S + 63 must fit int32
MEA_LSE_ALIGNMENT = 32  # AttentionKernel::kAlignLSE: S + 31 must fit int32
MEA_ACCUMULATOR_MIN_V_HEAD = 128  # MemoryEfficientAttentionParams::need_workspace: Hv > 128 and not fp32
MEA_MAX_HEAD_SIZE = 1024  # kEfficientAttentionMaxHeadSize, cutlass_fmha/memory_efficient_attention.h
FLASH_MAX_HEAD_SIZE = 256  # flash_api.cc is_supported: H <= 256
HEAD_SIZE_MULTIPLE = 8  # Flash and MEA: head sizes must be multiples of 8
LSE_ELEMENT_BYTES = 4  # softmax LSE and MEA accumulator are float32 regardless of dtype

TRT_FLASH_MIN_SEQUENCE = 385  # kMinSequenceLengthFlashAttention, tensorrt_fused_multihead_attention/mha_runner.h
TRT_XMMA_MAX_SEQUENCE = 384  # FusedMHARunnerFP16v2::IsSupported non-flash regime

DEFAULT_MIN_SEQ_FLASH_PACKED_QKV = 513  # attention_kernel_options.cc, sdpa_kernel == 0
DEFAULT_MIN_SEQ_MEA_FP32 = 256  # attention_kernel_options.cc, sdpa_kernel == 0
MAX_THREADS_PER_BLOCK = 1024  # cudaDeviceProp::maxThreadsPerBlock on every CUDA GPU ORT supports (MHA CheckInputs bound on N)

# Why GroupQueryAttention's session option (--max-total-seq, in every command that takes it) stops
# at INT32_MAX: ORT reads an int64, but the CUDA kernel's total sequence length T is an int32.
MAX_TOTAL_SEQ_WHY = ("ORT's session option ep.cuda.gqa_workspace_max_total_sequence_length is an int64, but the CUDA "
                     "kernel's total sequence length T is an int32; 0 leaves it unset")


def checked_max_total_seq(value: int) -> int:
    """Return --max-total-seq's value inside its domain 0..INT32_MAX (0: unset), else raise
    UsageError naming the flag and why (MAX_TOTAL_SEQ_WHY): one check for every command."""
    return in_range(value, "--max-total-seq", 0, INT32_MAX, MAX_TOTAL_SEQ_WHY)
