"""What a validation run will cost, estimated before anything is allocated or launched.

On the simulator, `simulator_seconds` sums the family's cost of each stage (its `cost` module, in
the per-item seconds of `cost_model`), plus the allocator's sentinel fill (one Python loop
iteration per root byte) and the per-stage host <-> device copies of every root; it over-predicts
runs of seconds by 1.5x to 2x, tiny ones by more (tests/cli/test_validate_stream.py). The memory
counts the device bytes (inputs, output and workspace roots with their guard bands) and the host
bytes (the host inputs, the float64 reference's arrays, and the measurement's copies of every root:
before, after, the changed-byte mask and the poison mask). Nothing here imports numba.

A shape over either limit is refused with its estimate: not run, and not a failure.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import Any

from ..spec.errors import UsageError
from ..spec.statement import Footprint
from .cost_model import COPY_BYTE_SECONDS, FILL_BYTE_SECONDS
from .families import kernel_family
from .placement import Placement

GUARD_BYTES = 256  # the allocator's sentinel band on each side of a root (allocator.GUARD_BYTES)
DEFAULT_MAX_SIM_SECONDS = 60.0
DEFAULT_MEMORY_FRACTION = 4  # refuse a shape needing more than 1/4 of the machine's RAM


def root_bytes(placement: Placement) -> int:
    """Return the device bytes of every root (output and workspace), guard bands included."""
    return sum(nbytes + 2 * GUARD_BYTES for nbytes in placement.allocation_bytes.values())


@dataclass(frozen=True)
class Cost:
    """A run's estimated simulator seconds (None on a GPU), device bytes and host bytes."""

    simulator_seconds: float | None
    device_bytes: int
    host_bytes: int

    def as_dict(self) -> dict[str, float | int | None]:
        return {"simulator_seconds": None if self.simulator_seconds is None else round(self.simulator_seconds, 1),
                "device_bytes": self.device_bytes, "host_bytes": self.host_bytes}


def run_cost(p: Any, fp: Footprint, placement: Placement, simulator: bool) -> Cost:
    """Return the estimated cost of validating the placed route (see the module docstring): device
    bytes (the roots and the inputs), host bytes (copies, inputs, reference; the simulator's device
    memory too) and, on the simulator, the stages' seconds plus the roots' fill, copies and diffs."""
    family = kernel_family(p.op)
    inputs = family.cost.input_elements(p)
    roots = root_bytes(placement)
    device = roots + inputs * max(p.element_size, 4)
    host = 4 * roots + inputs * p.element_size + family.cost.reference_bytes(p) + (device if simulator else 0)
    seconds = None
    if simulator:
        seconds = (sum(family.cost.stage_seconds(p, fp, stage.name) for stage in fp.stages)
                   + roots * (FILL_BYTE_SECONDS + COPY_BYTE_SECONDS * len(fp.stages)))
    return Cost(seconds, device, host)


def physical_memory_bytes() -> int | None:
    """Return the machine's RAM in bytes, or None where the system does not say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def default_max_memory_bytes() -> int:
    """Return the default memory limit of one shape: a quarter of the machine's RAM (4 GiB when unknown)."""
    total = physical_memory_bytes()
    return (total if total else 16 * 2**30) // DEFAULT_MEMORY_FRACTION


@dataclass(frozen=True)
class RunLimits:
    """The most a shape may cost: simulator seconds (None: no limit) and bytes of host or device memory."""

    max_sim_seconds: float | None = DEFAULT_MAX_SIM_SECONDS
    max_memory_bytes: int | None = None

    def refusal(self, cost: Cost) -> str:
        """Return why a run of this cost is refused, or '' when it fits."""
        from ..spec.units import format_bytes

        memory = max(cost.device_bytes, cost.host_bytes)
        if self.max_memory_bytes is not None and memory > self.max_memory_bytes:
            where = "host" if cost.host_bytes >= cost.device_bytes else "device"
            return (f"too large for this machine's memory: needs about {format_bytes(memory)} of {where} memory, "
                    f"over --max-memory-bytes {format_bytes(self.max_memory_bytes)}: run on a larger machine "
                    f"or shrink the shape")
        if (self.max_sim_seconds is not None and cost.simulator_seconds is not None
                and cost.simulator_seconds > self.max_sim_seconds):
            return (f"too large for the simulator: about {cost.simulator_seconds:,.0f} s estimated, over "
                    f"--max-sim-seconds {self.max_sim_seconds:g}: run on a GPU or shrink the shape")
        return ""


def sim_seconds_from_args(ns: argparse.Namespace) -> float:
    """Return --max-sim-seconds (inf: no limit); UsageError when it is not positive."""
    seconds = ns.max_sim_seconds
    if not seconds > 0:
        raise UsageError(f"--max-sim-seconds {seconds}: must be a positive number of seconds (inf: no limit)")
    return seconds
