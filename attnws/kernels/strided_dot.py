"""Device function: the float32 dot product every GEMM-like kernel here is built from."""

from __future__ import annotations

from numba import cuda, float32


@cuda.jit(device=True)
def strided_dot(x, x_start, x_stride, y, y_start, y_stride, count):
    """Return sum_l x[x_start + l * x_stride] * y[y_start + l * y_stride] over l < count, in float32."""
    acc = float32(0.0)
    for l in range(count):
        acc += float32(x[x_start + l * x_stride]) * float32(y[y_start + l * y_stride])
    return acc
