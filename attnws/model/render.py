"""A model report as text and JSON. Each node's estimate uses the `estimate` command's own
rendering, so `attnws model` and `attnws estimate` print the same fields for the same shapes.
The text leads with what to reserve. Identical nodes (same operator, element type, attributes,
shapes, outputs and estimate, an unavailable one's reason included, wherever they sit: a stack of
layers, or the calls of one function) print once, as a group ("x12"); JSON lists every node and
the groups by node index."""

from __future__ import annotations

from typing import Any

from ..spec.hints import Hint, HintState, input_names
from ..spec.printable import printable
from ..spec.units import format_bytes
from ..spec_commands import estimate_json, estimate_text
from .report import ModelReport, NodeReport
from .translate import OUTPUT_NAMES


def hint_json(hint: Hint) -> Any:
    """Return a positional shape hint as JSON: null (missing), "no_shape" or a list of dims."""
    if isinstance(hint, HintState):
        return None if hint is HintState.MISSING else "no_shape"
    return list(hint)


def names_json(names: tuple[str, ...], count: int) -> list[str | None]:
    """Return tensor names by position over all `count` positions: null for an omitted one."""
    return [names[i] if i < len(names) and names[i] else None for i in range(count)]


def node_json(n: NodeReport) -> dict[str, Any]:
    """Return one node's report as JSON data; its estimate carries the Level-2 requirements."""
    return {"name": n.name, "op_type": n.op_type, "graph": n.graph, "element_type": n.element_type,
            "attributes": n.attributes, "input_names": names_json(n.inputs, len(n.hints)),
            "input_shapes": [hint_json(h) for h in n.hints],
            "output_names": names_json(n.outputs, len(OUTPUT_NAMES[n.estimate.op])),
            "estimate": estimate_json(n.estimate)}


def group_json(r: ModelReport, group: list[int]) -> dict[str, Any]:
    """Return one group of identical nodes as JSON data: its size, its nodes' indices in `nodes`
    and what they share."""
    n = r.nodes[group[0]]
    return {"count": len(group), "nodes": group, "op_type": n.op_type, "status": n.estimate.error or n.estimate.status,
            "total_workspace_bytes": n.estimate.total_workspace_bytes if n.estimate.ok else None}


def model_json(r: ModelReport) -> dict[str, Any]:
    """Return the model report as JSON data: nodes, their groups, counts, sum and peak in bytes."""
    return {"model": r.path, "status": "ok" if r.complete else "unavailable", "node_count": len(r.nodes),
            "sized_count": len(r.sized), "complete": r.complete, "sum_total_bytes": r.sum_total_bytes,
            "peak_total_bytes": r.peak_total_bytes, "nodes": [node_json(n) for n in r.nodes],
            "groups": [group_json(r, g) for g in group_nodes(r.nodes)]}


def shapes_text(n: NodeReport) -> str:
    """Return the node's input shapes by input name, the missing optional inputs named once."""
    present, missing = [], []
    for name, hint in zip(input_names(n.estimate.op), n.hints):
        if hint is HintState.MISSING:
            missing.append(name)
        elif hint is HintState.NO_SHAPE:
            present.append(f"{name} (shape unknown)")
        else:
            present.append(f"{name} [{', '.join('?' if d < 0 else str(d) for d in hint)}]")
    return ", ".join(present) + (f"; absent: {', '.join(missing)}" if missing else "")


def outputs_text(n: NodeReport) -> str:
    """Return the node's outputs by name, the absent optional ones named once."""
    names = OUTPUT_NAMES[n.estimate.op]
    present = [name for i, name in enumerate(names) if i < len(n.outputs) and n.outputs[i]]
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
    outputs = tuple(name is not None for name in names_json(n.outputs, len(OUTPUT_NAMES[n.estimate.op])))
    return (n.op_type, n.element_type, repr(sorted(n.attributes.items())), n.hints, outputs,
            repr({**estimate_json(n.estimate), "message": n.group_message}))


def group_nodes(nodes: tuple[NodeReport, ...]) -> list[list[int]]:
    """Return the nodes' indices grouped by `group_key`, groups in order of their first node."""
    groups: dict[Any, list[int]] = {}
    for index, n in enumerate(nodes):
        groups.setdefault(group_key(n), []).append(index)
    return list(groups.values())


def names_text(names: list[str]) -> str:
    """Return node names, the middle of a long list elided: "a, b, ..., z"."""
    names = [printable(name) for name in names]
    return ", ".join(names) if len(names) <= 4 else f"{names[0]}, {names[1]}, ..., {names[-1]}"


def group_text(group: list[NodeReport]) -> str:
    """Return one group's report: its nodes, what was read, and the estimate they share."""
    n = group[0]
    count = ""
    if len(group) > 1:
        named = any(m.estimate.message != n.estimate.message for m in group)
        count = f" (x{len(group)}, identical{' but for tensor names; the first named below' if named else ''})"
    graphs = {m.graph for m in group}
    where = (f"{names_text([m.name for m in group])}{count} in graph {printable(n.graph)}" if len(graphs) == 1
             else f"{names_text([m.path for m in group])}{count}")
    title = (f"{where}: {n.op_type}, {n.element_type or 'element type unknown'}, {attributes_text(n.attributes)}\n"
             f"  input shapes  {shapes_text(n)}"
             + (f"\n  outputs       {outputs_text(n)}" if len(OUTPUT_NAMES[n.estimate.op]) > 1 else ""))
    return estimate_text(n.estimate, title)


def reserve_text(r: ModelReport) -> str:
    """Return the line that answers what to reserve: the peak of the nodes' roots (nodes run one
    after another), and the sum for a planner that keeps every node's root alive together; no
    number when a node is unavailable."""
    peak, total = format_bytes(r.peak_total_bytes), format_bytes(r.sum_total_bytes)
    if not r.nodes:
        return "nothing to reserve: the model has no PackedAttention, PackedMultiHeadAttention or MultiHeadAttention node"
    if not r.sized:
        return f"no safe reservation: none of the {len(r.nodes)} attention node(s) could be sized (why below)"
    if not r.complete:
        return (f"no safe reservation: {len(r.nodes) - len(r.sized)} of the {len(r.nodes)} attention node(s) could not "
                f"be sized (why below); the {len(r.sized)} sized alone need {peak} at their peak, {total} summed")
    return (f"reserve {peak} for attention workspace: the peak, the largest node's, when ORT's arena reuses one "
            f"workspace as the nodes run one after another; {total}, the sum, if a planner keeps every node's "
            "workspace alive together")


def model_text(r: ModelReport) -> str:
    """Return the whole report: what to reserve, each group of identical nodes, then the model's
    sum and peak."""
    groups = [[r.nodes[i] for i in g] for g in group_nodes(r.nodes)]
    lines = [reserve_text(r), f"model {r.path}: {len(r.nodes)} attention node(s), {len(r.sized)} sized"
             + (f", {len(groups)} distinct" if len(groups) < len(r.nodes) else "")]
    lines += [group_text(g) for g in groups]
    scope = "every node" if r.complete else f"the {len(r.sized)} sized node(s) only; the others are unavailable"
    lines += [
        f"model totals ({scope})",
        f"  sum of the nodes' totals (a partition budget)  {format_bytes(r.sum_total_bytes)}",
        f"  peak (nodes run one after another)            {format_bytes(r.peak_total_bytes)}",
    ]
    return "\n".join(lines)
