"""Run the solver's subcommands in-process, as the CLI parses them, without printing."""

from __future__ import annotations

import argparse
from typing import Any

from attnws.spec.command_line import CommandResult
from attnws.solver.commands import register


def solver_parser() -> argparse.ArgumentParser:
    """Return a parser holding the solver's subcommands (prove, counterexamples)."""
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    return parser


def parse(*argv: str) -> argparse.Namespace:
    """Return the namespace the solver's parser makes of argv."""
    return solver_parser().parse_args(list(argv))


def run(*argv: str) -> CommandResult:
    """Return the CommandResult of one solver subcommand (progress discarded)."""
    ns: Any = parse(*argv)
    return ns.handler(ns, lambda _: None)
