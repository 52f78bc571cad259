"""The validator: run the route ORT would pick on memory carved exactly as its recipe says, and
check the recipe against what really happened.

Checks per shape: the workspace allocations (count, order, bytes) equal the recipe's and are live
together; on a GPU, Numba's memory manager saw no allocation the allocator did not make; guard
bands intact; no byte outside the recipe's views touched; the output within the element type's
tolerance of the float64 reference; the allocated bytes within the AOT estimate for the same
geometry read as maxima. Nothing here prints.
"""

from __future__ import annotations

from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping

import numpy as np
from numba import cuda

from ..spec.dispatch import dispatch
from ..spec.errors import UsageError, WorkspaceError
from ..spec.estimate import estimate_geometry, runtime_problem
from ..spec.hints import Geometry
from ..spec.layout import Recipe
from ..spec.options import RuntimeConfig
from ..spec.problem import Backend, Problem, parse_enum
from ..spec.recipe import recipe
from ..spec.shapes_file import read_shapes_document, shape_record
from . import backends
from .allocator import AllocationRecord, Allocator
from .checks import check_bytes
from .device import device_kind
from .inputs import DTYPES, DeviceInputs, HostInputs, make_inputs, upload
from .reference import checked_tokens, reference_output, tolerance
from .report import WORKSPACE_PURPOSES, ValidationReport
from .workspace import Workspace, carve

def route_for(p: Problem, config: RuntimeConfig, backend: Backend | str | None) -> Backend | None:
    """Return the backend to run: the forced one, else ORT's dispatch; None when the output is empty."""
    outcome = dispatch(p, config)
    if outcome.empty:
        return None
    if backend is not None:
        try:
            return parse_enum(Backend, backend, "backend")
        except WorkspaceError as error:
            raise UsageError(str(error)) from None
    if outcome.backend is None:
        choices = ", ".join(b.value for b in outcome.backends)
        raise UsageError(f"dispatch picks one of {choices} depending on whether the TRT runner loads; "
                         "set the TRT runner or force a backend")
    return outcome.backend


def allocations_match(records: tuple[AllocationRecord, ...], expected: list[tuple[str, int]]) -> bool:
    """Return whether the workspace allocations equal `expected` in order and are all live together."""
    workspace = [r for r in records if r.purpose in WORKSPACE_PURPOSES]
    if [(r.purpose, r.nbytes) for r in workspace] != expected:
        return False
    return not workspace or max(r.opened for r in workspace) < min(r.closed for r in workspace)


def untagged_count(allocator: Allocator) -> int | None:
    """Return how many allocations the memory manager saw that the allocator did not make, or that
    it made and the manager never saw (None: unobserved). Numba allocates nothing for zero bytes."""
    if allocator.observed is None:
        return None
    made = Counter((r.purpose, r.device_bytes) for r in allocator.records() if r.device_bytes > 0)
    seen = Counter(allocator.observed)
    return sum(((seen - made) + (made - seen)).values())


def estimate_of(geometry: Geometry, config: RuntimeConfig) -> tuple[int | None, str]:
    """Return (the AOT total in bytes or None, its status text) for the geometry read as maxima."""
    estimate = estimate_geometry(geometry, config)
    if not estimate.ok:
        return None, f"unavailable: {estimate.message}"
    return estimate.total_workspace_bytes, estimate.classification.value


@dataclass(frozen=True)
class Staged:
    """A backend run ready to launch: the allocator, the device inputs, the carved workspace and
    the flat output [T * N * Hv]."""

    allocator: Allocator
    inputs: DeviceInputs
    workspace: Workspace
    out: Any

    def run(self, p: Problem, route: Recipe) -> None:
        """Launch the route's kernels and wait for them."""
        backends.run(p, route, self.inputs, self.workspace, self.out)
        cuda.synchronize()


@contextmanager
def staged(p: Problem, route: Recipe, host: HostInputs) -> Iterator[Staged]:
    """Allocate inputs, output and the recipe's roots through one allocator; release them on exit."""
    with Allocator() as allocator:
        inputs = upload(allocator, p, host)
        out = allocator.empty("output", (p.token_count * p.v_hidden_size,), DTYPES[p.element_size])
        yield Staged(allocator, inputs, carve(allocator, route, DTYPES[p.element_size]), out)


def validate_shape(geometry: Geometry, config: RuntimeConfig, backend: Backend | str | None = None, *,
                   seed: int = 0, labels: Mapping[str, Any] | None = None,
                   reference_tokens: int | None = None) -> ValidationReport:
    """Validate one concrete shape (see the module docstring); the spec's rejections raise InvalidArgument.

    `reference_tokens` caps how many output rows (a seeded sample) the float64 reference checks.
    """
    device = device_kind()
    shape = shape_record(geometry, config, **dict(labels or {}))
    problem = runtime_problem(geometry)
    chosen = route_for(problem, config, backend)
    estimate_bytes, estimate_status = estimate_of(geometry, config)
    if chosen is None:
        return ValidationReport(shape, device, estimate_bytes=estimate_bytes, estimate_status=estimate_status)
    route = recipe(problem, chosen, trt_runner_available=True)
    host = make_inputs(problem, seed)
    tokens = checked_tokens(problem, reference_tokens, seed)
    with staged(problem, route, host) as stage:
        stage.run(problem, route)
        got = stage.out.copy_to_host().reshape(problem.token_count, -1)[tokens].astype(np.float64)
        byte_check = check_bytes(stage.workspace.roots, route, problem)
    expected = reference_output(problem, host, tokens)
    records = stage.allocator.records()
    expected_allocations = [(p, b) for p, b in route.allocations() if b > 0]
    return ValidationReport(
        shape, device, chosen.value, tuple(expected_allocations), records,
        allocations_match(records, expected_allocations), untagged_count(stage.allocator), byte_check,
        float(np.abs(got - expected).max(initial=0.0)), tolerance(problem, expected), len(tokens),
        estimate_bytes, estimate_status,
    )


def validate_document(document: Any, progress: Callable[[str], None], *,
                      reference_tokens: int | None = None) -> list[ValidationReport]:
    """Validate every record of a shapes document on every backend its dispatch can pick.

    A record the specification rejects yields one failed report carrying the error.
    `reference_tokens` is passed on to validate_shape.
    """
    reports: list[ValidationReport] = []
    records = read_shapes_document(document)
    for index, (geometry, config, labels) in enumerate(records, 1):
        progress(f"validate {index}/{len(records)}: {labels.get('label', geometry.op.value)}")
        try:
            outcome = dispatch(runtime_problem(geometry), config)
            for backend in outcome.backends or (None,):
                reports.append(validate_shape(geometry, config, backend, labels=labels,
                                              reference_tokens=reference_tokens))
        except UsageError:
            raise
        except WorkspaceError as error:
            reports.append(ValidationReport(shape_record(geometry, config, **labels), device_kind(),
                                            error=f"{error.status}: {error}"))
    return reports
