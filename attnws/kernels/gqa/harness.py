"""Validate one GroupQueryAttention shape on the route ORT's cascade picks: its preparation and its
backend run on memory carved as the complete recipe says, measured against the footprint
(`statement`).

GroupQueryAttention's kernels are in progress (`attnws.kernels.families.IN_PROGRESS` says why), so
the shared validator hands its shapes here (`commands`); this is its path through the shared pieces: the spec's cascade picks the route and the recipe its
split count and regions; the allocator gives one guarded, SENTINEL-filled root per allocation
(the output, and the workspace "attention"); `measure` runs the stages (the preparation's,
`prepared`, then the backend's: `xqa_route`, `flash_route`, `mea_route`, `unfused_route`), poisoning dead
bytes before each, and finds stray and incomplete writes; the output is held against the float64
reference (`reference`) at `reference_check.tolerance`, and on Flash the LSE too.

Before any launch: every buffer on a non-empty region (unplaced), inside its allocation
(undersized) and inside its region's room (outside regions), and no two live buffers sharing a
byte (overlapping); nothing is launched when one fails. After the run: the workspace payload
measured on the device equals the recipe's total, guard bands intact, and the present cache (past
and present share one buffer) kept every byte but the S appended rows, which hold the new K
(rotated) and V (`present_cache_failures`; not for a windowed cache).

In scope: the XQA (decode), Flash (regular or fast decode), MEA and unfused routes on an unquantized fp16 cache,
with causality, a local window, a softcap, rotary embedding and packed QKV through the Q scratch,
and a windowed cache (staging at S > 1, compaction at S == 1). Out of scope, refused as
Unsupported: the cuDNN route (no recipe, no kernels here), bf16 (the simulator and NumPy have no
bfloat16), a quantized cache, smooth softmax or a head sink, QK-norm, rotary or packed QKV on
Flash's fast decode (the split kernel rotates and unpacks inside itself there), and a softcap on
MEA (its kernel here has none).

The route's own window rule: XQA, Flash and MEA keep the W keys q - W < j <= q of a local window W,
ORT's unfused softmax the W + 1 keys q - W <= j <= q (`unfused_route`); the reference is told which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...spec.domain import CONCRETE
from ...spec.errors import Unsupported
from ...spec.gqa import recipe as gqa_recipe
from ...spec.gqa.dispatch import select
from ...spec.gqa.problem import GqaProblem
from ...spec.gqa.recipe import Route
from ...spec.gqa.footprint import SEMAPHORES, SOFTMAX_LSE
from ...spec.options import RuntimeConfig
from ...spec.problem import Backend
from ...spec.statement import ATTENTION, FLOAT32_BYTES, OUTPUT
from ..allocation_checks import allocations_match, untagged_count
from ..allocator import Allocator
from ..launching import Launch
from ..measure import IncompleteWrite, StrayWrite, measure
from ..operator_inputs import upload_arrays
from ..reference_check import tolerance
from ..workspace import Workspace, carve
from . import flash_route, mea_route, unfused_route, xqa_route
from .inputs import make_inputs
from .prepared import Prepared, prepare
from .reference import new_tokens, reference, rotated
from .statement import gqa_statement

KERNEL_ROUTES = (Backend.XQA, Backend.FLASH, Backend.MEA, Backend.UNFUSED)


@dataclass(frozen=True, slots=True)
class GqaReport:
    """One shape's validation. `route` names the backend (and fast decode); `workspace_bytes` is
    the recipe's total; `allocated` the payload bytes of each root measured on the device;
    `touched_bytes` the bytes of each buffer's elements its writers wrote; errors are
    max |kernel - reference| (NaN when the kernel produced one) against their tolerances (the LSE
    on Flash only: NaN and 0 elsewhere, not checked). `not_run`: ORT's launches this harness does
    not run."""

    shape: str
    route: str
    splits: int
    fast_decode: bool
    workspace_bytes: int
    not_run: tuple[str, ...]
    unplaced: tuple[str, ...] = ()
    undersized: tuple[str, ...] = ()
    outside_regions: tuple[str, ...] = ()
    overlapping: tuple[tuple[str, str], ...] = ()
    launched: bool = False
    stages: tuple[str, ...] = ()
    allocated: tuple[tuple[str, int], ...] = ()
    allocations_match: bool = False
    untagged: int | None = None
    stray: tuple[StrayWrite, ...] = ()
    incomplete: tuple[IncompleteWrite, ...] = ()
    first_guard_write: str = ""
    max_error: float = math.nan
    tolerance: float = 0.0
    lse_error: float = math.nan
    lse_tolerance: float = 0.0
    touched_bytes: tuple[tuple[str, int], ...] = ()
    present_cache: tuple[str, ...] = ()  # what the step did wrong to the present cache (`present_cache_failures`)
    untouched: tuple[tuple[str, int], ...] = ()  # recipe regions no kernel touches (name, bytes): not a failure
    spare_bytes: int = 0  # workspace bytes no footprint buffer covers (statement.GqaStatement): not a failure

    def placement_failures(self) -> tuple[str, ...]:
        """Return the checks made before any launch that fail, in words."""
        return tuple(f"{what}: {', '.join(map(str, names))}" for what, names in (
            ("unplaced", self.unplaced), ("undersized", self.undersized), ("outside its region", self.outside_regions),
            ("overlapping", self.overlapping)) if names)

    def failures(self) -> tuple[str, ...]:
        """Return every failed check in words (empty: the shape validates)."""
        placed = self.placement_failures()
        if placed or not self.launched:
            return placed or ("not launched",)
        run = [f"stray write: {w.nbytes} bytes of {w.allocation} from {w.first_offset} in {w.stage}"
               for w in self.stray]
        run += [f"incomplete write: {w.buffer} {w.written} of {w.expected} elements in {w.stage}"
                for w in self.incomplete]
        checks = ((not self.first_guard_write, f"guard band written at {self.first_guard_write}"),
                  (self.allocations_match, f"allocated {dict(self.allocated)} != recipe {self.workspace_bytes} bytes"),
                  (not self.untagged, f"{self.untagged} allocations outside the allocator"),
                  (self.max_error <= self.tolerance, f"output error {self.max_error} > {self.tolerance}"),
                  (self.route != Backend.FLASH.value or self.lse_error <= self.lse_tolerance,
                   f"LSE error {self.lse_error} > {self.lse_tolerance}"))
        return tuple(run) + tuple(text for ok, text in checks if not ok) + self.present_cache

    @property
    def ok(self) -> bool:
        """Return whether every check passes."""
        return not self.failures()


def kernel_route(p: GqaProblem, config: RuntimeConfig) -> Route:
    """Return the route the cascade picks for p when it has kernels here, or raise Unsupported
    (module docstring)."""
    route = select(p, config).route
    if route is None or route.backend not in KERNEL_ROUTES:
        raise Unsupported(f"route={route.backend.value if route else None}: GroupQueryAttention has kernels here "
                          f"for {', '.join(b.value for b in KERNEL_ROUTES)} only")
    unmodelled = {"is_bf16=True": p.is_bf16, "quantized=True": p.quantized,
                  "use_smooth_softmax=True": p.use_smooth_softmax, "use_qk_norm=True": p.use_qk_norm,
                  "do_rotary=True on fast decode": route.fast_decode and p.do_rotary,
                  "is_packed_qkv=True on fast decode": route.fast_decode and p.is_packed_qkv,
                  # the MEA kernel here has no softcap (how ORT's cutlass path treats one was not read)
                  f"softcap={p.softcap:g} on MEA": route.backend is Backend.MEA and p.softcap > 0}
    named = [text for text, value in unmodelled.items() if value]
    if named:
        raise Unsupported(f"GroupQueryAttention kernels here do not model {', '.join(named)}")
    return route


def shape_text(p: GqaProblem, route: Route) -> str:
    """Return the shape in words."""
    extras = [(f"window {p.local_window_size}", p.local_window_size > 0), (f"softcap {p.softcap}", p.softcap > 0),
              ("windowed cache", p.sliding_window_cache), ("rotary", p.do_rotary), ("packed QKV", p.is_packed_qkv)]
    return (f"GQA B={p.batch_size} S={p.sequence_length} N={p.num_heads} Nk={p.kv_num_heads} H={p.head_size} "
            f"T={p.total_sequence_length} C={p.present_capacity(CONCRETE)}, sm{route.sm} with {route.sm_count} SMs"
            + "".join(f", {text}" for text, on in extras if on))


def window_keys(p: GqaProblem, backend: Backend) -> int | None:
    """Return the keys a local window W keeps on the route: W, or W + 1 on unfused (None: no window)."""
    if p.local_window_size <= 0:
        return None
    return p.local_window_size + (backend is Backend.UNFUSED)


def backend_launches(p: GqaProblem, route: Route, splits: int, prepared: Prepared, ws: Workspace) -> tuple[Launch, ...]:
    """Return the backend's launches on the prepared operands."""
    if route.backend is Backend.FLASH:
        return flash_route.launch_sequence(p, splits, prepared, ws)
    if route.backend is Backend.MEA:
        return mea_route.launch_sequence(p, prepared, ws)
    if route.backend is Backend.XQA:  # the launch carves its region itself, from the semaphores' first byte
        region = ws.arrays[SEMAPHORES].view(np.uint8)
        return xqa_route.xqa_stages(p, route.sm_count, region, prepared.query, prepared.key, prepared.value,
                                    prepared.key_lengths, ws.arrays[OUTPUT])
    return unfused_route.launch_sequence(p, route, prepared, ws)


