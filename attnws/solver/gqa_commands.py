"""GroupQueryAttention's commands: the shared commands with `--op gqa`, or with `--target` naming a
GroupQueryAttention target (`route` sends them here; the family is not yet in the shared registry,
so its flags and engine are its own: this module, `gqa_proofs` and `attnws.spec.gqa`).

- `attnws estimate --op gqa`: ORT 1.31.1's own AOT estimate for the node (its reachable routes,
  each sized as ORT sizes it), or why ORT declares none.
- `attnws dispatch --op gqa` (and `recipe --op gqa`): for one shape, the route ORT picks, why
  each earlier one was passed over, and its workspace region by region.
- `attnws prove --op gqa`: over every valid shape of the box, ORT's estimate is a safe bound (or
  the shape that breaks it), the proven maximum and its shape, the same per pattern, and the ratio.
- `attnws counterexamples --op gqa --kind nonmonotonic`: key lengths T where T + 1 needs less
  workspace, on the route ORT picks and on Flash's own route.
- `attnws targets --op gqa`: the committed GroupQueryAttention targets.

A box is a target file (`attnws/proofs/gqa-targets/`) or flags. Bytes throughout.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from attnws.spec.command_line import (
    EXIT_OK, EXIT_REJECTED, EXIT_UNKNOWN, PROOFS_DIR, CommandResult, Progress, add_config_arguments,
    add_json_argument, config_over, in_range, integer, number, parse_dim, parse_env,
)
from attnws.spec.documents import DocumentError, Fields, read_user_json
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument, UsageError, WorkspaceError
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.estimate import ort_bounds, aggregate_for_bounds
from attnws.spec.gqa.recipe import complete
from attnws.spec.options import RuntimeConfig
from attnws.spec.ort_version import ORT_VERSION
from attnws.spec.printable import printable
from attnws.spec.problem import Backend
from attnws.spec.target import DimRange
from attnws.spec.units import format_bytes

from .counterexamples import DEFAULT_LIMIT, UNDECIDED
from .gateway import DEFAULT_RLIMIT, Limits, Verdict
from .gqa_proofs import KV_QUANT, GqaBox, kernel_contract, key_length_drops, maximum, safe_bound
from .ledger import in_source_checkout
from .second_opinion import DISAGREEMENT, SOLVERS, require_solver, second_opinion
from .session import Session
from .splits import KeyLengthCase, nonmonotonic_pairs

GQA_TARGETS_DIR = PROOFS_DIR / "gqa-targets"
BOX_FLAGS = ("batch", "seq", "total_seq", "past", "heads", "kv_heads", "head_size")
SPLIT_RLIMIT = 200_000_000  # the split heuristic's queries: 128 unrolled divisions per key length


OP = "gqa"
# The shared commands that take `--op gqa`, and the command of this module each one runs.
ROUTED = {"estimate": "estimate", "dispatch": "dispatch", "recipe": "dispatch", "prove": "prove",
          "counterexamples": "counterexamples", "targets": "targets"}
GROUP = "gqa"  # the subcommand group `route` sends command lines to (not listed in `attnws --help`)


def route(args: list[str]) -> tuple[list[str], str] | None:
    """Return a GroupQueryAttention command line as this module's group parses it, with the name
    its messages go under ("estimate --op gqa"), or None when the line is another operator's.

    A line is GroupQueryAttention's when it gives `--op gqa`, or `--target` with a committed
    GroupQueryAttention target's name or a target file of one (an object with "kv_heads"). A
    command without GroupQueryAttention support is refused by name (UsageError)."""
    if not args or args[0].startswith("-") or args[0] == GROUP:
        return None
    rest, op_given = _without_op(args[1:])
    if not (op_given or _names_gqa_target(rest)):
        return None
    if args[0] not in ROUTED:
        raise UsageError(f"--op {OP}: {args[0]} does not take GroupQueryAttention yet (its kernels and validation "
                         "are issue 23's); the commands that do: " + ", ".join(ROUTED))
    return [GROUP, ROUTED[args[0]], *rest], f"{args[0]} --op {OP}"


def _without_op(args: list[str]) -> tuple[list[str], bool]:
    """Return the arguments without `--op gqa` / `--op=gqa`, and whether it was there."""
    for i, arg in enumerate(args):
        if arg == "--op" and i + 1 < len(args) and args[i + 1] == OP:
            return args[:i] + args[i + 2:], True
        if arg == f"--op={OP}":
            return args[:i] + args[i + 1:], True
    return args, False


def _names_gqa_target(args: list[str]) -> bool:
    """Return whether `--target` names a committed GroupQueryAttention target or a file of one."""
    names = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--target"]
    names += [a.split("=", 1)[1] for a in args if a.startswith("--target=")]
    for name in names:
        if "/" not in name and (GQA_TARGETS_DIR / f"{name.removesuffix('.json')}.json").exists():
            return True
        if name == "-":
            continue
        try:
            document = read_user_json(name, "--target")
        except (WorkspaceError, OSError):
            continue  # the shared loader says why
        if isinstance(document, dict) and "kv_heads" in document:
            return True
    return False


def register(subparsers: Any) -> None:
    """Add the group `route` sends GroupQueryAttention's command lines to."""
    gqa = subparsers.add_parser(GROUP, description=__doc__.split("\n\n")[0])
    gqa.set_defaults(handler=_needs_command)
    commands = gqa.add_subparsers(dest="gqa_command", metavar="COMMAND", parser_class=type(gqa))
    for name, handler, text in (("estimate", estimate_command, "ORT 1.31.1's own AOT estimate for the node"),
                                ("dispatch", dispatch_command, "the route ORT picks for one shape, and its workspace"),
                                ("prove", prove_command, "ORT's estimate safe? the proven maximum, per pattern"),
                                ("counterexamples", counterexamples_command,
                                 "key lengths where one more key needs less workspace"),
                                ("targets", targets_command, "list the committed GroupQueryAttention targets")):
        parser = commands.add_parser(name, help=text, description=text, prog=f"attnws {name} --op {OP}")
        if name != "targets":
            _add_box_arguments(parser, exact=name == "dispatch")
        if name == "prove":
            ledger = parser.add_argument_group("ledger").add_mutually_exclusive_group()
            ledger.add_argument("--write-ledger", dest="write_ledger", action="store_true",
                                help="prove every committed GroupQueryAttention target and rewrite "
                                     "attnws/proofs/gqa-ledger.json (a source checkout only)")
            ledger.add_argument("--check-ledger", dest="check_ledger", action="store_true",
                                help="prove every committed GroupQueryAttention target and compare with the ledger")
            parser.add_argument("--second-opinion", dest="second_opinion", choices=SOLVERS, default=None,
                                help="re-decide every decided query with this second solver (needs "
                                     "pip install 'attnws[cvc5]'); a disagreement fails (exit 1)")
        if name in ("prove", "counterexamples"):
            solver = parser.add_argument_group("solver")
            solver.add_argument("--rlimit", type=integer, default=None, metavar="N",
                                help=f"Z3 resource limit per query (default {DEFAULT_RLIMIT:,}; the key-length "
                                     f"searches {SPLIT_RLIMIT:,})")
        if name == "counterexamples":
            parser.add_argument("--kind", choices=["nonmonotonic"], default="nonmonotonic",
                                help="what to search: key lengths T whose workspace exceeds that of T + 1")
            parser.add_argument("--limit", type=integer, default=DEFAULT_LIMIT, metavar="K",
                                help="at most K findings per search")
        add_json_argument(parser)
        parser.set_defaults(handler=handler)
