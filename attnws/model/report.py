"""Level-1 and Level-2 for a whole model: one estimate per attention node, the sum and the peak.

The sum of the nodes' totals is what a planner that keeps every node's workspace alive together
needs; the maximum is the peak when nodes run one after another (ORT's arena reuses one workspace:
each node's is released before the next starts). Both count only sized nodes: `complete` says
whether every node was sized. All byte counts are bytes.

The bounds are the user's (`--dim`, `--max-shape-override`) and what the model determines from
them (`derive.resolve`: B + 1, T <= B * S, the graph's own equalities), reported in `derived`;
the symbols still unbound that an attention node reads are `missing`.

For the solver (`--prove`, `--policy tight`, `--pattern`) each node becomes a target: a dimension
the model fixes (a static ONNX dimension, an attribute) is exact there, and a symbolic one ranges
over 1..its bound. Which dimensions are static is read from further shape inferences at other
bounds (`with_exact_dims`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import onnx

from ..spec.estimate import Estimate, estimate_for_node, unavailable
from ..spec.errors import InvalidArgument, WorkspaceError
from ..spec.hints import Hint, HintState
from ..spec.options import RuntimeConfig
from ..spec.target import DimRange, Target
from .bounds import ShapeBounds
from .derive import MAXIMUM, Derived, Missing, resolve
from .functions import attention_sites
from .graph import Site
from .in_progress import InProgressNode, in_progress_nodes
from .registry import reader_for
from .translate import NodeInputs, ReadNode, anonymous, checked_types, node_inputs, read_node


@dataclass(frozen=True)
class NodeReport(ReadNode):
    """One attention node: where it is, what the adapter read, and its Level-1 estimate."""

    estimate: Estimate
    config: RuntimeConfig
    env: tuple[tuple[str, str], ...] = ()
    exact: frozenset[str] = frozenset()  # problem dimensions the model fixes (see with_exact_dims)
    inputs: tuple[str, ...] = ()  # the node's input names by position ("" for an omitted one)
    outputs: tuple[str, ...] = ()  # the node's output names by position ("" for an omitted one)
    # The estimate's message with the node's tensor names left out: nodes that differ only in
    # their tensors' names have the same (what grouping compares).
    group_message: str = ""


@dataclass(frozen=True)
class ModelReport:
    """Every attention node of a model, in graph order (subgraphs after their parent node, a
    function's nodes at each call, named by the call site)."""

    path: str
    nodes: tuple[NodeReport, ...]
    derived: tuple[Derived, ...] = ()  # the symbols the model determines from the user's bounds
    missing: tuple[Missing, ...] = ()  # the symbols an attention node reads that nothing bounds
    in_progress: tuple[InProgressNode, ...] = ()  # the nodes of in-progress families (`in_progress`)

    @property
    def sized(self) -> tuple[NodeReport, ...]:
        """Return the sized nodes of the registered families."""
        return tuple(n for n in self.nodes if n.estimate.ok)

    @property
    def node_count(self) -> int:
        """Return how many attention nodes the model has, in-progress families' included."""
        return len(self.nodes) + len(self.in_progress)

    @property
    def level1_bytes(self) -> list[int]:
        """Return every sized node's Level-1 total in bytes, in-progress families' after the others."""
        return [n.estimate.total_workspace_bytes for n in self.sized] + \
            [n.total_workspace_bytes for n in self.in_progress if n.ok]

    @property
    def complete(self) -> bool:
        """Return whether every attention node was sized."""
        return len(self.level1_bytes) == self.node_count

    @property
    def sum_total_bytes(self) -> int:
        """Return the sum of the sized nodes' totals in bytes (every node's workspace alive together)."""
        return sum(self.level1_bytes)

    @property
    def peak_total_bytes(self) -> int:
        """Return the largest sized node's total in bytes (the peak under sequential execution)."""
        return max(self.level1_bytes, default=0)


def _unsized(inputs: NodeInputs) -> tuple[str, str]:
    """Return (reason, error status) when the node's outputs or unresolved shapes leave it unsized
    whatever the specification says, else ("", "")."""
    reason, error = inputs.unmodelled()
    if reason:
        return reason, error
    return "; ".join(inputs.unresolved), ""


def node_report(site: Site, config: RuntimeConfig, env: tuple[tuple[str, str], ...] = ()) -> NodeReport:
    """Return the Level-1 report of one attention node; unresolved dimensions make it unavailable,
    and so does a MultiHeadAttention hidden size that is not a multiple of num_heads."""
    types = checked_types(site)
    inputs = node_inputs(types)
    reason, error = _unsized(inputs)
    if reason:
        estimate = unavailable(inputs.op, reason, error=error)
        group_message = _unsized(node_inputs(anonymous(types)))[0]
    else:
        estimate = estimate_for_node(site.node.op_type, inputs.element_type, inputs.sizing_attributes, inputs.hints, config,
                                     has_present=inputs.has_present)
        group_message = estimate.message
    return NodeReport(site.label, site.node.op_type, site.graph_path, inputs.element_type, inputs.attributes,
                      inputs.hints, estimate, config, env, inputs=inputs.names, outputs=inputs.outputs,
                      group_message=group_message)


def analyze_model(
    model: onnx.ModelProto, bounds: ShapeBounds, config: RuntimeConfig | None = None,
    env: tuple[tuple[str, str], ...] = (), path: str = "", max_total_sequence_length: int = 0,
) -> ModelReport:
    """Return the report of every attention node of the model at the maximum shapes of the bounds
    and what the model determines from them (`derive.resolve`); `max_total_sequence_length` is
    ORT's session option for the in-progress families' nodes (0: unset)."""
    config = config or RuntimeConfig()
    resolution = resolve(model, bounds)
    graph = resolution.inferred.graph
    nodes = tuple(node_report(site, config, env) for site in attention_sites(graph))
    return ModelReport(path, nodes, resolution.derived, resolution.missing,
                       in_progress_nodes(graph, config, max_total_sequence_length))


def _scaled_bounds(model: onnx.ModelProto, bounds: ShapeBounds, f: Any) -> ShapeBounds:
    """Return the bounds with every symbolic value v replaced by f(v) (axes an override gives for a
    static input dimension keep their value)."""
    declared = {i.name: i.type.tensor_type.shape.dim for i in model.graph.input
                if i.type.WhichOneof("value") == "tensor_type" and i.type.tensor_type.HasField("shape")}
    overrides = {}
    for name, dims in bounds.overrides.items():
        axes = declared.get(name)
        overrides[name] = tuple(d if axes is not None and axis < len(axes) and axes[axis].HasField("dim_value")
                                else f(d) for axis, d in enumerate(dims))
    return ShapeBounds({name: f(v) for name, v in bounds.dims.items()}, overrides)


def _attention_hints(inferred: onnx.ModelProto) -> list[tuple[Hint, ...]]:
    return [read_node(site).hints for site in attention_sites(inferred.graph)]


def _agreeing(runs: list[tuple[Hint, ...]]) -> tuple[Hint, ...]:
    """Return the first run's hints with -1 wherever the runs disagree on a dimension."""
    out = []
    for hints in zip(*runs):
        first = hints[0]
        if isinstance(first, HintState) or any(h != first and (isinstance(h, HintState) or len(h) != len(first))
                                               for h in hints):
            out.append(first if isinstance(first, HintState) else tuple(-1 for _ in first))
            continue
        out.append(tuple(d if all(h[axis] == d for h in hints) else -1 for axis, d in enumerate(first)))
    return tuple(out)


def with_exact_dims(model: onnx.ModelProto, report: ModelReport, bounds: ShapeBounds) -> ModelReport:
    """Return the report with each node's `exact` dimensions: those that keep their value when every
    bound the user gives grows (shape inference again with each plus 1, and plus 2, what the model
    determines derived again from those: a uniform shift keeps relations such as
    batch_plus_1 = batch + 1 and T <= B * S) and when each derived maximum (T <= B * S) shrinks by
    1 (a maximum is never exact, even where B and S are), i.e. static ONNX dimensions and what the
    model computes from them alone. When an inference fails, or a node's shapes do not resolve
    there, no dimension of it is taken as exact (ranges are always safe)."""
    try:
        runs = [[n.hints for n in report.nodes]]
        runs += [_attention_hints(resolve(model, _scaled_bounds(model, bounds, lambda v, k=k: v + k)).inferred)
                 for k in (1, 2)]
        shrunk = {d.name: d.value - 1 for d in report.derived if d.relation == MAXIMUM and d.value >= 2}
        if shrunk:  # the maxima one less, taken as given, and what follows from them derived again
            runs.append(_attention_hints(resolve(model, replace(bounds, dims={**bounds.dims, **shrunk})).inferred))
    except WorkspaceError:
        return report
    if any(len(run) != len(report.nodes) for run in runs):
        return report
    nodes = tuple(replace(n, exact=reader_for(n.estimate.op).exact_dims(_agreeing([run[i] for run in runs]),
                                                                         n.attributes))
                  for i, n in enumerate(report.nodes))
    return replace(report, nodes=nodes)


def node_target(report: NodeReport) -> Target:
    """Return the target of a sized node: heads (an attribute) exact, head sizes exact with PA's
    qkv_hidden_sizes, and every dimension the model fixes (`report.exact`) exact; every other
    dimension ranges over 1..its maximum (past over 0..its maximum). The family's own dimensions
    and flags are its reader's `target_fields`."""
    p = report.estimate.problem
    if not report.estimate.ok or p is None:
        raise InvalidArgument(f"node {report.name!r} has no estimate to build a target from: {report.estimate.message}")
    exact_heads = bool(report.attributes.get("qkv_hidden_sizes"))

    def dim(name: str, value: int, lowest: int = 1) -> DimRange:
        fixed = name in report.exact or (exact_heads and name in ("head_size", "v_head_size"))
        return DimRange(value, value) if fixed else DimRange(min(lowest, value), value)

    return Target(
        op=p.op, element_size=p.element_size, batch=dim("batch", p.batch_size), seq=dim("seq", p.sequence_length),
        heads=DimRange(p.num_heads, p.num_heads), head_size=dim("head_size", p.qk_head_size), qkv_bias=p.has_bias,
        attn_bias=p.has_attention_bias, attn_bias_broadcast_batch=bool(p.broadcast_attn_bias_dim_0),
        attn_bias_broadcast_heads=bool(p.broadcast_attn_bias_dim_1), config=report.config, env=report.env,
        name=report.path, **reader_for(p.op).target_fields(p, dim, exact_heads),
    )
