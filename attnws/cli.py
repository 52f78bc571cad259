"""The attnws command line: the only module that prints or exits.

No input produces a traceback: a usage error (a flag that cannot apply, a file the command line
names that cannot be read, a target or shapes file that is malformed) prints one line and exits 2;
a problem ORT rejects prints its check and exits 1, whichever command meets it, and so does a model
file that was read but is not a valid model; Ctrl-C prints "interrupted" and exits 130 (what was
printed before it is partial); a closed output pipe (`attnws ... --json | head`) ends the command quietly; an attnws bug prints one
line saying so and exits 4.

Every text it prints goes through `printable` (`attnws.spec.printable`): a control character in a name read from a
user's file (an escape sequence, a carriage return) is shown escaped, never sent to the terminal;
JSON is printed by json.dumps, which escapes them itself. The parser reads every integer flag with
`command.integer` and every decimal one with `command.number`, takes no abbreviations, and refuses
a single-valued flag given twice (argparse would keep the last).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import sys
import textwrap
from typing import Any, NoReturn, Sequence

from . import __version__
from .spec.command_line import (
    EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_REJECTED, EXIT_USAGE, JSON_SCHEMA_VERSION, KNOWN_SMS, SDPA_BITS,
    TARGET_METAVAR, CommandResult, integer, number,
)
from .spec.errors import InternalError, UsageError, WorkspaceError
from .spec.options import IGNORED_ENV, KNOWN_ENV
from .spec.ort_version import ORT_VERSION
from .spec.printable import printable

COMMAND_MODULES = (
    "attnws.spec.commands",
    "attnws.solver.commands",
    "attnws.kernels.commands",
    "attnws.model.commands",
    "attnws.plot.commands",
)

EXIT_CODES = """exit codes (one per kind of error, in every command):
  0    sized / every theorem proved / every check passed (validate: at least one shape ran)
  1    ORT rejects the problem (its check quoted, the same in every command), ORT would fail at run
       time (dispatch), an estimate is unavailable, a theorem is refuted or vacuous, a validation
       check fails, or a model file that was read is not a valid model (bad model); the output
       says why
  2    usage error: a flag that cannot apply, a file the command line names that cannot be read
       (missing, a folder, unreadable: a model too), a target or shapes file that is malformed
  3    undecided: prove, model --prove: some theorem unknown and none refuted or vacuous;
       counterexamples: a search undecided and nothing found; validate: no shape ran (every
       shape too large, or a shapes document without shapes)
  4    a bug in attnws (internal error)
  130  interrupted (Ctrl-C); what was printed before is partial"""

SYNTAX = "\n".join(textwrap.fill(line, 100, subsequent_indent="  ") for line in (
    "dimensions: --batch, --seq, --tokens: N is a maximum (1..N), LO..HI a range, N..N exact. --heads is "
    "exact (num_heads is an attribute); --head-size, --v-head-size, --input-hidden: N is exact, LO..HI a range. "
    "dispatch, recipe, validate and estimate --exact take one shape.",
    f"--sdpa-kernel bits: {', '.join(f'{bit} {name}' for bit, name in SDPA_BITS.items())}; 0 reads --env.",
    f"--env names: {', '.join(KNOWN_ENV)}; accepted without effect: {', '.join(IGNORED_ENV)}.",
    f"--sm: one of {', '.join(map(str, KNOWN_SMS))}. Integers are ASCII digits (no sign, '_' or blanks).",
    f"--target {TARGET_METAVAR}: a committed target (`attnws targets` lists them) or a target JSON file.",
    f"JSON output: docs/json-schema.md; every document carries \"schema_version\": {JSON_SCHEMA_VERSION}.",
))


class ParseError(Exception):
    """A command line argparse cannot read; carries the parser's name for the message."""

    def __init__(self, prog: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog


class HelpFormatter(argparse.HelpFormatter):
    """Wrap descriptions, keep the layout of a text already broken into lines (the exit codes), and
    show each option's default where it has a meaningful one."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("%(default)" not in text and "default" not in text and action.option_strings
                and default not in (None, False, True, [], argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


class StoreOnce(argparse._StoreAction):
    """argparse's store, refusing a second occurrence: with `--seq 4 --seq 8` argparse would keep 8
    silently. Repeatable flags (--env, --theorem, --dim, --at) use append and stay repeatable."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        seen = namespace.__dict__.setdefault("_given_once", {})
        if self.dest in seen:
            raise argparse.ArgumentError(self, f"given twice ({seen[self.dest]!r}, then {values!r}); give it once")
        seen[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, takes no abbreviations, reads integers and decimals
    with attnws's one parser each, refuses a single-valued flag given twice and suggests the
    closest choice for a misspelled value."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("type", int, integer)
        self.register("type", float, number)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)

    def error(self, message: str) -> NoReturn:
        raise ParseError(self.prog, message)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            close = difflib.get_close_matches(str(value), choices, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise argparse.ArgumentError(action, f"invalid choice {value!r} (choose from {', '.join(choices)}){hint}")


_PARSER: tuple[Parser, Any] | None = None


def build_parser() -> Parser:
    """Return the parser with every layer's subcommands registered."""
    return _parser_and_commands()[0]


def _parser_and_commands() -> tuple[Parser, Any]:
    global _PARSER
    if _PARSER is None:
        parser = Parser(
            prog="attnws",
            description="Proven workspace bounds for ONNX Runtime's PackedAttention, PackedMultiHeadAttention, "
                        "MultiHeadAttention and GroupQueryAttention.",
            epilog=f"{EXIT_CODES}\n\n{SYNTAX}\n\n`attnws COMMAND --help` describes each command.",
        )
        parser.add_argument("--version", action="version", version=f"attnws {__version__} (models ONNX Runtime {ORT_VERSION})")
        subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
        for name in COMMAND_MODULES:
            importlib.import_module(name).register(subparsers)
        for command, sub in subparsers.choices.items():
            sub.usage = _usage(sub)
            sub.epilog = "\n\n".join(part for part in (sub.epilog, COMMAND_EPILOG) if part)
            if sub.description is None:
                sub.description = next((a.help for a in subparsers._choices_actions if a.dest == command), None)
        _PARSER = (parser, subparsers)
    return _PARSER


COMMAND_EPILOG = "exit codes and how flags are written: `attnws --help`"
# Argument groups the usage line names in one word, as the README does.
SHORT_GROUPS = {"problem": "[PROBLEM]", "device and options": "[CONFIG]"}


def _usage(parser: argparse.ArgumentParser) -> str:
    """Return a command's usage line: its own flags (those that exclude each other as [A | B]), the
    problem and device groups as [PROBLEM] and [CONFIG]."""
    exclusive = {id(a): group for group in parser._mutually_exclusive_groups for a in group._group_actions}
    parts, shown = [parser.prog], set()
    for group in parser._action_groups:
        actions = [a for a in group._group_actions if a.help is not argparse.SUPPRESS
                   and not isinstance(a, argparse._HelpAction)]
        if group.title in SHORT_GROUPS:
            parts += [SHORT_GROUPS[group.title]] if actions else []
            continue
        for action in actions:
            together = exclusive.get(id(action))
            if together is None:
                word = _usage_word(action)
                word = word if action.required or not action.option_strings else f"[{word}]"
                parts.append(word + ("..." if isinstance(action, argparse._AppendAction) else ""))
            elif id(together) not in shown:
                shown.add(id(together))
                parts.append(f"[{' | '.join(_usage_word(a) for a in together._group_actions)}]")
    # Break lines between arguments only (a no-break space inside each), 100 columns after "usage: ".
    text = textwrap.fill(" ".join(p.replace(" ", "\xa0") for p in parts), 93, subsequent_indent=" " * 8,
                         break_on_hyphens=False, break_long_words=False)
    return text.replace("\xa0", " ")


def _usage_word(action: argparse.Action) -> str:
    """Return one argument as the usage line writes it: MODEL, --flag or --flag VALUE."""
    if not action.option_strings:
        return action.metavar or action.dest.upper()
    word = action.option_strings[0]
    if action.nargs != 0:
        choices = "{" + ",".join(map(str, action.choices)) + "}" if action.choices else None
        word += " " + (action.metavar or choices or action.dest.upper())
    return word


def _unrecognized(subparsers: Any, ns: argparse.Namespace, extras: list[str]) -> str:
    """Return the message for arguments no parser took, with the closest flag of the command's
    parser (a group's command's: `gqa estimate`) for each."""
    parser = subparsers.choices.get(getattr(ns, "command", None))
    while parser is not None and parser._subparsers is not None:
        nested = next(a for a in parser._subparsers._group_actions if isinstance(a, argparse._SubParsersAction))
        parser = nested.choices.get(getattr(ns, nested.dest, None))
    options = [s for s in parser._option_string_actions if s.startswith("--")] if parser is not None else []
    parts = []
    for extra in extras:
        name = extra.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.6) if name.startswith("-") else []
        parts.append(f"{extra!r} (did you mean {close[0]}?)" if close else repr(extra))
    noun = "argument" if len(extras) == 1 else "arguments"
    return f"unrecognized {noun}: {', '.join(parts)}"


def _progress(message: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[K{printable(message)}", end="", file=sys.stderr, flush=True)


def _clear_progress() -> None:
    if sys.stderr.isatty():
        print("\r\033[K", end="", file=sys.stderr, flush=True)


def _versioned(document: Any) -> Any:
    """Return a JSON document with schema_version and the modelled ORT version first (non-object
    documents unchanged)."""
    if isinstance(document, dict):
        return {"schema_version": JSON_SCHEMA_VERSION, "ort_version": ORT_VERSION, **document}
    return document


def _emit(result: CommandResult, want_json: bool, lines: bool = False) -> None:
    """Print one result: its text, or its JSON document (one line each when streaming; a result
    without a JSON document prints in text mode only)."""
    if want_json:
        if result.json is None:
            return
        doc = _versioned(result.json)
        text = json.dumps(doc, default=str) if lines else json.dumps(doc, indent=2, default=str)
    else:
        text = printable(result.text, keep_newlines=True)
    if text:
        print(text, flush=True)


def _error(command: str | None, message: str) -> None:
    """Print a one-line error (its control characters, line feeds included, escaped)."""
    where = f"attnws {command}" if command else "attnws"
    print(f"{where}: {printable(message)}", file=sys.stderr, flush=True)


def _silence_stdout() -> None:
    """After a closed pipe: point stdout at /dev/null so the interpreter's final flush stays quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _execute(ns: argparse.Namespace, want_json: bool) -> int:
    """Run the handler and print its result(s); return the exit code."""
    printed = 0
    try:
        try:
            result: CommandResult = ns.handler(ns, _progress)
        finally:
            _clear_progress()
        if result.stream is None:
            _emit(result, want_json)
            return result.exit_code
        code = result.exit_code
        for item in result.stream:
            _clear_progress()
            _emit(item, want_json, lines=True)
            printed += item.json is not None
            code = item.exit_code
        return code
    except KeyboardInterrupt:
        _clear_progress()
        partial = (f" after {printed} result(s): the output is partial, what was not shown did not run"
                   if printed else "")
        _error(ns.command, f"interrupted{partial}")
        return EXIT_INTERRUPTED


def run(argv: Sequence[str] | None = None) -> int:
    """Parse argv, run the command, print its result; return the exit code (never raises)."""
    command: str | None = None
    try:
        parser, subparsers = _parser_and_commands()
        args = list(sys.argv[1:] if argv is None else argv)
        try:
            ns, extras = parser.parse_known_args(args)
            command = getattr(ns, "command", None)
            if extras:
                raise ParseError(f"attnws {command}" if command else "attnws",
                                 _unrecognized(subparsers, ns, extras))
        except ParseError as error:
            hint = f"`{error.prog} --help` lists the flags"
            print(f"{error.prog}: usage error: {printable(str(error))}\n{hint}", file=sys.stderr)
            return EXIT_USAGE
        except SystemExit as exit_:  # --help, --version
            return exit_.code if isinstance(exit_.code, int) else 0
        if command is None:
            parser.print_help()
            return EXIT_USAGE
        want_json = bool(getattr(ns, "json", False))
        try:
            return _execute(ns, want_json)
        except UsageError as error:
            _error(command, f"usage error: {error}")
            return EXIT_USAGE
        except InternalError as error:
            _error(command, f"internal error ({error.status}), a bug in attnws: {error}")
            return EXIT_INTERNAL
        except WorkspaceError as error:
            _emit(CommandResult(EXIT_REJECTED, f"rejected ({error.status}): {error}",
                                {"status": error.status, "message": str(error)}), want_json)
            return EXIT_REJECTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_OK_PIPE
    except KeyboardInterrupt:
        _error(command, "interrupted")
        return EXIT_INTERRUPTED
    except MemoryError:
        _error(command, "out of memory; shrink the problem or raise the machine's memory")
        return EXIT_REJECTED
    except RecursionError:
        _error(command, "internal error (recursion too deep), a bug in attnws")
        return EXIT_INTERNAL
    except OSError as error:
        _error(command, f"usage error: {error.strerror or error}"
               + (f": {error.filename}" if getattr(error, "filename", None) else ""))
        return EXIT_USAGE
    except Exception as error:  # noqa: BLE001 - the promise is one line, never a traceback
        _error(command, f"internal error ({type(error).__name__}), a bug in attnws: {error}")
        return EXIT_INTERNAL


# A closed output pipe is the reader's choice, not a failure: exit as `head` leaves a writer with
# SIGPIPE ignored would, quietly and successfully.
EXIT_OK_PIPE = 0


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Console entry point."""
    sys.exit(run(argv))


if __name__ == "__main__":
    main()
