"""The operators' positional inputs, whatever the family: their names, and the shapes ORT's
adapter would see for a `Geometry` (each family's own rules in `attnws.spec.<family>.inputs`).
"""

from __future__ import annotations

from .families import family_of
from .hints import Geometry, Hint
from .problem import Op


def input_names(op: Op) -> tuple[str, ...]:
    """Return the operator's positional input names."""
    return family_of(op).inputs.input_names(op)


def geometry_hints(g: Geometry) -> list[Hint]:
    """Return the positional input shapes ORT would see for the geometry."""
    return family_of(g.op).inputs.geometry_hints(g)
