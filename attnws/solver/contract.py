"""What each backend's kernels touch, stated independently of the recipes (a separate encoding).

The recipes say how many bytes ORT reserves; this module says, from ORT's kernel sources, what
the kernels read and write and which int32 arguments they form. The `kernel_contract` theorem
proves the two agree: every view is at least what its kernel touches, backend regions are
exactly the kernel's buffer (no under- and no over-reservation), and the int32 kernel arguments
fit. Works on ints and on Z3 terms alike (plain operators; `choose` for the one data-dependent
choice), so the same function replays a counterexample concretely.
"""

from __future__ import annotations

from typing import Any

from attnws.spec.layout import Recipe
from attnws.spec.limits import INT32_MAX
from attnws.spec.problem import Backend, Problem, QkvLayout

from .domain import choose

FLOAT32_BYTES = 4  # softmax LSE [B, N, S] and MEA's output accumulator are float32
MEA_ACCUMULATOR_ABOVE_V_HEAD = 128  # MemoryEfficientAttentionParams::need_workspace: Hv > 128, not fp32
SCRATCH_SLACK = 256  # an unfused scratch region is its raw size rounded up to 256 bytes


def kernel_needs(p: Problem, r: Recipe) -> list[tuple[str, Any]]:
    """Return (name, condition) pairs that must hold for the recipe to serve its kernels."""
    es, b, s, n = p.element_size, p.batch_size, p.sequence_length, p.num_heads
    h, hv, t = p.qk_head_size, p.v_head_size, p.token_count
    needs: list[tuple[str, Any]] = []
    if r.qkv_layout is QkvLayout.PLANAR:
        tokens = b * s if r.backend is Backend.UNFUSED else t  # unfused reads padded B*S tokens
        needs += [
            ("Q view holds es*tokens*N*H", r.q_bytes >= es * tokens * n * h),
            ("K view holds es*tokens*N*H", r.k_bytes >= es * tokens * n * h),
            ("V view holds es*tokens*N*Hv", r.v_bytes >= es * tokens * n * hv),
        ]
    elif r.qkv_layout is QkvLayout.INTERLEAVED:
        needs.append(("interleaved view holds es*T*N*(2H+Hv)", r.interleaved_qkv_bytes >= es * t * n * (2 * h + hv)))
    region = r.backend_workspace_bytes
    if r.backend is Backend.FLASH:
        needs.append(("flash LSE is float32 [B, N, S]", region == FLOAT32_BYTES * b * s * n))
    elif r.backend is Backend.MEA:
        accumulator = FLOAT32_BYTES * b * s * n * hv if es == 2 else 0
        needs.append(("mea accumulator iff fp16 and Hv > 128",
                      region == choose(hv > MEA_ACCUMULATOR_ABOVE_V_HEAD, accumulator, 0)))
    elif r.backend is Backend.UNFUSED:
        raw = es * b * n * s * s
        needs += [
            ("unfused scratch holds es*B*N*S*S", region >= raw),
            ("unfused scratch is at most 255 bytes of padding", region < raw + SCRATCH_SLACK),
            ("unfused int32 argument S*S", s * s <= INT32_MAX),
            ("unfused int32 argument B*N*S", b * n * s <= INT32_MAX),
        ]
    return needs
