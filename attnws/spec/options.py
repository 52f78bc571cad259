"""The runtime configuration dispatch depends on: device, build flags, kernel options, TRT runner.

`KernelOptions.resolve` follows AttentionKernelOptions::Initialize of ORT 1.31.1
(`attention_kernel_options.cc`): with `sdpa_kernel > 0` each backend flag is a bit of the mask and
the enable/disable variables are not read; with 0 the flags come from ORT's environment variables.
The debug-info flag and the two sequence thresholds are read in both modes (the thresholds with
mode-dependent defaults). Values are parsed as ORT parses them (`core/platform/env_var_utils.h`,
`include/onnxruntime/core/common/parse_string.h`): an empty value is unset, a boolean is exactly
one of 0 1 false true False True, an integer is `std::from_chars` of the whole value (an optional
'-' then decimal digits, no sign '+', no blanks), and anything else is ORT's own error when the
session is created. The caller passes the environment as a mapping: the specification never
reads `os.environ`.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Mapping

from .devices import KNOWN_SMS, MAX_SM_COUNT, default_sm_count
from .errors import InvalidArgument
from .limits import DEFAULT_MIN_SEQ_FLASH_PACKED_QKV, DEFAULT_MIN_SEQ_MEA_FP32, INT32_MAX

# AttentionBackend bits of ORT 1.31.1 (contrib_ops/cpu/bert/attention_common.h). Bit 128, the TRT
# causal kernels, was removed by #29143 (2026-06-18): ORT 1.31.1 reads nothing from it.
SDPA_FLASH_ATTENTION = 1
SDPA_EFFICIENT_ATTENTION = 2
SDPA_TRT_FUSED_ATTENTION = 4
SDPA_CUDNN_FLASH_ATTENTION = 8
SDPA_MATH = 16
SDPA_TRT_FLASH_ATTENTION = 32
SDPA_TRT_CROSS_ATTENTION = 64
SDPA_LEAN_ATTENTION = 256  # read only by builds with USE_LEAN_ATTENTION; the released wheels have none
SDPA_DECODER_ATTENTION = 512  # MultiHeadAttention's decoder-masked kernel (needs cache_indirection)
SDPA_DEFINED_BITS = (SDPA_FLASH_ATTENTION | SDPA_EFFICIENT_ATTENTION | SDPA_TRT_FUSED_ATTENTION
                     | SDPA_CUDNN_FLASH_ATTENTION | SDPA_MATH | SDPA_TRT_FLASH_ATTENTION | SDPA_TRT_CROSS_ATTENTION
                     | SDPA_LEAN_ATTENTION | SDPA_DECODER_ATTENTION)

ENV_DISABLE_FLASH = "ORT_DISABLE_FLASH_ATTENTION"
ENV_DISABLE_MEA = "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION"
ENV_DISABLE_TRT_FUSED = "ORT_DISABLE_FUSED_ATTENTION"
ENV_DISABLE_TRT_FLASH = "ORT_DISABLE_TRT_FLASH_ATTENTION"
ENV_DISABLE_TRT_CROSS = "ORT_DISABLE_FUSED_CROSS_ATTENTION"  # MultiHeadAttention only
ENV_ENABLE_CUDNN = "ORT_ENABLE_CUDNN_FLASH_ATTENTION"  # MultiHeadAttention only
ENV_DISABLE_DECODER = "ORT_DISABLE_DECODER_ATTENTION"  # MHA's decoder-masked kernel (not modelled); PagedAttention's paged decode
ENV_DEBUG_INFO = "ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO"  # prints the kernel chosen; no effect on dispatch
# Read by GroupQueryAttention's constructor whatever sdpa_kernel is (group_query_attention.cc;
# both names are in the 1.31.1 binary): XQA is on unless ORT_ENABLE_XQA is 0, and the Flash
# fast-decode path is on unless ORT_DISABLE_FLASH_DECODE is true.
ENV_ENABLE_XQA = "ORT_ENABLE_XQA"
ENV_ENABLE_XQA_NATIVE_KV = "ORT_ENABLE_XQA_NATIVE_KV"  # PagedAttention: native fp16 XQA (default 0), read when XQA is on
ENV_ENABLE_XQA_PER_CHANNEL_KV = "ORT_ENABLE_XQA_PER_CHANNEL_KV"  # PagedAttention: per-channel K (default 1)
ENV_DISABLE_FLASH_DECODE = "ORT_DISABLE_FLASH_DECODE"
ENV_MIN_SEQ_FLASH_PACKED_QKV = "ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV"
ENV_MIN_SEQ_MEA_FP32 = "ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32"
# Boolean variables ORT reads only when sdpa_kernel is 0, and those it reads in both modes.
BACKEND_ENV = (ENV_DISABLE_FLASH, ENV_DISABLE_MEA, ENV_DISABLE_TRT_FUSED, ENV_DISABLE_TRT_FLASH,
               ENV_DISABLE_TRT_CROSS, ENV_ENABLE_CUDNN, ENV_DISABLE_DECODER)
ALWAYS_READ_ENV = (ENV_DEBUG_INFO, ENV_MIN_SEQ_FLASH_PACKED_QKV, ENV_MIN_SEQ_MEA_FP32, ENV_ENABLE_XQA,
                   ENV_DISABLE_FLASH_DECODE, ENV_ENABLE_XQA_NATIVE_KV, ENV_ENABLE_XQA_PER_CHANNEL_KV)
KNOWN_ENV = BACKEND_ENV + ALWAYS_READ_ENV
# Named by ORT's headers but never read by ORT 1.31.1's released build: lean attention is compiled
# only with USE_LEAN_ATTENTION, and #29143 removed the fused causal kernels with their variable.
# Accepted, unparsed and without effect, as in ORT.
IGNORED_ENV = ("ORT_ENABLE_LEAN_ATTENTION", "ORT_ENABLE_FUSED_CAUSAL_ATTENTION")
# Each backend flag of KernelOptions: its sdpa_kernel bit and the variable that switches it.
FLAG_SWITCHES = {
    "use_flash": (SDPA_FLASH_ATTENTION, ENV_DISABLE_FLASH), "use_efficient": (SDPA_EFFICIENT_ATTENTION, ENV_DISABLE_MEA),
    "use_trt_fused": (SDPA_TRT_FUSED_ATTENTION, ENV_DISABLE_TRT_FUSED),
    "use_trt_flash": (SDPA_TRT_FLASH_ATTENTION, ENV_DISABLE_TRT_FLASH),
    "use_trt_cross": (SDPA_TRT_CROSS_ATTENTION, ENV_DISABLE_TRT_CROSS), "use_cudnn": (SDPA_CUDNN_FLASH_ATTENTION, ENV_ENABLE_CUDNN),
    "use_decoder": (SDPA_DECODER_ATTENTION, ENV_DISABLE_DECODER),
}

_TRUE = ("1", "true", "True")
_FALSE = ("0", "false", "False")
_FROM_CHARS_INT = re.compile(r"-?[0-9]+")


def _parse_error(name: str, raw: str) -> InvalidArgument:
    return InvalidArgument(f"environment variable {name}={raw!r}: ORT 1.31.1 cannot parse it and fails to create "
                           "the session (\"Failed to parse environment variable\")")


def env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    """Return the boolean ORT reads from the variable (its default when unset or empty)."""
    raw = env.get(name, "")
    if raw == "":
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise _parse_error(name, raw)


def env_int(env: Mapping[str, str], name: str, default: int) -> int:
    """Return the int32 ORT reads from the variable (its default when unset or empty)."""
    raw = env.get(name, "")
    if raw == "":
        return default
    if not raw.isascii() or _FROM_CHARS_INT.fullmatch(raw) is None or not -(2**31) <= int(raw) <= INT32_MAX:
        raise _parse_error(name, raw)
    return int(raw)


@dataclass(frozen=True)
class Device:
    """The GPU: compute capability sm = 10 * major + minor (80 for A100, 90 for H100 / H200) and
    its multiprocessor count (None: the capability's default part, `devices.DEFAULT_PART`)."""

    sm: int = 80
    sm_count: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.sm, int) or isinstance(self.sm, bool) or self.sm not in KNOWN_SMS:
            raise InvalidArgument(f"sm = {self.sm!r} is not a compute capability attnws models "
                                  f"(known: {', '.join(map(str, KNOWN_SMS))})")
        if self.sm_count is None:
            object.__setattr__(self, "sm_count", default_sm_count(self.sm))
        if not isinstance(self.sm_count, int) or isinstance(self.sm_count, bool) or \
                not 0 < self.sm_count <= MAX_SM_COUNT:
            raise InvalidArgument(f"sm_count = {self.sm_count!r} must be a positive multiprocessor count "
                                  f"(at most {MAX_SM_COUNT})")


