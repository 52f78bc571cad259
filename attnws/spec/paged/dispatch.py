"""PagedAttention's backend selection (`paged_attention.cc` ComputeInternal, ORT 1.31.1), as gates.

No 1.31.1 copy of the file is stored: `docs/research/paged-workspace.md` §2 rebuilds the selection
from the fork copy ykhrustalev f5c8354f (its texts in the 1.31.1 binary; constants decoded in the
binary where marked) and #32493's cuDNN tier (review threads and the binary's call sites). As a
cascade, in the order the gates decide:

1. latent: the layout is LATENT (the unfused MLA kernel is then the only backend);
2. XQA: the paged decode kernel is chosen and XQA runs in it: T == B, one query token, a cache
   XQA takes (int8 / fp8, or native fp16 behind ORT_ENABLE_XQA_NATIVE_KV);
3. XQA speculative decode: 2..8 query tokens per sequence with attention_metadata;
4. the portable paged decode kernel: a decode-shaped step (T <= B) with a quantized cache, or
   where Flash is not eligible; or a portable speculative step;
5. cuDNN's paged SDPA: one-token decode with metadata, sm >= 90 (after the paged decode kernel and
   ahead of Flash: its place against the decode kernel is the fork's order plus #32493's "tier
   1.5", unconfirmed in the binary);
6. Flash (paged varlen; over a quantized cache, a dense gather), when its block-size rule holds;
7. MEA (a dense gather), only when Flash is not eligible.

Not modelled, each named: XQA's one-time shared-memory probe and cuDNN's per-run buildability
probe (both taken to pass; a CUDA Graph capture makes both fall through to Flash / MEA), the
decode kernel's shared memory (taken to fit: 4 H (cg + 1) + 1536 bytes, at most 17,920 for
H <= 1,024 against 48 KiB), and the cuDNN library version (>= 9.5 and stable assumed).
"""

from __future__ import annotations

from typing import Any

from ..backends import flash, mea
from ..domain import CONCRETE
from ..gates import Gate, enabled_gate
from ..options import ENV_ENABLE_XQA, ENV_ENABLE_XQA_NATIVE_KV, RuntimeConfig
from ..problem import Backend
from .problem import KvQuantization, PagedProblem

NO_ROUTE = ("PagedAttention requires FlashAttention (sm>=80, fp16/bf16, block_size a multiple of {fmin}), "
            "MemoryEfficientAttention (fp16 sm>=53, bf16 sm>=80, head_size<=1024 and %8==0), cuDNN paged SDPA "
            "(cuDNN>=9.5, sm>=90, fp16/bf16 one-token decode with attention_metadata), or the paged decode kernel "
            "(fp16/bf16, decode-shaped batch, i.e. token_count <= batch_size; this step has token_count={t} and "
            "batch_size={b}) to be available. Check ORT_DISABLE_FLASH_ATTENTION / ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION "
            "/ ORT_DISABLE_DECODER_ATTENTION / ORT_ENABLE_CUDNN_FLASH_ATTENTION env vars and dtype/head_size/block_size.")
LATENT_SHARED_MEMORY = "PagedAttention: the unfused MLA backend needs {need} bytes of shared memory for head_size={h} " \
                       "and v_head_size={hv}, but the device provides {have} bytes per block."
SHARED_MEMORY_PER_BLOCK = 49152  # cudaDeviceProp::sharedMemPerBlock on sm80 and sm90: 48 KiB
LATENT_SHARED_FLOATS = 384  # GetPagedLatentSharedMemoryBytes: 4 * (H + Hv + 384)
MAX_GRID_Y = 65535  # cudaDeviceProp::maxGridSize[1]: the decode kernel's token rows
XQA_HEAD_SIZES = (64, 128, 256)
XQA_GROUPS = (4, 6, 8, 16, 32)
XQA_PAGE = 128  # XQA reads the cache in 128-token pages: block_size % 128 == 0
NATIVE_XQA_HEAD, NATIVE_XQA_GROUP = 256, 6
SPEC_MAX_QUERY = 8
CUDNN_MIN_SM_MAJOR = 9


def _gate(name: str, cond: Any, reason: str) -> Gate:
    return Gate(name, cond, lambda: reason)


def flash_min_block(d: Any, head_size: Any) -> Any:
    """Flash's minimum page size for the head size: 256 (H <= 64), 128 (H <= 128), else 64
    (decoded in the 1.31.1 binary; it is the split heuristic's key block)."""
    return flash.split_block_n(d, head_size)


