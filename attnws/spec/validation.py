"""Checks every family's builder makes of ORT-style input shapes: dimensions within the int32
CUDA ABI, ranks, element sizes. Shapes are sequences of dimensions (ints, or Z3 terms in the solver).
"""

from __future__ import annotations

from typing import Any, Sequence

from .errors import InvalidArgument
from .limits import INT32_MAX

Shape = Sequence[Any]


def validate_dimension(d: Any, value: Any, what: str) -> None:
    """Check 0 <= value <= INT32_MAX (dimensions and attributes must fit the int32 CUDA ABI)."""
    d.require(value >= 0, lambda: InvalidArgument(f"{what} = {value} must be non-negative"))
    d.require(
        value <= INT32_MAX,
        lambda: InvalidArgument(f"{what} = {value} exceeds the int32 CUDA ABI ({INT32_MAX})"),
    )


def validate_shape(d: Any, shape: Shape | None, rank: int, name: str) -> None:
    """Check that an input has the given rank and valid dimensions."""
    if shape is None:
        raise InvalidArgument(f"{name} is required")
    if len(shape) != rank:
        raise InvalidArgument(f"{name} must have rank {rank}, got shape {list(shape)} (rank {len(shape)})")
    for axis, dim in enumerate(shape):
        validate_dimension(d, dim, f"{name}.shape[{axis}]")


def validate_element_size(element_size: int) -> None:
    """Check that the element size is 2 (fp16) or 4 (fp32) bytes."""
    if element_size not in (2, 4):
        raise InvalidArgument(f"element_size = {element_size} bytes; packed attention supports 2 (fp16) or 4 (fp32)")
