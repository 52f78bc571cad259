"""Who hears of each device allocation: the active `Allocator`s, innermost last. The GPU memory
manager (`memory_manager`) reports every allocation here; the allocator registers itself while a
run is on. Kept apart from both so that neither imports the other."""

from __future__ import annotations

from typing import Callable

OBSERVERS: list[Callable[[int], None]] = []  # each takes an allocation's size in bytes


def observe(size: int) -> None:
    """Report one device allocation of `size` bytes to the innermost observer, if any."""
    if OBSERVERS:
        OBSERVERS[-1](size)
