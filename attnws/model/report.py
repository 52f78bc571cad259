"""Level-1 and Level-2 for a whole model: one estimate per attention node, the sum and the peak.

The sum of the nodes' totals is what a planner that keeps every node's workspace alive together
needs; the maximum is the peak when nodes run one after another (ORT's arena reuses one workspace:
each node's is released before the next starts). Both count only sized nodes: `complete` says
whether every node was sized. All byte counts are bytes.

The bounds are the user's (`--dim`, `--max-shape-override`) and what the model determines from
them (`derive.resolve`: B + 1, T <= B * S, the graph's own equalities), reported in `derived`;
the symbols still unbound that an attention node reads are `missing`.

Each node is estimated by its reader (`NodeReader.estimate`, with the `Session`: ORT's session
options, such as `--max-total-seq`, and the model's constant initializers), whatever its family.

For the solver (`--prove`, `--policy tight`, `--pattern`) each node becomes a target: a dimension
the model fixes (a static ONNX dimension, an attribute) is exact there, a dimension the model
keeps equal to its partner in every run (the reader's `ties`: a decoder self attention's L = S) is
tied to it, and any other ranges over 1..its bound. Which dimensions are static or tied is read
from further shape inferences at other bounds (`with_exact_dims`). A node the target cannot state
(the reader's `unstated`) raises `Unstated`, a typed error.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import onnx

from ..spec.estimate import Estimate, unavailable
from ..spec.errors import InvalidArgument, WorkspaceError
from ..spec.hints import Hint, HintState
from ..spec.options import RuntimeConfig
from ..spec.target import DimRange, Target
from .bounds import ShapeBounds
from .derive import MAXIMUM, Derived, Missing, resolve
from .functions import attention_sites
from .graph import Site, all_graphs
from .reader import DEFAULT_CACHE_LAYOUT, NodeInputs, Session
from .registry import reader_for
from .translate import ReadNode, anonymous, checked_types, node_inputs, read_node, shape_dims


class Unstated(InvalidArgument):
    """A sized node the solver's target cannot state: `path` (the node) and `why` (its reader's
    `unstated`, in words)."""

    def __init__(self, path: str, why: str) -> None:
        super().__init__(f"node {path}: the solver's target cannot state it ({why})")
        self.path, self.why = path, why


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
    session: Session = Session()  # what the estimate read beyond the node
    tied: frozenset[str] = frozenset()  # target dimensions the model keeps equal to their partner (see with_exact_dims)


@dataclass(frozen=True)
class ModelReport:
    """Every attention node of a model, in graph order (subgraphs after their parent node, a
    function's nodes at each call, named by the call site)."""

    path: str
    nodes: tuple[NodeReport, ...]
    derived: tuple[Derived, ...] = ()  # the symbols the model determines from the user's bounds
    missing: tuple[Missing, ...] = ()  # the symbols an attention node reads that nothing bounds

    @property
    def sized(self) -> tuple[NodeReport, ...]:
        """Return the sized nodes."""
        return tuple(n for n in self.nodes if n.estimate.ok)

    @property
    def provable(self) -> tuple[NodeReport, ...]:
        """Return the nodes the solver can take: the sized ones and the valid ones ORT's estimate
        declares nothing for (a reachable cuDNN route, say); the problem is known for both."""
        return tuple(n for n in self.nodes if n.estimate.problem is not None)

    @property
    def node_count(self) -> int:
        """Return how many attention nodes the model has."""
        return len(self.nodes)

    @property
    def level1_bytes(self) -> list[int]:
        """Return every sized node's Level-1 total in bytes."""
        return [n.estimate.total_workspace_bytes for n in self.sized]

    @property
    def complete(self) -> bool:
        """Return whether every attention node was sized."""
        return len(self.level1_bytes) == self.node_count

    @property
    def sum_total_bytes(self) -> int | None:
        """Return the sum of the sized nodes' totals in bytes (every node's workspace alive
        together), None when no node was sized."""
        return sum(self.level1_bytes) if self.level1_bytes else None

    @property
    def peak_total_bytes(self) -> int | None:
        """Return the largest sized node's total in bytes (the peak under sequential execution),
        None when no node was sized."""
        return max(self.level1_bytes, default=None)


def _unsized(inputs: NodeInputs) -> tuple[str, str]:
    """Return (reason, error status) when the node's outputs or unresolved shapes leave it unsized
    whatever the specification says, else ("", "")."""
    reason, error = inputs.unmodelled()
    if reason:
        return reason, error
    return "; ".join(inputs.unresolved), ""


def node_report(site: Site, config: RuntimeConfig, env: tuple[tuple[str, str], ...] = (),
                session: Session = Session()) -> NodeReport:
    """Return the Level-1 report of one attention node (its reader's `estimate`); unresolved
    dimensions or unmodelled outputs make it unavailable, and so does what the spec refuses (a
    MultiHeadAttention hidden size that is not a multiple of num_heads among them)."""
    types = checked_types(site)
    inputs = node_inputs(types)
    reason, error = _unsized(inputs)
    if reason:
        estimate = unavailable(inputs.op, reason, error=error)
        group_message = _unsized(node_inputs(anonymous(types)))[0]
    else:
        estimate = inputs.reader.estimate(inputs, config, session)
        group_message = estimate.message
    return NodeReport(site.label, site.node.op_type, site.graph_path, inputs.element_type, inputs.attributes,
                      inputs.hints, site.path, estimate, config, env, inputs=inputs.names, outputs=inputs.outputs,
                      group_message=group_message, session=session)


def model_constants(model: onnx.ModelProto, inferred: onnx.ModelProto) -> frozenset[str]:
    """Return the names of the model's initializers, in every graph (the inferred copy's too, whose
    functions are inlined)."""
    return frozenset(t.name for m in (model, inferred) for g in all_graphs(m.graph) for t in g.initializer)


def analyze_model(
    model: onnx.ModelProto, bounds: ShapeBounds, config: RuntimeConfig | None = None,
    env: tuple[tuple[str, str], ...] = (), path: str = "", max_total_sequence_length: int = 0,
    cache_layout: str = DEFAULT_CACHE_LAYOUT,
) -> ModelReport:
    """Return the report of every attention node of the model at the maximum shapes of the bounds
    and what the model determines from them (`derive.resolve`); `max_total_sequence_length` is
    ORT's session option `ep.cuda.gqa_workspace_max_total_sequence_length` (0: unset),
    `cache_layout` how a GroupQueryAttention node's past and present hold its cache."""
    config = config or RuntimeConfig()
    resolution = resolve(model, bounds)
    graph = resolution.inferred.graph
    session = Session(max_total_sequence_length, model_constants(model, resolution.inferred), cache_layout)
    nodes = tuple(node_report(site, config, env, session) for site in attention_sites(graph))
    return ModelReport(path, nodes, resolution.derived, resolution.missing)


Shift = Callable[[str, int], int]  # (the symbol an axis declares, "" for none; its bound) -> the bound in a run


def _shifted_bounds(model: onnx.ModelProto, bounds: ShapeBounds, shift: Shift) -> ShapeBounds:
    """Return the bounds with every symbolic value v of symbol NAME replaced by shift(NAME, v)
    (axes an override gives for a static input dimension keep their value)."""
    declared = {i.name: shape_dims(i.type) or [] for i in model.graph.input}
    overrides = {}
    for name, dims in bounds.overrides.items():
        axes = declared.get(name, [])
        at = [axes[axis] if axis < len(axes) else None for axis in range(len(dims))]  # a value, a symbol or None
        overrides[name] = tuple(d if isinstance(a, int) else shift(a or "", d) for a, d in zip(at, dims))
    return ShapeBounds({name: shift(name, v) for name, v in bounds.dims.items()}, overrides)


def _apart(model: onnx.ModelProto, bounds: ShapeBounds) -> Shift:
    """Return a shift that moves each symbol the bounds give by its own amount (1, 2, 3, ... in
    name order; an override's unnamed axis by 1): two symbols bound to the same value part."""
    names = sorted({*bounds.dims, *(d.dim_param for i in model.graph.input if i.name in bounds.overrides
                                    for d in i.type.tensor_type.shape.dim if d.dim_param)})
    offsets = {name: k + 1 for k, name in enumerate(names)}
    return lambda name, v: v + offsets.get(name, 1)


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


def _tied(report: NodeReport, runs: list[tuple[Hint, ...]]) -> frozenset[str]:
    """Return the node's target dimensions equal to their partner (its reader's `ties`) in every
    run, both known."""
    reader = reader_for(report.estimate.op)
    read = [reader.dims_read(hints) for hints in runs]
    return frozenset(d for d, partner in reader.ties.items()
                     if all(v.get(d, -1) >= 0 and v.get(d) == v.get(partner) for v in read))


def with_exact_dims(model: onnx.ModelProto, report: ModelReport, bounds: ShapeBounds) -> ModelReport:
    """Return the report with each node's `exact` dimensions: those that keep their value when every
    bound the user gives grows (shape inference again with each plus 1, and plus 2, what the model
    determines derived again from those: a uniform shift keeps relations such as
    batch_plus_1 = batch + 1 and T <= B * S) and when each derived maximum (T <= B * S) shrinks by
    1 (a maximum is never exact, even where B and S are), i.e. static ONNX dimensions and what the
    model computes from them alone; and its `tied` dimensions: those equal to their partner in all
    those runs and in one more, where each given symbol moves by its own amount (`_apart`: a key
    length read from the query's own symbol stays S; an encoder length bound to the same value
    parts from it). When an inference fails, or a node's shapes do not resolve there, no
    dimension of it is taken as exact or tied (ranges are always safe)."""
    try:
        runs = [[n.hints for n in report.nodes]]
        runs += [_attention_hints(resolve(model, _shifted_bounds(model, bounds, lambda _, v, k=k: v + k)).inferred)
                 for k in (1, 2)]
        shrunk = {d.name: d.value - 1 for d in report.derived if d.relation == MAXIMUM and d.value >= 2}
        if shrunk:  # the maxima one less, taken as given, and what follows from them derived again
            runs.append(_attention_hints(resolve(model, replace(bounds, dims={**bounds.dims, **shrunk})).inferred))
    except WorkspaceError:
        return report
    if any(len(run) != len(report.nodes) for run in runs):
        return report
    try:  # a graph that equates two given symbols refuses them apart: then nothing is tied
        apart = _attention_hints(resolve(model, _shifted_bounds(model, bounds, _apart(model, bounds))).inferred)
    except WorkspaceError:
        apart = []
    ties = [*runs, apart] if len(apart) == len(report.nodes) else None
    nodes = tuple(replace(n, exact=reader_for(n.estimate.op).exact_dims(_agreeing([run[i] for run in runs]),
                                                                         n.attributes),
                          tied=_tied(n, [run[i] for run in ties]) if ties else frozenset())
                  for i, n in enumerate(report.nodes))
    return replace(report, nodes=nodes)


def node_target(report: NodeReport) -> Target:
    """Return the target of a node with a problem (sized, or valid where ORT's estimate declares
    nothing): heads (an attribute) exact, head sizes exact with PA's
    qkv_hidden_sizes, every dimension the model fixes (`report.exact`) exact and every one it ties
    to its partner (`report.tied`) tied; every other dimension ranges over 1..its maximum (past
    over 0..its maximum). The family's own dimensions and flags are its reader's `target_fields`;
    raise `Unstated` where its reader says the target does not state the node (`unstated`), and
    InvalidArgument where the target's own checks refuse it."""
    p = report.estimate.problem
    if p is None:
        raise InvalidArgument(f"node {report.name!r} has no problem to build a target from: {report.estimate.message}")
    reader = reader_for(p.op)
    exact_heads = bool(report.attributes.get("qkv_hidden_sizes"))

    def dim(name: str, value: int, lowest: int = 1) -> DimRange | None:
        if name in report.tied:
            return None
        fixed = name in report.exact or (exact_heads and name in ("head_size", "v_head_size"))
        return DimRange(value, value) if fixed else DimRange(min(lowest, value), value)

    target = Target(op=p.op, element_size=p.element_size, batch=dim("batch", p.batch_size),
                    seq=dim("seq", p.sequence_length), config=report.config, env=report.env, name=report.path,
                    **reader.target_fields(p, dim, exact_heads, report.session))
    why = reader.unstated(report.estimate, target)
    if why:
        raise Unstated(report.path, why)
    return target
