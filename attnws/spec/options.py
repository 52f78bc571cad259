"""The runtime configuration dispatch depends on: device, build flags, kernel options, TRT runner.

`KernelOptions.resolve` follows AttentionKernelOptions::Initialize: with `sdpa_kernel > 0` each
backend flag is a bit of the mask and the enable/disable variables are ignored; with 0 the flags
come from ORT's environment variables. The sequence thresholds are read from the environment in
both modes, with mode-dependent defaults. The caller passes the environment as a mapping: the
specification never reads `os.environ`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping

from .errors import InvalidArgument
from .limits import DEFAULT_MIN_SEQ_FLASH_PACKED_QKV, DEFAULT_MIN_SEQ_MEA_FP32, INT32_MAX

# AttentionBackend bits (contrib_ops/cpu/bert/attention_common.h).
SDPA_FLASH_ATTENTION = 1
SDPA_EFFICIENT_ATTENTION = 2
SDPA_TRT_FUSED_ATTENTION = 4
SDPA_CUDNN_FLASH_ATTENTION = 8
SDPA_MATH = 16
SDPA_TRT_FLASH_ATTENTION = 32
SDPA_TRT_CROSS_ATTENTION = 64

ENV_DISABLE_FLASH = "ORT_DISABLE_FLASH_ATTENTION"
ENV_DISABLE_MEA = "ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION"
ENV_DISABLE_TRT_FUSED = "ORT_DISABLE_FUSED_ATTENTION"
ENV_DISABLE_TRT_FLASH = "ORT_DISABLE_TRT_FLASH_ATTENTION"
ENV_MIN_SEQ_FLASH_PACKED_QKV = "ORT_MIN_SEQ_LEN_FLASH_ATTENTION_PACKED_QKV"
ENV_MIN_SEQ_MEA_FP32 = "ORT_MIN_SEQ_LEN_EFFICIENT_ATTENTION_FP32"
# MultiHeadAttention only (PA and PMHA never consult them).
ENV_DISABLE_TRT_CROSS = "ORT_DISABLE_FUSED_CROSS_ATTENTION"
ENV_ENABLE_CUDNN = "ORT_ENABLE_CUDNN_FLASH_ATTENTION"
ENV_ENABLE_LEAN = "ORT_ENABLE_LEAN_ATTENTION"
# Read by ORT but without effect on the dispatch attnws models: accepted and ignored.
IGNORED_ENV = ("ORT_ENABLE_ATTENTION_KERNEL_DEBUG_INFO", "ORT_ENABLE_FUSED_CAUSAL_ATTENTION")
KNOWN_ENV = (
    ENV_DISABLE_FLASH, ENV_DISABLE_MEA, ENV_DISABLE_TRT_FUSED, ENV_DISABLE_TRT_FLASH,
    ENV_MIN_SEQ_FLASH_PACKED_QKV, ENV_MIN_SEQ_MEA_FP32, ENV_DISABLE_TRT_CROSS, ENV_ENABLE_CUDNN,
    ENV_ENABLE_LEAN,
)

_TRUE = ("1", "true", "True")
_FALSE = ("0", "false", "False")


def _env_bool(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name)
    if raw is None:
        return False
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise InvalidArgument(f"environment variable {name}={raw!r} is not a boolean (use 0 or 1)")


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidArgument(f"environment variable {name}={raw!r} is not an integer") from None
    if not -(2**31) <= value <= INT32_MAX:
        raise InvalidArgument(f"environment variable {name}={raw!r} does not fit int32")
    return value


@dataclass(frozen=True)
class Device:
    """The GPU: compute capability sm = 10 * major + minor (80 for A100, 90 for H100 / H200)."""

    sm: int = 80

    def __post_init__(self) -> None:
        if not isinstance(self.sm, int) or not 10 <= self.sm <= 999:
            raise InvalidArgument(f"sm = {self.sm!r} is not a compute capability (10 * major + minor)")


@dataclass(frozen=True)
class BuildFlags:
    """Which optional backends the ORT build compiled in (TRT fused kernels are always built)."""

    flash: bool = True  # USE_FLASH_ATTENTION
    mea: bool = True  # USE_MEMORY_EFFICIENT_ATTENTION


@dataclass(frozen=True)
class KernelOptions:
    """Resolved AttentionKernelOptions (ORT defaults when built with no arguments)."""

    use_flash: bool = True
    use_efficient: bool = True
    use_trt_fused: bool = True
    use_trt_flash: bool = True
    use_trt_cross: bool = True
    use_cudnn: bool = False
    use_lean: bool = False
    min_seq_flash_packed_qkv: int = DEFAULT_MIN_SEQ_FLASH_PACKED_QKV
    min_seq_mea_fp32: int = DEFAULT_MIN_SEQ_MEA_FP32
    sdpa_kernel: int = 0

    @classmethod
    def resolve(
        cls, sdpa_kernel: int = 0, env: Mapping[str, str] | None = None, build: BuildFlags | None = None
    ) -> "KernelOptions":
        """Return the options ORT derives from the `sdpa_kernel` provider option, the environment
        mapping and the build flags (a backend not compiled in is forced off)."""
        env = dict(env or {})
        build = build or BuildFlags()
        if not isinstance(sdpa_kernel, int) or sdpa_kernel < 0 or sdpa_kernel > INT32_MAX:
            raise InvalidArgument(f"sdpa_kernel = {sdpa_kernel!r} must be a non-negative int32 bit mask")
        for name in env:
            if name.startswith("ORT_") and "ATTENTION" in name and name not in KNOWN_ENV + IGNORED_ENV:
                raise InvalidArgument(f"environment variable {name} is not one attnws models; known: {', '.join(KNOWN_ENV)}")
        if sdpa_kernel > 0:
            flags = {
                "use_flash": bool(sdpa_kernel & SDPA_FLASH_ATTENTION),
                "use_efficient": bool(sdpa_kernel & SDPA_EFFICIENT_ATTENTION),
                "use_trt_fused": bool(sdpa_kernel & SDPA_TRT_FUSED_ATTENTION),
                "use_trt_flash": bool(sdpa_kernel & SDPA_TRT_FLASH_ATTENTION),
                "use_trt_cross": bool(sdpa_kernel & SDPA_TRT_CROSS_ATTENTION),
                "use_cudnn": bool(sdpa_kernel & SDPA_CUDNN_FLASH_ATTENTION),
                "use_lean": False,
            }
            flash_default, mea_default = 0, 0
        else:
            flags = {
                "use_flash": not _env_bool(env, ENV_DISABLE_FLASH),
                "use_efficient": not _env_bool(env, ENV_DISABLE_MEA),
                "use_trt_fused": not _env_bool(env, ENV_DISABLE_TRT_FUSED),
                "use_trt_flash": not _env_bool(env, ENV_DISABLE_TRT_FLASH),
                "use_trt_cross": not _env_bool(env, ENV_DISABLE_TRT_CROSS),
                "use_cudnn": _env_bool(env, ENV_ENABLE_CUDNN),
                "use_lean": _env_bool(env, ENV_ENABLE_LEAN),
            }
            flash_default, mea_default = DEFAULT_MIN_SEQ_FLASH_PACKED_QKV, DEFAULT_MIN_SEQ_MEA_FP32
        flags["use_flash"] = flags["use_flash"] and build.flash
        flags["use_efficient"] = flags["use_efficient"] and build.mea
        return cls(
            **flags,
            min_seq_flash_packed_qkv=_env_int(env, ENV_MIN_SEQ_FLASH_PACKED_QKV, flash_default),
            min_seq_mea_fp32=_env_int(env, ENV_MIN_SEQ_MEA_FP32, mea_default),
            sdpa_kernel=sdpa_kernel,
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
    ) -> "RuntimeConfig":
        """Return a config from plain values, resolving the kernel options as ORT does."""
        build = BuildFlags(flash=flash_build, mea=mea_build)
        try:
            runner = TrtRunner(trt_runner)
        except ValueError:
            raise InvalidArgument(
                f"trt_runner = {trt_runner!r}; expected one of {[r.value for r in TrtRunner]}"
            ) from None
        return cls(Device(sm), build, KernelOptions.resolve(sdpa_kernel, env, build), runner)
