"""Carving: one root per recipe allocation, cut into the recipe's views at the recipe's offsets.

This is the only place a backend run's workspace memory comes from. Zero-byte allocations get no
root and zero-byte views no array. The LSE and the MEA accumulator are float32; every other view
is in the problem's element type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..spec.layout import Recipe, views
from .allocator import Allocator, Root

FLOAT32_VIEWS = frozenset({"softmax_lse", "mea_accumulator"})


@dataclass(frozen=True)
class Workspace:
    """The roots by purpose (projection, attention) and a pointer array per non-empty view name."""

    recipe: Recipe
    roots: Mapping[str, Root]
    arrays: Mapping[str, Any]


def carve(allocator: Allocator, recipe: Recipe, dtype: Any) -> Workspace:
    """Allocate the recipe's roots in order (PA: projection, then attention) and carve its views."""
    roots = {purpose: allocator.root(purpose, nbytes) for purpose, nbytes in recipe.allocations() if nbytes > 0}
    arrays = {
        v.name: roots[v.allocation].pointer(v.offset, np.float32 if v.name in FLOAT32_VIEWS else dtype)
        for v in views(recipe) if v.nbytes > 0
    }
    return Workspace(recipe, roots, arrays)