def _needs_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    raise UsageError("GroupQueryAttention's commands are written `attnws COMMAND --op gqa`: "
                     + ", ".join(dict.fromkeys(ROUTED)))


def _add_box_arguments(parser: argparse.ArgumentParser, exact: bool) -> None:
    g = parser.add_argument_group("GroupQueryAttention node")
    g.add_argument("--target", default=None, metavar="NAME|FILE",
                   help="a committed GroupQueryAttention target (`attnws targets --op gqa`) or a target file")
    shape = "N (exact)" if exact else "N (1..N) or LO..HI"
    g.add_argument("--batch", default=None, metavar="N", help=f"batch size B: {shape}")
    g.add_argument("--seq", default=None, metavar="N", help=f"new tokens S: {shape}")
    g.add_argument("--total-seq", dest="total_seq", default=None, metavar="N",
                   help=f"total_sequence_length T, the key length: {shape}")
    g.add_argument("--past", type=integer, default=None, metavar="P",
                   help="the past / present cache's capacity, shared by past and present (default: T's maximum); "
                        "with --sliding-window-cache, the window")
    g.add_argument("--heads", type=integer, default=None, metavar="N", help="num_heads")
    g.add_argument("--kv-heads", dest="kv_heads", type=integer, default=None, metavar="N", help="kv_num_heads")
    g.add_argument("--head-size", dest="head_size", type=integer, default=None, metavar="H", help="head size")
    g.add_argument("--dtype", choices=["fp16", "bf16"], default=None, help="the Q/K/V element type (default fp16)")
    g.add_argument("--window", type=integer, default=None, metavar="W", help="local_window_size (default -1: none)")
    g.add_argument("--sliding-window-cache", dest="sliding_window_cache", action="store_true", default=None,
                   help="sliding_window_cache=1: the cache holds the window only (its capacity --past = --window)")
    g.add_argument("--rotary", action="store_true", default=None, help="do_rotary=1 with cos / sin caches")
    g.add_argument("--packed-qkv", dest="packed_qkv", action="store_true", default=None,
                   help="query packs Q, K and V: [B, S, (N + 2 Nk) H]")
    g.add_argument("--softcap", type=number, default=None, metavar="F", help="softcap (default 0)")
    g.add_argument("--smooth-softmax", dest="smooth_softmax", action="store_true", default=None,
                   help="smooth_softmax=1")
    g.add_argument("--head-sink", dest="head_sink", action="store_true", default=None, help="a head_sink input [N]")
    g.add_argument("--kv-quant", dest="kv_quant", choices=list(KV_QUANT), default=None,
                   help="the KV cache's quantization, per-tensor scales (default none)")
    g.add_argument("--max-total-seq", dest="max_total_seq", type=integer, default=None, metavar="N",
                   help="the session option ep.cuda.gqa_workspace_max_total_sequence_length, which ORT's estimator "
                        "needs for a non-windowed cache (default: unset)")
    add_config_arguments(parser)


