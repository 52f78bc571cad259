"""Carving: one guarded root per allocation, cut into the footprint's buffers where the placement puts them.

This is the only place a backend run's output and workspace memory come from. Roots are sized by
the placement's allocations (the recipe's, and the output tensor); each buffer is a pointer at its
offset, typed by its element size: the problem's element type when they match, else float32 (the
Flash LSE and the MEA accumulator under fp16); the TRT sequence offsets are int32.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .allocator import Allocator, Root
from .operator_inputs import DTYPES
from .placement import Placement


@dataclass(frozen=True)
class Workspace:
    """The roots by allocation (output, projection, attention) and a pointer array per placed buffer."""

    roots: Mapping[str, Root]
    arrays: Mapping[str, Any]


# The TRT kernels' cumulative sequence offsets (MultiHeadAttention): int32, whatever the element type.
INT32_BUFFERS = ("sequence_offsets", "q_sequence_offsets", "kv_sequence_offsets")


def buffer_dtype(p: Any, element_bytes: int, name: str = "") -> Any:
    """Return the NumPy type of a buffer's elements: int32 for the sequence offsets, else the
    problem's type at its size, else float32."""
    if name in INT32_BUFFERS:
        return np.int32
    return DTYPES[p.element_size] if element_bytes == p.element_size else np.float32


def carve(allocator: Allocator, p: Any, placement: Placement) -> Workspace:
    """Allocate the placement's roots in order and carve a pointer for each placed buffer."""
    roots = {name: allocator.root(name, nbytes) for name, nbytes in placement.allocation_bytes.items()}
    arrays = {b.name: roots[b.allocation].pointer(b.offset, buffer_dtype(p, b.buffer.element_bytes, b.name))
              for b in placement.buffers}
    return Workspace(roots, arrays)
