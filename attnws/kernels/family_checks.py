"""The checks a family makes beyond the ones every route shares, as one record (`Check`), and what
its after-run checks read (`Ran`).

Each family implements them in its `checks` module (`attnws.kernels.families`): each buffer inside
its recipe region's room (`outside_regions`), the present KV cache after the step
(`present_cache`), the softmax LSE against a float64 reference (`lse`), and whether ORT documents
the slack a workspace may hold beyond the footprint (`slack_unbounded`). A check that has nothing
to hold for a family or a route says so (`not_applicable`, with why), so every report carries
every check. What several families' hooks share is here too: `placed_at_views` (the regions check
of recipes whose buffers sit at views) and `without_kernels` (a route `routes.unmodelled` refuses).
Nothing here loads numba or NumPy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

PASSED, FAILED, NOT_APPLICABLE, NOT_RUN = "passed", "failed", "not applicable", "not run"


@dataclass(frozen=True, slots=True)
class Check:
    """One family check: `status` passed, failed, not applicable (`why` says why) or not run (the
    kernels were not launched, or the shape never reached the check); `failures` what failed
    (buffer or allocation names, or sentences); `max_error` and `tolerance` (absolute) for a
    comparison with a float64 reference, None otherwise."""

    status: str = NOT_RUN
    why: str = ""
    failures: tuple[str, ...] = ()
    max_error: float | None = None
    tolerance: float | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAILED

    @property
    def checked(self) -> bool:
        """Return whether the check ran (passed or failed)."""
        return self.status in (PASSED, FAILED)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "why": self.why, "failures": list(self.failures),
                "max_error": self.max_error, "tolerance": self.tolerance}


def outcome(failures: Sequence[str]) -> Check:
    """Return the check passed when nothing failed, else failed with `failures`."""
    return Check(FAILED if failures else PASSED, failures=tuple(failures))


def not_applicable(why: str) -> Check:
    """Return a check that has nothing to hold here, saying why."""
    return Check(NOT_APPLICABLE, why)


def placed_at_views(family: str) -> Check:
    """Return the regions check of a family whose recipes place each buffer at a view with no room
    beyond it: not applicable, its allocation (undersized) and the buffers live beside it
    (overlapping) bounding it."""
    return not_applicable(f"{family}'s recipes place each buffer at a view; its allocation and the live buffers "
                          "beside it bound it (undersized, overlapping buffers)")


def without_kernels(backend: Any, backends: Sequence[Any], kernel_routes: Sequence[Any], family: str) -> str:
    """Return why the kernels here do not run `backend`'s route: one of the family's `backends`
    without kernels here ('' for the others: a backend the family has no route for at all is the
    specification's to reject)."""
    if backend in backends and backend not in kernel_routes:
        return f"route={backend.value}: {family} has kernels here for {', '.join(b.value for b in kernel_routes)} only"
    return ""


def compared(what: str, max_error: float, tolerance: float) -> Check:
    """Return the comparison of `what` with its float64 reference: failed when the error is over
    the tolerance (or NaN)."""
    failures = () if max_error <= tolerance else (f"{what} error {max_error:.3g} > tolerance {tolerance:.3g}",)
    return Check(FAILED if failures else PASSED, failures=failures, max_error=max_error, tolerance=tolerance)


@dataclass(frozen=True)
class Ran:
    """What an after-run check reads, while the run's memory is live: the host inputs drawn, the
    family's device inputs after the run (`inputs.upload`'s: a cache updated in place among them) and the
    workspace's arrays by buffer name (`workspace.Workspace.arrays`)."""

    host: Any
    inputs: Any
    arrays: Mapping[str, Any]
