"""Where ONNX Runtime 1.31.1 picks a backend and the run then fails: the conditions, per route.

Each `Failure` is one error ORT's kernels return (or throw) after dispatch picked the route and
the workspace was allocated; nothing falls back. They are evaluated in any domain: `dispatch`
reports the first one that holds, the solver searches the box for shapes where one does
(`no_runtime_failure`, `counterexamples --kind runtime-failure`). Sources, read at ORT 1.31.1
(docs/research/ort-1.31.1-pin.md; paths under onnxruntime/contrib_ops/cuda/bert/):

- `trt_no_kernel`: the TRT fused runner's validity check passes and it has no kernel for
  (bucket, H) ("Failed to find kernel"). ORT 1.31.1 has a kernel for every shape its IsSupported
  admits, so this holds nowhere; the condition stays so that a kernel table losing an entry shows.
- `unpack_block_limit` (add_bias_transpose.cu): MultiHeadAttention's packed KV [B, L, N, 2, H] and
  packed QKV [B, S, N, 3, H] are unpacked by AddBiasTranspose formats 4 (Flash, MEA, cuDNN) and
  5 (unfused), which have no kernel for a block of (H / w) * N > 1024 threads
  (w = 4, 2 or 1 elements per access as H % 4, H % 2).
- `mea_bias_alignment` (cutlass_fmha/kernel_forward.h, check_supported): MEA's attention bias rows
  are T keys long and must be a multiple of the kernel's alignment (8 elements for fp16; 4 for
  fp32 on sm80 and newer, none on sm75); MultiHeadAttention's dispatch tests S, not T.
- `causal_mask_1d` (attention_softmax.cu, ComputeSoftmaxWithMask1D): the unfused softmax with a
  1-D key padding mask ([B] or [3B + 2]) is not implemented for causal attention over T > 1024.
- `softmax_shared_memory` (attention_softmax.cu): the unfused softmax over T > 1024 with a 2-D or
  3-D mask, or causal without a mask, launches a kernel with 4 * T + 64 bytes of shared memory and
  no opt-in, beyond the default 48 KiB from T = 12273 ("invalid argument").
- `mea_offsets_int32` (attention_impl.cu, EfficientAttention): the [3B + 2] mask's sequence starts
  are int32 and ORT refuses B * S or B * T >= 2^31.
`trt_no_kernel` is checked here for every family; each family states its own errors
(`attnws.spec.<family>.failures`): MultiHeadAttention's are the other five, PackedAttention and
PackedMultiHeadAttention check their shapes before any kernel runs and have none.
"""

from __future__ import annotations

from typing import Any

from .backends import trt
from .domain import CONCRETE
from .families import FAMILIES, family_of
from .gates import Failure, trt_flash_enabled
from .options import RuntimeConfig, TrtRunner
from .problem import Backend

NO_ROUTE = "no_route"  # the cascade ends with no backend: ORT's run fails before allocating (`dispatch.no_route`)
# The TRT runner's, every family's own (`attnws.spec.<family>.failures.KINDS`), and no route at all.
FAILURE_KINDS = ("trt_no_kernel", *(kind for family in FAMILIES for kind in family.failures.KINDS), NO_ROUTE)


def _trt_no_kernel(d: Any, p: Any, config: RuntimeConfig) -> list[Failure]:
    if config.trt_runner is not TrtRunner.AUTO:
        return []
    sm = config.device.sm
    trt_flash = trt_flash_enabled(p, config)
    missing = d.not_(trt.kernel_found(d, sm, p.qk_head_size, p.sequence_length, trt_flash))

    def message() -> str:
        bucket = trt.normalized_seq(d, sm, p.sequence_length)
        return (f"the TRT fused runner is selected (IsValid holds for the sequence bucket {bucket} on sm{sm}), but "
                f"it has no kernel for s={bucket} d={p.qk_head_size} ('Failed to find kernel')")

    return [Failure("trt_no_kernel", missing, message)]


def route_failures(d: Any, p: Any, config: RuntimeConfig, backend: Backend) -> list[Failure]:
    """Return the run-time errors the route can hit at problem p once dispatch picked it."""
    out = _trt_no_kernel(d, p, config) if backend is Backend.TRT else []
    return out + family_of(p.op).failures.route_failures(d, p, config, backend)


def possible_failures(p_max: Any, config: RuntimeConfig, backends: Any) -> list[str]:
    """Return the failure kinds some shape within the maxima of p_max (every dimension read as
    1..max, as ORT's estimator reads them) can hit on one of the routes: each condition grows
    with the dimensions, so the maximum decides it, except the bias alignment, which some T
    below the maximum always breaks, and the TRT runner's missing kernels, possible when the
    kernel table lacks a head size up to the maximum. An over-approximation: the solver decides
    per shape."""
    kinds = {f.kind for b in backends for f in route_failures(CONCRETE, p_max, config, b)
             if f.kind == "mea_bias_alignment" or (f.kind != "trt_no_kernel" and f.cond)}
    head_bound = min(p_max.qk_head_size, p_max.v_head_size)
    if (Backend.TRT in backends and config.trt_runner is TrtRunner.AUTO
            and any(h <= head_bound for h in trt.heads_without_kernels(config.device.sm))):
        kinds.add("trt_no_kernel")
    return [k for k in FAILURE_KINDS if k in kinds]
