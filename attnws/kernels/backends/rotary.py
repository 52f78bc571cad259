"""Rotary embedding's device function, shared by the families whose prologues rotate Q and K
(GroupQueryAttention's UnpackRoPEAppend, PagedAttention's QkNormRotaryTNH).

Rotary embedding over the whole head (rotary_dim = H), from cos / sin caches [max_pos, H / 2]
(flat): non-interleaved pairs (i, i + H / 2), interleaved pairs (2i, 2i + 1), each rotated by
angle i at the token's position: (x0, x1) -> (x0 cos - x1 sin, x1 cos + x0 sin). Element type in,
float32 arithmetic and result.
"""

from __future__ import annotations

from numba import cuda, float32


@cuda.jit(device=True)
def rotated_element(src, at, h, half, position, cos, sin, interleaved):
    """Return element h of the head at src[at:] rotated at `position` (src[at + h] without caches)."""
    x = float32(src[at + h])
    if cos is None:
        return x
    if interleaved:
        i = h // 2
        partner = float32(src[at + (h ^ 1)])
        sign = float32(-1.0) if h % 2 == 0 else float32(1.0)
    else:
        i = h % half
        partner = float32(src[at + h + half]) if h < half else float32(src[at + h - half])
        sign = float32(-1.0) if h < half else float32(1.0)
    return x * float32(cos[position * half + i]) + sign * partner * float32(sin[position * half + i])
