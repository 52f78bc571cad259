"""Command plumbing shared by the CLI and each layer's commands: argument groups, their checks and
translation into spec objects, and the result record a command returns. Nothing here prints or
exits; `attnws.cli` does both.

A layer adds a subcommand by exposing `register(subparsers)` that creates its parser and sets
`handler=fn` with `fn(namespace, progress) -> CommandResult`; `progress(message)` reports long
runs (the CLI shows it on a terminal only).

Every flag is checked here against what it can apply to, and a flag that cannot apply is a usage
error naming it and why: a flag of the other operator, problem flags beside `--target`, a range
where a command needs one shape, an environment variable ORT does not read, an `sdpa_kernel` bit
ORT does not define, a compute capability the capability tables do not know. Every integer a flag
takes is read by one parser (`parse_integer`: ASCII digits only), and text a person reads passes
through `printable` (control characters escaped).
"""

from __future__ import annotations

import argparse
import difflib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from .declared import EXACT, FROM_ZERO, MAXIMUM, Flag, flag_uses
from .devices import DEFAULT_PART, KNOWN_SMS, MAX_SM_COUNT, default_sm_count
from .documents import STDIN, DocumentError, open_user_file
from .errors import InvalidArgument, NodeRejected, UsageError
from .families import DIMENSION_LABELS, FAMILIES, SHOWN_ORDER, dtype_problem, op_fields
from .hints import Geometry
from .limits import INT32_MAX
from .options import (
    IGNORED_ENV, KNOWN_ENV, SDPA_CUDNN_FLASH_ATTENTION, SDPA_DECODER_ATTENTION, SDPA_DEFINED_BITS,
    SDPA_EFFICIENT_ATTENTION, SDPA_FLASH_ATTENTION, SDPA_LEAN_ATTENTION, SDPA_MATH, SDPA_TRT_CROSS_ATTENTION,
    SDPA_TRT_FLASH_ATTENTION, SDPA_TRT_FUSED_ATTENTION, RuntimeConfig, TrtRunner,
)
from .ort_version import ORT_VERSION
from .problem import ELEMENT_SIZES, Op
from .target import DEFAULT_TARGET, PATTERN_DIMS, DimRange, Target, load_target, parse_patterns
from .units import MAX_INTEGER_DIGITS, in_range, parse_integer

# One exit code per kind of error, in every command. A problem ORT rejects (its check quoted, as
# `dispatch` quotes it) is EXIT_REJECTED whichever command meets it, and so is a model file that is
# read but is not a valid model ("bad model"); a file the command line names that cannot be read
# (missing, a folder, unreadable) is EXIT_USAGE, and so is a target or shapes file that is read but
# malformed: it describes the command line's problem, it is not the problem.
EXIT_OK = 0  # sized / all proved / every check passed
EXIT_REJECTED = 1  # the spec rejects the problem, a theorem is refuted or vacuous, a check failed, or a bad model
EXIT_USAGE = 2  # the command line (or a file it names) cannot be interpreted: missing, unreadable or malformed
EXIT_UNKNOWN = 3  # undecided: a theorem or search UNKNOWN and nothing refuted or found; validate: no shape ran
EXIT_INTERNAL = 4  # a bug in attnws (an internal error); the message says so
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT): what was printed before it is partial

JSON_SCHEMA_VERSION = 1  # every JSON document carries it as "schema_version" (docs/json-schema.md)

Progress = Callable[[str], None]
# Committed targets and the ledger ship inside the package (package data), so `--target NAME` and
# `--check-ledger` work from any install.
PROOFS_DIR = Path(__file__).resolve().parent.parent / "proofs"
TARGETS_DIR = PROOFS_DIR / "targets"


@dataclass
class CommandResult:
    """What a command hands the CLI: its exit code, human text and JSON document.

    A streaming command (`validate`) returns `stream`: results the CLI prints one by one as they are
    produced (text blocks, or one JSON line each); the last one it yields is the summary, whose
    exit code is the command's."""

    exit_code: int
    text: str
    json: Any = field(default_factory=dict)
    stream: Iterator["CommandResult"] | None = None


