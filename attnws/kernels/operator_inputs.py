"""What every family's operator inputs share: the element types, the host inputs, their seeded
values and their upload.

Values are uniform in [-w, w), rounded to the element type once on the host, so that the kernels
and the float64 reference read the same numbers. Each family's `inputs` module says which inputs
its operators take, their shapes and their half-widths w.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from .allocator import Allocator

DTYPES = {2: np.float16, 4: np.float32}  # element size in bytes -> NumPy type

Uniform = Callable[..., np.ndarray]  # (shape, half_width = 1.0) -> host array in the element type


@dataclass(frozen=True)
class HostInputs:
    """ORT input name -> host array (absent optional inputs left out), and the lengths the family
    drew (the packed operators' sequence lengths, MultiHeadAttention's key lengths)."""

    arrays: Mapping[str, np.ndarray]
    lengths: tuple[int, ...]


def uniform_values(rng: np.random.Generator, element_size: int) -> Uniform:
    """Return `uniform(shape, half_width=1.0)`: values of rng uniform in [-half_width, half_width),
    as the element type of `element_size` bytes."""
    dtype = DTYPES[element_size]

    def uniform(shape: tuple[int, ...], half_width: float = 1.0) -> np.ndarray:
        return rng.uniform(-half_width, half_width, size=shape).astype(dtype)

    return uniform


def upload_arrays(allocator: Allocator, host: HostInputs) -> dict[str, Any]:
    """Copy every host input to the device, flat, through the allocator (purpose "input:<name>")."""
    return {name: allocator.upload(f"input:{name}", np.ascontiguousarray(a).reshape(-1))
            for name, a in host.arrays.items()}
