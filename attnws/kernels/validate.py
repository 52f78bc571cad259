"""The validator: run the route ORT would pick on memory carved as its recipe says, and check the
recipe and the kernels against the footprint, an independent statement of what the kernels touch.

Checks per shape, before any launch: every footprint buffer lies on a recipe view (unplaced
buffers), at its alignment (misaligned), inside its allocation (undersized) and inside its recipe
region's room where the family's recipes have rooms (outside regions); buffers live together share
no byte (overlapping buffers); each workspace allocation is at most the footprint plus ORT's
documented slack, where ORT documents any (oversized; elsewhere what the recipe reserves beyond
the footprint is reported, not failed). Nothing is launched when a buffer is unplaced, misaligned,
undersized or outside its region. Then, stage by stage (`measure`): no byte written outside the
buffers the stage declares (stray writes, guard bands included) and every declared buffer written
(incomplete writes). After the run: the workspace payloads measured on the device equal the
recipe's and are live together (allocations); on a GPU, Numba's memory manager saw no allocation
the allocator did not make (untagged allocations); guard bands intact; the output within the
element type's tolerance of the float64 reference, and the family's after-run checks (the present
KV cache, the softmax LSE against float64); the allocated bytes within the AOT estimate for the
same geometry read as maxima.

The inputs, the stages, the reference and the checks beyond these are the problem's family's
(`families`, the hooks each family implements): each family states its footprint
(`attnws.spec.<family>.footprint`), placed again after the inputs are drawn where it depends on
them (GroupQueryAttention's key lengths); outputs it places outside the workspace
(MultiHeadAttention's present outputs and Flash's LSE) are roots of their own, sized as ORT
allocates them, so a kernel writing past one shows as an undersized buffer or a stray write. A
route or feature the family's kernels do not model is refused before the recipe, not failed.

A shape ORT refuses before any kernel runs is reported rejected (`refusal`): only where ORT's own
checks raise (building the runtime problem, its dispatch, the recipe ORT sizes: `ORT_REFUSED`), or
its cascade runs no route. An error of attnws's own never is: an `InternalError` propagates, and
any other error raised past ORT's checks (the footprint, the inputs, the kernels) is raised as one.

Given `RunLimits`, the run's cost is estimated first (`budget`): a shape over the simulator's time
limit or the memory limit is refused after the checks before any launch and before anything is
allocated; the report says why, and a refusal is not a failure. `iter_document` yields each
report as soon as it is ready, so a caller can show results while the rest still run. Nothing here
prints.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator, Mapping

import numpy as np
from numba import cuda

from ..spec.dispatch import dispatch
from ..spec.errors import InternalError, UsageError, WorkspaceError
from ..spec.estimate import estimate_geometry, runtime_problem
from ..spec.statement import OUTPUT, Footprint
from ..spec.footprint import footprint
from ..spec.hints import Geometry
from ..spec.options import RuntimeConfig
from ..spec.problem import Backend, parse_enum
from ..spec.recipe import recipe
from ..spec.shapes_file import read_shapes_document, shape_record
from .allocation_checks import allocations_match, oversized, untagged_count
from .allocator import Allocator
from .budget import RunLimits, run_cost
from .device import SIMULATOR, device_kind
from .families import kernel_family
from .family_checks import Ran, not_applicable, outcome
from .launching import Launch
from .measure import Measurement, measure
from .operator_inputs import HostInputs
from .placement import Placement, place, spare_bytes, untouched_views
from .reference_check import checked_rows, tolerance
from .report import ValidationReport, buffer_reports
from .workspace import Workspace, carve


# Errors ORT's checks never raise: a bug of attnws's own, and a request attnws cannot interpret.
# Every other WorkspaceError raised by ORT's checks (`runtime_problem`, `dispatch`, `recipe`) is ORT
# refusing the shape.
NOT_REFUSALS = (InternalError, UsageError)


def refusal(shape: Mapping[str, Any], device: str, error: WorkspaceError | str, **fields: Any) -> ValidationReport:
    """Return the report of a shape ORT refuses before any kernel runs (nothing ran): `error` is the
    error ORT's own checks raised (never one of `NOT_REFUSALS`: the callers let those propagate), or
    ORT's run-time failure in words."""
    message = error if isinstance(error, str) else f"{error.status}: {error}"
    return ValidationReport(shape, device, error=message, rejected=True, **fields)


def route_for(p: Any, config: RuntimeConfig, backend: Backend | str | None) -> Backend | None:
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


def estimate_of(geometry: Geometry, config: RuntimeConfig) -> tuple[int | None, str]:
    """Return (the AOT total in bytes or None, its status text) for the geometry read as maxima."""
    estimate = estimate_geometry(geometry, config)
    if not estimate.ok:
        return None, f"unavailable: {estimate.message}"
    return estimate.total_workspace_bytes, estimate.classification.value