# Dimension flags every operator has. Batch and sequence counts vary at run time: a bare N is a
# maximum (1..N). Heads and head sizes are fixed by the model (attributes and weights): a bare N is
# exact, and head sizes take a range only when written LO..HI. Each family declares its own
# dimension flags and what a bare N means for them (`attnws.spec.declared`).
COMMON_DIMS = {"batch": MAXIMUM, "seq": MAXIMUM, "heads": EXACT, "head_size": EXACT, "v_head_size": EXACT}
# The flags each operator has of its own, as its family declares them (the others are a usage
# error naming the operator that has them).
FLAG_USES = flag_uses()
OP_FLAGS = {op: flags for family in FAMILIES for op, flags in family.fields.FLAGS.items()}
OPTIONAL_FLAGS = tuple(sorted(FLAG_USES))
DIM_FLAGS = (*COMMON_DIMS, *(dest for dest, use in FLAG_USES.items() if use.flag.kind == "dimension"))
COMMON_FLAGS = ("op", "dtype", "attn_bias", "attn_bias_broadcast_batch", "attn_bias_broadcast_heads")
PROBLEM_FLAGS = (*DIM_FLAGS, *COMMON_FLAGS, *(dest for dest in FLAG_USES if dest not in DIM_FLAGS))
CONFIG_FLAGS = ("sm", "sm_count", "sdpa_kernel", "env", "flash_build", "mea_build", "trt_build", "trt_runner")

SDPA_BITS = {
    SDPA_FLASH_ATTENTION: "Flash", SDPA_EFFICIENT_ATTENTION: "memory-efficient (MEA)",
    SDPA_TRT_FUSED_ATTENTION: "TRT fused", SDPA_CUDNN_FLASH_ATTENTION: "cuDNN flash (MHA only)",
    SDPA_MATH: "math (unfused)", SDPA_TRT_FLASH_ATTENTION: "TRT flash", SDPA_TRT_CROSS_ATTENTION: "TRT cross (MHA only)",
    SDPA_LEAN_ATTENTION: "lean (not in ORT's released build: no effect)",
    SDPA_DECODER_ATTENTION: "decoder-masked MHA (needs cache_indirection, not modelled: no effect)",
}
ACCEPTED_ENV = KNOWN_ENV + IGNORED_ENV

EXACT_HELP = "N is exact; LO..HI a range"
TARGET_METAVAR = "NAME|FILE"  # the one placeholder for a target, in help, messages and the README
UINT32_MAX = 2**32 - 1  # Z3's resource and time limits are unsigned 32-bit: a larger value wraps
def integer(text: str) -> int:
    """argparse type of every integer flag (the CLI's parser reads `type=int` with it)."""
    value = parse_integer(text)
    if value is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative integer in ASCII digits (no sign, '_', "
                                         f"blanks or other scripts' digits; at most {MAX_INTEGER_DIGITS} of them)")
    return value


_NUMBER_TEXT = re.compile(r"[0-9]{1,30}(?:\.[0-9]{1,30})?|inf")


def number(text: str) -> float:
    """argparse type of every decimal flag (the CLI's parser reads `type=float` with it): ASCII
    digits with an optional fraction, or inf; no sign, exponent, nan, '_' or blanks."""
    if not isinstance(text, str) or not _NUMBER_TEXT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a non-negative decimal number (ASCII digits with an "
                                         "optional fraction, e.g. 60 or 2.5, or inf)")
    return float(text)


# Characters that move the cursor, change colours, break or reorder a line on a terminal: C0 and C1
# controls (ESC, CR, BS, ...), line and paragraph separators, and the bidirectional overrides.
def flag(name: str) -> str:
    """Return the command-line spelling of a namespace attribute: head_size -> --head-size."""
    return "--" + name.replace("_", "-")


