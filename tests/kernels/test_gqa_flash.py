"""GroupQueryAttention's Flash route on the simulator: the split-KV kernels at the split count the
spec's heuristic picks, on memory carved as the complete recipe says, measured against the
footprint (`attnws.kernels.gqa.harness.validate_gqa`), after the preparation's stages, output and
LSE against the float64 reference.

Tiny shapes: H = 8 (block_n = 256 keys), so a key length just past 256 gives two key blocks, and a
device of 16 SMs (or 3) makes the heuristic split them. Each case checks every measured write
lies inside the footprint's buffers, each buffer inside its recipe region, the workspace measured
on the device equal to the recipe's total, and the output within tolerance.
"""

from __future__ import annotations

import pytest

from attnws.kernels.gqa.harness import validate_gqa
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import Unsupported
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.problem import GqaProblem
from attnws.spec.gqa.recipe import complete
from attnws.spec.options import ENV_DISABLE_FLASH_DECODE, RuntimeConfig

from tests.kernels.gqa_shapes import gqa

SM16 = RuntimeConfig.make(sm=80, sm_count=16)
REGULAR = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_DISABLE_FLASH_DECODE: "1"})  # Flash without fast decode
SPLIT_T = 264  # two key blocks of 256


def spec_splits(p: GqaProblem, config: RuntimeConfig) -> tuple[int, int]:
    """Return (split count, workspace bytes) of the route the spec's cascade and recipe pick."""
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
    p, config, splits, fast_decode, preparation = CASES[case]
    report = validate_gqa(p, config)
    assert report.failures() == ()
    assert (report.splits, report.workspace_bytes) == spec_splits(p, config)
    assert report.splits == splits and report.fast_decode is fast_decode and report.route == "flash"
    assert report.stages == preparation + (("attention",) if splits == 1 else ("split_kv", "combine"))
    assert dict(report.allocated) == {"output": 2 * p.batch_size * p.sequence_length * p.num_heads * p.head_size,
                                      "attention": report.workspace_bytes}
    assert report.not_run == ()
    assert report.max_error < report.tolerance / 4  # well inside, not at the edge


def test_a_longer_key_that_splits_less_needs_less_workspace_and_both_are_contained():
    """#32453's shape pattern, scaled down: on 3 SMs, the first key length T whose successor gets
    fewer splits (a key block more makes the best split count ineligible); one cache of T + 1 rows."""
    config = RuntimeConfig.make(sm=80, sm_count=3)
    shapes = {t: gqa(1, 1, 2, 1, 8, t, past=t + 1) for t in range(1, 1025)}
    t = next(t for t in range(1, 1024) if spec_splits(shapes[t + 1], config)[0] < spec_splits(shapes[t], config)[0])
    short, long = validate_gqa(shapes[t], config), validate_gqa(shapes[t + 1], config)
    assert short.failures() == () and long.failures() == ()
    assert long.splits < short.splits
    assert long.workspace_bytes < short.workspace_bytes


def test_a_head_size_whose_tile_and_row_strides_differ_is_refused_before_launch():
    """H = 160: kHeadDim 192 against d_rounded 160, so the combine reads past the output
    accumulator's region, past the end of the workspace, once B * N * S > 1 (the footprint's
    finding 2): nothing runs."""
    report = validate_gqa(gqa(1, 1, 2, 1, 160, 100), SM16)
    assert report.splits > 1 and not report.launched
    assert report.failures() == ("undersized: output_accumulator", "outside its region: output_accumulator")


@pytest.mark.parametrize("p, config, unsupported", [
    (gqa(1, 1, 4, 2, 8, 20, bf16=True), SM16, "is_bf16=True"),
], ids=["bf16"])
def test_a_shape_outside_the_kernels_is_refused(p, config, unsupported):
    with pytest.raises(Unsupported, match=unsupported):
        validate_gqa(p, config)
