"""Planted faults in the recipes, the allocator and the kernels, each with the check that must catch it.

Every fault is a `plant(monkeypatch)` over the real code and a tiny shape on which
`attnws.kernels.validate_shape` must report the `expected` failure. None of them was caught while
the allocation parity read the recipe back from itself; the footprint (`attnws.spec.footprint`)
and the stage-by-stage measurement are what catch them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

import attnws.kernels  # noqa: F401  (chooses the device before numba loads)

import numpy as np
from numba import cuda

from attnws.kernels import validate
from attnws.kernels.backends import flash, mea, unfused
from attnws.kernels.packed import layouts
from attnws.kernels.allocator import Allocator
from attnws.spec import Op, QkvFormat, QkvLayout, RuntimeConfig
from attnws.spec.hints import Geometry

from tests.quality.kill_rate import record

SM75 = RuntimeConfig.make(sm=75)
SM80 = RuntimeConfig.make(sm=80)
EXTRA_BYTES = 4096

# T < B*S, so the T-token routes leave part of the B*S capacity unused.
FLASH = Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=8, tokens=5, qkv_bias=True,
                 pmha_format=QkvFormat.SEPARATE)
TRT = Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=32, qkv_bias=True)  # T = B*S: no unused capacity
MEA_ACCUMULATOR = Geometry(Op.PMHA, 2, batch=2, seq=4, heads=1, head_size=8, v_head_size=136, tokens=5,
                           qkv_bias=True, pmha_format=QkvFormat.SEPARATE)  # fp16, Hv > 128, on sm75
UNFUSED_FP32 = Geometry(Op.PMHA, 4, batch=2, seq=4, heads=2, head_size=4, tokens=5)  # 4 * B*N*S*S = 256: no padding
UNFUSED_PADDED = Geometry(Op.PMHA, 4, batch=2, seq=3, heads=2, head_size=4, tokens=5)  # 144 of 256 bytes used


@dataclass(frozen=True)
class KernelFault:
    """A planted fault: `plant` patches it in, and validating `geometry` on `backend` under
    `config` must report the failure named `expected`."""

    name: str
    description: str
    geometry: Geometry
    config: RuntimeConfig
    backend: str
    expected: str
    plant: Callable[[Any], None]


@cuda.jit
def store_zero(array, index):
    array[index] = 0


def recipe_edit(edit: Callable[[Any], dict[str, Any]]) -> Callable[[Any], None]:
    """Return a plant replacing the recipe's fields by `edit(recipe)`."""

    def plant(monkeypatch: Any) -> None:
        real = validate.recipe

        def edited(*args: Any, **kwargs: Any) -> Any:
            r = real(*args, **kwargs)
            return replace(r, **edit(r))

        monkeypatch.setattr(validate, "recipe", edited)

    return plant


def reserve_backend_region(times: int) -> Callable[[Any], None]:
    """Return a plant reserving `times` the backend's region (the LSE, or each unfused scratch
    region, moving the second along)."""

    def edit(r: Any) -> dict[str, Any]:
        extra = (times - 1) * r.backend_workspace_bytes
        regions = 2 if r.has_second_scratch else 1
        return {"backend_workspace_bytes": times * r.backend_workspace_bytes,
                "second_scratch_offset_bytes": r.second_scratch_offset_bytes + (regions - 1) * extra,
                "attention_workspace_bytes": r.attention_workspace_bytes + regions * extra}

    return recipe_edit(edit)


def allocator_hands_out_extra(monkeypatch: Any) -> None:
    real = Allocator.root
    monkeypatch.setattr(Allocator, "root", lambda self, purpose, nbytes: real(self, purpose, nbytes + EXTRA_BYTES))


def producer_shifted_by_one_element(which: int) -> Callable[[Any], None]:
    """Return a plant making the producer write part `which` (0 Q, 1 K, 2 V) one element further on."""

    def plant(monkeypatch: Any) -> None:
        real = layouts.launch_materialize
        monkeypatch.setattr(layouts, "launch_materialize", lambda plan: real(
            replace(plan, destination=plan.destination[1:]) if plan.which == which else plan))

    return plant


def store_after(module: Any, name: str, array_field: str, index: Callable[[Any], int]) -> Callable[[Any], None]:
    """Return a plant making module.<name> (a launch) also store 0 at plan.<array_field>[index(plan)]."""

    def plant(monkeypatch: Any) -> None:
        real = getattr(module, name)

        def launch(plan: Any) -> None:
            real(plan)
            store_zero[1, 1](getattr(plan, array_field), index(plan))

        monkeypatch.setattr(module, name, launch)

    return plant


def score_elements(plan: unfused.ScoresPlan) -> int:
    """Return B * N * S * S: the elements of the score matrix."""
    return plan.batch_heads * plan.seq * plan.seq


def output_elements(plan: layouts.TransposePlan) -> int:
    """Return T * N * Hv: the elements of the output."""
    return plan.packing.tokens * plan.packing.heads * plan.v_head_size