@dataclass(frozen=True)
class BuildFlags:
    """Which optional backends the ORT build compiled in (the released wheels have all three)."""

    flash: bool = True  # USE_FLASH_ATTENTION
    mea: bool = True  # USE_MEMORY_EFFICIENT_ATTENTION
    trt: bool = True  # USE_TRT_FUSED_ATTENTION (CMake onnxruntime_USE_TRT_FUSED_ATTENTION, #31632)


@dataclass(frozen=True)
class KernelOptions:
    """Resolved AttentionKernelOptions (ORT defaults when built with no arguments)."""

    use_flash: bool = True
    use_efficient: bool = True
    use_trt_fused: bool = True
    use_trt_flash: bool = True
    use_trt_cross: bool = True
    use_cudnn: bool = False
    # AllowCudnnFlashAttentionAuto (1.31.1): operators that auto-prefer cuDNN on sm >= 90
    # (GroupQueryAttention) may, unless sdpa_kernel pins the kernels or the cuDNN variable is 0.
    cudnn_auto: bool = True
    use_xqa: bool = True  # GroupQueryAttention: ORT_ENABLE_XQA != 0
    use_flash_decode: bool = True  # GroupQueryAttention: not ORT_DISABLE_FLASH_DECODE
    use_decoder: bool = True  # PagedAttention's paged decode kernel: not ORT_DISABLE_DECODER_ATTENTION (bit 512)
    use_native_xqa: bool = False  # PagedAttention: ORT_ENABLE_XQA_NATIVE_KV != 0, with XQA on
    use_per_channel_xqa: bool = True  # PagedAttention: ORT_ENABLE_XQA_PER_CHANNEL_KV != 0, with XQA on
    min_seq_flash_packed_qkv: int = DEFAULT_MIN_SEQ_FLASH_PACKED_QKV
    min_seq_mea_fp32: int = DEFAULT_MIN_SEQ_MEA_FP32
    sdpa_kernel: int = 0
    switches: tuple[tuple[str, str], ...] = ()  # the backend variables set, as given: what turned a flag

    def disabled_reason(self, flag: str) -> str:
        """Return, in words, what turned the backend flag (a field name: use_flash, ...) off."""
        bit, variable = FLAG_SWITCHES[flag]
        if self.sdpa_kernel > 0:
            return f"disabled by sdpa_kernel = {self.sdpa_kernel} (bit {bit} not set)"
        given = dict(self.switches).get(variable)
        if given is None:
            return f"disabled ({variable} is off by default)"
        return f"disabled by {variable}={given}"

    @classmethod
    def resolve(
        cls, sdpa_kernel: int = 0, env: Mapping[str, str] | None = None, build: BuildFlags | None = None
    ) -> "KernelOptions":
        """Return the options ORT derives from the `sdpa_kernel` provider option, the environment
        mapping and the build flags (a backend not compiled in is forced off). Raise InvalidArgument
        for a value ORT cannot parse (ORT's own error), for a mask bit ORT 1.31.1 does not define,
        and for a backend variable given with a non-zero mask (ORT would not read it)."""
        env = dict(env or {})
        build = build or BuildFlags()
        if not isinstance(sdpa_kernel, int) or sdpa_kernel < 0 or sdpa_kernel > INT32_MAX:
            raise InvalidArgument(f"sdpa_kernel = {sdpa_kernel!r} must be a non-negative int32 bit mask")
        undefined = sdpa_kernel & ~SDPA_DEFINED_BITS
        if undefined:
            bits = [1 << i for i in range(undefined.bit_length()) if undefined >> i & 1]
            raise InvalidArgument(f"sdpa_kernel = {sdpa_kernel}: bit(s) {', '.join(map(str, bits))} are not defined by "
                                  "ORT 1.31.1, which ignores them (bit 128, TRT causal attention, was removed by #29143)")
        for name in env:
            if name.startswith("ORT_") and "ATTENTION" in name and name not in KNOWN_ENV + IGNORED_ENV:
                raise InvalidArgument(f"environment variable {name} is not one ORT 1.31.1 reads for attention; "
                                      f"known: {', '.join(KNOWN_ENV)}")
        if sdpa_kernel > 0:
            unread = [name for name in BACKEND_ENV if name in env]
            if unread:
                raise InvalidArgument(f"{', '.join(unread)} has no effect with sdpa_kernel = {sdpa_kernel}: ORT reads "
                                      "the backend variables only when sdpa_kernel is 0")
            flags = {
                "use_flash": bool(sdpa_kernel & SDPA_FLASH_ATTENTION),
                "use_efficient": bool(sdpa_kernel & SDPA_EFFICIENT_ATTENTION),
                "use_trt_fused": bool(sdpa_kernel & SDPA_TRT_FUSED_ATTENTION),
                "use_trt_flash": bool(sdpa_kernel & SDPA_TRT_FLASH_ATTENTION),
                "use_trt_cross": bool(sdpa_kernel & SDPA_TRT_CROSS_ATTENTION),
                "use_cudnn": bool(sdpa_kernel & SDPA_CUDNN_FLASH_ATTENTION),
                "use_decoder": bool(sdpa_kernel & SDPA_DECODER_ATTENTION),
            }
            flash_default, mea_default = 0, 0
        else:
            flags = {
                "use_flash": not env_bool(env, ENV_DISABLE_FLASH, False),
                "use_efficient": not env_bool(env, ENV_DISABLE_MEA, False),
                "use_trt_fused": not env_bool(env, ENV_DISABLE_TRT_FUSED, False),
                "use_trt_flash": not env_bool(env, ENV_DISABLE_TRT_FLASH, False),
                "use_trt_cross": not env_bool(env, ENV_DISABLE_TRT_CROSS, False),
                "use_cudnn": env_bool(env, ENV_ENABLE_CUDNN, False),
                "use_decoder": not env_bool(env, ENV_DISABLE_DECODER, False),
            }
            flash_default, mea_default = DEFAULT_MIN_SEQ_FLASH_PACKED_QKV, DEFAULT_MIN_SEQ_MEA_FP32
        env_bool(env, ENV_DEBUG_INFO, False)
        flags["cudnn_auto"] = sdpa_kernel == 0 and env.get(ENV_ENABLE_CUDNN, "") not in _FALSE
        flags["use_xqa"] = env_int(env, ENV_ENABLE_XQA, 1) != 0
        flags["use_native_xqa"] = flags["use_xqa"] and env_int(env, ENV_ENABLE_XQA_NATIVE_KV, 0) != 0
        flags["use_per_channel_xqa"] = flags["use_xqa"] and env_int(env, ENV_ENABLE_XQA_PER_CHANNEL_KV, 1) != 0
        flags["use_flash_decode"] = not env_bool(env, ENV_DISABLE_FLASH_DECODE, False)
        flags["use_flash"] = flags["use_flash"] and build.flash
        flags["use_efficient"] = flags["use_efficient"] and build.mea
        return cls(
            **flags,
            min_seq_flash_packed_qkv=env_int(env, ENV_MIN_SEQ_FLASH_PACKED_QKV, flash_default),
            min_seq_mea_fp32=env_int(env, ENV_MIN_SEQ_MEA_FP32, mea_default),
            sdpa_kernel=sdpa_kernel,
            switches=tuple(sorted((name, env[name]) for _, name in FLAG_SWITCHES.values() if env.get(name, ""))),
        )


