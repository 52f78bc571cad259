"""Containment validation: every view of a recipe lies inside its allocation.

`validate_recipe` is each family's containment check (for the packed family ONNX Runtime's
ValidatePackedAttentionWorkspaceRecipe: the layout fields are consistent and each view's end,
computed with checked addition, is <= the allocation).
`overlapping_views` and `misaligned_views` are the stronger properties attnws adds: live views
are pairwise disjoint, and the unfused scratch regions and PA's attention root are 256-aligned.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from .families import family_of
from .layout import ATTENTION, PROJECTION, Recipe, View, views
from .limits import WORKSPACE_ALIGNMENT


def validate_recipe(d: Any, r: Any) -> None:
    """Raise InvalidArgument unless the recipe's layout fields agree and every view is contained
    (its family's `validate_views`)."""
    family_of(r.op).recipe.validate_views(d, r)


def disjoint(d: Any, a: View, b: View) -> Any:
    """Return the condition that views a and b share no byte (empty views share none)."""
    if a.allocation != b.allocation:
        return True
    return d.any_(a.nbytes == 0, b.nbytes == 0, a.end <= b.offset, b.end <= a.offset)


def view_pairs(r: Recipe) -> list[tuple[View, View]]:
    """Return every pair of views live at the same time (all of a recipe's views are)."""
    return list(combinations(views(r), 2))


def overlapping_views(r: Recipe) -> list[tuple[str, str]]:
    """Return the names of concretely overlapping view pairs (empty when the layout is sound)."""
    from .domain import CONCRETE

    return [(a.name, b.name) for a, b in view_pairs(r) if not disjoint(CONCRETE, a, b)]


def aligned_quantities(r: Any) -> list[tuple[str, Any]]:
    """Return (name, bytes) of each quantity of the recipe that must be a multiple of 256 (its
    family's `aligned_quantities`)."""
    return family_of(r.op).recipe.aligned_quantities(r)


def misaligned(r: Recipe) -> list[tuple[str, Any]]:
    """Return the aligned_quantities entries that are not multiples of 256 (concrete recipes)."""
    return [(name, value) for name, value in aligned_quantities(r) if value % WORKSPACE_ALIGNMENT]


__all__ = [
    "ATTENTION", "PROJECTION", "aligned_quantities", "disjoint", "misaligned", "overlapping_views",
    "validate_recipe", "view_pairs",
]