def add_problem_arguments(parser: argparse.ArgumentParser, *, require_op: bool = False) -> None:
    """Add the problem flags (see DIM_FLAGS for what a bare N means)."""
    g = parser.add_argument_group(
        "problem", "Batch, sequence and token counts: N is a maximum (1..N), LO..HI a range, N..N exact. "
                   "Heads are exact (num_heads is an attribute); head sizes and the PA input hidden size "
                   "are exact when bare, a range only when written LO..HI.")
    g.add_argument("--op", choices=[o.value for o in Op], required=require_op,
                   help=", ".join(f"{o.value} ({o.onnx_name})" for o in list(Op)[:-1])
                   + f" or {list(Op)[-1].value} ({list(Op)[-1].onnx_name})")
    g.add_argument("--dtype", choices=sorted(ELEMENT_SIZES), default=None,
                   help="element type (default fp16; bf16: GQA and PAGED only, which run no fp32)")
    g.add_argument("--batch", metavar="B", help="batch size (a maximum)")
    g.add_argument("--seq", metavar="S", help="padded (MHA, GQA: query; PAGED: the longest sequence's new tokens) "
                                              "sequence length (a maximum)")
    g.add_argument("--heads", metavar="N", help="num_heads attribute (exact)")
    g.add_argument("--head-size", dest="head_size", metavar="H", help=f"Q/K head size ({EXACT_HELP})")
    g.add_argument("--v-head-size", dest="v_head_size", metavar="HV",
                   help=f"V head size ({EXACT_HELP}; default: the head size; PA needs --qkv-hidden-sizes, "
                        "PMHA --format separate to differ)")
    for use in FLAG_USES.values():
        add_declared_flag(g, use.flag)
    g.add_argument("--attn-bias", action="store_true", help="the attention bias input is present")
    g.add_argument("--attn-bias-broadcast-batch", action="store_true",
                   help="attention bias batch dimension is 1 (needs --attn-bias)")
    g.add_argument("--attn-bias-broadcast-heads", action="store_true",
                   help="attention bias head dimension is 1 (needs --attn-bias)")


def add_declared_flag(group: argparse._ArgumentGroup, declared: Flag) -> None:
    """Add a flag a family declares, as its kind reads it (integers and decimals with this
    module's parsers; a dimension or a value as text its reader parses; a choice with a bare
    value takes it when given alone)."""
    options: dict[str, Any] = {"dest": declared.dest, "help": declared.help}
    if declared.kind == "switch":
        options["action"] = "store_true"
    else:
        options.update(default=None, metavar=declared.metavar)
        if declared.kind in ("integer", "number"):
            options["type"] = integer if declared.kind == "integer" else number
        if declared.kind == "choice":
            options.update(choices=list(declared.choices), metavar=None)
        if declared.bare:
            options.update(nargs="?", const=declared.bare)
    group.add_argument(flag(declared.dest), **options)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the device / build / kernel-option flags."""
    g = parser.add_argument_group("device and options")
    g.add_argument("--sm", type=int, default=None, metavar="SM",
                   help=f"compute capability, 10 * major + minor; one of {', '.join(map(str, KNOWN_SMS))} "
                        "(default 80)")
    g.add_argument("--sm-count", dest="sm_count", type=integer, default=None, metavar="N",
                   help="the device's multiprocessor count, which Flash's split-KV and XQA's scratch depend on "
                        f"(default: the --sm's common part: {', '.join(f'{DEFAULT_PART[sm]} {default_sm_count(sm)}' for sm in KNOWN_SMS)})")
    bits = ", ".join(f"{bit} {name}" for bit, name in SDPA_BITS.items())
    g.add_argument("--sdpa-kernel", dest="sdpa_kernel", type=int, default=None, metavar="MASK",
                   help=f"ORT's sdpa_kernel provider option, a sum of bits: {bits}; 0 (default) reads the "
                        "environment variables instead")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an ORT environment variable (repeatable; `attnws --help` lists the names ORT reads); the "
                        "process environment is never read")
    g.add_argument("--no-flash-build", dest="flash_build", action="store_false", default=None,
                   help="ORT built without Flash attention")
    g.add_argument("--no-mea-build", dest="mea_build", action="store_false", default=None,
                   help="ORT built without memory-efficient attention")
    g.add_argument("--no-trt-build", dest="trt_build", action="store_false", default=None,
                   help="ORT built without the TRT fused attention kernels (onnxruntime_USE_TRT_FUSED_ATTENTION=OFF)")
    g.add_argument("--trt-runner", dest="trt_runner", choices=[r.value for r in TrtRunner], default=None,
                   help="whether the TRT runner's cubin loads: auto (default) from the kernel table, "
                        "unknown reports every backend it could lead to")


def output_group(parser: argparse.ArgumentParser) -> Any:
    """Return the parser's "output" argument group (created on first use): --json and the like."""
    return next((g for g in parser._action_groups if g.title == "output"), None) or parser.add_argument_group("output")


