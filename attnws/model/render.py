"""A model report as text and JSON. Each node's estimate uses the `estimate` command's own
rendering, so `attnws model` and `attnws estimate` print the same fields for the same shapes
(the tight policy's proven maximum too). The text leads with what to reserve (`reserve`: the peak
and the sum, for ORT's bound and the proven maxima), then the symbols still missing and those
derived from the model. Identical nodes (same operator, element type, attributes, shapes, outputs
and estimate, an unavailable one's reason included, and one solver run, wherever they sit: a stack
of layers, or the calls of one function) print once, as a group ("x12"); JSON lists every node and
the groups by node index."""

from __future__ import annotations

from typing import Any, Sequence

from ..spec.hints import Hint, HintState
from ..spec.inputs import input_names
from ..spec.printable import printable
from ..spec.target import Pattern
from ..spec.units import format_bytes
from ..spec.commands import estimate_json, estimate_text, estimator, shape_words, tight_text
from .registry import op_types_text, reader_for
from .report import ModelReport, NodeReport
from .reserve import NodeChecks, totals


def _output_names(n: NodeReport) -> tuple[str, ...]:
    """Return the outputs the node's operator declares, by position."""
    return reader_for(n.estimate.op).output_names


def hint_json(hint: Hint) -> Any:
    """Return a positional shape hint as JSON: null (missing), "no_shape" or a list of dims."""
    if isinstance(hint, HintState):
        return None if hint is HintState.MISSING else "no_shape"
    return list(hint)


def names_json(names: tuple[str, ...], count: int) -> list[str | None]:
    """Return tensor names by position over all `count` positions: null for an omitted one."""
    return [names[i] if i < len(names) and names[i] else None for i in range(count)]


def node_json(n: NodeReport) -> dict[str, Any]:
    """Return one node's report as JSON data; its estimate carries the Level-2 requirements, and
    `session_options` the session's options its reader's estimate read (null: unset)."""
    return {"name": n.name, "op_type": n.op_type, "graph": n.graph, "element_type": n.element_type,
            "attributes": n.attributes, "input_names": names_json(n.inputs, len(n.hints)),
            "input_shapes": [hint_json(h) for h in n.hints],
            "output_names": names_json(n.outputs, len(_output_names(n))),
            "session_options": {name: getattr(n.session, name) or None
                                for name in reader_for(n.estimate.op).session_options},
            "estimate": estimate_json(n.estimate)}


def group_json(r: ModelReport, group: list[int]) -> dict[str, Any]:
    """Return one group of identical nodes as JSON data: its size, its nodes' indices in `nodes`
    and what they share."""
    n = r.nodes[group[0]]
    return {"count": len(group), "nodes": group, "op_type": n.op_type, "status": n.estimate.error or n.estimate.status,
            "total_workspace_bytes": n.estimate.total_workspace_bytes if n.estimate.ok else None}


def model_json(r: ModelReport, checks: list[NodeChecks] | None = None,
               patterns: tuple[Pattern, ...] = ()) -> dict[str, Any]:
    """Return the model report as JSON data: nodes, their groups, counts, sum and peak in bytes,
    the dimensions derived and missing, and the totals (`reserve.totals`); the solver's per-node
    results are `prove.checks_json`'s."""
    return {"model": r.path, "status": "ok" if r.complete else "unavailable", "node_count": r.node_count,
            "sized_count": len(r.level1_bytes), "complete": r.complete, "sum_total_bytes": r.sum_total_bytes,
            "peak_total_bytes": r.peak_total_bytes, "derived": [d.as_dict() for d in r.derived],
            "missing": [m.as_dict() for m in r.missing],
            "totals": totals(checks, patterns, r.level1_bytes),
            "nodes": [node_json(n) for n in r.nodes],
            "groups": [group_json(r, g) for g in group_nodes(r.nodes, _check_keys(r, checks))]}


