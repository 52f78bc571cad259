"""The arithmetic domain every formula of the specification is written against.

Recipes, builders and dispatch never use `+`, `*`, `if` or `max` on shape values directly for
anything that can overflow or branch on data: they call a domain. `CONCRETE` evaluates over Python
ints with ONNX Runtime's checked size_t semantics and raises typed errors; the solver passes a
symbolic domain with the same methods that builds Z3 terms and turns every check into a proof
obligation. One formula, two evaluations: that is how the solver avoids retyping the spec.

Contract of each method (both domains):
- `add`, `mul`, `align_up`: size_t arithmetic; overflow past SIZE_MAX is `WorkspaceOverflow`.
- `require(cond, make_error)`: the check ORT performs; `make_error()` builds the typed error.
- `ite(cond, then, other)`: data-dependent choice; `then` / `other` are values or zero-argument
  callables (callables are evaluated only on their branch, so their checks are guarded by it).
- `all_`, `any_`, `not_`, `member`: boolean connectives over conditions.
- `div`, `mod`: floor division and remainder of non-negative values by a positive divisor.
- `min_`, `max_`: of two values.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from .errors import InvalidArgument, WorkspaceError, WorkspaceOverflow
from .limits import INT32_MAX, INT64_MAX, SIZE_MAX


def _value(branch: Any) -> Any:
    return branch() if callable(branch) else branch


class ConcreteDomain:
    """Checked arithmetic over Python ints: results are exact or a typed error is raised."""

    symbolic = False

    def add(self, left: int, right: int, what: str = "a size") -> int:
        """Return left + right, or raise WorkspaceOverflow when it exceeds 64-bit size_t."""
        result = left + right
        if result > SIZE_MAX:
            raise WorkspaceOverflow(
                f"size_t overflow computing {what}: {left} + {right} = {result} > {SIZE_MAX}"
            )
        return result

    def mul(self, *factors: int, what: str = "a size") -> int:
        """Return the product, multiplying left to right; raise WorkspaceOverflow at the first
        partial product past 64-bit size_t."""
        result = factors[0]
        for factor in factors[1:]:
            product = result * factor
            if product > SIZE_MAX:
                shown = " * ".join(str(f) for f in factors)
                raise WorkspaceOverflow(
                    f"size_t overflow computing {what}: {shown} ({result} * {factor} = {product}) "
                    f"> {SIZE_MAX}"
                )
            result = product
        return result

    def align_up(self, value: int, alignment: int, what: str = "a size") -> int:
        """Return value rounded up to a multiple of alignment (checked); alignment 0 is invalid."""
        if alignment == 0:
            raise InvalidArgument(f"alignment must be non-zero (computing {what}): alignment=0")
        numerator = self.add(value, alignment - 1, what=what)
        return self.mul(numerator // alignment, alignment, what=what)

    def require(self, cond: bool, make_error: Callable[[], WorkspaceError]) -> None:
        """Raise make_error() unless cond holds."""
        if not cond:
            raise make_error()

    def ite(self, cond: bool, then: Any, other: Any) -> Any:
        """Return the value of the branch cond selects; only that branch is evaluated."""
        return _value(then) if cond else _value(other)

    def all_(self, *conds: bool) -> bool:
        return all(conds)

    def any_(self, *conds: bool) -> bool:
        return any(conds)

    def not_(self, cond: bool) -> bool:
        return not cond

    def member(self, value: int, allowed: Iterable[int]) -> bool:
        return value in tuple(allowed)

    def div(self, numerator: int, divisor: int) -> int:
        return numerator // divisor

    def mod(self, numerator: int, divisor: int) -> int:
        return numerator % divisor

    def min_(self, left: int, right: int) -> int:
        return min(left, right)

    def max_(self, left: int, right: int) -> int:
        return max(left, right)


CONCRETE = ConcreteDomain()


def product_fits(d: Any, limit: int, *factors: Any, what: str) -> Any:
    """Check that the size_t product of factors is <= limit (an ABI width); return the product.

    The product is computed with checked size_t multiplication first, so a product past 2^64 is
    `WorkspaceOverflow` and one past `limit` is `InvalidArgument`, in that order, as ORT reports.
    """
    product = d.mul(*factors, what=what)
    abi = "int32" if limit == INT32_MAX else "int64" if limit == INT64_MAX else f"<= {limit}"
    d.require(
        product <= limit,
        lambda: InvalidArgument(
            f"{what} = {' * '.join(str(f) for f in factors)} = {product} does not fit {abi} "
            f"(limit {limit})"
        ),
    )
    return product


def fits_int32(d: Any, *factors: Any, what: str) -> Any:
    """`product_fits` against INT32_MAX (CUDA kernel int32 arguments)."""
    return product_fits(d, INT32_MAX, *factors, what=what)


def fits_int64(d: Any, *factors: Any, what: str) -> Any:
    """`product_fits` against INT64_MAX (int64 strides and extents)."""
    return product_fits(d, INT64_MAX, *factors, what=what)