# -- boxes ---------------------------------------------------------------------------------------
def _dim(raw: Any, name: str, exact: bool) -> DimRange:
    """N is a maximum (1..N), or exactly N for a command that takes one shape; LO..HI a range."""
    text = str(raw)
    found = parse_dim(text, name)
    if ".." not in text:
        return DimRange(found.hi, found.hi) if exact else DimRange(min(1, found.hi), found.hi)
    if exact and not found.exact:
        raise UsageError(f"--{name.replace('_', '-')} {raw}: this command takes one shape (N)")
    return found


def box_from_args(ns: argparse.Namespace, exact: bool = False) -> GqaBox:
    """The box the flags (or the target, with flags overriding its configuration) describe."""
    if ns.target is not None:
        given = [f"--{name.replace('_', '-')}" for name in BOX_FLAGS if getattr(ns, name) is not None]
        if given:
            raise UsageError(f"--target {ns.target} fixes the node; {' '.join(given)} cannot be added to it")
        box = load_gqa_target(ns.target)
        return replace(box, config=config_over(ns, box.config, box.env), env=env_over(ns, box.env))
    missing = [f"--{name.replace('_', '-')}" for name in ("heads", "kv_heads", "head_size", "total_seq")
               if getattr(ns, name) is None]
    if missing:
        raise UsageError(f"a GroupQueryAttention node needs {', '.join(missing)} (or --target)")
    for name in ("heads", "kv_heads", "head_size"):
        in_range(getattr(ns, name), f"--{name.replace('_', '-')}", 1, 2**31 - 1)
    total = _dim(ns.total_seq, "total_seq", exact)
    past = total.hi if ns.past is None else in_range(ns.past, "--past", 1, 2**31 - 1)
    box = GqaBox(
        name="flags", num_heads=ns.heads, kv_num_heads=ns.kv_heads, head_size=ns.head_size, past=past,
        batch=_dim(ns.batch or 1, "batch", exact), seq=_dim(ns.seq or 1, "seq", exact), total_seq=total,
        config=config_over(ns, RuntimeConfig(), ()), env=env_over(ns, ()), is_bf16=ns.dtype == "bf16",
        is_packed_qkv=bool(ns.packed_qkv), do_rotary=bool(ns.rotary),
        local_window_size=-1 if ns.window is None else ns.window, sliding_window_cache=bool(ns.sliding_window_cache),
        softcap=ns.softcap or 0.0, smooth_softmax=bool(ns.smooth_softmax), head_sink=bool(ns.head_sink),
        kv_quant=ns.kv_quant or "none", max_total_sequence_length=ns.max_total_seq or 0)
    _check_box(box)
    return box


