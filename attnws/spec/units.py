"""Quantities as people read them: bytes with thousands separators and a binary unit.

Shared by every command's text output (JSON keeps plain integers), with the integer reading and the
range check every command's numeric flags (and a family's own) meet.
"""

from __future__ import annotations

from .errors import UsageError

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


def format_bytes(n: int | None) -> str:
    """Return n bytes as "1,280 B", "3,145,728 B (3.0 MiB)" from 1 MiB on, "(1.5 GiB)" from 1 GiB
    on, or "n/a" for None."""
    if n is None:
        return "n/a"
    if n >= GIB:
        return f"{n:,} B ({n / GIB:.1f} GiB)"
    if n >= MIB:
        return f"{n:,} B ({n / MIB:.1f} MiB)"
    return f"{n:,} B"


def bytes_more(larger: int, smaller: int) -> str:
    """Return "(N B more)": the exact difference a comparison of two rounded byte counts states."""
    return f"({larger - smaller:,} B more)"


MAX_INTEGER_DIGITS = 100


def parse_integer(text: str) -> int | None:
    """Return the non-negative integer `text` spells in ASCII digits, or None. Python's int() also
    takes other scripts' digits ('٨'), '1_6', '+7' and blanks; no attnws flag takes those, and none
    takes a negative value."""
    if not isinstance(text, str) or not 0 < len(text) <= MAX_INTEGER_DIGITS or not text.isascii() \
            or not text.isdigit():
        return None
    return int(text)


def in_range(value: int, name: str, lo: int, hi: int | None = None, why: str = "") -> int:
    """Return value when lo <= value <= hi (hi None: no upper end), else raise UsageError naming the
    flag (and `why` the domain is what it is, where given)."""
    if value < lo or (hi is not None and value > hi):
        span = f"at least {lo:,}" if hi is None else f"in {lo:,}..{hi:,}"
        raise UsageError(f"{name} {value}: must be {span}" + (f" ({why})" if why else ""))
    return value
