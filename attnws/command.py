"""Command plumbing shared by the CLI and each layer's commands: argument groups, their
translation into spec objects, and the result record a command returns. Nothing here prints or
exits; `attnws.cli` does both.

A layer adds a subcommand by exposing `register(subparsers)` that creates its parser and sets
`handler=fn` with `fn(namespace, progress) -> CommandResult`; `progress(message)` reports long
runs (the CLI shows it on a terminal only).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .spec.errors import InvalidArgument, UsageError
from .spec.hints import Geometry
from .spec.options import RuntimeConfig, TrtRunner
from .spec.problem import ELEMENT_SIZES, Op, QkvFormat
from .spec.target import DEFAULT_TARGET, DimRange, Target, load_target

EXIT_OK = 0  # sized / all proved / every check passed
EXIT_REJECTED = 1  # the spec rejects the problem, a theorem is refuted, or a check failed
EXIT_USAGE = 2  # the command line cannot be interpreted
EXIT_UNKNOWN = 3  # prove: some theorem UNKNOWN and none refuted

Progress = Callable[[str], None]
# Committed targets and the ledger ship inside the package (package data), so `--target NAME` and
# `--check-ledger` work from any install.
PROOFS_DIR = Path(__file__).resolve().parent / "proofs"


@dataclass
class CommandResult:
    """What a command hands the CLI: its exit code, human text and JSON document."""

    exit_code: int
    text: str
    json: Any = field(default_factory=dict)


DIM_FLAGS = ("tokens", "batch", "seq", "heads", "head_size", "v_head_size", "input_hidden")


def add_problem_arguments(parser: argparse.ArgumentParser, *, require_op: bool = False) -> None:
    """Add the problem flags. Dimensions accept N (a maximum, 1..N), LO..HI, or N..N (exact)."""
    g = parser.add_argument_group("problem")
    g.add_argument("--op", choices=[o.value for o in Op], required=require_op, help="pa or pmha")
    g.add_argument("--dtype", choices=sorted(ELEMENT_SIZES), default=None, help="fp16 (default) or fp32")
    g.add_argument("--tokens", help="packed token count T (default: batch * seq)")
    g.add_argument("--batch", help="batch size B")
    g.add_argument("--seq", help="padded sequence length S")
    g.add_argument("--heads", help="num_heads N")
    g.add_argument("--head-size", dest="head_size", help="Q/K head size H")
    g.add_argument("--v-head-size", dest="v_head_size", help="V head size Hv (default: head size)")
    g.add_argument("--input-hidden", dest="input_hidden", help="PA input hidden size (default: N * H)")
    g.add_argument("--qkv-hidden-sizes", dest="qkv_hidden_sizes", help="PA attribute Q,K,V (makes heads exact)")
    g.add_argument("--format", choices=[f.value for f in QkvFormat], default=None, help="PMHA input format")
    g.add_argument("--qkv-bias", action="store_true", help="PMHA QKV bias input present")
    g.add_argument("--attn-bias", action="store_true", help="attention bias input present")
    g.add_argument("--attn-bias-broadcast-batch", action="store_true", help="attention bias batch dim is 1")
    g.add_argument("--attn-bias-broadcast-heads", action="store_true", help="attention bias head dim is 1")


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the device / build / kernel-option flags."""
    g = parser.add_argument_group("device and options")
    g.add_argument("--sm", type=int, default=None, help="compute capability, 10 * major + minor (default 80)")
    g.add_argument("--sdpa-kernel", dest="sdpa_kernel", type=int, default=None, help="ORT sdpa_kernel bit mask")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="ORT environment variable")
    g.add_argument("--no-flash-build", dest="flash_build", action="store_false", default=None)
    g.add_argument("--no-mea-build", dest="mea_build", action="store_false", default=None)
    g.add_argument("--trt-runner", dest="trt_runner", choices=[r.value for r in TrtRunner], default=None,
                   help="whether the TRT runner's cubin loads (default auto: from the kernel table)")


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document")


def parse_env(pairs: list[str]) -> dict[str, str]:
    """Return the --env NAME=VALUE pairs as a mapping."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"--env {pair!r}: expected NAME=VALUE")
        env[name] = value
    return env


def config_from_args(ns: argparse.Namespace, base: RuntimeConfig | None = None) -> RuntimeConfig:
    """Return the runtime configuration the flags describe (unset flags keep `base`'s values)."""
    base = base or RuntimeConfig()
    env = parse_env(ns.env)
    return RuntimeConfig.make(
        sm=base.device.sm if ns.sm is None else ns.sm,
        sdpa_kernel=base.options.sdpa_kernel if ns.sdpa_kernel is None else ns.sdpa_kernel,
        env=env,
        flash_build=base.build.flash if ns.flash_build is None else ns.flash_build,
        mea_build=base.build.mea if ns.mea_build is None else ns.mea_build,
        trt_runner=base.trt_runner if ns.trt_runner is None else ns.trt_runner,
    )


def problem_flags_given(ns: argparse.Namespace) -> bool:
    """Return whether any problem flag was given (none given selects the default target)."""
    return any(getattr(ns, name, None) not in (None, False) for name in
               (*DIM_FLAGS, "op", "dtype", "qkv_hidden_sizes", "format", "qkv_bias", "attn_bias",
                "attn_bias_broadcast_batch", "attn_bias_broadcast_heads"))


def qkv_hidden_sizes_from_args(ns: argparse.Namespace) -> tuple[int, int, int] | None:
    if not ns.qkv_hidden_sizes:
        return None
    try:
        values = tuple(int(v) for v in ns.qkv_hidden_sizes.split(","))
    except ValueError:
        raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes!r}: expected Q,K,V integers") from None
    if len(values) != 3:
        raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes!r}: expected exactly three values")
    return values  # type: ignore[return-value]


