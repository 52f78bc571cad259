"""The specification's commands: `recipe`, `dispatch` and `estimate` (no printing here).

Each handler returns a CommandResult whose JSON uses ONNX Runtime's field names plus `status`
(ok, invalid_argument, overflow, unavailable) and `message`; the text is a readable table.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .command import (
    EXIT_OK,
    EXIT_REJECTED,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_problem_arguments,
    config_from_args,
    geometry_from_args,
    qkv_hidden_sizes_from_args,
    target_from_args,
)
from .spec.errors import UsageError, WorkspaceError
from .spec.estimate import (
    Estimate, estimate_exact, estimate_from_hints, estimate_geometry, level2_requirements, runtime_problem,
)
from .spec.hints import parse_hint
from .spec.aggregate import root_layout
from .spec.dispatch import dispatch
from .spec.layout import Recipe
from .spec.problem import Backend, Op, ELEMENT_SIZES
from .spec.recipe import recipe
from .spec.options import TrtRunner


def _recipe_json(r: Recipe) -> dict[str, Any]:
    offset, total = root_layout(r.projection_bytes, r.attention_workspace_bytes)
    out = r.as_dict()
    out.update(attention_workspace_offset_bytes=offset, total_workspace_bytes=total,
               requirements=[r.as_dict() for r in level2_requirements(total)])
    return out


def _rows(pairs: list[tuple[str, Any]]) -> str:
    width = max(len(k) for k, _ in pairs)
    return "\n".join(f"  {k.ljust(width)}  {_fmt(v)}" for k, v in pairs)


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int):
        return str(value)
    return f"{value:,}"


def _error_result(error: WorkspaceError, **extra: Any) -> CommandResult:
    doc = {"status": error.status, "message": str(error), **extra}
    return CommandResult(EXIT_REJECTED, f"rejected ({error.status}): {error}", doc)


def _recipe_text(r: Recipe) -> str:
    doc = _recipe_json(r)
    keys = ["projection_bytes", "projection_m", "projection_n", "projection_k", "qkv_layout", "qkv_capacity_bytes",
            "q_offset_bytes", "q_bytes", "k_offset_bytes", "k_bytes", "v_offset_bytes", "v_bytes",
            "interleaved_qkv_offset_bytes", "interleaved_qkv_bytes", "backend_workspace_offset_bytes",
            "backend_workspace_bytes", "has_second_scratch", "second_scratch_offset_bytes",
            "attention_workspace_bytes", "attention_workspace_offset_bytes", "total_workspace_bytes"]
    if r.op is Op.PMHA:
        keys = [k for k in keys if not k.startswith("projection")]
    return _rows([(k, doc[k]) for k in keys])


def run_recipe(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws recipe`: one exact recipe for one problem on one backend."""
    geometry, config = geometry_from_args(ns)
    backend = Backend(ns.backend)
    try:
        problem = runtime_problem(geometry)
        runner = config.trt_runner is not TrtRunner.UNAVAILABLE
        r = recipe(problem, backend, trt_runner_available=runner)
    except WorkspaceError as error:
        return _error_result(error, op=geometry.op.value, backend=backend.value)
    doc = {"status": "ok", "message": "", "problem": problem.as_dict(), **_recipe_json(r)}
    text = f"{geometry.op.onnx_name} recipe on {backend.value}\n{_recipe_text(r)}"
    return CommandResult(EXIT_OK, text, doc)


