"""Where MultiHeadAttention's routes fail at run time once ORT picked them (ORT 1.31.1; the
sources are listed in `attnws.spec.runtime_failures`): the packed K/V unpacking block limit,
MEA's attention-bias alignment and int32 sequence starts, the unfused softmax's causal 1-D mask
and shared-memory limits.
"""

from __future__ import annotations

from typing import Any

from ..gates import Failure
from ..options import RuntimeConfig
from ..problem import Backend, Op
from .footprint import width_by
from .problem import MaskType, MhaFormat, MhaProblem

# The run-time failure kinds of this family's routes (`attnws.spec.runtime_failures` lists them).
KINDS = ("unpack_block_limit", "mea_bias_alignment", "causal_mask_1d", "softmax_shared_memory", "mea_offsets_int32")
# One failing shape per kind beside a running neighbour, for `attnws ort-failures` (each dispatched when
# the catalogue is shown): (kind, where, fails when, failing geometry fields, running ones); the fields
# are `Geometry`'s beyond B = S = N = 1, H = 64, fp16 (`element_size` to change it).
EXAMPLES = (
    ("unpack_block_limit", "MultiHeadAttention, packed KV or packed QKV, on Flash, MEA, cuDNN or unfused",
     "(H / w) * N > 1024 threads per block (w = 4 when H % 4 == 0, else 2 when even, else 1)",
     {"kv_seq": 1, "heads": 33, "head_size": 128, "mha_format": MhaFormat.PACKED_KV},
     {"kv_seq": 1, "heads": 32, "head_size": 128, "mha_format": MhaFormat.PACKED_KV}),
    ("mea_bias_alignment", "MultiHeadAttention with an attention bias, on MEA",
     "T = P + L not a multiple of 8 (fp16) or 4 (fp32, sm80 and newer); dispatch tests S only",
     {"seq": 8, "kv_seq": 9, "attn_bias": True}, {"seq": 8, "kv_seq": 8, "attn_bias": True}),
    ("causal_mask_1d", "MultiHeadAttention, unidirectional, [B] or [3B + 2] mask, on unfused", "T > 1024",
     {"kv_seq": 1025, "mask": MaskType.KEY_SEQ_LEN, "unidirectional": True},
     {"kv_seq": 1024, "mask": MaskType.KEY_SEQ_LEN, "unidirectional": True}),
    ("softmax_shared_memory", "MultiHeadAttention, [B, T] or [B, S, T] mask (or causal without one), on unfused",
     "T >= 12273: 4 * T + 64 bytes of shared memory exceed the default 48 KiB",
     {"element_size": 4, "kv_seq": 12273, "mask": MaskType.KEY_PADDING},
     {"element_size": 4, "kv_seq": 12272, "mask": MaskType.KEY_PADDING}),
    ("mea_offsets_int32", "MultiHeadAttention, [3B + 2] mask, on MEA", "B * S or B * T >= 2^31 (int32 sequence starts)",
     {"batch": 65535, "seq": 32769, "kv_seq": 1, "mask": MaskType.KEY_SEQ_LEN_START},
     {"batch": 65535, "seq": 32768, "kv_seq": 1, "mask": MaskType.KEY_SEQ_LEN_START}),
)
# The form the TRT fused runner serves, swept for a missing kernel (`attnws ort-failures`).
TRT_FORMS = (("MultiHeadAttention, separate Q/K/V, [B] key-length mask", Op.MHA,
              lambda seq: {"mask": MaskType.KEY_SEQ_LEN}),)
MAX_THREADS_PER_BLOCK = 1024  # cudaDeviceProp::maxThreadsPerBlock on every GPU ORT 1.31.1 serves


CAUSAL_MASK_1D_MAX_KEYS = 1024  # ComputeSoftmaxWithMask1D: causal needs T <= 1024


SOFTMAX_LARGE_MIN_KEYS = 12273  # 4 * T + 64 > 48 KiB of default dynamic shared memory


MEA_OFFSETS_LIMIT = 2**31  # int32 sequence starts of the [3B + 2] mask


def mea_bias_alignment(p: Any, config: RuntimeConfig) -> int:
    """Return the elements MEA's attention-bias rows must be a multiple of (1: no constraint)."""
    if p.element_size == 2:
        return 8
    return 4 if config.device.sm >= 80 else 1


def route_failures(d: Any, p: MhaProblem, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return MultiHeadAttention's run-time errors on the route at problem p (besides the TRT
    runner's missing kernel, which `attnws.spec.runtime_failures` checks for every family)."""
    h, n, s, t, b = p.qk_head_size, p.num_heads, p.sequence_length, p.total_sequence_length, p.batch_size
    out: list[Failure] = []
    packed = p.qkv_format in (MhaFormat.PACKED_KV, MhaFormat.PACKED_QKV)
    if packed and backend in (Backend.FLASH, Backend.MEA, Backend.CUDNN, Backend.UNFUSED):
        threads = d.mul(d.div(h, width_by(d, h)), n, what="unpack block (H / w) * N")
        fmt = 5 if backend is Backend.UNFUSED else 4
        out.append(Failure("unpack_block_limit", threads > MAX_THREADS_PER_BLOCK, lambda: (
            f"AddBiasTranspose (format {fmt}) not implemented for hidden_size > max_threads_per_block: unpacking "
            f"{p.qkv_format.value} needs (H / w) * N = {threads} > {MAX_THREADS_PER_BLOCK} threads per block")))
    if backend is Backend.MEA and p.has_attention_bias:
        align = mea_bias_alignment(p, config)
        if align > 1:
            out.append(Failure("mea_bias_alignment", d.mod(t, align) != 0, lambda: (
                f"MEA's attention bias rows hold T = {t} keys, not a multiple of {align} "
                "('p.bias_strideM % kAlignmentQ == 0' failed: attn_bias is not correctly aligned)")))
    if backend is Backend.MEA and p.mask_rank == 1:
        large = d.any_(d.mul(b, s, what="B * S") >= MEA_OFFSETS_LIMIT, d.mul(b, t, what="B * T") >= MEA_OFFSETS_LIMIT)
        out.append(Failure("mea_offsets_int32", d.all_(p.mask_is_start, large), lambda: (
            f"FMHA sequence start offsets exceed INT32_MAX: B * S = {b * s} or B * T = {b * t} >= 2^31")))
    if backend is Backend.UNFUSED and p.is_unidirectional and p.mask_rank == 1:
        out.append(Failure("causal_mask_1d", t > CAUSAL_MASK_1D_MAX_KEYS, lambda: (
            f"ComputeSoftmaxWithMask1D does not support causal with total sequence length > "
            f"{CAUSAL_MASK_1D_MAX_KEYS}: T = {t}")))
    if backend is Backend.UNFUSED and (p.mask_rank in (2, 3) or (p.mask_rank == 0 and p.is_unidirectional)):
        out.append(Failure("softmax_shared_memory", t >= SOFTMAX_LARGE_MIN_KEYS, lambda: (
            f"the unfused softmax over T = {t} keys launches with 4 * T + 64 = {4 * t + 64} bytes of shared memory, "
            "beyond the default 48 KiB ('CUDA error cudaErrorInvalidValue: invalid argument')")))
    return out