def _ranges(ns: argparse.Namespace) -> dict[str, DimRange | None]:
    out: dict[str, DimRange | None] = {}
    for name in DIM_FLAGS:
        raw = getattr(ns, name, None)
        try:
            out[name] = None if raw is None else DimRange.parse(raw, "--" + name.replace("_", "-"))
        except InvalidArgument as error:
            raise UsageError(str(error)) from None
    return out


def target_from_args(ns: argparse.Namespace) -> Target:
    """Return the target the flags describe: `--target NAME|FILE`, the problem flags (ranges),
    or the built-in default target when no problem flag is given. Config flags apply on top."""
    name = getattr(ns, "target", None)
    if name:
        path = Path(name)
        if not path.exists():
            path = PROOFS_DIR / "targets" / f"{name}.json"
        if not path.exists():
            raise UsageError(f"--target {name!r}: no such file or committed target")
        base = load_target(path)
    elif not problem_flags_given(ns):
        base = DEFAULT_TARGET
    else:
        base = None
    if base is not None:
        from dataclasses import replace

        return replace(base, config=config_from_args(ns, base.config), env=base.env + tuple(parse_env(ns.env).items()))
    if ns.op is None:
        raise UsageError("--op pa|pmha is required with problem flags")
    dims = _ranges(ns)
    sizes = qkv_hidden_sizes_from_args(ns)
    heads = dims["heads"]
    if sizes is not None and heads is not None:
        dims["head_size"] = dims["head_size"] or DimRange(sizes[0] // heads.hi, sizes[0] // heads.hi)
        dims["v_head_size"] = dims["v_head_size"] or DimRange(sizes[2] // heads.hi, sizes[2] // heads.hi)
        dims["heads"] = DimRange(heads.hi, heads.hi)
        if dims["head_size"].hi * heads.hi != sizes[0] or dims["v_head_size"].hi * heads.hi != sizes[2]:
            raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes} disagree with --heads {heads.hi} and the head sizes")
    missing = [f"--{n.replace('_', '-')}" for n in ("batch", "seq", "heads", "head_size") if dims[n] is None]
    if missing:
        raise UsageError(f"missing problem flags: {' '.join(missing)}")
    return Target(
        op=Op(ns.op), element_size=ELEMENT_SIZES[ns.dtype or "fp16"],
        batch=dims["batch"], seq=dims["seq"], heads=dims["heads"], head_size=dims["head_size"],
        v_head_size=dims["v_head_size"], tokens=dims["tokens"], input_hidden=dims["input_hidden"],
        qkv_hidden_sizes=sizes is not None, pmha_format=QkvFormat(ns.format or "packed"),
        qkv_bias=ns.qkv_bias, attn_bias=ns.attn_bias, attn_bias_broadcast_batch=ns.attn_bias_broadcast_batch,
        attn_bias_broadcast_heads=ns.attn_bias_broadcast_heads, config=config_from_args(ns),
        env=tuple(parse_env(ns.env).items()),
    )


def geometry_from_args(ns: argparse.Namespace) -> tuple[Geometry, RuntimeConfig]:
    """Return one concrete geometry (each flag a single value N or N..N) and its configuration."""
    if ns.op is None:
        raise UsageError("--op pa|pmha is required")
    dims = _ranges(ns)
    for name, value in dims.items():
        if value is not None and not value.exact and value.lo != min(1, value.hi):
            raise UsageError(f"--{name.replace('_', '-')} {value}: this command takes one value, not a range")
    missing = [f"--{n.replace('_', '-')}" for n in ("batch", "seq", "heads") if dims[n] is None]
    sizes = qkv_hidden_sizes_from_args(ns)
    if dims["head_size"] is None and sizes is None:
        missing.append("--head-size")
    if missing:
        raise UsageError(f"missing problem flags: {' '.join(missing)}")
    point = {k: (None if v is None else v.hi) for k, v in dims.items()}
    heads = point["heads"]
    head_size = point["head_size"] if point["head_size"] is not None else sizes[0] // max(heads, 1)
    v_head = point["v_head_size"]
    if v_head is None and sizes is not None:
        v_head = sizes[2] // max(heads, 1)
    geometry = Geometry(
        op=Op(ns.op), element_size=ELEMENT_SIZES[ns.dtype or "fp16"], batch=point["batch"], seq=point["seq"],
        heads=heads, head_size=head_size, v_head_size=v_head, tokens=point["tokens"],
        input_hidden=point["input_hidden"], qkv_hidden_sizes=sizes, pmha_format=QkvFormat(ns.format or "packed"),
        qkv_bias=ns.qkv_bias, attn_bias=ns.attn_bias, attn_bias_broadcast_batch=ns.attn_bias_broadcast_batch,
        attn_bias_broadcast_heads=ns.attn_bias_broadcast_heads,
    )
    return geometry, config_from_args(ns)