def _check_keys(r: ModelReport, checks: list[NodeChecks] | None) -> list[Any]:
    """Per node, the node whose solver run it shares (None unsized or without the solver): nodes
    group only when they share one."""
    shared = {c.node.path: c.shared_from for c in checks or []}
    return [shared.get(n.path) for n in r.nodes]


def shapes_text(names: Sequence[str], hints: Sequence[Hint]) -> str:
    """Return a node's input shapes by input name, the missing optional inputs named once."""
    present, missing = [], []
    for name, hint in zip(names, hints):
        if hint is HintState.MISSING:
            missing.append(name)
        elif hint is HintState.NO_SHAPE:
            present.append(f"{name} (shape unknown)")
        else:
            present.append(f"{name} [{', '.join('?' if d < 0 else str(d) for d in hint)}]")
    return ", ".join(present) + (f"; absent: {', '.join(missing)}" if missing else "")


def outputs_text(names: Sequence[str], outputs: Sequence[str]) -> str:
    """Return a node's outputs by name (`outputs`: the node's, by position), the absent optional
    ones named once."""
    present = [name for i, name in enumerate(names) if i < len(outputs) and outputs[i]]
    missing = [name for name in names if name not in present]
    return ", ".join(present) + (f"; absent: {', '.join(missing)}" if missing else "")


def attributes_text(attributes: dict[str, Any]) -> str:
    """Return the attributes as name = value, lists as [a, b, c]."""
    def value(v: Any) -> str:
        return f"[{', '.join(map(str, v))}]" if isinstance(v, (list, tuple)) else f"{v:g}" if isinstance(v, float) else str(v)
    return ", ".join(f"{k} = {value(v)}" for k, v in sorted(attributes.items())) or "no attributes"


def group_key(n: NodeReport) -> Any:
    """Return what makes two nodes print the same: everything but their names, their graphs and
    the tensor names in an unavailable estimate's reason."""
    outputs = tuple(name is not None for name in names_json(n.outputs, len(_output_names(n))))
    return (n.op_type, n.element_type, repr(sorted(n.attributes.items())), n.hints, outputs,
            repr({**estimate_json(n.estimate), "message": n.group_message}))


def group_nodes(nodes: tuple[NodeReport, ...], extra: list[Any] | None = None) -> list[list[int]]:
    """Return the nodes' indices grouped by `group_key` (and `extra`, one key per node), groups in
    order of their first node."""
    groups: dict[Any, list[int]] = {}
    for index, n in enumerate(nodes):
        groups.setdefault((group_key(n), extra[index] if extra else None), []).append(index)
    return list(groups.values())


def names_text(names: list[str]) -> str:
    """Return node names, the middle of a long list elided: "a, b, ..., z"."""
    names = [printable(name) for name in names]
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ..., {names[-1]}"


def title_text(group: list[NodeReport]) -> str:
    """Return a group's heading: where its nodes are, how many, the first's operator, element
    type, attributes, input shapes and outputs (nodes whose estimate messages differ, named apart
    by their tensors, say so)."""
    n = group[0]
    messages = [m.estimate.message for m in group]
    output_names = _output_names(n)
    count = ""
    if len(group) > 1:
        named = any(m != messages[0] for m in messages)
        count = f" (x{len(group)}, identical{' but for tensor names; the first named below' if named else ''})"
    graphs = {m.graph for m in group}
    where = (f"{names_text([m.name for m in group])}{count} in graph {printable(n.graph)}" if len(graphs) == 1
             else f"{names_text([m.path for m in group])}{count}")
    return (f"{where}: {n.op_type}, {n.element_type or 'element type unknown'}, "
            f"{attributes_text(n.attributes)}\n  input shapes  {shapes_text(input_names(n.estimate.op), n.hints)}"
            + (f"\n  outputs       {outputs_text(output_names, n.outputs)}" if len(output_names) > 1 else ""))