@dataclass(frozen=True)
class Staged:
    """A backend run ready to launch: the allocator, the family's device inputs, the carved
    workspace (the output among its roots), the placement it was carved at and the route's stages."""

    allocator: Allocator
    inputs: Any
    workspace: Workspace
    placement: Placement
    launches: tuple[Launch, ...]

    def run(self) -> None:
        """Launch every stage and wait for them."""
        for launch in self.launches:
            launch.enqueue()
        cuda.synchronize()

    def output(self, p: Any) -> np.ndarray:
        """Return a host copy of the output [rows, width] (the family's `output_rows`: T, or B * S;
        the width N * Hv), the output buffer's elements at the start of the output root."""
        count = kernel_family(p.op).reference.output_rows(p)
        elements = self.placement.buffer(OUTPUT).buffer.elements
        return self.workspace.arrays[OUTPUT][:elements].copy_to_host().reshape(count, -1)


@contextmanager
def staged(p: Any, placement: Placement, host: HostInputs, route: Any = None) -> Iterator[Staged]:
    """Allocate inputs, the output and the recipe's roots through one allocator, carve the
    placement's buffers and build the family's stages for the recipe `route` (read by the routes
    whose launches it sizes: GroupQueryAttention's split and SM counts); release everything on exit."""
    family = kernel_family(p.op)
    with Allocator() as allocator:
        inputs = family.inputs.upload(allocator, p, host)
        workspace = carve(allocator, p, placement)
        launches = family.routes.launch_sequence(p, route, placement.footprint, inputs, workspace)
        yield Staged(allocator, inputs, workspace, placement, launches)


def before_launch(p: Any, fp: Footprint, route: Any, placement: Placement) -> dict[str, Any]:
    """Return the report fields of the checks made before any launch, on the placed footprint:
    unplaced, misaligned, undersized and overlapping buffers, the family's region rooms
    (`outside_regions`), and each workspace allocation against the footprint plus the slack ORT
    documents, where it documents any (`slack`); what the recipe reserves beyond the footprint."""
    family = kernel_family(p.op)
    unbounded = family.checks.slack_unbounded(p)
    over = () if unbounded else oversized(fp, route)
    return dict(buffers=buffer_reports(placement, Measurement()), unplaced=placement.unplaced,
                misaligned=placement.misaligned(), undersized=placement.undersized(),
                overlapping=placement.overlapping(), oversized=over,
                outside_regions=family.checks.outside_regions(p, route, placement),
                slack=not_applicable(unbounded) if unbounded else outcome([o.allocation for o in over]),
                spare_bytes=spare_bytes(placement), untouched_regions=untouched_views(placement, route))


def launchable(report: ValidationReport) -> bool:
    """Return whether the checks before any launch leave the kernels memory to run in: every
    buffer placed, aligned, inside its allocation and inside its region's room."""
    return not (report.unplaced or report.misaligned or report.undersized or report.outside_regions.failed)


def validate_shape(geometry: Geometry, config: RuntimeConfig, backend: Backend | str | None = None, *,
                   seed: int = 0, labels: Mapping[str, Any] | None = None,
                   reference_tokens: int | None = None, limits: RunLimits | None = None) -> ValidationReport:
    """Validate one concrete shape (see the module docstring). A shape ORT's own checks refuse
    (building the runtime problem, the dispatch, a cascade with no route, the recipe of the route)
    is a rejected report (`refusal`); an `InternalError` propagates, a `UsageError` too (a backend
    that cannot be parsed, a dispatch that depends on the TRT runner), and any other error raised
    past ORT's checks is raised as an `InternalError`: attnws's own footprint, inputs or kernels
    failed, never ORT.

    The problem's family gives the inputs, the stages, the reference and its own checks
    (`families`). `reference_tokens` caps how many output rows (a seeded sample) the float64
    reference checks; `limits` (None: none) refuses a run estimated over them.
    """
    device = device_kind()
    shape = shape_record(geometry, config, **dict(labels or {}))
    try:  # ORT's own checks
        problem = runtime_problem(geometry)
        estimate_bytes, estimate_status = estimate_of(geometry, config)
        outcome = dispatch(problem, config)
    except NOT_REFUSALS:
        raise
    except WorkspaceError as error:
        return refusal(shape, device, error)
    if backend is None and not outcome.empty and not outcome.backends:  # ORT fails at run time: no route
        return refusal(shape, device, f"runtime_failure ({outcome.failure_kind}): {outcome.failure}",
                       estimate_bytes=estimate_bytes, estimate_status=estimate_status)
    chosen = route_for(problem, config, backend)
    if chosen is None:
        return ValidationReport(shape, device, estimate_bytes=estimate_bytes, estimate_status=estimate_status)
    family = kernel_family(problem.op)
    unmodelled = family.routes.unmodelled(problem, config, chosen)
    if unmodelled:
        return ValidationReport(shape, device, chosen.value, estimate_bytes=estimate_bytes,
                                estimate_status=estimate_status, refused=f"no kernels here: {unmodelled}",
                                unmodelled=True)
    try:  # ORT's recipe for the route: ORT's error, e.g. a forced backend the operator has no route for
        route = recipe(problem, chosen, trt_runner_available=True, config=config)
    except NOT_REFUSALS:
        raise
    except WorkspaceError as error:
        return refusal(shape, device, error)
    base = ValidationReport(shape, device, chosen.value, estimate_bytes=estimate_bytes, estimate_status=estimate_status)
    try:
        return checked_run(problem, config, chosen, route, base, seed=seed, reference_tokens=reference_tokens,
                           limits=limits)
    except NOT_REFUSALS:
        raise
    except WorkspaceError as error:
        raise InternalError(f"ORT accepts the shape and sizes its recipe, but attnws's own footprint, inputs or "
                            f"kernels raised {error.status}: {error}") from error


