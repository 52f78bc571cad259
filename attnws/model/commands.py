"""`attnws model MODEL.onnx`: Level-1 estimates and Level-2 declarations for every attention node
(every operator of `registry.READERS`) of a model file, with the model's sum and peak. Nothing
here prints or exits, and registering the command loads no onnx (the handler imports the layer).

Exit codes: 0 every node sized (and, with --prove, every theorem PROVED); 1 a node unavailable,
a theorem REFUTED or the model bad (BadModel, raised to the CLI: a file read that is not a valid
model); 2 usage (UsageError: a model file that cannot be read, missing, a folder or unreadable); 3 some
theorem UNKNOWN and none refuted. `--prove`, `--policy tight` and `--pattern` load the solver (Z3)
lazily.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..spec.command_line import (
    EXIT_OK,
    EXIT_REJECTED,
    OP_FLAGS,
    CommandResult,
    Progress,
    add_config_arguments,
    add_json_argument,
    add_pattern_argument,
    config_from_args,
    integer,
    parse_env,
    readable_file,
)
from ..spec.declared import flag_uses
from ..spec.errors import UsageError
from ..spec.families import family_of
from ..spec.limits import checked_max_total_seq
from ..spec.problem import Op
from .bounds import DEFAULT_MAX_MODEL_BYTES, DEFAULT_MAX_MODEL_NODES, ShapeBounds, shape_bounds



@dataclass(frozen=True)
class ModelPlotter:
    """How `model --plot` draws. The plot layer sits above this one, so it hands its functions in
    (`attnws.plot.commands.register` sets them as the `model` command's default) instead of
    being imported from here. `check_out(path, flag)` returns the checked output path;
    `draw(model, report, bounds, out, progress)` returns the text line and the JSON fields."""

    check_out: Callable[[str, str], Path]
    draw: Callable[..., tuple[str, dict[str, Any]]]


def run_model(ns: argparse.Namespace, progress: Progress) -> CommandResult:
    """Return the model report for the parsed flags."""
    from .derive import bound_symbols, declared_symbols
    from .genai_config import CONFIG_NAME, find_config, read_bounds
    from .inert import inert_resolution, refuse_inert_dims
    from .load import load_model
    from .reader import DEFAULT_CACHE_LAYOUT
    from .registry import reader_of
    from .render import model_json, model_text
    from .report import Unstated, analyze_model, with_exact_dims
    from .reserve import parse_pattern_flags

    for flag, value in (("--max-bytes", ns.max_bytes), ("--max-nodes", ns.max_nodes)):
        if value < 0:
            raise UsageError(f"{flag} {value} must be non-negative")
    plot_out, plotter = None, ns.model_plotter
    if ns.plot is not None:
        if plotter is None:
            raise UsageError(f"--plot {ns.plot}: no plotter is registered (attnws.plot.commands registers it)")
        plot_out = plotter.check_out(ns.plot, "--plot")
    bounds = shape_bounds(ns.dim, ns.max_shape_override)
    given = set(bounds.dims)  # the user's --dim names: a genai_config.json adds its own below
    patterns = parse_pattern_flags(ns.pattern)
    config = config_from_args(ns)
    max_total_seq = checked_max_total_seq(ns.max_total_seq)
    readable_file(ns.model, "model")  # a file the command line names that cannot be read: a usage error
    progress(f"reading {ns.model}")
    model = load_model(ns.model, ns.max_bytes, ns.max_nodes)
    genai = None
    config_path = find_config(ns.model)
    if config_path is not None:
        progress(f"reading {config_path}")
        genai = read_bounds(config_path, declared_symbols(model), bound_symbols(model, bounds), max_total_seq != 0,
                            ns.cache_layout is not None)
        bounds = ShapeBounds({**bounds.dims, **genai.dims}, bounds.overrides)
        max_total_seq = max_total_seq or genai.max_total_seq
    layout = ns.cache_layout or (genai.cache_layout if genai else None)
    progress("inferring maximum shapes")
    report = analyze_model(model, bounds, config, tuple(parse_env(ns.env).items()), ns.model, max_total_seq,
                           layout or DEFAULT_CACHE_LAYOUT)
    hints = [n.hints for n in report.nodes]
    refuse_inert_dims(model, bounds, given, hints)
    refuse_unread_options(ns, {option for node in report.nodes for option in reader_of(node.op_type).session_options})
    if genai is not None:  # a config's bound that changes nothing is not said to be taken
        genai = genai.without({name for name in genai.dims if inert_resolution(model, bounds, name, hints) is not None})
    checks = None
    if ns.prove or ns.policy == "tight" or patterns:
        from . import prove

        report = with_exact_dims(model, report, bounds)
        checks = prove.check_nodes(report, ns.prove, ns.policy == "tight", progress, patterns)
    text = model_text(report, checks, patterns)
    doc = {**model_json(report, checks, patterns), "genai_config": genai.as_dict() if genai else None}
    source = "--cache-layout" if ns.cache_layout else CONFIG_NAME if layout else "assumed"
    doc["cache_layout"] = {"value": layout or DEFAULT_CACHE_LAYOUT, "from": source}
    set_options = () if layout is None else ("cache_layout",)  # the session options the flags or the config give
    assumed = dict.fromkeys(line for node in report.nodes
                            for option, line in reader_of(node.op_type).assumptions.items() if option not in set_options)
    if assumed:  # one line each under the title
        headline, _, rest = text.partition("\n")
        text = "\n".join((headline, *assumed, rest))
    if genai is not None:
        text = f"{genai.text()}\n{text}"
    if plot_out is not None:
        try:
            line, fields = plotter.draw(model, report, bounds, plot_out, progress)
        except Unstated as error:
            raise Unstated(error.path, f"{error.why}; --plot draws every sized node's proven bounds: drop --plot, "
                                       "the report gives the node's estimate") from None
        text, doc = f"{text}\n{line}", {**doc, **fields}
    if checks is None:
        return CommandResult(EXIT_OK if report.complete else EXIT_REJECTED, text, doc)
    doc.update(prove.checks_json(checks))
    if ns.prove:
        text = f"{text}\n{prove.checks_text(checks)}"
    return CommandResult(prove.exit_code(report, checks), text, doc)


# The session options (`reader.Session` fields) the flags of this command set, by flag.
_OPTION_FLAGS = (("--max-total-seq", "max_total_seq", "max_total_sequence_length"),
                 ("--cache-layout", "cache_layout", "cache_layout"))


def refuse_unread_options(ns: argparse.Namespace, read: set[str]) -> None:
    """Raise UsageError for a session flag given where no node of the model reads its option
    (`read`: the options the model's nodes' readers read): a flag that cannot apply is refused,
    never silently ignored."""
    for flag, dest, option in _OPTION_FLAGS:
        if getattr(ns, dest) and option not in read:
            owners = _op_types("or", lambda op: dest in OP_FLAGS[op])
            raise UsageError(f"{flag} {getattr(ns, dest)}: no node of this model reads it (a {owners} node's "
                             "session option); drop it")


def _op_types(conjunction: str, keep: Callable[[Op], bool] = lambda op: True) -> str:
    """Return the attention op types the model reads (one reader per operator of every family:
    `registry.READERS`, tested) that `keep` keeps, "A, B or C"."""
    names = [op.onnx_name for op in Op if keep(op)]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} {conjunction} {names[-1]}"


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `model` subcommand."""
    p = subparsers.add_parser(
        "model", help="workspace of every attention node of an ONNX model",
        description=f"The Level-1 estimate (ORT's; attnws's own for "
                    f"{_op_types('and', lambda op: not family_of(op).estimate.ORT_ESTIMATOR)}) "
                    f"and Level-2 declaration of every {' / '.join(op.onnx_name for op in Op)} node (com.microsoft; control-flow "
                    "subgraphs and every call of a model-local function included, a function's nodes named by the call "
                    "site), identical nodes grouped, "
                    "led by what to reserve: the peak of the nodes' workspaces (ORT's arena reuses one workspace as "
                    "the nodes run one after another), or their sum (a planner that keeps every node's workspace "
                    "alive together), for ORT's bound and, with --policy tight or --pattern, the proven maxima. "
                    "Symbolic dimensions need a bound (--dim or --max-shape-override) unless the model determines "
                    "it from the others (cumulative_sequence_length [B + 1], the packed token count T <= B * S, "
                    "the graph's own equalities): those are derived and reported, and a missing one is named. For "
                    "the solver a static ONNX dimension is exact, a key/value length the graph keeps equal to the "
                    "sequence length is tied to it, and any other symbolic one ranges over 1..its bound. A "
                    "genai_config.json beside the model (onnxruntime-genai's builder writes one) gives the bounds "
                    "onnxruntime-genai runs it with: the head size, the cache's rows (search.max_length, also "
                    "--max-total-seq), a windowed layer's window; each is reported with its field, and a flag "
                    "of yours wins. The weights file need not be present.")
    p.add_argument("model", help="the .onnx file")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=MAX",
                   help="the maximum of the symbolic dimension NAME (repeatable); wins over a derived value; one "
                        "contradicting a derived equality is a usage error, and so is one no attention node's input "
                        "shape depends on (an attention mask's width, which the graph turns into an input's value)")
    p.add_argument("--max-shape-override", dest="max_shape_override", metavar="STR",
                   help="ORT's session.max_shape_override: 'input:[8,4096];mask:[8,4096]'")
    p.add_argument("--max-bytes", dest="max_bytes", type=int, default=DEFAULT_MAX_MODEL_BYTES,
                   help="refuse a model file larger than this many bytes")
    p.add_argument("--max-nodes", dest="max_nodes", type=int, default=DEFAULT_MAX_MODEL_NODES,
                   help="refuse a model with more nodes than this, every graph and function counted, and again "
                        "once its functions are inlined")
    p.add_argument("--policy", choices=["ort", "tight"], default="ort",
                   help="ort: ORT's bound only; tight: also each node's proven maximum runtime workspace over its "
                        "shapes (the tight policy, with its method and witness shape), and the model's peak and sum "
                        "of those (runs Z3)")
    add_pattern_argument(p, "each attention node's target (a node without that dimension reports the pattern as not applying)")
    p.add_argument("--prove", action="store_true", help="prove safe_bound and containment for every sized node (runs Z3)")
    p.add_argument("--max-total-seq", dest="max_total_seq", type=integer, default=0, metavar="N",
                   help="ONNX Runtime's session option ep.cuda.gqa_workspace_max_total_sequence_length: the longest "
                        f"total sequence a {_op_types('or', lambda op: 'max_total_seq' in OP_FLAGS[op])} node with a "
                        "non-windowed cache sees; "
                        "ORT's estimator needs it for such a node (default 0: unset, and the node's estimate is "
                        "unavailable)")
    p.add_argument("--cache-layout", dest="cache_layout", choices=flag_uses()["cache_layout"].flag.choices,
                   help=f"how a {_op_types('or', lambda op: 'cache_layout' in OP_FLAGS[op])} node's past and present "
                        "hold the cache: shared (one buffer of P rows, T <= P; onnxruntime-genai with "
                        "past_present_share_buffer and one beam) or separate (present a new tensor of P + S rows, the "
                        "past P then any length up to its bound: beam search, or a plain InferenceSession.run); "
                        "default: genai_config.json's, else shared")
    p.add_argument("--plot", metavar="FILE.png|FILE.svg",
                   help="draw per node ORT's estimate, the tight bound and the proven maximum as bars, with the "
                        "model's sum and peak (runs Z3)")
    add_config_arguments(p)
    add_json_argument(p)
    p.set_defaults(handler=run_model, model_plotter=None)