def group_text(group: list[NodeReport], check: NodeChecks | None = None) -> str:
    """Return one group's report: its nodes, what was read, the estimate they share and, when the
    solver ran, their proven maximum and each memory pattern's."""
    n = group[0]
    lines = [estimate_text(n.estimate, title_text(group))]
    if check is not None and check.unprovable:
        lines.append(f"  solver: not run: the solver's target cannot state the node ({printable(check.unprovable)}); "
                     f"{_root_words(check, estimator(n.estimate.op))} counts for it")
    if check is not None and check.tight_asked and check.tight is None and not check.unprovable:
        lines.append(f"  proven maximum of the whole node: none: {estimator(n.estimate.op)} estimate declares nothing "
                     "here, and the shapes that take a route without a recipe would be left out of the solver's")
    if check is not None and check.tight is not None:
        lines.append(tight_text(check.tight.as_dict(), estimator(n.estimate.op)))
    if check is not None and check.patterns:
        lines += pattern_lines(check, estimator(n.estimate.op))
    return "\n".join(lines)


def _root_words(check: NodeChecks, who: str) -> str:
    """Return "WHO root N B", or that WHO declares nothing for the node."""
    return f"{who} root {format_bytes(check.ort_bytes)}" if check.ort_bytes is not None else f"{who} estimate: none"


def pattern_lines(check: NodeChecks, who: str) -> list[str]:
    """Return each memory pattern's proven maximum on the node, or why it does not apply."""
    whole = format_bytes(check.tight_total_bytes) if check.tight_total_bytes is not None else "none (nothing bounds it)"
    width = max(len(p.pattern.name) for p in check.patterns)
    lines = [f"  memory patterns (each its proven maximum over the pattern's shapes of this node; "
             f"{_root_words(check, who)}):"]
    for p in check.patterns:
        name = printable(p.pattern.name).ljust(width)
        if not p.applies:
            lines.append(f"    {name}  does not apply: {p.reason}; the node's whole reservation {whole} counts for it")
            continue
        box = ", ".join(f"{k} {v}" for k, v in p.box.as_dict().items())
        clipped = " (clipped to the node's dimensions)" if p.box != p.pattern else ""
        if not p.proved:
            why = p.result.reason or p.result.vacuous_because
            lines.append(f"    {name}  {p.result.verdict.value}: {why} ({box}{clipped}); the node's whole reservation "
                         f"{whole} counts for it")
            continue
        details = p.result.details
        if details.get("left_out"):
            routes = ", ".join(details["left_out"])
            lines.append(f"    {name}  none: some of its shapes take {routes}, which no recipe sizes ({box}{clipped}; "
                         f"the others need at most {format_bytes(details['max_runtime_bytes'])})")
            continue
        ratio = (f", {check.ort_bytes / p.reserve_bytes:.1f}x below {who}" if p.reserve_bytes and check.ort_bytes
                 and p.reserve_bytes != check.ort_bytes else "")
        lines.append(f"    {name}  reserve {format_bytes(p.reserve_bytes)}{ratio} ({box}{clipped}; needed at "
                     f"{shape_words(details['witness'])})")
    return lines


ARENA = "ORT's arena reuses one workspace as the nodes run one after another"
PLANNER = "a planner keeps every node's workspace alive together"