def present_cache_failures(p: GqaProblem, host: Any, present: tuple[np.ndarray, np.ndarray]) -> tuple[str, ...]:
    """Return what the step did wrong to the present cache [B, Nk, C, H] (past and present share
    one buffer), in words: rows below past_b = L_b - S must keep their bytes (the past the step
    reads), rows past_b .. past_b + S - 1 hold the new K (rotated at their positions) and V within
    the element type's tolerance, the rows past them keep their bytes. A windowed cache is not
    checked (its staging's write-back is not run here, and compaction moves its rows): ()."""
    if p.sliding_window_cache:
        return ()
    _, new_key, new_value = new_tokens(p, host)
    failures = []
    for name, after, new in (("present_key", present[0], new_key), ("present_value", present[1], new_value)):
        before = host.arrays[name]
        for b, length in enumerate(host.lengths):
            past = length - p.sequence_length
            rows = new[b]
            if name == "present_key" and p.do_rotary:
                rows = rotated(rows, past + np.arange(p.sequence_length), host)
            kept = np.ones(before.shape[2], bool)
            kept[past:length] = False
            if (after[b][:, kept].view(np.uint16) != before[b][:, kept].view(np.uint16)).any():
                failures.append(f"{name} of batch entry {b}: a row outside the appended {past}..{length - 1} changed")
            error = float(np.abs(after[b][:, past:length].astype(np.float64) - rows.transpose(1, 0, 2)).max())
            if not error <= tolerance(p.element_size, rows):
                failures.append(f"{name} of batch entry {b}: appended rows off by {error}")
    return tuple(failures)


