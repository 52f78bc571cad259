"""How the validator holds a run's output against its family's float64 reference: which output rows
it checks, and the largest error each element type is allowed.

Maximum |kernel - reference| allowed: ATOL + RTOL * max |reference|. fp16 stores Q/K/V, scores and
probabilities in half precision (about 3 significant digits); fp32 only reorders float32 sums.
"""

from __future__ import annotations

import numpy as np

TOLERANCES = {2: (1e-2, 1e-2), 4: (1e-5, 1e-4)}  # element size in bytes -> (ATOL, RTOL)


def checked_rows(total: int, limit: int | None, seed: int = 0) -> np.ndarray:
    """Return the sorted output rows the reference checks: all `total`, or a seeded sample of `limit`."""
    if limit is None or total <= limit:
        return np.arange(total)
    return np.sort(np.random.default_rng(seed).choice(total, size=limit, replace=False))


def tolerance(element_size: int, expected: np.ndarray) -> float:
    """Return the largest absolute error allowed against `expected` for elements of `element_size` bytes."""
    atol, rtol = TOLERANCES[element_size]
    return atol + rtol * float(np.abs(expected).max(initial=0.0))


def max_abs_error(got: np.ndarray, expected: np.ndarray) -> float:
    """Return max |got - expected| over the elements, an infinity matching the reference's (the
    LSE of a row that sees no key) counting 0; NaN when either holds a NaN."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    same = np.isinf(expected) & (got == expected)
    return float(np.abs(np.where(same, 0.0, got - expected)).max(initial=0.0))