def run_dispatch(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws dispatch`: the backend ORT picks, why the others were skipped, and its recipe."""
    geometry, config = geometry_from_args(ns)
    try:
        problem = runtime_problem(geometry)
        outcome = dispatch(problem, config)
        recipes = [recipe(problem, b, trt_runner_available=True) for b in outcome.backends]
    except WorkspaceError as error:
        return _error_result(error, op=geometry.op.value)
    skipped = [{"backend": b.value, "reason": reason} for b, reason in outcome.skipped]
    doc: dict[str, Any] = {
        "status": "ok", "message": "", "problem": problem.as_dict(), "empty": outcome.empty,
        "backend": outcome.backend.value if outcome.backend else None,
        "backends": [b.value for b in outcome.backends], "skipped": skipped,
    }
    lines = [f"{geometry.op.onnx_name} on sm{config.device.sm}"]
    if outcome.empty:
        lines.append("  output is empty: ORT returns before dispatch; no workspace")
        doc.update(total_workspace_bytes=0, requirements=[])
    else:
        picked = " or ".join(b.value for b in outcome.backends)
        lines.append(f"  picks: {picked}" + (" (TRT runner validity unknown)" if len(recipes) > 1 else ""))
        doc.update(_recipe_json(recipes[0]))
        doc["recipes"] = [_recipe_json(r) for r in recipes]
    lines += [f"  skipped {s['reason']}" for s in skipped]
    for r in recipes:
        lines += [f"recipe on {r.backend.value}", _recipe_text(r)]
    return CommandResult(EXIT_OK, "\n".join(lines), doc)


def estimate_json(est: Estimate) -> dict[str, Any]:
    """Return the estimate under ORT's field names."""
    recipes = {r.backend: r for r in est.routes}
    routes = []
    for verdict in est.reachability:
        entry: dict[str, Any] = {"backend": verdict.backend.value, "reachable": verdict.reachable,
                                 "reason": verdict.reason}
        if verdict.backend in recipes:
            entry["recipe"] = recipes[verdict.backend].as_dict()
        routes.append(entry)
    if not est.reachability:
        routes = [{"backend": r.backend.value, "reachable": True, "reason": "", "recipe": r.as_dict()} for r in est.routes]
    return {
        "status": est.error or est.status, "message": est.message, "classification": est.classification.value,
        "op": est.op.value, "head_domain": est.head_domain.value if est.head_domain else None,
        "problem": est.problem.as_dict() if est.problem else None, "routes": routes,
        "projection_bytes": est.projection_bytes,
        "attention_workspace_offset_bytes": est.attention_workspace_offset_bytes,
        "attention_workspace_bytes": est.attention_workspace_bytes,
        "total_workspace_bytes": est.total_workspace_bytes,
        "requirements": [r.as_dict() for r in est.requirements()],
    }


def estimate_text(est: Estimate, title: str) -> str:
    """Return the estimate as a readable report."""
    lines = [title, f"  classification  {est.classification.value}"]
    if not est.ok:
        lines.append(f"  unavailable: {est.message}")
        return "\n".join(lines)
    recipes = {r.backend: r for r in est.routes}
    lines.append("  route     reachable  attention bytes  note")
    verdicts = est.reachability or tuple()
    shown = [(v.backend, v.reachable, v.reason) for v in verdicts] or [(b, True, "") for b in recipes]
    for backend, reachable, reason in shown:
        size = _fmt(recipes[backend].attention_workspace_bytes) if backend in recipes else "-"
        lines.append(f"  {backend.value.ljust(8)}  {('yes' if reachable else 'no').ljust(9)}  {size.rjust(15)}  {reason}")
    lines.append(_rows([
        ("projection bytes", est.projection_bytes),
        ("attention offset bytes", est.attention_workspace_offset_bytes),
        ("attention bytes (max over routes)", est.attention_workspace_bytes),
        ("total workspace bytes", est.total_workspace_bytes),
        ("level-2 requirements", [r.as_dict() for r in est.requirements()] or "none"),
    ]))
    return "\n".join(lines)


def _hints_estimate(ns: argparse.Namespace) -> Estimate:
    try:
        raw = json.loads(ns.input_shapes)
    except json.JSONDecodeError as error:
        raise UsageError(f"--input-shapes is not JSON: {error}") from None
    if not isinstance(raw, list):
        raise UsageError("--input-shapes must be a JSON list of positional hints")
    if ns.op is None or ns.heads is None:
        raise UsageError("--input-shapes needs --op and --heads (num_heads)")
    hints = [parse_hint(h, i) for i, h in enumerate(raw)]
    sizes = qkv_hidden_sizes_from_args(ns)
    try:
        heads = int(ns.heads)
    except ValueError:
        raise UsageError(f"--heads {ns.heads!r} must be an integer with --input-shapes") from None
    return estimate_from_hints(Op(ns.op), ELEMENT_SIZES[ns.dtype or "fp16"], heads, hints, config_from_args(ns), sizes)


def run_estimate(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """`attnws estimate`: AOT estimate read as maxima (safe bound), or exact with --exact."""
    if ns.input_shapes is not None:
        est, title = _hints_estimate(ns), "estimate from ORT positional input shapes"
    elif ns.exact:
        geometry, config = geometry_from_args(ns)
        est, title = estimate_exact(geometry, config), f"exact runtime workspace ({geometry.op.onnx_name})"
    else:
        target = target_from_args(ns)
        est = estimate_geometry(target.max_geometry(), target.config)
        title = f"estimate for {target.name if target.name != 'custom' else target.op.onnx_name} (shapes read as maxima)"
    doc = estimate_json(est)
    text = estimate_text(est, title)
    if ns.policy == "tight" and est.ok:
        from .solver.commands import tight_report

        tight = tight_report(target_from_args(ns), progress)
        doc["tight"] = tight
        text += "\n" + "\n".join(f"  tight policy: {k} = {_fmt(v)}" for k, v in tight.items())
    return CommandResult(EXIT_OK if est.ok else EXIT_REJECTED, text, doc)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the recipe, dispatch and estimate subcommands."""
    p = subparsers.add_parser("recipe", help="one exact recipe for a problem on a backend")
    add_problem_arguments(p)
    p.add_argument("--backend", required=True, choices=[b.value for b in Backend])
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_recipe)

    p = subparsers.add_parser("dispatch", help="the backend ORT picks for a concrete problem, and why")
    add_problem_arguments(p)
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_dispatch)

    p = subparsers.add_parser("estimate", help="AOT workspace estimate (default: the built-in target)")
    add_problem_arguments(p)
    add_config_arguments(p)
    p.add_argument("--target", help="a committed target name or a target JSON file")
    p.add_argument("--exact", action="store_true", help="the flags are the runtime geometry")
    p.add_argument("--input-shapes", dest="input_shapes", help="ORT positional shape hints as JSON")
    p.add_argument("--policy", choices=["ort", "tight"], default="ort",
                   help="ort (default): every route ORT keeps; tight: drop routes proven unreachable")
    add_json_argument(p)
    p.set_defaults(handler=run_estimate)