def latent_shared_bytes(d: Any, p: PagedProblem) -> Any:
    return d.mul(4, d.add(d.add(p.head_size, p.v_head_size, what="H + Hv"), LATENT_SHARED_FLOATS, what="H + Hv + 384"),
                 what="MLA shared memory")


def group(d: Any, p: PagedProblem) -> Any:
    return d.div(p.num_heads, p.kv_num_heads)


def flash_eligible(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """Flash's eligibility: enabled, flash::is_supported, and the block size a multiple of its
    minimum page (a quantized cache is exempt: Flash reads a dense gathered copy)."""
    sm = config.device.sm
    fmin = flash_min_block(d, p.head_size)
    return [
        _gate("not latent", not p.latent, "the latent layout runs the MLA kernel only"),
        enabled_gate(config.options, "use_flash"),
        Gate("device and head size", flash.supported(d, sm, p.head_size),
             lambda: f"needs sm >= 80, H % 8 == 0 and H <= 256: sm{sm}, H = {p.head_size}"),
        Gate("block size", d.any_(p.quantized, d.mod(p.block_size, fmin) == 0),
             lambda: f"needs the block size a multiple of {fmin} for H = {p.head_size}: block {p.block_size}"),
    ]


def _holds(d: Any, gates: list[Gate]) -> Any:
    return d.all_(*(g.cond for g in gates))


def decode_eligible(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """The paged decode kernel's eligibility (its shared memory taken to fit)."""
    return [
        _gate("not latent", not p.latent, "the latent layout runs the MLA kernel only"),
        enabled_gate(config.options, "use_decoder"),
        Gate("grid", p.token_count <= MAX_GRID_Y, lambda: f"T = {p.token_count} exceeds the grid's {MAX_GRID_Y} rows"),
    ]


def _per_channel_allowed(p: PagedProblem, config: RuntimeConfig) -> bool:
    return p.k_quantization is not KvQuantization.PER_CHANNEL or config.options.use_per_channel_xqa


def native_xqa(d: Any, p: PagedProblem, config: RuntimeConfig) -> Any:
    """fp16_xqa_eligible: native fp16 XQA (opt-in), metadata given, fp16, sm >= 80, no softcap,
    H 256, group 6, block size a multiple of 128."""
    return d.all_(config.options.use_native_xqa, p.has_metadata, not p.quantized, not p.is_bf16,
                  config.device.sm >= 80, p.softcap == 0, p.head_size == NATIVE_XQA_HEAD,
                  p.num_heads == d.mul(NATIVE_XQA_GROUP, p.kv_num_heads, what="6 * Nk"),
                  d.mod(p.block_size, XQA_PAGE) == 0)


def quantized_xqa(d: Any, p: PagedProblem, config: RuntimeConfig) -> Any:
    """quantized_xqa_eligible: an int8 / fp8 cache (fp8 on sm89 or sm >= 90), sm >= 80, no
    softcap, H 64 / 128 / 256, group 4 / 6 / 8 / 16 / 32, block size a multiple of 128."""
    sm = config.device.sm
    if p.cache_type == "int4":
        return int4_xqa(d, p, config)
    if p.cache_type not in ("int8", "fp8") or (p.cache_type == "fp8" and not (sm == 89 or sm >= 90)):
        return False
    groups = d.any_(*(p.num_heads == d.mul(g, p.kv_num_heads, what="XQA group * Nk") for g in XQA_GROUPS))
    return d.all_(sm >= 80, p.softcap == 0, d.member(p.head_size, XQA_HEAD_SIZES), groups,
                  d.mod(p.block_size, XQA_PAGE) == 0)


def int4_xqa(d: Any, p: PagedProblem, config: RuntimeConfig) -> Any:
    """The INT4 variant (docs/research/paged-workspace.md §2.2 item 8; its text "INT4 paged XQA
    requires FP16 queries, head_size 256, and group size 6." is in the 1.31.1 binary, and ORT's int4
    tests assert XQA for it): per-channel XQA on, an fp16 query, H 256, group 6, PER_CHANNEL K and
    V scales, sm >= 80, no softcap, block size a multiple of 128."""
    per_channel = (p.k_quantization is KvQuantization.PER_CHANNEL and p.v_quantization is KvQuantization.PER_CHANNEL)
    return d.all_(config.options.use_per_channel_xqa, per_channel, not p.is_bf16, config.device.sm >= 80,
                  p.softcap == 0, p.head_size == NATIVE_XQA_HEAD,
                  p.num_heads == d.mul(NATIVE_XQA_GROUP, p.kv_num_heads, what="6 * Nk"),
                  d.mod(p.block_size, XQA_PAGE) == 0)


def xqa_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """XQA inside the paged decode kernel, one query token per sequence."""
    return [
        *decode_eligible(d, p, config),
        _gate("enabled", config.options.use_xqa, f"disabled by {ENV_ENABLE_XQA}=0"),
        Gate("one token per sequence", d.all_(p.token_count == p.batch_size, p.max_query_len == 1),
             lambda: f"needs T == B and one new token each: T = {p.token_count}, B = {p.batch_size}, "
                     f"S = {p.max_query_len}"),
        _gate("per-channel", _per_channel_allowed(p, config), "per-channel K with ORT_ENABLE_XQA_PER_CHANNEL_KV=0"),
        Gate("cache", d.any_(quantized_xqa(d, p, config), native_xqa(d, p, config)),
             lambda: "needs an int8 / fp8 cache XQA takes (H 64/128/256, group 4/6/8/16/32, block % 128, no softcap), "
                     f"or native fp16 XQA ({ENV_ENABLE_XQA_NATIVE_KV}=1, metadata, H 256, group 6)"),
    ]


def spec_candidate(d: Any, p: PagedProblem, config: RuntimeConfig) -> Any:
    """xqa_spec_dec_candidate: metadata with 2..8 query tokens, XQA on, per-channel allowed, a
    quantized cache with an fp16 query at group 6 and H 256 (or H 128 with int8: the 1.31.1
    loader's widening), or native spec decode (fp16 / bf16 cache, H 256, group 6, opted in)."""
    six = p.num_heads == d.mul(NATIVE_XQA_GROUP, p.kv_num_heads, what="6 * Nk")
    # The 1.31.1 loader's H 128 INT8 variant is causal only: ORT's test
    # Cuda_XqaSpecDecInt8CacheHeadSize128NonCausalFallsBack (paged_attention_op_test.cc 0406a9fb) asserts a
    # non-causal step there falls back, while its H 256 twin keeps XQA.
    quantized = d.all_(p.quantized, not p.is_bf16, six,
                       d.any_(p.head_size == NATIVE_XQA_HEAD,
                              d.all_(p.head_size == 128, p.cache_type == "int8", p.causal)))
    native = d.all_(config.options.use_native_xqa, not p.quantized, p.head_size == NATIVE_XQA_HEAD, six)
    return d.all_(config.options.use_xqa, p.has_metadata, p.max_query_len > 1, p.max_query_len <= SPEC_MAX_QUERY,
                  _per_channel_allowed(p, config), config.device.sm >= 80, d.mod(p.block_size, XQA_PAGE) == 0,
                  d.any_(quantized, native))


def xqa_spec_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    return [*decode_eligible(d, p, config),
            Gate("speculative step", spec_candidate(d, p, config),
                 lambda: "needs attention_metadata with 2..8 query tokens and a cache speculative XQA takes")]


def portable_spec(d: Any, p: PagedProblem, config: RuntimeConfig) -> Any:
    """portable_spec_dec_candidate: metadata with 2..8 query tokens and an int4 cache, or a
    per-channel K cache while per-channel XQA is off."""
    cache = p.cache_type == "int4" or (p.quantized and p.k_quantization is KvQuantization.PER_CHANNEL
                                       and not config.options.use_per_channel_xqa)
    return d.all_(p.has_metadata, p.max_query_len > 1, p.max_query_len <= SPEC_MAX_QUERY, cache)


def paged_decode_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """The portable split-KV kernel: a decode-shaped step with a quantized cache or without Flash
    (native XQA falling through restores Flash), or a portable speculative step."""
    no_flash = d.not_(_holds(d, flash_eligible(d, p, config)))
    return [*decode_eligible(d, p, config),
            Gate("decode step", d.any_(d.all_(p.decode_shaped(d), d.any_(p.quantized, no_flash)),
                                       portable_spec(d, p, config)),
                 lambda: f"needs T <= B with a quantized cache or without Flash: T = {p.token_count}, "
                         f"B = {p.batch_size}")]


def cudnn_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """cuDNN's paged SDPA: one-token decode with metadata on sm >= 90, unquantized, no softcap,
    window or head sink (is_supported_paged: H % 8 == 0, H <= 256), not where native XQA wins."""
    sm, opts = config.device.sm, config.options
    on = opts.use_cudnn or (opts.cudnn_auto and sm // 10 >= CUDNN_MIN_SM_MAJOR)
    return [
        _gate("not latent", not p.latent, "the latent layout runs the MLA kernel only"),
        _gate("enabled", on, "off (needs ORT_ENABLE_CUDNN_FLASH_ATTENTION=1 or sdpa_kernel bit 8, or sm >= 90 "
                             "without sdpa_kernel and without ORT_ENABLE_CUDNN_FLASH_ATTENTION=0)"),
        _gate("device", sm // 10 >= CUDNN_MIN_SM_MAJOR, f"needs sm >= 90: sm{sm}"),
        _gate("unquantized", not p.quantized, "quantized cache"),
        _gate("metadata", p.has_metadata, "needs attention_metadata"),
        Gate("one token per sequence", d.all_(p.token_count == p.batch_size, p.max_query_len == 1),
             lambda: f"needs T == B and one new token each: T = {p.token_count}, B = {p.batch_size}, "
                     f"S = {p.max_query_len}"),
        _gate("plain attention", p.softcap == 0 and p.local_window_size <= 0 and not p.has_head_sink,
              "softcap, a local window or a head sink"),
        Gate("head size", d.all_(d.mod(p.head_size, 8) == 0, p.head_size <= 256),
             lambda: f"needs H % 8 == 0 and H <= 256: H = {p.head_size}"),
        Gate("native XQA", d.not_(native_xqa(d, p, config)), lambda: "native fp16 XQA takes the step"),
    ]


def mea_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    """mea_eligible: only where Flash is not eligible (ORT's own condition, not just the cascade's
    order: so the estimate never keeps MEA beside an eligible Flash)."""
    sm = config.device.sm
    return [
        _gate("not latent", not p.latent, "the latent layout runs the MLA kernel only"),
        Gate("Flash not eligible", d.not_(_holds(d, flash_eligible(d, p, config))), lambda: "Flash is eligible"),
        enabled_gate(config.options, "use_efficient"),
        Gate("device and head size", mea.supported(d, sm, True, p.head_size, p.head_size, p.is_bf16),
             lambda: f"needs H % 8 == 0, H <= 1024 on sm >= {mea.MIN_SM_BF16 if p.is_bf16 else mea.MIN_SM_FP16}: "
                     f"sm{sm}, H = {p.head_size}"),
    ]


def latent_gates(d: Any, p: PagedProblem, config: RuntimeConfig) -> list[Gate]:
    need = latent_shared_bytes(d, p)
    return [_gate("latent layout", p.latent, "kv_cache_layout is SEPARATE"),
            Gate("shared memory", need <= SHARED_MEMORY_PER_BLOCK,
                 lambda: f"needs {need} bytes of shared memory, the device has {SHARED_MEMORY_PER_BLOCK}")]


def cascade_gates(d: Any, p: PagedProblem, config: RuntimeConfig, runner_valid: Any = None) -> list[tuple[Backend, list[Gate]]]:
    """PagedAttention's selection as a cascade: (backend, gates), in the order of the module
    docstring. It has no TRT runner: `runner_valid` does not apply."""
    return [
        (Backend.LATENT, latent_gates(d, p, config)), (Backend.XQA, xqa_gates(d, p, config)),
        (Backend.XQA_SPEC, xqa_spec_gates(d, p, config)), (Backend.PAGED_DECODE, paged_decode_gates(d, p, config)),
        (Backend.CUDNN, cudnn_gates(d, p, config)), (Backend.FLASH, flash_eligible(d, p, config)),
        (Backend.MEA, mea_gates(d, p, config)),
    ]


def output_is_empty(d: Any, p: PagedProblem) -> Any:
    """T == 0 returns before any allocation; the builder refuses it (attnws sizes steps with a
    token), so no modelled problem is empty."""
    return False


def no_route(p: PagedProblem) -> str:
    """ORT's error when no backend runs the problem (the MLA kernel's shared-memory error under
    the latent layout)."""
    if p.latent:
        need = 4 * (p.head_size + p.v_head_size + LATENT_SHARED_FLOATS)
        return LATENT_SHARED_MEMORY.format(need=need, h=p.head_size, hv=p.v_head_size, have=SHARED_MEMORY_PER_BLOCK)
    return NO_ROUTE.format(fmin=flash_min_block(CONCRETE, p.head_size), t=p.token_count, b=p.batch_size)
