"""The specification's commands: `recipe`, `dispatch`, `estimate`, `targets` and `ort-failures`
(no printing here).

`estimate --target` also reports which backends can run in the target and, with `--policy tight`
or memory patterns, the proven maxima: the solver's work. The solver sits above the spec, so it
hands those functions in (`TargetSolver`, set by `attnws.solver.commands.register` as the estimate
command's default) rather than being imported from here.

Each handler returns a CommandResult whose JSON uses ONNX Runtime's field names plus `status`
(ok, invalid_argument, overflow, unavailable) and `message`; the text says the same in words,
bytes as "478,150,656 B (456.0 MiB)".
"""

from __future__ import annotations

import argparse
import textwrap
from dataclasses import dataclass
from typing import Any, Callable

from . import command_line as cmd
from .command_line import (
    EXIT_OK,
    EXIT_REJECTED,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_pattern_argument,
    add_problem_arguments,
    add_target_argument,
    config_from_args,
    geometry_from_args,
    given,
    qkv_hidden_sizes_from_args,
    target_from_args,
)
from .backends import flash, mea, trt
from .aggregate import root_layout
from .dispatch import dispatch
from .errors import InvalidArgument, UsageError, WorkspaceError
from .failures import EXAMPLES, failure_markdown, failure_table
from .estimate import (
    Estimate, estimate_exact, estimate_from_hints, estimate_geometry, level2_requirements, runtime_problem,
)
from .families import family_of, op_fields, options_line, shape_words
from .hints import parse_input_shapes
from .limits import WORKSPACE_ALIGNMENT
from .statement import ATTENTION, PROJECTION
from .layout import Recipe, views
from .options import RuntimeConfig, TrtRunner
from .ort_version import ORT_VERSION
from .printable import printable
from .problem import ELEMENT_SIZES, Backend, Op
from .recipe import recipe
from .target import Target
from .units import format_bytes

BACKEND_NAMES = {Backend.TRT: "TRT fused", Backend.FLASH: "Flash", Backend.MEA: "memory-efficient (MEA)",
                 Backend.UNFUSED: "unfused", Backend.TRT_CROSS: "TRT fused cross attention", Backend.CUDNN: "cuDNN SDPA",
                 Backend.XQA: "XQA", Backend.XQA_SPEC: "XQA speculative decode",
                 Backend.PAGED_DECODE: "paged decode (split-KV)", Backend.LATENT: "latent (MLA)"}


def separate_requests(r: Any) -> bool:
    """Whether the recipe is a list of separate requests (PagedAttention's) rather than a root."""
    return any(name not in (PROJECTION, ATTENTION) for name, _ in r.allocations())


