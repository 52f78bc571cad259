"""Planted faults in MultiHeadAttention's kernels and recipes, each reported by the validator by the
failure it names (kill rate 100%, recorded with the other planted-fault suites).

Each fault patches the real code (monkeypatch, undone after the test) and validates one tiny shape
on one route; its clean twin (the same shape unpatched) passes, so each failure is the fault's.
"""

from __future__ import annotations

import importlib
from dataclasses import replace
from functools import partial
from typing import Any, Callable

import numpy as np
import pytest
from numba import cuda

from attnws.kernels import strided_copy, validate_shape
from attnws.kernels.backends import strided, trt, unfused
from attnws.kernels.launching import Launch
from attnws.kernels.mha import layouts, routes
from attnws.spec import Geometry, Op, RuntimeConfig
from attnws.spec.mha.problem import MaskType

from tests.quality.kernel_faults import KernelFault as Fault, check_fault, store_zero
from tests.quality.kill_rate import RESULTS

SUITE = "mha kernels"
SM75 = RuntimeConfig.make(sm=75)
SM80 = RuntimeConfig.make(sm=80)
mha_recipe = importlib.import_module("attnws.spec.mha.recipe")


def mha_geometry(dtype: int = 2, **dims: Any) -> Geometry:
    return Geometry(Op.MHA, dtype, **{"batch": 2, "seq": 3, "heads": 2, "head_size": 8, "kv_seq": 5, **dims})


UNFUSED = mha_geometry(mask=MaskType.KEY_PADDING)  # Q 96 elements, then K, V; context fits over Q
UNFUSED_PAST = mha_geometry(4, head_size=4, qkv_bias=True, with_past=True, with_present=True, past=2)
PRESENT_ONLY = mha_geometry(with_present=True, mask=MaskType.KEY_PADDING)
FLASH = mha_geometry()
MEA_ACCUMULATOR = mha_geometry(batch=1, seq=2, heads=1, kv_seq=3, v_head_size=136, qkv_bias=True)
CROSS = mha_geometry(qkv_bias=True)
RUNNER = mha_geometry(kv_seq=3, heads=1, head_size=32, qkv_bias=True)
Q_ELEMENTS = 2 * 2 * 3 * 8  # B * N * S * H of UNFUSED


def wrap_launch(module: Any, name: str, edit: Callable[[Any], Any]) -> Callable[[Any], None]:
    """Return a plant launching module.<name> with its plan edited by `edit`."""

    def plant(mp: Any) -> None:
        real = getattr(module, name)
        mp.setattr(module, name, lambda plan: real(edit(plan)))

    return plant


def context_past_q(mp: Any) -> None:
    """The P V GEMM writes its context after Q, into K and V, instead of over Q."""
    real = unfused.launch_context
    mp.setattr(unfused, "launch_context", lambda plan: real(replace(plan, context=plan.context[Q_ELEMENTS:])))


def concat_without_past(mp: Any) -> None:
    """The concatenation copies only the new K and V rows into present, not the past ones."""
    real = layouts.RouteLayouts.concat_past

    def concat(self: Any) -> Launch:
        launch = real(self)
        plans = launch.enqueue.args[0]
        return Launch(launch.stage, partial(strided_copy.launch_all, plans[1::2]))

    mp.setattr(layouts.RouteLayouts, "concat_past", concat)


def stage_then_poke(stage: str, array_name: str, index: Callable[[Any], int]) -> Callable[[Any], None]:
    """Return a plant making `stage` also store 0 at ws.arrays[array_name][index(stages)]."""

    def plant(mp: Any) -> None:
        real = routes.launch_sequence

        def sequence(p: Any, recipe: Any, fp: Any, inputs: Any, ws: Any) -> tuple[Launch, ...]:
            launches = list(real(p, recipe, fp, inputs, ws))
            for i, launch in enumerate(launches):
                if launch.stage == stage:
                    def enqueue(launch: Launch = launch) -> None:
                        launch.enqueue()
                        store_zero[1, 1](ws.arrays[array_name], index(p))

                    launches[i] = Launch(stage, enqueue)
            return tuple(launches)

        mp.setattr(routes, "launch_sequence", sequence)

    return plant


def offsets_one_short(mp: Any) -> None:
    real = trt.launch_offsets
    mp.setattr(trt, "launch_offsets", lambda plans: real([replace(p, batch=p.batch - 1) for p in plans]))


def kv_offsets_over_q_offsets(mp: Any) -> None:
    real = trt.launch_offsets
    mp.setattr(trt, "launch_offsets", lambda plans: real([replace(p, offsets=plans[0].offsets) for p in plans]))


