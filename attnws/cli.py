"""The attnws command line: the only module that prints or exits.

Exit codes: 0 sized / proved / passed; 1 the specification rejects the problem, a theorem is
refuted or a check fails (the JSON still says why); 2 usage error; 3 (prove) some theorem
UNKNOWN and none refuted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Sequence

from . import __version__
from .command import EXIT_REJECTED, EXIT_USAGE, CommandResult
from .spec.errors import InternalError, UsageError, WorkspaceError

COMMAND_MODULES = (
    "attnws.spec_commands",
    "attnws.solver.commands",
    "attnws.kernels.commands",
    "attnws.model.commands",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the parser with every layer's subcommands registered."""
    parser = argparse.ArgumentParser(
        prog="attnws",
        description="Proven workspace bounds for ONNX Runtime's PackedAttention / PackedMultiHeadAttention.",
        epilog="Exit codes: 0 ok, 1 rejected/refuted/failed, 2 usage error, 3 unknown (prove).",
    )
    parser.add_argument("--version", action="version", version=f"attnws {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise
            continue
        module.register(subparsers)
    return parser


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{message}", end="", file=sys.stderr, flush=True)


def run(argv: Sequence[str] | None = None) -> int:
    """Parse argv, run the command, print its result; return the exit code."""
    parser = build_parser()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        ns = parser.parse_args(args)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if ns.command is None:
        parser.print_help()
        return EXIT_USAGE
    want_json = getattr(ns, "json", False)
    try:
        result: CommandResult = ns.handler(ns, _progress)
    except UsageError as error:
        print(f"attnws {ns.command}: usage error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except InternalError:
        raise
    except WorkspaceError as error:
        result = CommandResult(EXIT_REJECTED, f"rejected ({error.status}): {error}",
                               {"status": error.status, "message": str(error)})
    finally:
        if sys.stderr.isatty():
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    print(json.dumps(result.json, indent=2, default=str) if want_json else result.text)
    return result.exit_code


def main() -> None:
    """Console entry point."""
    sys.exit(run())


if __name__ == "__main__":
    main()
