"""Kernel: fill a byte buffer with one value (the allocator's sentinel), grid-stride.

A kernel rather than an assignment from the host: Numba's `array[:] = value` stages the value in a
device allocation of its own, which the instrumented allocator would count.
"""

from __future__ import annotations

from numba import cuda

from .launching import stride_launch


@cuda.jit
def fill_bytes(raw, value):
    """raw[i] = value for every byte i of the uint8 array raw."""
    for i in range(cuda.grid(1), raw.shape[0], cuda.gridsize(1)):
        raw[i] = value


def launch(raw, value: int) -> None:
    """Fill the device uint8 array `raw` with `value` (0..255)."""
    blocks, threads = stride_launch(raw.shape[0])
    fill_bytes[blocks, threads](raw, value)