def recipe_scores_by_l(mp: Any) -> None:
    mp.setattr(mha_recipe, "scores_used_bytes", lambda d, p: d.mul(
        p.element_size, p.batch_size, p.num_heads, p.sequence_length, p.kv_sequence_length, what="scores by L"))


def recipe_without_offsets(mp: Any) -> None:
    real_bytes, real_views = mha_recipe.scratch_bytes, mha_recipe._scratch_views
    mp.setattr(mha_recipe, "scratch_bytes", lambda d, p, b: 0 if b.value == "trt" else real_bytes(d, p, b))
    mp.setattr(mha_recipe, "_scratch_views", lambda d, p, b, o: [] if b.value == "trt" else real_views(d, p, b, o))


def causal_ignored(mp: Any) -> None:
    real = strided.launch
    mp.setattr(strided, "launch", lambda plan: real(replace(plan, causal=False)))


FAULTS = (
    Fault("context-past-q", "the unfused context is written after Q, into K and V", UNFUSED, SM80, "unfused",
          "stray writes", context_past_q),
    Fault("scores-sized-with-l", "the scores GEMM covers L = 5 keys instead of T = P + L = 7", UNFUSED_PAST, SM80,
          "unfused", "incomplete writes",
          wrap_launch(unfused, "launch_scores", lambda plan: replace(plan, kv_seq=plan.keys - 2))),
    Fault("context-sized-with-l", "the P V GEMM reads L keys of present_value instead of T", UNFUSED_PAST, SM80,
          "unfused", "reference", wrap_launch(unfused, "launch_context", lambda plan: replace(plan, kv_seq=5))),
    Fault("concat-without-past", "present gets the new K and V rows but not the past ones", UNFUSED_PAST, SM80,
          "unfused", "incomplete writes", concat_without_past),
    Fault("present-key-one-past", "the K copy into present_key writes one element past the tensor", PRESENT_ONLY,
          SM80, "unfused", "stray writes",
          stage_then_poke("materialize_k", "present_key", lambda p: 2 * 2 * 5 * 8)),
    Fault("v-into-scores", "the V copy writes one element past V, into the scores region", UNFUSED, SM80, "unfused",
          "stray writes", stage_then_poke("materialize_v", "v", lambda p: 2 * 2 * 5 * 8)),
    Fault("flash-lse-private", "Flash keeps its LSE in memory of its own", FLASH, SM80, "flash", "incomplete writes",
          wrap_launch(strided, "launch", lambda plan: replace(
              plan, lse=cuda.device_array(plan.lse.shape, np.float32)))),
    Fault("mea-accumulator-ignored", "MEA accumulates in registers, ignoring its float32 workspace",
          MEA_ACCUMULATOR, SM75, "mea", "incomplete writes",
          wrap_launch(strided, "launch", lambda plan: replace(plan, accumulator=None))),
    Fault("causal-ignored", "the fused kernel attends every key of a unidirectional node",
          mha_geometry(unidirectional=True, with_past=True, with_present=True, past=2), SM80, "flash", "reference",
          causal_ignored),
    Fault("runner-offsets-one-short", "the runner's offsets kernel writes B of the B + 1 offsets", RUNNER, SM75,
          "trt", "incomplete writes", offsets_one_short),
    Fault("cross-kv-offsets-over-q", "the cross kv offsets are written over the q offsets", CROSS, SM75,
          "trt_cross", "incomplete writes", kv_offsets_over_q_offsets),
    Fault("recipe-scores-by-l", "the recipe sizes the S x T regions with L", UNFUSED_PAST, SM80, "unfused",
          "overlapping buffers", recipe_scores_by_l),
    Fault("recipe-without-offsets", "the runner's recipe has no sequence offsets region", RUNNER, SM75, "trt",
          "unplaced buffers", recipe_without_offsets),
)


@pytest.mark.filterwarnings("ignore:invalid value encountered")  # kernels reading the NaN sentinel
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_mha_fault_is_caught(fault, monkeypatch):
    check_fault(fault, monkeypatch, SUITE)


TWINS = {repr((f.geometry, f.config, f.backend)): (f.geometry, f.config, f.backend) for f in FAULTS}


@pytest.mark.parametrize("geometry, config, backend", TWINS.values())
def test_clean_twins_pass(geometry, config, backend):
    report = validate_shape(geometry, config, backend)
    assert report.passed, report.as_dict()


def test_mha_kill_rate_is_100_percent():
    missing = [f.name for f in FAULTS if f.name not in RESULTS.get(SUITE, {})]
    if missing:
        pytest.skip(f"run with the whole module to report the kill rate (not run: {missing})")
    assert all(RESULTS[SUITE][f.name] for f in FAULTS)