class TrtRunner(enum.Enum):
    """What is known of FusedMHARunnerFP16v2::IsValid (whether a cubin loads) for a shape."""

    AUTO = "auto"  # decided by the kernel tables in capability (IsValid, and the kernel found at run time)
    AVAILABLE = "available"
    UNAVAILABLE = "unavailable"
    UNKNOWN = "unknown"  # either: dispatch reports every backend it could lead to


@dataclass(frozen=True)
class RuntimeConfig:
    """Everything besides the problem that ORT's dispatch reads."""

    device: Device = field(default_factory=Device)
    build: BuildFlags = field(default_factory=BuildFlags)
    options: KernelOptions = field(default_factory=KernelOptions)
    trt_runner: TrtRunner = TrtRunner.AUTO

    @classmethod
    def make(
        cls,
        sm: int = 80,
        sdpa_kernel: int = 0,
        env: Mapping[str, str] | None = None,
        flash_build: bool = True,
        mea_build: bool = True,
        trt_runner: TrtRunner | str = TrtRunner.AUTO,
        trt_build: bool = True,
        sm_count: int | None = None,
    ) -> "RuntimeConfig":
        """Return a config from plain values, resolving the kernel options as ORT does."""
        build = BuildFlags(flash=flash_build, mea=mea_build, trt=trt_build)
        try:
            runner = TrtRunner(trt_runner)
        except ValueError:
            raise InvalidArgument(
                f"trt_runner = {trt_runner!r}; expected one of {[r.value for r in TrtRunner]}"
            ) from None
        return cls(Device(sm, sm_count), build, KernelOptions.resolve(sdpa_kernel, env, build), runner)
