"""A model report as text and JSON. Each node's estimate uses the `estimate` command's own
rendering, so `attnws model` and `attnws estimate` print the same fields for the same shapes."""

from __future__ import annotations

from typing import Any

from ..spec.hints import Hint, HintState
from ..spec_commands import estimate_json, estimate_text
from .report import ModelReport, NodeReport


def hint_json(hint: Hint) -> Any:
    """Return a positional shape hint as JSON: null (missing), "no_shape" or a list of dims."""
    if isinstance(hint, HintState):
        return None if hint is HintState.MISSING else "no_shape"
    return list(hint)


def node_json(n: NodeReport) -> dict[str, Any]:
    """Return one node's report as JSON data; its estimate carries the Level-2 requirements."""
    return {"name": n.name, "op_type": n.op_type, "graph": n.graph, "element_type": n.element_type,
            "attributes": n.attributes, "input_shapes": [hint_json(h) for h in n.hints],
            "estimate": estimate_json(n.estimate)}


def model_json(r: ModelReport) -> dict[str, Any]:
    """Return the model report as JSON data: nodes, counts, sum and peak in bytes."""
    return {"model": r.path, "status": "ok" if r.complete else "unavailable", "node_count": len(r.nodes),
            "sized_count": len(r.sized), "complete": r.complete, "sum_total_bytes": r.sum_total_bytes,
            "peak_total_bytes": r.peak_total_bytes, "nodes": [node_json(n) for n in r.nodes]}


def _shape_text(hint: Hint) -> str:
    value = hint_json(hint)
    return "missing" if value is None else value if isinstance(value, str) else f"[{','.join(map(str, value))}]"


def node_text(n: NodeReport) -> str:
    """Return one node's report: where it is, what was read, and its estimate."""
    title = (f"node {n.name} ({n.op_type}, graph {n.graph}): {n.element_type}, "
             f"attributes {n.attributes}\n  input shapes  {', '.join(_shape_text(h) for h in n.hints)}")
    return estimate_text(n.estimate, title)


def model_text(r: ModelReport) -> str:
    """Return the whole report: each node, then the model's sum and peak."""
    lines = [f"model {r.path}: {len(r.nodes)} attention node(s), {len(r.sized)} sized"]
    lines += [node_text(n) for n in r.nodes]
    scope = "every node" if r.complete else f"the {len(r.sized)} sized node(s) only; the others are unavailable"
    lines += [
        f"model totals ({scope})",
        f"  sum of totals (partition budget)  {r.sum_total_bytes:,} bytes",
        f"  peak (sequential execution)       {r.peak_total_bytes:,} bytes",
    ]
    return "\n".join(lines)