def flash_lse_in_private_memory(monkeypatch: Any) -> None:
    real = flash.launch
    monkeypatch.setattr(flash, "launch", lambda plan: real(
        replace(plan, lse=cuda.device_array(plan.lse.shape, np.float32))))


def mea_accumulates_in_registers(monkeypatch: Any) -> None:
    real = mea.launch
    monkeypatch.setattr(mea, "launch", lambda plan: real(replace(plan, accumulator=None)))


def unfused_scores_in_private_memory(monkeypatch: Any) -> None:
    """Scores GEMM and softmax share a plain device array instead of the scores region."""
    private: dict[str, Any] = {}
    real_scores, real_softmax = unfused.launch_scores, unfused.launch_softmax

    def scores(plan: unfused.ScoresPlan) -> None:
        private["scores"] = cuda.device_array(score_elements(plan), plan.scores.dtype)
        real_scores(replace(plan, scores=private["scores"]))

    monkeypatch.setattr(unfused, "launch_scores", scores)
    monkeypatch.setattr(unfused, "launch_softmax", lambda plan: real_softmax(replace(plan, scores=private["scores"])))


FAULTS = (
    KernelFault("lse-reserved-4x", "the recipe reserves four times the Flash LSE", FLASH, SM80, "flash", "oversized",
                reserve_backend_region(4)),
    KernelFault("unfused-scratch-reserved-2x", "the recipe reserves twice each unfused scratch region",
                UNFUSED_PADDED, SM80, "unfused", "oversized", reserve_backend_region(2)),
    KernelFault("allocator-4096-extra", f"the allocator hands out {EXTRA_BYTES:,} bytes more than asked",
                TRT, SM80, "trt", "allocations", allocator_hands_out_extra),
    KernelFault("q-into-k", "the Q producer writes one element into the K view", FLASH, SM80, "flash",
                "stray writes", producer_shifted_by_one_element(0)),
    KernelFault("v-into-lse", "the V producer overruns into the Flash LSE", FLASH, SM80, "flash", "stray writes",
                producer_shifted_by_one_element(2)),
    KernelFault("v-into-scores", "the V producer overruns into the unfused scores", UNFUSED_PADDED, SM80,
                "unfused", "stray writes", producer_shifted_by_one_element(2)),
    KernelFault("flash-lse-unwritten", "Flash never writes its LSE (keeps it in memory of its own)", FLASH, SM80,
                "flash", "incomplete writes", flash_lse_in_private_memory),
    KernelFault("mea-accumulator-ignored", "MEA accumulates in registers, ignoring its FP32 accumulator",
                MEA_ACCUMULATOR, SM75, "mea", "incomplete writes", mea_accumulates_in_registers),
    KernelFault("unfused-private-scores", "the unfused scores live in a private device array", UNFUSED_PADDED, SM80,
                "unfused", "incomplete writes", unfused_scores_in_private_memory),
    KernelFault("one-past-output", "the transpose writes one element past the output", UNFUSED_PADDED, SM80,
                "unfused", "stray writes", store_after(layouts, "launch_transpose", "out", output_elements)),
    KernelFault("one-past-fp32-scores", "the scores GEMM writes one element past the matrix, into the "
                "probabilities that the softmax overwrites later", UNFUSED_FP32, SM80, "unfused", "stray writes",
                store_after(unfused, "launch_scores", "scores", score_elements)),
    KernelFault("one-past-scores-into-padding", "the scores GEMM writes one element into the 256-byte alignment "
                "padding", UNFUSED_PADDED, SM80, "unfused", "stray writes",
                store_after(unfused, "launch_scores", "scores", score_elements)),
    KernelFault("recipe-one-element-short", "the recipe's interleaved view and allocation are one element short",
                TRT, SM80, "trt", "undersized", recipe_edit(lambda r: {
                    "interleaved_qkv_bytes": r.interleaved_qkv_bytes - 2,
                    "attention_workspace_bytes": r.attention_workspace_bytes - 2})),
    KernelFault("recipe-without-qkv-views", "the recipe has no Q, K, V views for a route that materializes them",
                FLASH, SM80, "flash", "unplaced buffers", recipe_edit(lambda r: {"qkv_layout": QkvLayout.NONE})),
    KernelFault("lse-off-alignment", "the recipe places the float32 LSE 2 bytes off its alignment", FLASH, SM80,
                "flash", "misaligned", recipe_edit(lambda r: {
                    "backend_workspace_offset_bytes": r.backend_workspace_offset_bytes + 2})),
    KernelFault("lse-over-v", "the recipe places the LSE over V, which the attention reads", FLASH, SM80, "flash",
                "overlapping buffers", recipe_edit(lambda r: {"backend_workspace_offset_bytes": r.v_offset_bytes})),
)


def check_fault(fault: KernelFault, monkeypatch: Any, suite: str) -> None:
    """Plant the fault, validate its shape, record whether the named failure was reported, and
    fail the test when it was not."""
    fault.plant(monkeypatch)
    report = validate.validate_shape(fault.geometry, fault.config, fault.backend)
    caught = fault.expected in report.failures
    record(suite, fault.name, caught)
    assert caught, f"{fault.name} ({fault.description}) fails only {report.failures}"
