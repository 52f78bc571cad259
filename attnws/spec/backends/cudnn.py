"""cuDNN's flash attention (`cudnn_fmha/cudnn_flash_attention.cc`, MultiHeadAttention only, off
unless enabled): where ORT runs it. Its own workspace is the cuDNN frontend's, outside ORT's."""

from __future__ import annotations

from typing import Any

from ..limits import HEAD_SIZE_MULTIPLE

# cudnn_sdpa::is_supported (cudnn_fmha/cudnn_flash_attention.cu), the non-causal rules: compute
# capability major >= 8, both head sizes multiples of 8 and <= 256.
MIN_SM_MAJOR = 8
MAX_HEAD_SIZE = 256


def supported(d: Any, sm: int, head_size: Any, v_head_size: Any) -> Any:
    """cudnn_sdpa::is_supported for non-causal attention with N_kv = N."""
    if sm // 10 < MIN_SM_MAJOR:
        return False
    return d.all_(d.mod(head_size, HEAD_SIZE_MULTIPLE) == 0, d.mod(v_head_size, HEAD_SIZE_MULTIPLE) == 0,
                  head_size <= MAX_HEAD_SIZE, v_head_size <= MAX_HEAD_SIZE)
