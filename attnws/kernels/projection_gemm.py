"""Kernel: PackedAttention's input projection with bias, projection = input @ weights + bias.

input [T, k], weights [k, n], bias [n], projection [T, n] (n = 2 * hidden + v_hidden), all row-major
in the element type; each output element is a float32 dot product, grid-stride over T * n.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from numba import cuda, float32

from .launching import stride_launch
from .strided_dot import strided_dot


@cuda.jit
def projection_gemm(x, weights, bias, projection, rows, n, k):
    """projection[i * n + j] = bias[j] + sum_l x[i * k + l] * weights[l * n + j]."""
    for index in range(cuda.grid(1), rows * n, cuda.gridsize(1)):
        i = index // n
        j = index - i * n
        projection[index] = float32(bias[j]) + strided_dot(x, i * k, 1, weights, j, n, k)


@dataclass(frozen=True)
class ProjectionPlan:
    """GEMM m = T, n = 2 * hidden + v_hidden, k = input hidden; arrays flat, row-major."""

    input: Any
    weights: Any
    bias: Any
    projection: Any
    m: int
    n: int
    k: int


def launch(plan: ProjectionPlan) -> None:
    blocks, threads = stride_launch(plan.m * plan.n)
    projection_gemm[blocks, threads](plan.input, plan.weights, plan.bias, plan.projection, plan.m, plan.n, plan.k)
