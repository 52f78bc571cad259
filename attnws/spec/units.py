"""Quantities as people read them: bytes with thousands separators and a binary unit.

Shared by every command's text output (JSON keeps plain integers).
"""

from __future__ import annotations

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
