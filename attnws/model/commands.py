"""`attnws model MODEL.onnx`: Level-1 estimates and Level-2 declarations for every attention node
(PackedAttention, PackedMultiHeadAttention, MultiHeadAttention) of a model file, with the model's
sum and peak. Nothing here prints or exits.

Exit codes: 0 every node sized (and, with --prove, every theorem PROVED); 1 a node unavailable,
a theorem REFUTED or the model bad (BadModel, raised to the CLI); 2 usage (UsageError); 3 some
theorem UNKNOWN and none refuted. `--prove` and `--policy tight` load the solver (Z3) lazily.
"""

from __future__ import annotations

import argparse

from ..command import (
    EXIT_OK,
    EXIT_REJECTED,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    config_from_args,
    parse_env,
)
from ..spec.errors import UsageError
from .bounds import shape_bounds
from .load import DEFAULT_MAX_MODEL_BYTES, DEFAULT_MAX_MODEL_NODES, load_model
from .render import model_json, model_text
from .report import analyze_model, with_exact_dims


def run_model(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Return the model report for the parsed flags."""
    for flag, value in (("--max-bytes", ns.max_bytes), ("--max-nodes", ns.max_nodes)):
        if value < 0:
            raise UsageError(f"{flag} {value} must be non-negative")
    plot_out = None
    if ns.plot is not None:
        from ..plot.commands import check_out

        plot_out = check_out(ns.plot, "--plot")
    bounds = shape_bounds(ns.dim, ns.max_shape_override)
    config = config_from_args(ns)
    progress(f"reading {ns.model}")
    model = load_model(ns.model, ns.max_bytes, ns.max_nodes)
    progress("inferring maximum shapes")
    report = analyze_model(model, bounds, config, tuple(parse_env(ns.env).items()), ns.model)
    text, doc = model_text(report), model_json(report)
    if plot_out is not None:
        from ..plot.model import plot_model

        line, fields = plot_model(model, report, bounds, plot_out, progress)
        text, doc = f"{text}\n{line}", {**doc, **fields}
    if not (ns.prove or ns.policy == "tight"):
        return CommandResult(EXIT_OK if report.complete else EXIT_REJECTED, text, doc)
    from . import prove

    report = with_exact_dims(model, report, bounds)
    checks = prove.check_nodes(report, ns.prove, ns.policy == "tight", progress)
    doc.update(prove.checks_json(checks))
    return CommandResult(prove.exit_code(report, checks), f"{text}\n{prove.checks_text(checks)}", doc)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `model` subcommand."""
    p = subparsers.add_parser(
        "model", help="workspace of every attention node of an ONNX model",
        description="The Level-1 estimate (ORT's; attnws's own for MultiHeadAttention) and Level-2 "
                    "declaration of every PackedAttention / "
                    "PackedMultiHeadAttention / MultiHeadAttention node (com.microsoft; control-flow subgraphs "
                    "and every call of a model-local function included, a function's nodes named by the call "
                    "site), identical nodes grouped, "
                    "led by what to reserve: the peak of the nodes' workspaces, or their sum. Symbolic dimensions need a bound (--dim or "
                    "--max-shape-override). For --prove and --policy tight a static ONNX dimension is exact and "
                    "a symbolic one ranges over 1..its bound.")
    p.add_argument("model", help="the .onnx file")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=MAX",
                   help="the maximum of the symbolic dimension NAME (repeatable)")
    p.add_argument("--max-shape-override", dest="max_shape_override", metavar="STR",
                   help="ORT's session.max_shape_override: 'input:[8,4096];mask:[8,4096]'")
    p.add_argument("--max-bytes", dest="max_bytes", type=int, default=DEFAULT_MAX_MODEL_BYTES,
                   help="refuse a model file larger than this many bytes")
    p.add_argument("--max-nodes", dest="max_nodes", type=int, default=DEFAULT_MAX_MODEL_NODES,
                   help="refuse a model with more nodes than this, every graph and function counted, and again "
                        "once its functions are inlined")
    p.add_argument("--policy", choices=["ort", "tight"], default="ort",
                   help="ort: every route ORT keeps; tight: also the smaller root proven safe per node (runs Z3)")
    p.add_argument("--prove", action="store_true", help="prove safe_bound and containment for every sized node (runs Z3)")
    p.add_argument("--plot", metavar="FILE.png|FILE.svg",
                   help="draw per node ORT's estimate, the tight bound and the proven maximum as bars, with the "
                        "model's sum and peak (runs Z3)")
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_model)
