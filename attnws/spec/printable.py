"""Text from a user's file made safe to print: control characters escaped, never interpreted.

A target's name, an ONNX node's or graph's name, a shape's label can hold escape sequences, line
feeds or bidi overrides that would forge lines of a report (a name printing as "PROVED
safe_bound" on a line of its own). Every text attnws prints passes through `printable`.
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069]")


def printable(text: str, keep_newlines: bool = False) -> str:
    """Return text with every control character escaped as Python writes it (\\x1b, \\n, \\u2028),
    without quotes; `keep_newlines` keeps the line feeds that separate a report's lines. The CLI
    prints every text through it; a value from a user's file that could hold a line feed (a target's
    name, a shape's label) goes through it on its own before it is put into a line."""
    def escape(match: re.Match[str]) -> str:
        char = match.group()
        return char if keep_newlines and char == "\n" else repr(char)[1:-1]
    return _CONTROL.sub(escape, text)
