"""Running the CLI in process: exit code, standard output and standard error of `attnws.cli.main`."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from typing import Any

from attnws.cli import main

REPR_MARKS = ("{'", "'}", "None", "()", "[{", "True", "False")


@dataclass
class Run:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def lines(self) -> list[Any]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


def attnws(*argv: str, stdin: str | None = None) -> Run:
    """Run `attnws argv...` through main(); return its exit code and output. Any exception other
    than SystemExit escaping main fails the caller."""
    out, err = io.StringIO(), io.StringIO()
    saved = None
    if stdin is not None:
        import sys

        saved = sys.stdin
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin.encode()))
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(argv))
            except SystemExit as exit_:
                code = exit_.code
            else:
                raise AssertionError("main returned instead of exiting")
    finally:
        if saved is not None:
            import sys

            sys.stdin = saved
    assert isinstance(code, int), code
    return Run(code, out.getvalue(), err.getvalue())
