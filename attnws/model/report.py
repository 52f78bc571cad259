"""Level-1 and Level-2 for a whole model: one estimate per attention node, the sum and the peak.

The sum of the nodes' totals is what a partition budget is charged; the maximum is the peak when
nodes run one after another (each node's workspace is released before the next starts). Both count
only sized nodes: `complete` says whether every node was sized. All byte counts are bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import onnx

from ..spec.estimate import Estimate, estimate_for_node, unavailable
from ..spec.errors import InvalidArgument
from ..spec.hints import Hint
from ..spec.options import RuntimeConfig
from ..spec.problem import QkvFormat
from ..spec.target import DimRange, Target
from .bounds import ShapeBounds
from .graph import Site, walk
from .infer import infer_max_shapes
from .translate import is_attention, read_node


@dataclass(frozen=True)
class NodeReport:
    """One attention node: where it is, what the adapter read, and its Level-1 estimate."""

    name: str
    op_type: str
    graph: str
    element_type: str | None
    attributes: dict[str, Any]
    hints: tuple[Hint, ...]
    estimate: Estimate
    config: RuntimeConfig
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ModelReport:
    """Every attention node of a model, in graph order (subgraphs after their parent node)."""

    path: str
    nodes: tuple[NodeReport, ...]

    @property
    def sized(self) -> tuple[NodeReport, ...]:
        return tuple(n for n in self.nodes if n.estimate.ok)

    @property
    def complete(self) -> bool:
        """Return whether every attention node was sized."""
        return len(self.sized) == len(self.nodes)

    @property
    def sum_total_bytes(self) -> int:
        """Return the sum of the sized nodes' totals in bytes (the partition budget's charge)."""
        return sum(n.estimate.total_workspace_bytes for n in self.sized)

    @property
    def peak_total_bytes(self) -> int:
        """Return the largest sized node's total in bytes (the peak under sequential execution)."""
        return max((n.estimate.total_workspace_bytes for n in self.sized), default=0)


def node_report(site: Site, config: RuntimeConfig, env: tuple[tuple[str, str], ...] = ()) -> NodeReport:
    """Return the Level-1 report of one attention node; unresolved dimensions make it unavailable."""
    inputs = read_node(site)
    if inputs.unresolved:
        estimate = unavailable(inputs.op, "; ".join(inputs.unresolved))
    else:
        estimate = estimate_for_node(site.node.op_type, inputs.element_type, inputs.attributes, inputs.hints, config)
    return NodeReport(site.label, site.node.op_type, site.graph_path, inputs.element_type, inputs.attributes,
                      inputs.hints, estimate, config, env)


def analyze_model(
    model: onnx.ModelProto, bounds: ShapeBounds, config: RuntimeConfig | None = None,
    env: tuple[tuple[str, str], ...] = (), path: str = "",
) -> ModelReport:
    """Return the report of every attention node of the model at the bounds' maximum shapes."""
    config = config or RuntimeConfig()
    inferred = infer_max_shapes(model, bounds)
    nodes = tuple(node_report(site, config, env) for site in walk(inferred.graph) if is_attention(site))
    return ModelReport(path, nodes)


def node_target(report: NodeReport) -> Target:
    """Return the target of a sized node: every shape dimension ranges over 1..its maximum, heads
    (an attribute) are exact, and so are head sizes when PA carries qkv_hidden_sizes."""
    p = report.estimate.problem
    if not report.estimate.ok or p is None:
        raise InvalidArgument(f"node {report.name!r} has no estimate to build a target from: {report.estimate.message}")
    exact_heads = bool(report.attributes.get("qkv_hidden_sizes"))
    size = (lambda n: DimRange(n, n)) if exact_heads else (lambda n: DimRange(1, n))
    separate = p.qkv_format is QkvFormat.SEPARATE
    return Target(
        op=p.op, element_size=p.element_size, batch=DimRange(1, p.batch_size), seq=DimRange(1, p.sequence_length),
        heads=DimRange(p.num_heads, p.num_heads), head_size=size(p.qk_head_size),
        v_head_size=size(p.v_head_size) if exact_heads or separate else None,
        tokens=DimRange(1, p.token_count), input_hidden=DimRange(1, p.input_hidden_size) if p.input_hidden_size else None,
        qkv_hidden_sizes=exact_heads, pmha_format=p.qkv_format or QkvFormat.PACKED, qkv_bias=p.has_bias,
        attn_bias=p.has_attention_bias, attn_bias_broadcast_batch=p.broadcast_attn_bias_dim_0,
        attn_bias_broadcast_heads=p.broadcast_attn_bias_dim_1, config=report.config, env=report.env,
        name=f"{report.graph}/{report.name}",
    )