def env_over(ns: argparse.Namespace, env: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The box's environment with --env applied, sorted pairs."""
    return tuple(sorted({**dict(env), **parse_env(ns.env)}.items()))


def _check_box(box: GqaBox) -> None:
    """Refuse a box whose largest node ORT rejects: the message is ORT's."""
    try:
        box.at_maxima()
    except WorkspaceError as error:
        raise InvalidArgument(f"{box.name}: the node at its maxima is not valid: {error}") from None


GQA_TARGET_KEYS = {"name", "description", "source", "heads", "kv_heads", "head_size", "past", "batch", "seq",
                   "total_seq", "dtype", "window", "sliding_window_cache", "rotary", "packed_qkv", "softcap",
                   "smooth_softmax", "head_sink", "kv_quant", "max_total_seq", "sm", "sm_count", "sdpa_kernel", "env",
                   "patterns", "expect_unavailable_estimate"}


def load_gqa_target(name: str) -> GqaBox:
    """The box a committed target's name or a target file describes; a bad file is a usage error."""
    path = Path(name)
    if not path.exists():
        path = GQA_TARGETS_DIR / f"{path.name.removesuffix('.json')}.json"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in GQA_TARGETS_DIR.glob("*.json")))
        raise UsageError(f"--target {name!r}: no such file or committed GroupQueryAttention target (known: {known})")
    try:
        return gqa_target_from_dict(read_user_json(path, f"--target {name}"), str(path.name), path.stem)
    except (DocumentError, InvalidArgument) as error:
        raise UsageError(f"--target {name}: {error}") from None


def gqa_target_from_dict(data: Any, what: str, default_name: str) -> GqaBox:
    """Read a GroupQueryAttention target document (keys as in `GQA_TARGET_KEYS`)."""
    f = Fields(data, what, known=GQA_TARGET_KEYS)

    def dim(key: str) -> DimRange:
        raw = f.raw(key)
        if raw is None:
            raise DocumentError(f"{what}: field {key} is required (N or \"LO..HI\")")
        return DimRange.parse(raw, f"{what}: field {key}")

    def exact(key: str, required: bool = True) -> Any:
        return f.integer(key, None, required=required, lo=1)

    softcap = f.raw("softcap", 0)
    if not isinstance(softcap, (int, float)) or isinstance(softcap, bool) or softcap < 0:
        raise DocumentError(f"{what}: field softcap = {softcap!r}; expected a non-negative number")
    env = f.string_map("env")
    config = RuntimeConfig.make(sm=f.integer("sm", 80), sm_count=f.integer("sm_count", None, optional=True, lo=1),
                                sdpa_kernel=f.integer("sdpa_kernel", 0), env=env)
    patterns = f.raw("patterns") or {}
    if not isinstance(patterns, dict):
        raise DocumentError(f"{what}: field patterns must be an object of name -> {{dimension: range}}")
    read_patterns = tuple((pname, {k: DimRange.parse(v, f"{what}: pattern {pname}.{k}") for k, v in dims.items()
                                   if k in ("batch", "seq", "total_seq") or _bad_pattern(what, pname, k)})
                          for pname, dims in patterns.items())
    box = GqaBox(
        name=f.string("name", default_name), num_heads=exact("heads"), kv_num_heads=exact("kv_heads"),
        head_size=exact("head_size"), past=exact("past"), batch=dim("batch"), seq=dim("seq"),
        total_seq=dim("total_seq"), config=config, is_bf16=f.string("dtype", "fp16", ["fp16", "bf16"]) == "bf16",
        is_packed_qkv=f.boolean("packed_qkv"), do_rotary=f.boolean("rotary"),
        local_window_size=f.integer("window", -1), sliding_window_cache=f.boolean("sliding_window_cache"),
        softcap=float(softcap), smooth_softmax=f.boolean("smooth_softmax"), head_sink=f.boolean("head_sink"),
        kv_quant=f.string("kv_quant", "none", list(KV_QUANT)), max_total_sequence_length=f.integer("max_total_seq", 0),
        description=f.string("description", ""), patterns=read_patterns, env=tuple(sorted(env.items())),
        expect_unavailable_estimate=f.boolean("expect_unavailable_estimate"))
    _check_box(box)
    return box


def _bad_pattern(what: str, pattern: str, key: str) -> bool:
    raise DocumentError(f"{what}: pattern {pattern} names {key!r}; a pattern narrows batch, seq or total_seq")