def carved_bytes(r: Any) -> int:
    """The root that holds a recipe's separate requests, each carved 256-byte aligned."""
    return sum(-(-nbytes // WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT for _, nbytes in r.allocations())


def _recipe_json(r: Recipe) -> dict[str, Any]:
    offset, total = root_layout(r.projection_bytes, r.attention_workspace_bytes)
    out = r.as_dict()
    out.update(attention_workspace_offset_bytes=offset, total_workspace_bytes=total,
               requirements=[q.as_dict() for q in level2_requirements(carved_bytes(r) if separate_requests(r) else total)])
    return out


def _error_result(error: WorkspaceError, options: str = "", **extra: Any) -> CommandResult:
    doc = {"status": error.status, "message": str(error), **extra}
    return CommandResult(EXIT_REJECTED, "\n".join([f"rejected ({error.status}): {error}", *_options(options)]), doc)


def _options(line: str) -> list[str]:
    """Return the node options line (`families.options_line`) as an indented line of a text
    result, or nothing where the family has none."""
    return [f"  {line}"] if line else []


def requirement_text(total_bytes: int) -> str:
    """Return the Level-2 declaration of a root in words."""
    if not total_bytes:
        return "none (the root is 0 bytes)"
    return f"one slot-0 workspace of {format_bytes(total_bytes)}, 256-byte aligned"


def problem_text(p: Any) -> str:
    """Return a problem's dimensions as one line: T, B, S, N, H, Hv and the element type."""
    dtype = {2: "fp16", 4: "fp32"}.get(p.element_size, f"{p.element_size}-byte")
    return op_fields(p.op).problem_text(p, dtype)


def requests_text(r: Any) -> str:
    """Return a recipe of separate requests (PagedAttention's: one GetScratchBuffer per buffer, no
    root) as each request's bytes, where its size comes from device data, and the root that holds
    them carved 256-byte aligned."""
    requests = r.allocations()
    notes = r.device_sized()
    width = max(len(name) for name, _ in requests)
    lines = ["  requests (one allocation each, in ORT's order; 0 bytes: not allocated)"]
    lines += [f"    {name.ljust(width)}  {format_bytes(nbytes)}" + (f"  (sized from {notes[name]})" if notes.get(name) else "")
              for name, nbytes in requests]
    carved = carved_bytes(r)
    lines.append(f"  together               {format_bytes(r.attention_workspace_bytes)}")
    lines.append(f"  level-2 requirement    {requirement_text(carved)} (each request 256-byte aligned in it)")
    return "\n".join(lines)


def recipe_text(r: Recipe) -> str:
    """Return a recipe as its allocations and the views inside them, bytes with units."""
    if separate_requests(r):
        return requests_text(r)
    lines = []
    shown = [v for v in views(r) if v.allocation == "attention"]
    projection = family_of(r.op).estimate.has_projection(r.op)
    if projection:
        lines.append(f"  projection allocation  {format_bytes(r.projection_bytes)}: Q, K, V from the GEMM "
                     f"m = {r.projection_m:,}, n = {r.projection_n:,}, k = {r.projection_k:,}")
    lines.append(f"  attention allocation   {format_bytes(r.attention_workspace_bytes)}")
    width = max((len(v.name) for v in shown), default=0)
    offsets = [f"{v.offset:,}" for v in shown]
    owidth = max((len(o) for o in offsets), default=0)
    for v, offset in zip(shown, offsets):
        lines.append(f"    {v.name.ljust(width)}  at offset {offset.rjust(owidth)}  {format_bytes(v.nbytes)}")
    if r.qkv_layout.value == "none":
        lines.append("    (no Q/K/V copy: the backend reads the operator's inputs directly)")
    offset, total = root_layout(r.projection_bytes, r.attention_workspace_bytes)
    layout = (f"projection at 0, attention at offset {offset:,} (256-byte aligned)" if projection
              else "the attention allocation")
    lines.append(f"  root                   {format_bytes(total)}: {layout}")
    lines.append(f"  level-2 requirement    {requirement_text(total)}")
    return "\n".join(lines)


def never_dispatched(backend: Backend, p: Any, config: RuntimeConfig) -> str:
    """Return why ORT's dispatch can never pick `backend` on this device, or ''."""
    sm, name = config.device.sm, BACKEND_NAMES[backend]
    if backend is Backend.FLASH and not flash.sm_supported(sm):
        return f"dispatch can never pick {name} on sm{sm}: Flash needs compute capability 8.0 or newer"
    if backend is Backend.MEA and not mea.sm_supported(sm, p.element_size == 2):
        least = mea.MIN_SM_FP16 if p.element_size == 2 else mea.MIN_SM_FP32
        return f"dispatch can never pick {name} on sm{sm}: MEA needs sm >= {least} for this element type"
    if backend is Backend.TRT and sm not in trt.XMMA_HEAD_SIZES and sm not in trt.FLASH_HEAD_SIZES:
        return f"dispatch can never pick {name} on sm{sm}: ORT has no TRT fused kernel for it"
    return ""


def recipe_notes(backend: Backend, p: Any, config: RuntimeConfig) -> list[str]:
    """Return what a person asking for this recipe should know about ORT's dispatch: whether it
    can ever pick the backend on this device, and whether it picks it for this shape."""
    never = never_dispatched(backend, p, config)
    if never:
        return [never]
    outcome = dispatch(p, config)
    if outcome.empty:
        return ["the output is empty: ORT returns before dispatch and allocates no workspace"]
    if backend in outcome.backends:
        return []
    why = next((reason for b, reason in outcome.skipped if b is backend), "")
    if not outcome.backends:
        return [f"ORT's dispatch picks no backend for this shape ({why}): {outcome.failure}"]
    picked = " or ".join(b.value for b in outcome.backends)
    return [f"ORT's dispatch picks {picked} for this shape, not {backend.value}" + (f" ({why})" if why else "")]


def run_recipe(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws recipe`: one exact recipe for one problem on one backend."""
    geometry, config = geometry_from_args(ns, "recipe", estimate=False)
    backend = Backend(ns.backend)
    options = options_line(geometry)
    try:
        problem = runtime_problem(geometry)
        runner = config.trt_runner is not TrtRunner.UNAVAILABLE
        r = recipe(problem, backend, trt_runner_available=runner, config=config)
        notes = recipe_notes(backend, problem, config)
        side = family_of(geometry.op).estimate.side_allocations_of(problem, config, backend)
    except WorkspaceError as error:
        return _error_result(error, options, op=geometry.op.value, backend=backend.value)
    notes += [side[0]] if side is not None else []
    doc = {"status": "ok", "message": "", "problem": problem.as_dict(), **_recipe_json(r), "notes": notes,
           "side_allocations": side[1] if side is not None else None}
    text = "\n".join([f"{geometry.op.onnx_name} recipe on {backend.value}: {problem_text(problem)}",
                      *_options(options), recipe_text(r), *(f"note: {n}" for n in notes)])
    return CommandResult(EXIT_OK, text, doc)


def run_dispatch(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws dispatch`: the backend ORT picks, why the others were skipped, and its recipe."""
    geometry, config = geometry_from_args(ns, "dispatch", estimate=False)
    options = options_line(geometry)
    try:
        problem = runtime_problem(geometry)
        outcome = dispatch(problem, config)
        recipes = [recipe(problem, b, trt_runner_available=True, config=config) for b in outcome.backends]
    except WorkspaceError as error:
        return _error_result(error, options, op=geometry.op.value)
    skipped = [{"backend": b.value, "reason": reason} for b, reason in outcome.skipped]
    doc: dict[str, Any] = {
        "status": "ok", "message": "", "problem": problem.as_dict(), "empty": outcome.empty,
        "backend": outcome.backend.value if outcome.backend else None,
        "backends": [b.value for b in outcome.backends], "skipped": skipped,
    }
    lines = [f"{geometry.op.onnx_name} on sm{config.device.sm}: {problem_text(problem)}", *_options(options)]
    if outcome.empty:
        lines.append("  output is empty: ORT returns before dispatch; no workspace")
        doc.update(total_workspace_bytes=0, requirements=[])
    elif not recipes:
        lines.append("  picks no backend: every one of the cascade is passed over")
    else:
        picked = " or ".join(b.value + (f" ({r.route_text()})" if r.route_text() else "")
                             for b, r in zip(outcome.backends, recipes))
        lines.append(f"  picks {picked}" + (" (the TRT runner may or may not load)" if len(recipes) > 1 else ""))
        doc.update(_recipe_json(recipes[0]))
        doc["recipes"] = [_recipe_json(r) for r in recipes]
    lines += [f"  skipped {s['reason']}" for s in skipped]
    sides = {}
    for r in recipes:
        lines += [f"recipe on {r.backend.value}", recipe_text(r)]
        side = family_of(geometry.op).estimate.side_allocations_of(problem, config, r.backend)
        if side is not None:
            lines.append(f"  {side[0]}")
            sides[r.backend.value] = side[1]
    doc["side_allocations"] = sides
    if outcome.failure:
        doc.update(status="runtime_failure", message=outcome.failure, failure_kind=outcome.failure_kind)
        lines.append(f"runtime failure: {outcome.failure}")
        return CommandResult(EXIT_REJECTED, "\n".join(lines), doc)
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def route_rows(est: Estimate) -> list[tuple[str, bool, str, int | None]]:
    """Return (route, reachable, why not, bytes the estimate sizes it at or None) for every route
    of the operator in its cascade's order, and after each backend the routes the estimator sizes
    apart from it (GroupQueryAttention's Flash fast decode)."""
    sized = est.route_bytes()
    shown = [(v.backend.value, v.reachable, v.reason) for v in est.reachability] or [(name, True, "") for name in sized]
    rows: list[tuple[str, bool, str, int | None]] = []
    for name, reachable, reason in shown:
        rows.append((name, reachable, reason, sized.get(name)))
        rows += [(extra, reach, why, sized.get(extra)) for extra, reach, why in est.apart if extra.startswith(f"{name}_")]
    return rows


def estimate_json(est: Estimate) -> dict[str, Any]:
    """Return the estimate under ORT's field names."""
    recipes = {r.backend.value: r for r in est.routes}
    routes = []
    for name, reachable, reason, nbytes in route_rows(est):
        entry: dict[str, Any] = {"backend": name, "reachable": reachable, "reason": reason, "sized_bytes": nbytes}
        if name in recipes:
            entry["recipe"] = recipes[name].as_dict()
        routes.append(entry)
    return {
        "status": est.error or est.status, "message": est.message, "classification": est.classification.value,
        "op": est.op.value, "head_domain": est.head_domain.value if est.head_domain else None,
        "problem": est.problem.as_dict() if est.problem else None, "routes": routes,
        "projection_bytes": est.projection_bytes,
        "attention_workspace_offset_bytes": est.attention_workspace_offset_bytes,
        "attention_workspace_bytes": est.attention_workspace_bytes,
        "total_workspace_bytes": est.total_workspace_bytes,
        "requirements": [r.as_dict() for r in est.requirements()], "note": est.note,
        "persistent_prepack_bytes": est.persistent_prepack_bytes,
        "initialization_scratch_bytes": est.initialization_scratch_bytes,
    }


def estimator(op: Op) -> str:
    """Return whose AOT bound an operator's estimate is: ORT's estimator's for the packed operators;
    attnws's own for MultiHeadAttention, for which ORT 1.31.1 has no estimator."""
    return family_of(op).estimate.WHOSE


def classification_text(est: Estimate) -> str:
    """Return the estimate's classification in words, saying whose bound it is."""
    who = family_of(est.op).estimate.BOUND_NAME
    return {"exact": "exact: the route and every deciding dimension are known",
            "safe_bound": f"safe bound: the largest workspace of every route {who} keeps, each at the maximum shape",
            }.get(est.classification.value, est.classification.value)


def estimate_text(est: Estimate, title: str, options: str = "") -> str:
    """Return the estimate as a readable report (`options`: the node options line, under the title)."""
    lines = [title, *_options(options), f"  {classification_text(est)}"]
    if not est.ok:
        lines[-1] = f"  unavailable: {est.message}"
        return "\n".join(lines)
    rows = route_rows(est)
    sizes = {name: "-" if nbytes is None else format_bytes(nbytes) for name, _, _, nbytes in rows}
    width = max([len("attention workspace"), *map(len, sizes.values())])
    name_width = max([len("route"), *(len(name) for name, _, _, _ in rows)])
    lines.append(f"  {'route'.ljust(name_width)}  sized  {'attention workspace'.ljust(width)}  why not")
    for name, reachable, reason, _ in rows:
        lines.append(f"  {name.ljust(name_width)}  {('yes' if reachable else 'no').ljust(5)}  "
                     f"{sizes[name].rjust(width)}  {reason}".rstrip())
    projection = family_of(est.op).estimate.has_projection(est.op)
    rows = [("projection", format_bytes(est.projection_bytes))] if projection else []
    rows += [
        ("attention workspace", f"{format_bytes(est.attention_workspace_bytes)} (the largest route)"),
        ("total workspace", format_bytes(est.total_workspace_bytes)
         + (f" (attention at offset {est.attention_workspace_offset_bytes:,})" if projection else "")),
        ("level-2 requirement", requirement_text(est.total_workspace_bytes)),
    ]
    if est.persistent_prepack_bytes:
        rows.append(("head-sink prepack", f"{format_bytes(est.persistent_prepack_bytes)} persistent, "
                                          f"{format_bytes(est.initialization_scratch_bytes)} at session creation "
                                          "(outside the workspace)"))
    width = max(len(k) for k, _ in rows)
    lines += [f"  {k.ljust(width)}  {v}" for k, v in rows]
    if est.note:
        lines.append(f"  note: {est.note}")
    return "\n".join(lines)


def dispatch_text(report: dict[str, dict[str, Any]], est: Estimate) -> str:
    """Return which backends can run in the target (dispatch picks them for some valid shape,
    with the shape) beside which ones the estimate sizes."""
    sized = {v.backend.value for v in est.reachability or () if v.reachable}
    lines = ["  can run in this target (the solver's witness, replayed through dispatch; 'sized' is the estimate's "
             "view):"]
    width = max((len(b) for b in report), default=0)
    for backend, entry in report.items():
        if entry["dispatched"]:
            what = f"yes, e.g. {shape_words(entry['witness'])}"
        else:
            what = "never: proven, no valid shape takes it" if entry["dispatched"] is False else "undecided"
        note = "" if (backend in sized) == bool(entry["dispatched"]) else (
            "  (sized, never runs)" if backend in sized else "  (runs, NOT sized)")
        lines.append(f"    {backend.ljust(width)}  {what}{note}")
    return "\n".join(lines)


def tight_text(tight: dict[str, Any], estimator: str = "ORT's") -> str:
    """Return the tight policy's report in words (and each memory pattern's proven maximum);
    `estimator` says whose root it improves on."""
    ort, root = tight.get("ort_total_bytes"), tight.get("tight_total_bytes")
    ratio = f" ({tight['ratio']:.2f}x below it)" if tight.get("ratio") and root != ort else ""
    if tight.get("method") == "proven maximum":
        lines = [f"  tight policy: reserve {format_bytes(root)}, the proven maximum over every valid shape, needed at "
                 f"{shape_words(tight['witness'])} ({_names(tight['witness'].get('backends'))}); "
                 f"{estimator} root {format_bytes(ort)}{ratio}"]
    elif tight.get("method") == "route-dropping bound":
        lines = [f"  tight policy: the maximum was not decided; reserve {format_bytes(root)}, the route-dropping bound "
                 f"(proven safe: {estimator} routes less those never dispatched, each at the maximum shape); "
                 f"{estimator} root {format_bytes(ort)}{ratio}"]
    else:
        lines = [f"  tight policy: nothing smaller proven ({tight.get('verdict')}); reserve {estimator} root "
                 f"{format_bytes(ort)}"]
    if tight.get("method") in ("proven maximum", "route-dropping bound"):
        lines.append(f"    level-2 requirement with it: {requirement_text(root)}")
    dropped = ", ".join(tight.get("dropped_routes", []))
    if dropped:
        lines.append(f"    routes {estimator} estimate sizes but dispatch never picks here (proven): {dropped}")
    if tight.get("undecided_routes"):
        lines.append(f"    routes undecided: {', '.join(tight['undecided_routes'])}")
    lines += patterns_text(tight, estimator)
    return "\n".join(lines)


def _names(backends: Any) -> str:
    return ", ".join(backends) if backends else "no route"


def patterns_text(report: dict[str, Any], estimator: str) -> list[str]:
    """Return each memory pattern's proven maximum beside the estimate's root over the whole
    target, and whether some shape lies outside every pattern."""
    if "patterns" not in report:
        return []
    ort = report.get("ort_total_bytes")
    lines = [f"  memory patterns (each its own proven maximum; {estimator} root over the whole target "
             f"{format_bytes(ort)}):"]
    width = max((len(p["details"]["pattern"]) for p in report["patterns"]), default=0)
    for result in report["patterns"]:
        p = result["details"]
        name, box = p["pattern"].ljust(width), ", ".join(f"{k} {v}" for k, v in p["dims"].items())
        if result["verdict"] != "PROVED":
            why = result.get("reason") or result.get("vacuous_because") or ""
            lines.append(f"    {name}  {result['verdict']}: {why} ({box})")
            continue
        ratio = f", {p['ratio']:.1f}x below" if p.get("ratio") else ""
        lines.append(f"    {name}  reserve {format_bytes(p['max_runtime_bytes'])}{ratio} ({box}; "
                     f"needed at {shape_words(p['witness'])})")
    uncovered = report["uncovered"]
    if uncovered["status"] == "found":
        lines.append(f"    outside every pattern: {shape_words(uncovered['witness'])} (a valid shape no pattern "
                     "covers: reserve the whole target's maximum for it)")
    elif uncovered["status"] == "undecided":
        lines.append("    whether some shape lies outside every pattern: undecided")
    else:
        lines.append("    every valid shape of the target lies in some pattern (proven)")
    return lines


def dims_text(t: Target) -> str:
    """Return a target's box in words: maxima as <=, exact values as =, ranges as LO..HI."""
    parts = cmd.box_terms(t) + op_fields(t.op).target_words(t)
    dtype = "bf16" if t.bf16 else "fp16" if t.element_size == 2 else "fp32"
    return f"{t.op.onnx_name}, {dtype}, sm{t.config.device.sm}: {', '.join(p for p in parts if p)}"


# What --input-shapes takes beside the shapes: the node's attributes and the element type.
HINT_ATTRIBUTE_FLAGS = ("op", "heads", "dtype", "qkv_hidden_sizes", "with_present", "unidirectional")


def _hints_estimate(ns: argparse.Namespace) -> Estimate:
    ignored = given(ns, tuple(f for f in cmd.PROBLEM_FLAGS if f not in HINT_ATTRIBUTE_FLAGS))
    if ignored:
        raise UsageError(f"--input-shapes gives every shape; {' '.join(ignored)} cannot be combined with it")
    if ns.op is None or ns.heads is None:
        raise UsageError("--input-shapes needs --op and --heads (num_heads)")
    cmd.check_own_flags(ns, Op(ns.op), ("qkv_hidden_sizes", "with_present", "unidirectional"))
    try:
        hints = parse_input_shapes(ns.input_shapes)
    except InvalidArgument as error:
        raise UsageError(str(error)) from None
    sizes = qkv_hidden_sizes_from_args(ns)
    heads = cmd.parse_dim(ns.heads, "heads").hi
    return estimate_from_hints(Op(ns.op), ELEMENT_SIZES[ns.dtype or "fp16"], heads, hints, config_from_args(ns), sizes,
                               has_present=ns.with_present, unidirectional=ns.unidirectional)


@dataclass(frozen=True)
class TargetSolver:
    """The solver's part of `estimate --target`: `dispatch_report(target)` (which backends can run
    in the target, JSON) and `tight_report(target, progress)` (the proven maxima, JSON)."""

    dispatch_report: Callable[[Target], dict[str, Any]]
    tight_report: Callable[[Target, Progress], dict[str, Any]]


def run_estimate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws estimate`: AOT estimate read as maxima (safe bound), or exact with --exact."""
    modes = given(ns, ("target", "exact", "input_shapes"))
    if len(modes) > 1:
        raise UsageError(f"{' and '.join(modes)} are different ways to give the problem; use one")
    if ns.policy == "tight" and (ns.exact or ns.input_shapes is not None):
        raise UsageError(f"--policy tight proves over a target's ranges; it does not apply to {modes[0]}")
    solver: TargetSolver | None = ns.target_solver
    if ns.policy == "tight" and solver is None:
        raise UsageError("--policy tight needs the solver, and no solver is registered (attnws.solver.commands "
                         "registers it)")
    target, options = None, ""
    if ns.input_shapes is not None:
        est, title = _hints_estimate(ns), "estimate from ORT positional input shapes"
    elif ns.exact:
        geometry, config = geometry_from_args(ns, "estimate --exact", estimate=False)
        options = options_line(geometry)
        est = estimate_exact(geometry, config)
        title = f"exact runtime workspace of {geometry.op.onnx_name} on sm{config.device.sm}"
    else:
        target = target_from_args(ns)
        options = options_line(target.max_geometry())
        est = estimate_geometry(target.max_geometry(), target.config)
        # A target of problem flags is named after them: dims_text says it all.
        name = "" if ns.target is None and cmd.problem_flags_given(ns) else f"{printable(target.name)}: "
        how = family_of(target.op).estimate.READING
        title = f"estimate for {name}{dims_text(target)} ({how})"
    doc = estimate_json(est)
    text = estimate_text(est, title, options)
    if target is None or not est.ok or solver is None:
        return CommandResult(EXIT_OK if est.ok else EXIT_REJECTED, text, doc)
    progress(f"finding a shape each backend runs for in {target.name}")
    doc["dispatch"] = solver.dispatch_report(target)
    text += "\n" + dispatch_text(doc["dispatch"], est)
    if ns.policy == "tight" or target.patterns:
        tight = solver.tight_report(target, progress)
        doc["tight"] = tight
        text += "\n" + tight_text(tight, estimator(target.op))
    return CommandResult(EXIT_OK, text, doc)


def run_targets(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws targets`: the committed targets `--target NAME|FILE` accepts, with their descriptions."""
    from .target import load_target

    entries = []
    for name in cmd.committed_target_names():
        t = load_target(cmd.TARGETS_DIR / f"{name}.json")
        entries.append({"name": t.name, "description": t.description, "op": t.op.value,
                        "dtype": "bf16" if t.bf16 else "fp16" if t.element_size == 2 else "fp32", "sm": t.config.device.sm,
                        "file": str(cmd.TARGETS_DIR / f"{name}.json")})
    width = max((len(e["name"]) for e in entries), default=0)
    lines = [f"{len(entries)} committed targets (attnws COMMAND --target NAME), in", f"  {cmd.TARGETS_DIR}"]
    lines += [line for e in entries for line in target_lines(e, width)]
    return CommandResult(EXIT_OK, "\n".join(lines), {"directory": str(cmd.TARGETS_DIR), "targets": entries})


TARGETS_COLUMNS = 100  # characters per line of `attnws targets` (a folder's path alone may run longer)


def target_lines(entry: dict[str, Any], width: int) -> list[str]:
    """Return one committed target as `attnws targets` lists it: its name padded to `width`, its
    operator, and its description wrapped at TARGETS_COLUMNS characters under its own column."""
    head = f"  {entry['name'].ljust(width)}  {entry['op'].ljust(4)}  "
    return textwrap.wrap(entry["description"], TARGETS_COLUMNS, initial_indent=head,
                         subsequent_indent=" " * len(head), break_on_hyphens=False)


MAX_FAILURE_SEQ = 4096  # beyond the TRT-flash threshold 385 every supported head size has a kernel


def run_ort_failures(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws ort-failures`: where ORT's dispatch picks a route and the run then fails."""
    if not 1 <= ns.max_seq <= MAX_FAILURE_SEQ:
        raise UsageError(f"--max-seq {ns.max_seq}: must be in 1..{MAX_FAILURE_SEQ} (the TRT runner's kernels are "
                         "looked up by sequence bucket up to 384; every S is dispatched, for every form, device and "
                         "head size)")
    progress(f"running dispatch over S 1..{ns.max_seq} for every form, device and head size")
    rows = failure_table(ns.max_seq)
    failing = [r for r in rows if r.ranges]
    kinds = [example.as_dict() for example in EXAMPLES]
    if ns.markdown:
        text = failure_markdown(rows, ns.max_seq).rstrip("\n")
    else:
        lines = [f"Where ORT {ORT_VERSION} picks a route and the run then fails (each shape dispatched now):"]
        for k in kinds:
            lines += [f"  {k['kind']}: {k['where']}", f"    fails when {k['condition']}",
                      f"    fails:  {k['failing']} ({k['route']})", f"    runs:   {k['running']} ({k['running_route']})"]
        lines.append(f"TRT fused runner without a kernel (S 1..{ns.max_seq}, every form, sm, head size): "
                     + ("none" if not failing else f"{len(failing)} (operator, sm, head size)"))
        lines += [f"  {r.form}, sm{r.sm}, H = {r.head_size}: S in " + ", ".join(f"{lo}..{hi}" for lo, hi in r.ranges)
                  for r in failing]
        text = "\n".join(lines)
    return CommandResult(EXIT_OK, text, {"max_seq": ns.max_seq, "kinds": kinds,
                                         "trt_rows": [r.as_dict() for r in failing]})


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the recipe, dispatch, estimate, targets and ort-failures subcommands."""
    p = subparsers.add_parser(
        "recipe", help="one exact recipe for a problem on a backend",
        description="One exact recipe: the bytes of each allocation and every view's offset, for one shape "
                    "on the backend you name (whether or not ORT's dispatch would pick it; a note says so).")
    p.add_argument_group("recipe").add_argument("--backend", required=True, choices=[b.value for b in Backend],
                                                help="the backend to size")
    add_problem_arguments(p)
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_recipe)

    p = subparsers.add_parser(
        "dispatch", help="the backend ORT picks for a concrete problem, and why",
        description="The backend ORT's runtime cascade picks for one shape, why it skipped each other one, "
                    "and the picked backend's recipe.")
    add_problem_arguments(p)
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_dispatch)

    p = subparsers.add_parser(
        "estimate", help="AOT workspace estimate (default: the built-in target)",
        description="ORT's ahead-of-time workspace estimate (MultiHeadAttention: attnws's own bound by the same "
                    "rule; ORT 1.31.1 has no estimator for it). Without problem flags: the built-in target "
                    "(BERT-base-like PMHA fp16 sm80, B <= 32, S <= 512, N = 12, H = 64). Dimensions are "
                    "read at their maxima, as ORT reads shapes; --exact takes them as the runtime shape; "
                    "--input-shapes takes ORT's positional hints.")
    add_target_argument(p)
    add_problem_arguments(p)
    add_config_arguments(p)
    g = p.add_argument_group("estimate")
    g.add_argument("--exact", action="store_true", help="the flags are one runtime shape")
    g.add_argument("--input-shapes", dest="input_shapes", metavar="JSON",
                   help="ORT positional shape hints, e.g. '[[6,6],[6,24],[24],[2,4],[3],null]' (with --op, "
                        "--heads, and for PA --qkv-hidden-sizes)")
    add_pattern_argument(g)
    g.add_argument("--policy", choices=["ort", "tight"], default="ort",
                   help="ort: every route the estimator keeps; tight: also the smaller root proven safe once the "
                        "routes proven unreachable are dropped (runs Z3)")
    add_json_argument(p)
    p.set_defaults(handler=run_estimate, target_solver=None)

    p = subparsers.add_parser(
        "targets", help=f"list the committed targets (--target {cmd.TARGET_METAVAR})",
        description=f"The committed targets, shipped with attnws: the names `--target {cmd.TARGET_METAVAR}` accepts "
                    "in estimate, prove, counterexamples, plot and validate, with a description of each, every "
                    "operator's.")
    add_json_argument(p)
    p.set_defaults(handler=run_targets)

    p = subparsers.add_parser(
        "ort-failures", help="where ORT picks a route and the run then fails",
        description="Every kind of run-time failure attnws models for ORT 1.31.1 (a route dispatch picks whose run "
                    "then returns an error), each with a failing shape and a running neighbour dispatched now; then "
                    "ORT's dispatch over every sequence length up to --max-seq for each operator form, device with TRT "
                    "kernels and head size, listing where it picks the TRT fused runner that then has no kernel. "
                    "--markdown writes the document kept in docs/ort-runtime-failures.md, for an upstream report.")
    p.add_argument_group("sweep").add_argument(
        "--max-seq", dest="max_seq", type=int, default=1024, metavar="S",
        help=f"largest sequence length, at most {MAX_FAILURE_SEQ}")
    output = cmd.output_group(p).add_mutually_exclusive_group()
    output.add_argument("--markdown", action="store_true", help="the Markdown document (docs/ort-runtime-failures.md)")
    add_json_argument(p, output)
    p.set_defaults(handler=run_ort_failures)