def validate_gqa(p: GqaProblem, config: RuntimeConfig, *, seed: int = 0) -> GqaReport:
    """Validate one concrete GroupQueryAttention problem on its route (module docstring).

    Raises Unsupported outside the scope, and the spec's InvalidArgument where ORT's recipe does."""
    route = kernel_route(p, config)
    run = gqa_recipe.complete(p.workspace_problem(CONCRETE), route)
    host = make_inputs(p, bool(route.fast_decode), route.backend is Backend.UNFUSED, seed)
    statement = gqa_statement(p, route, run, host.lengths)
    placement = statement.placement
    checked = GqaReport(shape_text(p, route), route.backend.value, statement.splits, bool(route.fast_decode),
                        run.total_workspace_bytes, statement.not_run, placement.unplaced, placement.undersized(),
                        statement.outside_regions, placement.overlapping(), untouched=statement.untouched,
                        spare_bytes=statement.spare_bytes)
    if checked.placement_failures():
        return checked
    with Allocator() as allocator:
        inputs = upload_arrays(allocator, host)
        workspace = carve(allocator, p, placement)
        prepared = prepare(p, route, inputs, workspace)
        launches = prepared.launches + backend_launches(p, route, statement.splits, prepared, workspace)
        measurement = measure(launches, placement, workspace.roots)
        outputs = placement.buffer(OUTPUT).buffer.elements
        got = workspace.arrays[OUTPUT][:outputs].copy_to_host().astype(np.float64)
        lse_rows = p.batch_size * p.num_heads * p.sequence_length
        got_lse = (workspace.arrays[SOFTMAX_LSE][:lse_rows].copy_to_host().astype(np.float64)
                   if SOFTMAX_LSE in workspace.arrays else None)
        present = tuple(inputs[name].copy_to_host().reshape(host.arrays[name].shape)
                        for name in ("present_key", "present_value"))
    records = allocator.records()
    expected, expected_lse = reference(p, host, window_keys(p, route.backend))
    lse = {} if got_lse is None else dict(lse_error=float(np.abs(got_lse - expected_lse.reshape(-1)).max()),
                                          lse_tolerance=tolerance(FLOAT32_BYTES, expected_lse))
    return GqaReport(
        checked.shape, checked.route, checked.splits, checked.fast_decode, checked.workspace_bytes, checked.not_run,
        launched=True, stages=tuple(launch.stage for launch in launches),
        allocated=tuple((r.purpose, r.nbytes) for r in records if r.guard_bytes),
        allocations_match=allocations_match(records, [(ATTENTION, run.total_workspace_bytes)]),
        untagged=untagged_count(allocator), stray=measurement.stray, incomplete=measurement.incomplete,
        first_guard_write=measurement.first_guard_write,
        max_error=float(np.abs(got - expected.reshape(-1)).max()), tolerance=tolerance(p.element_size, expected),
        touched_bytes=tuple(measurement.touched_bytes.items()), present_cache=present_cache_failures(p, host, present),
        untouched=checked.untouched, spare_bytes=checked.spare_bytes, **lse)
