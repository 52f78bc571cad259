"""Flash attention (`flash_attention/flash_api.cc`): where ORT runs it, and the bytes of its
softmax log-sum-exp (LSE), float32 per query row and head."""

from __future__ import annotations

from typing import Any

from ..limits import FLASH_MAX_HEAD_SIZE, HEAD_SIZE_MULTIPLE, LSE_ELEMENT_BYTES

# flash::is_supported (flash_attention/flash_api.cc @ 990ba5f0c3e0c8735fec8bf89dd11953224a9c03): compute
# capability major >= 8 since #24584 (4adef01e7, 2025-04-28), so sm90, sm100 and sm120 run Flash.
MIN_SM_MAJOR = 8

def sm_supported(sm: int) -> bool:
    """flash::is_supported's device rule: compute capability major >= 8."""
    return sm // 10 >= MIN_SM_MAJOR


def supported(d: Any, sm: int, head_size: Any) -> Any:
    """flash::is_supported with N_kv = N: sm major >= 8, H % 8 == 0, H <= 256."""
    if not sm_supported(sm):
        return False
    return d.all_(d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0, head_size <= FLASH_MAX_HEAD_SIZE)


def any_head_supported(d: Any, sm: int, head_bound: Any) -> Any:
    """flash::is_any_supported_head_size: the sm rule holds and some multiple of 8 is <= head_bound."""
    if not sm_supported(sm):
        return False
    return head_bound >= HEAD_SIZE_MULTIPLE


def softmax_lse_bytes(d: Any, p: Any) -> Any:
    """Return 4 * B * S * N: Flash's float32 softmax log-sum-exp buffer [B, N, S], in bytes."""
    return d.mul(LSE_ELEMENT_BYTES, p.batch_size, p.sequence_length, p.num_heads, what="flash LSE 4 * B * S * N")
