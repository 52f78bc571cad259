"""A `--dim` that would change nothing is refused, never silently ignored.

attnws sizes each attention node from its input shapes at the bounds (and what the model derives
from them); it never reads a tensor's value. A symbol the user bounds that no attention node's
input shape depends on would be accepted and change nothing: a decoder's attention-mask width, for
one, which the graph turns (ReduceSum, Shape, Gather, Sub, Cast) into the values of an attention
node's index inputs, such as its total sequence length. `refuse_inert_dims` makes such a bound a
usage error that names the symbol, says why, and where the graph reads it as a value.

Whether a bound matters is measured, not guessed: the model is resolved again without it
(`derive.resolve`), and the bound is inert when every attention node's input shapes come out the
same and the model derives no value for the symbol itself (a value the model derives is checked
against the one given, so that bound is not ignored). A symbol a `--max-shape-override` binds as
well is not judged: the override binds it anyway.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Sequence

import onnx

from ..spec.errors import UsageError, WorkspaceError
from ..spec.hints import Hint
from ..spec.inputs import input_names
from ..spec.printable import printable
from .bounds import ShapeBounds
from .derive import bound_symbols, resolve
from .functions import attention_sites
from .graph import Site, all_graphs
from .infer import symbols_of
from .registry import reader_of
from .translate import is_attention, read_node


def refuse_inert_dims(model: onnx.ModelProto, bounds: ShapeBounds, given: Iterable[str],
                      hints: Sequence[tuple[Hint, ...]]) -> None:
    """Raise UsageError for the first symbol, by name, of `given` (the names the user bounds by
    --dim) that changes no attention node's input shape (`inert_resolution`); `bounds` are all the
    bounds the report was made at (a genai_config.json's among them) and `hints` its attention
    nodes' input shapes, in graph order. Nothing is refused in a model without attention nodes."""
    if not hints:
        return
    overridden = bound_symbols(model, replace(bounds, dims={}))
    for name in sorted(set(given) - overridden):
        probe = inert_resolution(model, bounds, name, hints)
        if probe is not None:
            raise UsageError(_refusal(name, bounds.dims[name], probe))


def inert_resolution(model: onnx.ModelProto, bounds: ShapeBounds, name: str,
                     hints: Sequence[tuple[Hint, ...]]) -> onnx.ModelProto | None:
    """Return the model inferred with the bound on `name` left out when every attention node's
    input shapes are then `hints` (those at `bounds`) and the model derives no value for `name`:
    the bound changes nothing. None where it matters, or where the model does not resolve
    without it."""
    try:
        probe = resolve(model, replace(bounds, dims={k: v for k, v in bounds.dims.items() if k != name}))
    except WorkspaceError:
        return None
    if any(d.name == name for d in probe.derived):
        return None
    sites = list(attention_sites(probe.inferred.graph))
    return probe.inferred if [read_node(site).hints for site in sites] == list(hints) else None


def _refusal(name: str, value: int, inferred: onnx.ModelProto) -> str:
    """Return why `--dim name=value` changes nothing, with the attention nodes whose index inputs
    the graph computes from it (`value_readers`) and what their readers advise instead (each
    reader's `value_advice`, once)."""
    text = (f"--dim {printable(name)}={value} changes nothing: no attention node's input shape depends on it, and "
            "attnws sizes a node from its input shapes, never from a tensor's value")
    readers = value_readers(inferred, name)
    if readers:
        (site, inputs), rest = readers[0], len(readers) - 1
        names = input_names(reader_of(site.node.op_type).op)
        where = " and ".join(f"input {i} ({names[i]})" for i in inputs)
        more = f", and likewise of {rest} more node(s)" if rest else ""
        text += (f"; the graph computes from it the value of {site.node.op_type} node "
                 f"{printable(site.label)}'s {where}{more}")
    advice = dict.fromkeys(reader_of(site.node.op_type).value_advice for site, _ in readers)
    return "; ".join((text, "drop it", *filter(None, advice)))


def value_readers(inferred: onnx.ModelProto, name: str) -> list[tuple[Site, tuple[int, ...]]]:
    """Return each attention node with the index inputs (its reader's `index_inputs`) whose value
    the graph computes from a tensor that has the symbol `name` in its shape (tracing producers
    back, not through another attention node), in graph order; nodes without one are left out."""
    producers = {out: node for graph in all_graphs(inferred.graph) for node in graph.node for out in node.output}
    out = []
    for site in attention_sites(inferred.graph):
        present = [i for i in reader_of(site.node.op_type).index_inputs
                   if i < len(site.node.input) and site.node.input[i]]
        inputs = tuple(i for i in present if _computed_from(site, site.node.input[i], name, producers))
        if inputs:
            out.append((site, inputs))
    return out


def _computed_from(site: Site, tensor: str, name: str, producers: dict[str, onnx.NodeProto]) -> bool:
    """Return whether `tensor` or a tensor it is computed from (producers traced back, stopping at
    attention nodes and graph inputs) has the symbol `name` in its shape (or a tensor a sequence
    or optional of it holds: `infer.symbols_of`), as `site` sees types."""
    pending, seen = [tensor], {tensor}
    while pending:
        current = pending.pop()
        if name in symbols_of(site.scope.type_of(current)):
            return True
        node = producers.get(current)
        if node is None or is_attention(node):
            continue
        for source in node.input:
            if source and source not in seen:
                seen.add(source)
                pending.append(source)
    return False