def _box_text(box: GqaBox) -> str:
    flags = [f"B {box.batch}", f"S {box.seq}", f"T {box.total_seq}", f"cache {box.past:,}",
             f"N {box.num_heads} / Nk {box.kv_num_heads}", f"H {box.head_size}", "bf16" if box.is_bf16 else "fp16",
             f"sm{box.config.device.sm} ({box.config.device.sm_count} SMs)"]
    flags += [w for w, on in ((f"window {box.local_window_size}", box.local_window_size > 0),
                              ("windowed cache", box.sliding_window_cache), ("rotary", box.do_rotary),
                              ("packed QKV", box.is_packed_qkv), (f"softcap {box.softcap:g}", box.softcap > 0),
                              ("smooth softmax", box.smooth_softmax), ("head sink", box.head_sink),
                              (f"KV {box.kv_quant}", box.kv_quant != "none")) if on]
    return f"{printable(box.name)}: " + ", ".join(flags)


# -- commands ------------------------------------------------------------------------------------
def estimate_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """ORT 1.31.1's own estimate for the box's node at its maxima."""
    box = box_from_args(ns)
    doc: dict[str, Any] = {"op": "gqa", "target": box.name}
    try:
        bounds = ort_bounds(box.at_maxima(), box.config, box.max_total_sequence_length)
        result = aggregate_for_bounds(bounds)
    except WorkspaceError as error:
        doc.update(status="unavailable", reason=str(error))
        return CommandResult(EXIT_REJECTED, f"{_box_text(box)}\nORT's estimate: unavailable: {error}", doc)
    routes = {str(getattr(r, "value", r)): b for r, b in result.sized.items()}
    doc.update(status="ok", total_workspace_bytes=result.total_workspace_bytes, routes=routes,
               persistent_prepack_bytes=result.persistent_prepack_bytes,
               initialization_scratch_bytes=result.initialization_scratch_bytes,
               level2=[{"size_bytes": result.total_workspace_bytes, "slot_id": 0, "alignment_bytes": 256}]
               if result.total_workspace_bytes else [])
    lines = [_box_text(box), f"ORT's estimate: {format_bytes(result.total_workspace_bytes)} (Level 2: one slot-0 "
                             "root, 256-byte aligned), the largest of its routes:"]
    lines += [f"  {name}: {format_bytes(b)}" for name, b in routes.items()]
    if result.persistent_prepack_bytes:
        lines.append(f"  head-sink prepack: {result.persistent_prepack_bytes:,} B persistent, "
                     f"{result.initialization_scratch_bytes:,} B at initialization (outside the workspace)")
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def dispatch_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """The route ORT picks for one shape and its complete workspace."""
    box = box_from_args(ns, exact=True)
    p = box.problem(CONCRETE, box.batch.hi, box.seq.hi, box.total_seq.hi)
    chosen = select(p, box.config)
    shape = f"B {box.batch.hi}, S {box.seq.hi}, T {box.total_seq.hi}"
    doc: dict[str, Any] = {"op": "gqa", "shape": {"batch": box.batch.hi, "seq": box.seq.hi,
                                                  "total_seq": box.total_seq.hi},
                           "skipped": [reason for _, reason in chosen.skipped]}
    lines = [_box_text(box), f"{shape}:"] + [f"  skipped {reason}" for _, reason in chosen.skipped]
    if chosen.route is None:
        doc.update(backend=None, failure=chosen.failure)
        return CommandResult(EXIT_REJECTED, "\n".join(lines + [f"  ORT fails at run time: {chosen.failure}"]), doc)
    route = chosen.route
    label = route.backend.value + (" (fast decode)" if route.fast_decode else "")
    if route.backend is Backend.CUDNN:
        doc.update(backend="cudnn", workspace_bytes=None)
        lines.append("  cudnn: its workspace is cuDNN's frontend's own (no recipe states it)")
        return CommandResult(EXIT_OK, "\n".join(lines), doc)
    run = complete(p.workspace_problem(CONCRETE), route)
    regions = [(f"preparation {v.name}", v.offset, v.nbytes) for v in run.preparation.regions if v.nbytes] + \
        [(f"{route.backend.value} {v.name}", run.backend_offset_bytes + v.offset, v.nbytes)
         for v in run.backend.regions if v.nbytes]
    doc.update(backend=route.backend.value, fast_decode=route.fast_decode, splits=run.backend.splits,
               workspace_bytes=run.total_workspace_bytes,
               regions=[{"name": n, "offset_bytes": o, "bytes": b} for n, o, b in regions])
    lines.append(f"  {label}: {format_bytes(run.total_workspace_bytes)}"
                 + (f", {run.backend.splits} splits" if route.backend is Backend.FLASH else ""))
    lines += [f"    {name}: {nbytes:,} B at {offset:,}" for name, offset, nbytes in regions]
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def _limits(ns: argparse.Namespace, default: int = DEFAULT_RLIMIT) -> Limits:
    second = getattr(ns, "second_opinion", None)
    if second:
        require_solver(second)
    return Limits(rlimit=default if ns.rlimit is None else in_range(ns.rlimit, "--rlimit", 1, 2**32 - 1),
                  second_opinion=second)