def checked_run(problem: Any, config: RuntimeConfig, chosen: Backend, route: Any, base: ValidationReport, *,
                seed: int, reference_tokens: int | None, limits: RunLimits | None) -> ValidationReport:
    """Return `base` (the shape, the device, the backend and the estimate) with the checks before any
    launch on the recipe `route` ORT sizes and, where they leave the kernels memory to run in and the
    limits allow, the run's. Everything here is attnws's own (the footprint, the inputs, the
    kernels), past ORT's checks: an error raised here is never ORT refusing the shape."""
    family = kernel_family(problem.op)
    fp = footprint(problem, chosen, config=config)
    placement = place(problem, fp, route)
    expected_allocations = [(p, b) for p, b in route.allocations() if b > 0]
    checked = replace(
        base, recipe_allocations=tuple(expected_allocations), route=route.route_text(), recipe=route.as_dict(),
        present_cache=family.checks.present_cache(problem, route, None), lse=family.checks.lse(problem, route, None),
        launches_not_run=family.routes.launches_not_run(problem, route), **before_launch(problem, fp, route, placement))
    if not launchable(checked):
        return checked
    if limits is not None:
        cost = run_cost(problem, fp, placement, simulator=base.device == SIMULATOR)
        checked = replace(checked, cost=cost.as_dict(), refused=limits.refusal(cost))
        if checked.refused:
            return checked
    host = family.inputs.route_inputs(problem, route, family.inputs.make_inputs(problem, seed))
    drawn = family.inputs.drawn_footprint(problem, route, fp, host)
    if drawn is not fp:  # the footprint of the inputs drawn (GroupQueryAttention's key lengths)
        placement = place(problem, drawn, route)
        checked = replace(checked, **before_launch(problem, drawn, route, placement))
        if not launchable(checked):
            return checked
    tokens = checked_rows(family.reference.output_rows(problem), reference_tokens, seed)
    with staged(problem, placement, host, route) as stage:
        measurement = measure(stage.launches, placement, stage.workspace.roots)
        got = stage.output(problem)[tokens].astype(np.float64)
        ran = Ran(host, stage.inputs, stage.workspace.arrays)
        present_cache = family.checks.present_cache(problem, route, ran)
        lse = family.checks.lse(problem, route, ran)
    expected = family.reference.reference_output(problem, host, tokens, chosen)
    records = stage.allocator.records()
    return replace(
        checked, allocations=records, allocations_match=allocations_match(records, expected_allocations),
        observed_untagged=untagged_count(stage.allocator), stages=tuple(launch.stage for launch in stage.launches),
        buffers=buffer_reports(placement, measurement), measurement=measurement,
        max_error=float(np.abs(got - expected).max(initial=0.0)), tolerance=tolerance(problem.element_size, expected),
        reference_tokens=len(tokens), present_cache=present_cache, lse=lse,
    )


def iter_document(document: Any, progress: Callable[[str], None], *, reference_tokens: int | None = None,
                  limits: RunLimits | None = None) -> Iterator[ValidationReport]:
    """Yield a report for every record of a shapes document on every backend its dispatch can
    pick, each as soon as it is ready. The whole document is read first: a malformed record
    raises InvalidArgument before anything runs.

    A record ORT's own checks refuse (building its runtime problem or dispatching it) yields one
    rejected report carrying ORT's error (`refusal`), a shape on a backend `validate_shape`'s own;
    an `InternalError` propagates, never a rejection. `reference_tokens` and `limits` are passed on
    to validate_shape.
    """
    records = read_shapes_document(document)
    for index, (geometry, config, labels) in enumerate(records, 1):
        progress(f"validate {index}/{len(records)}: {labels.get('label', geometry.op.value)}")
        try:  # ORT's own checks
            outcome = dispatch(runtime_problem(geometry), config)
            backends_ = outcome.backends or (None,)
        except NOT_REFUSALS:
            raise
        except WorkspaceError as error:
            yield refusal(shape_record(geometry, config, **labels), device_kind(), error)
            continue
        for backend in backends_:
            yield validate_shape(geometry, config, backend, labels=labels, reference_tokens=reference_tokens,
                                 limits=limits)


def validate_document(document: Any, progress: Callable[[str], None], *,
                      reference_tokens: int | None = None, limits: RunLimits | None = None) -> list[ValidationReport]:
    """Return the reports of `iter_document`, all at once."""
    return list(iter_document(document, progress, reference_tokens=reference_tokens, limits=limits))
