"""GroupQueryAttention's Flash route on the simulator: the split-KV kernels at the split count the
spec's heuristic picks, on memory carved as the complete recipe says, measured against the
footprint by the one validator (`attnws.kernels.validate_shape`), after the preparation's stages,
output and LSE against the float64 reference.

Tiny shapes: H = 8 (block_n = 256 keys), so a key length just past 256 gives two key blocks, and a
device of 16 SMs (or 3) makes the heuristic split them. Each case checks every measured write
lies inside the footprint's buffers, each buffer inside its recipe region, the workspace measured
on the device equal to the recipe's total, and the output within tolerance.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.kernels import validate_shape
from attnws.kernels.backends import flash_split
from attnws.spec.domain import CONCRETE
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.gqa.recipe import complete
from attnws.spec.hints import Geometry
from attnws.spec.options import ENV_DISABLE_FLASH_DECODE, RuntimeConfig

from tests.kernels.gqa_shapes import allocated, gqa_geometry as gqa

SM16 = RuntimeConfig.make(sm=80, sm_count=16)
REGULAR = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_DISABLE_FLASH_DECODE: "1"})  # Flash without fast decode
SPLIT_T = 264  # two key blocks of 256


def spec_splits(g: Geometry, config: RuntimeConfig) -> tuple[int, int]:
    """Return (split count, workspace bytes) of the route the spec's cascade and recipe pick."""
    p = runtime_problem(g)
    run = complete(p.workspace_problem(CONCRETE), select(p, config).route)
    return run.backend.splits, run.total_workspace_bytes


FAST = ("Append_KV",)  # fast decode: the split kernel's own append, no sequence vectors
REGULAR_PREP = ("GetSequenceLengths", "UnpackRoPEAppend (K, V)")
CASES = {
    "decode-one-split": (gqa(1, 1, 4, 2, 8, 20), SM16, 1, True, FAST),
    "decode-two-splits-two-key-lengths": (gqa(2, 1, 4, 2, 8, SPLIT_T), SM16, 2, True, FAST),
    "prompt-after-past-two-splits": (gqa(1, 2, 4, 2, 8, SPLIT_T), REGULAR, 2, False, REGULAR_PREP),
    "first-prompt-one-split": (gqa(1, 8, 4, 2, 8, 8), SM16, 1, False, REGULAR_PREP),
    "local-window-two-splits": (gqa(1, 2, 4, 2, 8, SPLIT_T, window=12), REGULAR, 2, False,
                                REGULAR_PREP),
    "softcap-decode-two-splits": (gqa(1, 1, 4, 2, 8, SPLIT_T, softcap=2.0), SM16, 2, True, FAST),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_flash_route_runs_inside_its_footprint_and_matches_the_reference(case):
    g, config, splits, fast_decode, preparation = CASES[case]
    report = validate_shape(g, config)
    assert report.failures == ()
    assert (report.recipe["splits"], report.recipe_bytes) == spec_splits(g, config)
    assert report.recipe["splits"] == splits and report.recipe["fast_decode"] is fast_decode
    assert report.backend == "flash" and report.route.endswith(f"{splits} split{'s' if splits > 1 else ''}")
    assert report.stages == preparation + (("attention",) if splits == 1 else ("split_kv", "combine"))
    assert allocated(report) == {"output": 2 * g.batch * g.seq * g.heads * g.head_size,
                                 "attention": report.recipe_bytes}
    assert report.launches_not_run == ()
    assert report.max_error < report.tolerance / 4  # well inside, not at the edge
    assert report.lse.status == "passed" and report.lse.max_error < report.lse.tolerance / 4


def test_a_longer_key_that_splits_less_needs_less_workspace_and_both_are_contained():
    """#32453's shape pattern, scaled down: on 3 SMs, the first key length T whose successor gets
    fewer splits (a key block more makes the best split count ineligible); one cache of T + 1 rows."""
    config = RuntimeConfig.make(sm=80, sm_count=3)
    shapes = {t: gqa(1, 1, 2, 1, 8, t, past=t + 1) for t in range(1, 1025)}
    t = next(t for t in range(1, 1024) if spec_splits(shapes[t + 1], config)[0] < spec_splits(shapes[t], config)[0])
    short, long = validate_shape(shapes[t], config), validate_shape(shapes[t + 1], config)
    assert short.failures == () and long.failures == ()
    assert long.recipe["splits"] < short.recipe["splits"]
    assert long.allocated_bytes < short.allocated_bytes


def test_a_combine_that_skips_a_split_fails_the_output_and_the_lse(monkeypatch):
    """The LSE the combine writes is held against the float64 reference's, as the output is."""
    real = flash_split.launch_combine
    monkeypatch.setattr(flash_split, "launch_combine", lambda plan: real(replace(plan, splits=plan.splits - 1)))
    report = validate_shape(gqa(1, 1, 2, 1, 8, 600), SM16)
    assert report.failures == ("reference", "lse") and report.lse.max_error > report.lse.tolerance
    assert report.lse.failures[0].startswith("LSE error ")


def test_a_head_size_whose_tile_and_row_strides_differ_is_refused_before_launch():
    """H = 160: kHeadDim 192 against d_rounded 160, so the combine reads past the output
    accumulator's region, past the end of the workspace, once B * N * S > 1 (the footprint's
    finding 2): nothing runs."""
    report = validate_shape(gqa(1, 1, 2, 1, 160, 100), SM16)
    assert report.recipe["splits"] > 1 and report.stages == () and report.allocations == ()
    assert report.failures == ("undersized", "outside regions")
    assert report.undersized == report.outside_regions.failures == ("output_accumulator",)


@pytest.mark.parametrize("g, config, unsupported", [
    (gqa(1, 1, 4, 2, 8, 20, bf16=True), SM16, "is_bf16=True"),
], ids=["bf16"])
def test_a_shape_outside_the_kernels_is_refused(g, config, unsupported):
    report = validate_shape(g, config)
    assert report.status == "refused" and report.unmodelled and unsupported in report.refused