def prove_box(box: GqaBox, limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """The box's results as a document (no timings: the ledger keeps it): the safe bound, the
    kernel contract, the maxima, and the verdict they combine to."""
    sessions: list[Session] = []
    progress(f"{box.name}: ORT's estimate as a bound")
    bound = safe_bound(box, limits, sessions)
    ort = bound.ort_bytes
    doc: dict[str, Any] = {"op": "gqa", "target": box.name, "ort_estimate_bytes": ort,
                           "safe_bound": {"verdict": bound.verdict.value, "counterexample": bound.counterexample,
                                          "reason": bound.reason, "vacuous_because": bound.vacuous_because},
                           "maxima": []}
    expected_vacuous = bound.verdict is Verdict.VACUOUS and box.expect_unavailable_estimate
    verdicts = [Verdict.PROVED if expected_vacuous else bound.verdict]
    progress(f"{box.name}: the kernels' buffers inside the recipe")
    kc = kernel_contract(box, limits, sessions)
    verdicts.append(kc.verdict)
    doc["kernel_contract"] = {"verdict": kc.verdict.value, "counterexample": kc.counterexample, "reason": kc.reason}
    for name, pattern in (("every shape", None), *box.patterns):
        progress(f"{box.name}: the largest workspace of {name}")
        found = maximum(box, limits, pattern, sessions)
        expected = found.vacuous and box.expect_unavailable_estimate and found.cudnn_shape is not None
        verdicts.append(Verdict.PROVED if expected or found.bytes is not None else
                        Verdict.VACUOUS if found.vacuous else Verdict.UNKNOWN)
        doc["maxima"].append({"pattern": name, "bytes": found.bytes, "witness": found.witness,
                              "backend": found.backend, "reason": found.reason, "vacuous": found.vacuous,
                              "expected": expected, "cudnn_shape": found.cudnn_shape,
                              "ratio": round(ort / found.bytes, 2) if ort and found.bytes else None})
    if limits.second_opinion:
        progress(f"{box.name}: {limits.second_opinion}'s opinion of every decided query")
        opinion = second_opinion([a for s in sessions for a in s.answers], limits, limits.second_opinion)
        doc["second_opinion"] = opinion.as_dict(timing=False)
        if opinion.verdict == DISAGREEMENT:
            verdicts.append(Verdict.REFUTED)
    doc["verdict"] = Verdict.worst(verdicts).value
    return doc


def prove_text(box: GqaBox, doc: dict[str, Any]) -> list[str]:
    """The results of `prove_box` in words, one line each."""
    bound, ort = doc["safe_bound"], doc["ort_estimate_bytes"]
    lines = [_box_text(box)]
    if bound["verdict"] == "VACUOUS":
        expected = " (the target expects it)" if box.expect_unavailable_estimate else ""
        lines.append(f"safe_bound VACUOUS{expected}: {bound['vacuous_because']}")
    elif bound["verdict"] == "PROVED":
        lines.append(f"safe_bound PROVED: no valid shape needs more than ORT's {format_bytes(ort)}")
    elif bound["verdict"] == "REFUTED":
        c = bound["counterexample"]
        lines.append(f"safe_bound REFUTED: B {c['batch']}, S {c['seq']}, T {c['total_seq']} needs "
                     f"{format_bytes(c['bytes'])} on {c['backend']}, more than ORT's {format_bytes(ort)}")
    else:
        lines.append(f"safe_bound UNKNOWN: {bound['reason']}")
    kc = doc["kernel_contract"]
    if kc["verdict"] == "PROVED":
        lines.append("kernel_contract PROVED: at every valid shape the kernels' buffers (attnws.spec.gqa.footprint, "
                     "stated from ORT's kernels) stay inside the regions the recipe gives them")
    elif kc["verdict"] == "REFUTED":
        c = kc["counterexample"]
        lines.append(f"kernel_contract REFUTED at B {c['batch']}, S {c['seq']}, T {c['total_seq']}: "
                     + "; ".join(c["violations"]) + " (read from ORT's kernel sources, not run on a GPU)")
    else:
        lines.append(f"kernel_contract UNKNOWN: {kc['reason']}")
    for m in doc["maxima"]:
        name = m["pattern"]
        if m["vacuous"]:
            lines.append(f"maximum of {name}: VACUOUS{' (the target expects it)' if m['expected'] else ''}: "
                         f"{m['reason']}")
            continue
        if m["bytes"] is None:
            lines.append(f"maximum of {name}: UNKNOWN ({m['reason']})")
            continue
        w = m["witness"]
        ratio = f"; ORT's estimate is {ort / m['bytes']:,.1f}x it" if ort else ""
        lines.append(f"maximum of {name}: {format_bytes(m['bytes'])} (proven) at B {w['batch']}, S {w['seq']}, "
                     f"T {w['total_seq']} on {m['backend']}{ratio}")
        if m["cudnn_shape"] is not None:
            c = m["cudnn_shape"]
            lines.append(f"  (shapes that take cuDNN, such as B {c['batch']}, S {c['seq']}, T {c['total_seq']}, are "
                         "left out: cuDNN's frontend sizes its own workspace)")
    if "second_opinion" in doc:
        o = doc["second_opinion"]
        lines.append(f"second opinion ({o['solver']}): {o['verdict']}, {o['confirmed']} of {o['queries']} queries "
                     "confirmed" + (f"; {o['disagreements'][0]}" if o["disagreements"] else ""))
    return lines + [f"{doc['verdict']}: {printable(box.name)}"]


VERDICT_EXIT = {"PROVED": EXIT_OK, "REFUTED": EXIT_REJECTED, "VACUOUS": EXIT_REJECTED, "UNKNOWN": EXIT_UNKNOWN}


def prove_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Safe bound, kernel contract, proven maximum and per-pattern maxima over the box; or the
    GroupQueryAttention ledger over every committed target."""
    limits = _limits(ns, SPLIT_RLIMIT)
    if ns.write_ledger or ns.check_ledger:
        return _ledger_command(ns, limits, progress)
    box = box_from_args(ns)
    doc = prove_box(box, limits, progress)
    return CommandResult(VERDICT_EXIT[doc["verdict"]], "\n".join(prove_text(box, doc)), doc)


GQA_LEDGER = PROOFS_DIR / "gqa-ledger.json"


def ledger_facts(entry: dict[str, Any]) -> dict[str, Any]:
    """What the ledger check compares of a target's results: the estimate, the verdicts and the
    proven bytes (a witness is one of possibly many shapes attaining a maximum: kept, not compared)."""
    return {"ort_estimate_bytes": entry.get("ort_estimate_bytes"), "verdict": entry.get("verdict"),
            "safe_bound": (entry.get("safe_bound") or {}).get("verdict"),
            "kernel_contract": (entry.get("kernel_contract") or {}).get("verdict"),
            "maxima": [(m["pattern"], m["bytes"], m["vacuous"], m["expected"]) for m in entry.get("maxima", [])]}


def ledger_differences(stored: dict[str, Any], fresh: dict[str, Any]) -> list[str]:
    """One line per target and fact where the two ledgers differ."""
    out = []
    for name in sorted(set(stored["targets"]) | set(fresh["targets"])):
        old, new = (ledger_facts(ledger["targets"].get(name, {})) for ledger in (stored, fresh))
        out += [f"{name}: {key} was {old[key]}, is {new[key]}" for key in old if old[key] != new[key]]
    return out


def committed_boxes() -> list[GqaBox]:
    """Every committed GroupQueryAttention target, by name."""
    return [load_gqa_target(str(p)) for p in sorted(GQA_TARGETS_DIR.glob("*.json"))]


def compute_gqa_ledger(limits: Limits, progress: Progress = lambda message: None) -> dict[str, Any]:
    """Every committed target's results (`prove_box`), with the modelled ORT version."""
    return {"version": 1, "ort_version": ORT_VERSION, "rlimit": limits.rlimit,
            "targets": {box.name: prove_box(box, limits, progress) for box in committed_boxes()}}


def _ledger_command(ns: argparse.Namespace, limits: Limits, progress: Progress) -> CommandResult:
    flags = [f"--{n.replace('_', '-')}" for n in ("target", *BOX_FLAGS) if getattr(ns, n) is not None]
    if flags:
        raise UsageError(f"the ledger proves every committed target as committed; {' '.join(flags)} cannot be added")
    if ns.write_ledger and not in_source_checkout():
        raise UsageError(f"--write-ledger rewrites {GQA_LEDGER} of a source checkout; this attnws is installed")
    fresh = compute_gqa_ledger(limits, progress)
    if ns.write_ledger:
        GQA_LEDGER.write_text(json.dumps(fresh, indent=1, sort_keys=True) + "\n")
        return CommandResult(EXIT_OK, f"wrote {GQA_LEDGER} ({len(fresh['targets'])} targets)", fresh)
    stored = json.loads(GQA_LEDGER.read_text())
    differences = ledger_differences(stored, fresh)
    text = "\n".join(differences) or f"the GroupQueryAttention ledger matches ({len(fresh['targets'])} targets)"
    return CommandResult(EXIT_REJECTED if differences else EXIT_OK, text, {"differences": differences})


def counterexamples_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Key lengths whose workspace exceeds the next one's: on the route ORT picks, and on Flash's."""
    box = box_from_args(ns)
    in_range(ns.limit, "--limit", 1)
    limits = _limits(ns, SPLIT_RLIMIT)
    lines, doc = [_box_text(box)], {"op": "gqa", "target": box.name, "searches": []}
    progress(f"{box.name}: key-length drops on the route ORT picks")
    drops, status = key_length_drops(box, limits, ns.limit)
    lines.append(f"on the route ORT picks: {len(drops)} {status.describe()}" if drops
                 else f"on the route ORT picks: {status.describe()}")
    lines += [f"  B {d['batch']}, S {d['seq']}: T {d['total_seq']:,} needs {format_bytes(d['bytes'])} "
              f"({d['backend']}), T {d['total_seq'] + 1:,} needs {format_bytes(d['next_bytes'])} "
              f"({d['next_backend']})" for d in drops]
    doc["searches"].append({"route": "picked", **status.as_dict(), "drops": drops})
    statuses = [status]
    flash_case = KeyLengthCase(box.problem(CONCRETE, box.batch.hi, box.seq.hi, box.total_seq.hi).workspace_problem(
        CONCRETE), box.config.device.sm_count, box.total_seq.lo, box.total_seq.hi, box.config.device.sm,
        box.local_window_size)
    progress(f"{box.name}: key-length drops on Flash's route at B {box.batch.hi}, S {box.seq.hi}")
    flash_drops, flash_status = nonmonotonic_pairs(flash_case, limits, ns.limit)
    where = f"on Flash's route (B {box.batch.hi}, S {box.seq.hi}, not fast decode)"
    lines.append(f"{where}: {len(flash_drops)} {flash_status.describe()}" if flash_drops
                 else f"{where}: {flash_status.describe()}")
    lines += [f"  T {d.total:,} needs {format_bytes(d.bytes_before)} ({d.splits_before} splits), T {d.total + 1:,} "
              f"needs {format_bytes(d.bytes_after)} ({d.splits_after} splits)" for d in flash_drops]
    doc["searches"].append({"route": "flash", **flash_status.as_dict(), "drops": [d.as_dict() for d in flash_drops]})
    statuses.append(flash_status)
    undecided = any(s.state == UNDECIDED for s in statuses) and not (drops or flash_drops)
    return CommandResult(EXIT_UNKNOWN if undecided else EXIT_OK, "\n".join(lines), doc)


def targets_command(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """List the committed GroupQueryAttention targets."""
    boxes = [load_gqa_target(str(p)) for p in sorted(GQA_TARGETS_DIR.glob("*.json"))]
    lines = [f"{len(boxes)} committed GroupQueryAttention targets (attnws estimate|dispatch|prove|counterexamples "
             f"--target NAME), in "
             f"{GQA_TARGETS_DIR}"] + [f"  {b.name:<34} {printable(b.description)}" for b in boxes]
    return CommandResult(EXIT_OK, "\n".join(lines), {"targets": [{"name": b.name, "description": b.description}
                                                                 for b in boxes]})


__all__ = ["register", "box_from_args", "load_gqa_target", "gqa_target_from_dict"]