def add_json_argument(parser: argparse.ArgumentParser, group: Any = None) -> None:
    """Add --json to `group` (a mutually exclusive group of the output's forms), else to the
    parser's output group."""
    (group or output_group(parser)).add_argument("--json", action="store_true",
                                                 help="print JSON (docs/json-schema.md) instead of text")


def add_target_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--target NAME|FILE`, the alternative to the problem flags."""
    parser.add_argument_group("target").add_argument(
        "--target", metavar=TARGET_METAVAR,
        help="a committed target (`attnws targets` lists them) or a target JSON file; it fixes the problem, so "
             "problem flags cannot be combined with it; device and option flags apply on top of it")


def add_pattern_argument(parser: Any, of: str = "the target; added to the target's own patterns") -> None:
    """Add `--pattern NAME:DIM=RANGE[,DIM=RANGE...]` (repeatable): a memory pattern; `of` says what
    it narrows (a target, or each attention node of a model)."""
    parser.add_argument(
        "--pattern", action="append", default=[], metavar="NAME:DIM=RANGE[,...]",
        help="a memory pattern: a named sub-box whose own maximum is proven (repeatable), e.g. "
             f"decode:seq=1,past=0..4095; DIM is one of {', '.join(PATTERN_DIMS)}, each RANGE read as "
             f"that dimension's flag reads it; the sub-box of {of}")


def patterns_from_args(ns: argparse.Namespace, target: Target) -> Target:
    """Return the target with the --pattern flags added to its own patterns."""
    texts = getattr(ns, "pattern", None) or []
    if not texts:
        return target
    try:
        return replace(target, patterns=target.patterns + parse_patterns(texts))
    except InvalidArgument as error:
        raise UsageError(str(error)) from None


def given(ns: argparse.Namespace, names: tuple[str, ...]) -> list[str]:
    """Return the flags among `names` given on the command line (set, not at their unset default)."""
    return [flag(name) for name in names if getattr(ns, name, None) not in (None, False, [])]


def problem_flags_given(ns: argparse.Namespace) -> bool:
    """Return whether any problem flag was given (none given selects the default target)."""
    return bool(given(ns, PROBLEM_FLAGS))


def config_flags_given(ns: argparse.Namespace) -> list[str]:
    """Return the device / option flags given on the command line. Every one defaults to None (the
    --no-*-build flags store False when given, so False is given here, unlike a store_true flag)."""
    return [flag(name) for name in CONFIG_FLAGS if getattr(ns, name, None) not in (None, [])]


def suggestion(word: str, choices: Any) -> str:
    """Return "; did you mean 'X'?" for the closest choice, or ''."""
    close = difflib.get_close_matches(word, [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def name_value(pair: str, option: str, expected: str) -> tuple[str, str]:
    """Return (NAME, VALUE) of one `option NAME=VALUE` argument, NAME stripped; raise UsageError
    "OPTION 'PAIR': expected EXPECTED" when there is no '=' or no name."""
    name, sep, value = pair.partition("=")
    name = name.strip()
    if not sep or not name:
        raise UsageError(f"{option} {pair!r}: expected {expected}")
    return name, value


def parse_env(pairs: list[str]) -> dict[str, str]:
    """Return the --env NAME=VALUE pairs as a mapping: names ORT reads, each given once."""
    env: dict[str, str] = {}
    for pair in pairs:
        name, value = name_value(pair, "--env", "NAME=VALUE")
        if name not in ACCEPTED_ENV:
            raise UsageError(f"--env {name}: not an environment variable ORT reads for attention"
                             f"{suggestion(name, ACCEPTED_ENV)} (known: {', '.join(ACCEPTED_ENV)})")
        if name in env and env[name] != value:
            raise UsageError(f"--env {name} is given twice ({env[name]!r} and {value!r})")
        env[name] = value
    return env


def check_sm(sm: int) -> int:
    """Return sm when the capability tables know it, else raise UsageError with the list."""
    if sm not in KNOWN_SMS:
        raise UsageError(f"--sm {sm}: not a compute capability attnws models{suggestion(str(sm), KNOWN_SMS)} "
                         f"(known: {', '.join(map(str, KNOWN_SMS))}: ORT {ORT_VERSION}'s CUDA 13 wheel carries kernels "
                         "for these only, and no PTX, so on sm70 and sm100 its kernels cannot launch)")
    return sm


def check_sdpa_kernel(mask: int) -> int:
    """Return mask when it is 0 or a sum of bits ORT 1.31.1 defines, else raise UsageError naming the bits."""
    if not 0 <= mask <= INT32_MAX:
        raise UsageError(f"--sdpa-kernel {mask}: must be a non-negative bit mask")
    undefined = mask & ~SDPA_DEFINED_BITS
    if undefined:
        bits = [1 << i for i in range(undefined.bit_length()) if undefined >> i & 1]
        raise UsageError(f"--sdpa-kernel {mask}: bit(s) {', '.join(map(str, bits))} are not defined by ORT 1.31.1, "
                         "which ignores them (bit 128, TRT causal attention, was removed by ORT #29143); defined: "
                         f"{', '.join(f'{bit} {name}' for bit, name in SDPA_BITS.items())}")
    return mask


def config_from_args(ns: argparse.Namespace, base: Target | None = None) -> RuntimeConfig:
    """Return the runtime configuration the flags describe; unset flags keep `base`'s values (its
    environment included: --env adds to or overrides the target's)."""
    if base is None:
        return config_over(ns, RuntimeConfig(), ())
    return config_over(ns, base.config, base.env)


def config_over(ns: argparse.Namespace, config: RuntimeConfig, base_env: tuple[tuple[str, str], ...]) -> RuntimeConfig:
    """Return `config` with the device and option flags given applied (--env adds to `base_env`)."""
    if not config_flags_given(ns):
        return config
    env = {**dict(base_env), **parse_env(getattr(ns, "env", []))}
    sm = config.device.sm if ns.sm is None else check_sm(ns.sm)
    sm_count = (None if ns.sm is not None else config.device.sm_count) if ns.sm_count is None else \
        in_range(ns.sm_count, "--sm-count", 1, MAX_SM_COUNT)
    sdpa = config.options.sdpa_kernel if ns.sdpa_kernel is None else check_sdpa_kernel(ns.sdpa_kernel)
    try:
        return RuntimeConfig.make(
            sm=sm, sdpa_kernel=sdpa, env=env,
            flash_build=config.build.flash if ns.flash_build is None else ns.flash_build,
            mea_build=config.build.mea if ns.mea_build is None else ns.mea_build,
            trt_build=config.build.trt if ns.trt_build is None else ns.trt_build,
            trt_runner=config.trt_runner if ns.trt_runner is None else ns.trt_runner, sm_count=sm_count,
        )
    except InvalidArgument as error:
        raise UsageError(f"--env / --sdpa-kernel: {error}") from None


def env_from_args(ns: argparse.Namespace, base: Target | None = None) -> tuple[tuple[str, str], ...]:
    """Return the environment (the target's, then --env) as sorted pairs."""
    env = {**dict(base.env if base is not None else ()), **parse_env(getattr(ns, "env", []))}
    return tuple(sorted(env.items()))


def reading_of(name: str, op: Op | None = None) -> str:
    """Return what a bare N means for the dimension flag: the common dimensions' reading, else the
    operator's family's (without an operator, the first family's that declares it)."""
    if name in COMMON_DIMS:
        return COMMON_DIMS[name]
    use = FLAG_USES[name]
    return use.reading(op) if op in use.ops else use.flag.reading


def parse_dim(raw: str, name: str, op: Op | None = None) -> DimRange:
    """Return the range a dimension flag gives: N, read as the dimension's family declares for the
    operator (a maximum 1..N, a range 0..N from zero, or exact), or LO..HI, each an integer
    `parse_integer` reads; --heads takes one value."""
    first, dots, second = raw.partition("..")
    lo, hi = parse_integer(first), parse_integer(second if dots else first)
    if lo is None or hi is None:
        raise UsageError(f"{flag(name)} {raw!r}: expected N or LO..HI (non-negative integers in ASCII digits, "
                         "no blanks)")
    reading = reading_of(name, op)
    if not dots and reading != EXACT:
        lo = 0 if reading == FROM_ZERO else min(1, hi)
    if hi > INT32_MAX or lo > hi:
        raise UsageError(f"{flag(name)} {raw}: needs 0 <= LO <= HI <= {INT32_MAX}")
    if name == "heads" and lo != hi:
        raise UsageError(f"--heads {raw}: num_heads is a node attribute, one value per model; give one N")
    return DimRange(lo, hi)


def dims_from_args(ns: argparse.Namespace, op: Op) -> dict[str, DimRange | None]:
    """Return each dimension flag's range for the operator (None where not given)."""
    return {name: None if getattr(ns, name, None) is None else parse_dim(getattr(ns, name), name, op)
            for name in DIM_FLAGS}


def qkv_hidden_sizes_from_args(ns: argparse.Namespace) -> tuple[int, int, int] | None:
    if not getattr(ns, "qkv_hidden_sizes", None):
        return None
    values = tuple(parse_integer(v) for v in ns.qkv_hidden_sizes.split(","))
    if None in values:
        raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes!r}: expected Q,K,V non-negative integers "
                         "(ASCII digits)")
    if len(values) != 3:
        raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes!r}: expected exactly three values")
    if any(not 0 <= v <= INT32_MAX for v in values):
        raise UsageError(f"--qkv-hidden-sizes {ns.qkv_hidden_sizes}: values must be within [0, {INT32_MAX}]")
    return values  # type: ignore[return-value]


def check_own_flags(ns: argparse.Namespace, op: Op, names: tuple[str, ...]) -> None:
    """Raise UsageError for the first of `names` given that only other operators have, naming them."""
    foreign = [name for name in names if name in OPTIONAL_FLAGS and name not in OP_FLAGS[op]]
    for name in given(ns, tuple(foreign)):
        owners = [f"{o.onnx_name} (--op {o.value})" for o in Op if name.lstrip("-").replace("-", "_") in OP_FLAGS[o]]
        listed = owners[0] if len(owners) == 1 else f"{', '.join(owners[:-1])} and {owners[-1]}"
        raise UsageError(f"{name}: only {listed} {'has' if len(owners) == 1 else 'have'} it; not --op {op.value}")


def problem_flags(ns: argparse.Namespace) -> tuple[Op, dict[str, DimRange | None]]:
    """Return the operator and its dimensions' ranges; raise UsageError for a flag that cannot apply."""
    if ns.op is None:
        raise UsageError(f"--op {'|'.join(o.value for o in Op)} is required with problem flags")
    op = Op(ns.op)
    check_own_flags(ns, op, OPTIONAL_FLAGS)
    dims = dims_from_args(ns, op)
    if dtype_problem(op, ns.dtype):
        raise UsageError(f"--{dtype_problem(op, ns.dtype)}")
    fields = op_fields(op)
    formats = fields.format_type(op)
    if ns.format is not None and ns.format not in [f.value for f in formats]:
        raise UsageError(f"--format {ns.format}: {op.onnx_name} takes {', '.join(f.value for f in formats)}")
    for broadcast in ("attn_bias_broadcast_batch", "attn_bias_broadcast_heads"):
        if getattr(ns, broadcast, False) and not ns.attn_bias:
            raise UsageError(f"{flag(broadcast)} needs --attn-bias")
    hv, h = dims["v_head_size"], dims["head_size"]
    if hv is not None and hv != h and fields.flag_problem(op, ns):
        raise UsageError(fields.flag_problem(op, ns))
    return op, dims


def committed_target_names() -> list[str]:
    """Return the names of the committed targets (the file names in TARGETS_DIR, sorted)."""
    return sorted(path.stem for path in TARGETS_DIR.glob("*.json"))


def target_suggestion(name: str) -> str:
    """Return "; did you mean ...?" for a target name no file or committed target has: the committed
    names it begins (several when it is the prefix of several), else the closest one."""
    stem = Path(name).name.removesuffix(".json")
    names = committed_target_names()
    starting = [n for n in names if n.startswith(stem)] if stem else []
    if len(starting) > 1:
        return f"; did you mean one of {', '.join(starting)}?"
    return f"; did you mean {starting[0]!r}?" if starting else suggestion(stem, names)


def resolve_target_path(name: str) -> Path:
    """Return the file `--target NAME|FILE` names: an existing file, else a committed target (a
    path whose file is missing is found among the committed targets by its file name)."""
    path = Path(name)
    if path.exists():
        return path  # documents.py says what it is when it is not a regular file
    committed = TARGETS_DIR / f"{path.name.removesuffix('.json')}.json"
    if committed.exists():
        return committed
    raise UsageError(f"--target {name!r}: no such file or committed target{target_suggestion(name)} "
                     "(`attnws targets` lists them)")


def load_target_arg(name: str) -> Target:
    """Return the target `--target NAME|FILE` names; a malformed or unreadable file is a usage error."""
    path = resolve_target_path(name)
    try:
        return checked_node(load_target(path))
    except NodeRejected:
        raise  # ORT's check of the problem the file describes, as `dispatch` gives it
    except InvalidArgument as error:
        raise UsageError(f"--target {name}: {error}") from None


def readable_file(path: str, what: str) -> None:
    """Raise UsageError where the file the command line names cannot be read: missing, not a
    regular file, or unreadable ('-', standard input, is read by the command itself). What it
    holds is the command's to judge."""
    if path == STDIN:
        return
    try:
        with open_user_file(path, what):
            pass
    except DocumentError as error:
        raise UsageError(str(error)) from None


def checked_node(t: Target) -> Target:
    """Return the target when ORT accepts its node's attributes (IsValidConfig: num_heads in
    [1, INT32_MAX] where the target fixes it), else raise NodeRejected with ORT's check: every
    shape of the box fails it, whichever command runs (the family's own checks at the maxima run
    when the target is made)."""
    if t.heads is not None and t.heads.exact:
        refuse_config(t.op, t.element_size, t.heads.lo, None)
    return t


def refuse_config(op: Op, element_size: int, heads: int, sizes: Any) -> None:
    """Raise NodeRejected with ORT's IsValidConfig check where it refuses the node's attributes
    (num_heads, qkv_hidden_sizes), whatever its shapes."""
    from .estimate import config_problem

    problem = config_problem(op, element_size, heads, sizes)
    if problem:
        raise NodeRejected(f"{op.onnx_name} {problem}")


def box_terms(t: Target, spaced: bool = True) -> list[str]:
    """Return a target's dimensions: maxima "S <= 512", exact values "N = 12", ranges "S in 8..512"
    (`spaced` False, for a name: "S<=512", "N=12", "S=8..512")."""
    terms = []
    for name in SHOWN_ORDER:
        symbol, r = DIMENSION_LABELS[name], getattr(t, name)
        if r is None:
            continue
        relation, value = ("=", r.lo) if r.exact else ("<=", r.hi) if r.lo <= 1 else ("in" if spaced else "=", r)
        terms.append(f"{symbol} {relation} {value}" if spaced else f"{symbol}{relation}{value}")
    return terms


def flags_target_name(t: Target) -> str:
    """Return the name of a target the problem flags describe, from those flags:
    "pmha fp16 sm80 B<=8 S<=512 N=12 H=64", then the operator's flags that differ from its defaults."""
    dtype = "bf16" if t.bf16 else "fp16" if t.element_size == 2 else "fp32"
    words = [t.op.value, dtype, f"sm{t.config.device.sm}", *box_terms(t, False)]
    words += op_fields(t.op).name_words(t)
    words += [w for w, on in (("qkv-bias", t.qkv_bias), ("attn-bias", t.attn_bias)) if on]
    return " ".join(words)


def target_from_args(ns: argparse.Namespace) -> Target:
    """Return the target the flags describe (`target_without_patterns`) with its --pattern flags."""
    return patterns_from_args(ns, target_without_patterns(ns))


def target_without_patterns(ns: argparse.Namespace) -> Target:
    """Return the target the flags describe: `--target NAME|FILE`, the problem flags, or the
    built-in default target when no problem flag is given. Config flags apply on top of a target
    (--env adds to its environment); problem flags beside --target are a usage error."""
    name = getattr(ns, "target", None)
    if name:
        problem = given(ns, tuple(f for f in PROBLEM_FLAGS if f != "op"))
        if problem:
            raise UsageError(f"--target {name} fixes the problem; {' '.join(problem)} cannot be combined with it "
                             "(drop them, or drop --target and give every problem flag)")
        base = load_target_arg(name)
        if ns.op is not None and Op(ns.op) is not base.op:
            raise UsageError(f"--op {ns.op}: --target {name} is {base.op.onnx_name}'s (op {base.op.value})")
    elif not problem_flags_given(ns):
        base = DEFAULT_TARGET
    else:
        base = None
    if base is not None:
        if not config_flags_given(ns):
            return base
        return replace(base, config=config_from_args(ns, base), env=env_from_args(ns, base))
    op, dims = problem_flags(ns)
    sizes = qkv_hidden_sizes_from_args(ns)
    if sizes is not None:
        heads = dims["heads"]
        if heads is None:
            raise UsageError("--qkv-hidden-sizes needs --heads")
        n = heads.hi
        refuse_config(op, ELEMENT_SIZES[ns.dtype or "fp16"], n, sizes)
        implied = {"head_size": DimRange(sizes[0] // n, sizes[0] // n), "v_head_size": DimRange(sizes[2] // n, sizes[2] // n)}
        for key, value in implied.items():
            if dims[key] is not None and dims[key] != value:
                raise UsageError(f"{flag(key)} {dims[key]} disagrees with --qkv-hidden-sizes {ns.qkv_hidden_sizes} "
                                 f"and --heads {n}, which give {value}")
            dims[key] = value
    missing = [flag(n) for n in ("batch", "seq", "heads", "head_size", *op_fields(op).REQUIRED_DIMENSIONS[op])
               if dims[n] is None]
    if missing:
        raise UsageError(f"missing problem flags: {' '.join(missing)}")
    try:
        target = _flags_target(ns, op, dims, sizes)
        return checked_node(replace(target, name=flags_target_name(target)))  # the spec's default name is "custom"
    except NodeRejected:
        raise  # ORT's check of the problem the flags describe, as `dispatch` gives it
    except InvalidArgument as error:
        raise UsageError(str(error)) from None


def _flags_target(ns: argparse.Namespace, op: Op, dims: dict[str, DimRange | None],
                  sizes: tuple[int, int, int] | None) -> Target:
    """Return the target the problem flags give, before it is named."""
    return Target(
        op=op, element_size=ELEMENT_SIZES[ns.dtype or "fp16"], batch=dims["batch"], seq=dims["seq"],
        heads=dims["heads"], head_size=dims["head_size"], v_head_size=dims["v_head_size"],
        **op_fields(op).target_fields(op, ns, dims, sizes), qkv_bias=ns.qkv_bias, attn_bias=ns.attn_bias,
        attn_bias_broadcast_batch=ns.attn_bias_broadcast_batch, attn_bias_broadcast_heads=ns.attn_bias_broadcast_heads,
        config=config_from_args(ns), env=env_from_args(ns),
    )


def geometry_from_args(ns: argparse.Namespace, command: str = "this command",
                       estimate: bool = True) -> tuple[Geometry, RuntimeConfig]:
    """Return one concrete geometry (each dimension flag one value, N or N..N) and its configuration.
    `estimate`: whether the command reads ORT's AOT estimate of the shape (validate does); a
    command that does not (dispatch, recipe, estimate --exact) refuses the flags only that
    estimate reads (the family's `ESTIMATE_ONLY`: GroupQueryAttention's session bound)."""
    op, dims = problem_flags(ns)
    unread = [] if estimate else given(ns, op_fields(op).ESTIMATE_ONLY)
    if unread:
        raise UsageError(f"{unread[0]}: only ORT's AOT estimate reads it (a session option), and `attnws {command}` "
                         "sizes one shape without it; drop it (`attnws estimate`, `prove`, `counterexamples`, `plot`, "
                         "`validate` and `model` read it)")
    for name, value in dims.items():
        if value is not None and getattr(ns, name) is not None and ".." in getattr(ns, name) and not value.exact:
            raise UsageError(f"{flag(name)} {getattr(ns, name)}: {command} takes one shape, not a range; "
                             f"give one value (`attnws estimate` and `attnws prove` take ranges)")
    sizes = qkv_hidden_sizes_from_args(ns)
    missing = [flag(n) for n in ("batch", "seq", "heads", *op_fields(op).REQUIRED_DIMENSIONS[op]) if dims[n] is None]
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
        op=op, element_size=ELEMENT_SIZES[ns.dtype or "fp16"], batch=point["batch"], seq=point["seq"],
        heads=heads, head_size=head_size, v_head_size=v_head, **op_fields(op).geometry_fields(op, ns, point, sizes),
        qkv_bias=ns.qkv_bias, attn_bias=ns.attn_bias, attn_bias_broadcast_batch=ns.attn_bias_broadcast_batch,
        attn_bias_broadcast_heads=ns.attn_bias_broadcast_heads,
    )
    return geometry, config_from_args(ns)