def reserve_text(r: ModelReport, checks: list[NodeChecks] | None = None) -> str:
    """Return the line that answers what to reserve: the peak of the nodes' roots (nodes run one
    after another), and the sum for a planner that keeps every node's root alive together, the
    proven maxima's beside ORT's bound when the solver ran; no number when a node is unavailable."""
    count, sized = r.node_count, len(r.level1_bytes)
    if not count:
        return f"nothing to reserve: the model has no {op_types_text('or')} node"
    if not sized:
        return f"no safe reservation: none of the {count} attention node(s) could be sized (why below)"
    peak, total = format_bytes(r.peak_total_bytes), format_bytes(r.sum_total_bytes)
    proven = totals(checks, (), [])["proven"]
    if not r.complete:
        solver = (f" ({format_bytes(proven['peak'])} and {format_bytes(proven['sum'])} by their proven maxima)"
                  if proven is not None else "")
        return (f"no safe reservation: {count - sized} of the {count} attention node(s) could not "
                f"be sized (why below); the {sized} sized alone need {peak} at their peak, {total} summed"
                + solver)
    if proven is None:
        return (f"reserve {peak} for attention workspace: the peak, the largest node's, when {ARENA}; {total}, the "
                f"sum, if {PLANNER}")
    what = "the proven maximum" if all(c.proven for c in checks or []) else \
        "the proven maximum (the estimate's bound where no maximum was proven)"
    return (f"reserve {format_bytes(proven['peak'])} for attention workspace, {what} ({_bound_label(r)} {peak}): the "
            f"peak, the largest node's, when {ARENA}; {format_bytes(proven['sum'])} ({_bound_label(r)} {total}), the "
            f"sum, if {PLANNER}")


def _bound_label(r: ModelReport) -> str:
    """Return "ORT's bound" when ORT estimates every node's operator, else "Level-1 bound"."""
    return "ORT's bound" if all(reader_for(n.estimate.op).ort_estimator for n in r.nodes) else "Level-1 bound"


def totals_text(r: ModelReport, checks: list[NodeChecks] | None, patterns: tuple[Pattern, ...]) -> list[str]:
    """Return the model's peak and sum for ORT's bound, the proven maxima and each pattern."""
    t = totals(checks, patterns, r.level1_bytes)
    scope = "every node" if r.complete else f"the {len(r.level1_bytes)} sized node(s) only; the others are unavailable"
    rows = [(_bound_label(r), t["ort"])]
    if t["proven"] is not None:
        every = all(c.proven for c in checks or [])
        rows.append(("proven maximum" if every else f"proven maximum, else {_bound_label(r)}", t["proven"]))
    rows += [(f"pattern {printable(name)}", value) for name, value in t["patterns"].items()]
    cells = [(label, *("none" if v[k] is None else format_bytes(v[k]) for k in ("peak", "sum"))) for label, v in rows]
    w0 = max(len(c[0]) for c in cells)
    w1 = max(len("peak"), *(len(c[1]) for c in cells))
    lines = [f"model totals ({scope})",
             f"  peak: what {ARENA.replace('reuses', 'needs, reusing')}",
             f"  sum:  what {PLANNER.replace('keeps', 'needs that keeps')}"]
    if rows[0][0] == "Level-1 bound":
        lines.append(f"  Level-1 bound: ORT's estimate for {op_types_text('and', own_estimate=False)}, attnws's own "
                     f"for {op_types_text('and', own_estimate=True)} (ORT has none)")
    lines.append(f"  {''.ljust(w0)}  {'peak'.ljust(w1)}  sum")
    lines += [f"  {label.ljust(w0)}  {peak.ljust(w1)}  {total}" for label, peak, total in cells]
    return lines


def model_text(r: ModelReport, checks: list[NodeChecks] | None = None, patterns: tuple[Pattern, ...] = ()) -> str:
    """Return the whole report: what to reserve, the dimensions missing and derived, each group of
    identical nodes (with the solver's results when it ran), then the model's peak and sum."""
    by_path = {c.node.path: c for c in checks or []}
    groups = [[r.nodes[i] for i in g] for g in group_nodes(r.nodes, _check_keys(r, checks))]
    lines = [reserve_text(r, checks)]
    lines += [m.text for m in r.missing]
    if r.derived:
        lines.append("derived from the model (a --dim you give overrides one):")
        lines += [f"  {d.text}" for d in r.derived]
    distinct = len(groups)
    lines.append(f"model {printable(r.path)}: {r.node_count} attention node(s), {len(r.level1_bytes)} sized"
                 + (f", {distinct} distinct" if distinct < r.node_count else ""))
    lines += [group_text(g, by_path.get(g[0].path)) for g in groups]
    lines += totals_text(r, checks, patterns)
    return "\n".join(lines)
