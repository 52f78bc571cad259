"""Model-local functions, inlined as ONNX Runtime inlines them before it runs a model.

ONNX Runtime replaces each call of a model-local function (`model.functions`) by the function's
body and runs the body's nodes, so an attention node inside a function needs a workspace at every
call. `inline_functions` returns the model with every call inlined: calls in the main graph, in
its control-flow subgraphs and inside function bodies (nested calls, however deep: ONNX's inliner
takes at most 100 levels at once, so deeper chains are inlined in passes). ONNX's inliner binds
the function's formal inputs and outputs to the call's tensors and resolves each `ref_attr_name`
attribute from the call's attributes. A default the function declares (`attribute_proto`) is first
added to each call that lacks the attribute: ONNX's inliner (1.23) drops such an attribute, where
ONNX Runtime takes the default. A function no call reaches contributes nothing; a function that
calls itself, directly or not, is refused, as ONNX Runtime refuses it.

Before inlining, every call gets its own copy of the function, and every attention node is tagged
(in its `doc_string`, on this disposable copy) with its graph path and label as written: a node of
a function body is `main/<call site>/<node>`, so the two calls of one function give two nodes, each
named by its call site. `attention_sites` reads the tags back after ONNX's inliner has renamed the
nodes. The copies are counted as they are made, so nesting that multiplies the model's nodes is
refused at `max_nodes` before it is built.
"""

from __future__ import annotations

import json
from typing import Iterator

import onnx
import onnx.inliner

from .errors import BadModel, ModelTooLarge
from .graph import Site, join_path, node_label, subgraphs, unique_paths, walk
from .translate import is_attention

INLINE_PASS_DEPTH = 50  # call levels inlined per pass: ONNX's inliner refuses chains deeper than 100

FunctionId = tuple[str, str, str]  # (domain, name, overload)


def _id_text(key: FunctionId) -> str:
    domain, name, overload = key
    return f"{domain or 'ai.onnx'}.{name}" + (f" (overload {overload!r})" if overload else "")


def _tag(node: onnx.NodeProto, path: str, label: str) -> None:
    node.doc_string = json.dumps([path, label])


def _opset_imports(model: onnx.ModelProto, functions: list[onnx.FunctionProto]) -> None:
    """Add to the model the opset imports of its inlined functions' domains it lacks (ONNX Runtime
    resolves a function body's operators by the function's own imports)."""
    imported = {opset.domain for opset in model.opset_import}
    for function in functions:
        for opset in function.opset_import:
            if opset.domain not in imported:
                model.opset_import.append(opset)
                imported.add(opset.domain)


def inline_functions(model: onnx.ModelProto, max_nodes: int | None = None) -> onnx.ModelProto:
    """Return `model` (a disposable copy, changed in place) with every attention node tagged and
    every call of a model-local function inlined, INLINE_PASS_DEPTH levels of calls per pass of
    ONNX's inliner. Raise BadModel for a recursive function or a call ONNX's inliner refuses;
    ModelTooLarge when the inlined model would hold more than `max_nodes` nodes."""
    library: dict[FunctionId, onnx.FunctionProto] = {(f.domain, f.name, f.overload): f for f in model.functions}
    copies: list[onnx.FunctionProto] = []
    depths: list[int] = []  # of each copy: how many calls enclose its call
    count = 0
    # (nodes, graph path, the chain of functions being called)
    pending: list[tuple[list[onnx.NodeProto], str, tuple[FunctionId, ...]]] = [(model.graph.node, "main", ())]
    while pending:
        nodes, path, chain = pending.pop()
        count += len(nodes)
        if max_nodes is not None and count > max_nodes:
            raise ModelTooLarge(f"the model holds more than {max_nodes:,} nodes once its functions are inlined, "
                                "the limit (--max-nodes)")
        for index, node in enumerate(nodes):
            label = node_label(node, index)
            if is_attention(node):
                _tag(node, path, label)
            pending.extend((sub.node, f"{join_path(path, label)}.{attr}", chain) for attr, sub in subgraphs(node))
            key = (node.domain, node.op_type, node.overload)
            if key not in library:
                continue
            where = f"node {label!r} ({node.op_type}, graph {path})"
            if key in chain:
                cycle = " -> ".join(_id_text(k) for k in (*chain[chain.index(key):], key))
                raise BadModel(f"{where}: the model-local function {_id_text(key)} calls itself ({cycle}); ONNX "
                               "refuses recursive functions")
            body = onnx.FunctionProto()
            body.CopyFrom(library[key])
            body.name = f"{body.name}@{len(copies)}"  # one copy per call site
            node.op_type = body.name
            given = {attr.name for attr in node.attribute}  # ONNX's inliner ignores the defaults; ORT does not
            node.attribute.extend(default for default in body.attribute_proto if default.name not in given)
            copies.append(body)
            depths.append(len(chain))
            pending.append((body.node, join_path(path, label), (*chain, key)))
    del model.functions[:]
    model.functions.extend(copies)
    _opset_imports(model, copies)
    for start in range(0, max(depths, default=-1) + 1, INLINE_PASS_DEPTH):
        selected = [(body.domain, body.name) for body, depth in zip(copies, depths)
                    if start <= depth < start + INLINE_PASS_DEPTH]
        try:
            model = onnx.inliner.inline_selected_functions(model, selected)
        except Exception as error:  # noqa: BLE001 - ONNX's C++ raises several types on a malformed call
            raise BadModel(f"ONNX could not inline the model's functions: {str(error).strip()}") from None
    return model


def attention_sites(graph: onnx.GraphProto) -> Iterator[Site]:
    """Yield every attention node (`translate.is_attention`) of an inlined graph
    (`inline_functions`) and its subgraphs, in graph order, each with the graph path and label its
    tag gives and a path no other attention node has (`graph.unique_paths`)."""
    tagged = [(site, *json.loads(site.node.doc_string)) for site in walk(graph) if is_attention(site.node)]
    paths = unique_paths([join_path(path, label) for _, path, label in tagged])
    for (site, path, label), unique in zip(tagged, paths):
        yield Site(site.node, site.index, path, site.scope, label, unique)
