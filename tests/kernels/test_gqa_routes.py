"""GroupQueryAttention's XQA, MEA and unfused routes, and the preparation on Flash (rotary and packed QKV
through the Q scratch, a windowed cache's staging and compaction), on the simulator, through the
one validator (`attnws.kernels.validate_shape`): the route the spec's cascade picks, its
preparation's stages then its backend's, every measured write inside the footprint's buffers and
every buffer written whole (less what its writer legitimately skips), each inside its region's
room, the workspace measured on the device equal to the recipe's total, the present cache kept and
appended, the output within tolerance of the float64 reference.

Tiny shapes: N = 4 query heads over Nk = 2 KV heads, H = 8 (16 with rotary, 136 for MEA's float32
accumulator). MEA is forced with XQA and Flash off (ORT_ENABLE_XQA=0, ORT_DISABLE_FLASH_ATTENTION=1),
unfused with sdpa_kernel = 16 (MATH only) and XQA off.
"""

from __future__ import annotations

import pytest

from attnws.kernels import validate_shape
from attnws.kernels.placement import covered_bytes
from attnws.spec.domain import CONCRETE
from attnws.spec.gqa.dispatch import select
from attnws.spec.gqa.inputs import runtime_problem
from attnws.spec.gqa.problem import GqaFormat
from attnws.spec.gqa.recipe import complete
from attnws.spec.options import (ENV_DISABLE_FLASH, ENV_DISABLE_FLASH_DECODE, ENV_ENABLE_XQA, SDPA_MATH,
                                 RuntimeConfig)

from tests.kernels.gqa_shapes import allocated, gqa_geometry as gqa, touched

MEA = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_ENABLE_XQA: "0", ENV_DISABLE_FLASH: "1"})
UNFUSED = RuntimeConfig.make(sm=80, sm_count=16, sdpa_kernel=SDPA_MATH, env={ENV_ENABLE_XQA: "0"})
FLASH = RuntimeConfig.make(sm=80, sm_count=16)
REGULAR = RuntimeConfig.make(sm=80, sm_count=16, env={ENV_DISABLE_FLASH_DECODE: "1"})  # Flash without fast decode
WINDOWED = dict(window=4, sliding_window_cache=True)  # C = W = 4 rows
PACKED_QKV = GqaFormat.PACKED_QKV

LENGTHS = ("GetSequenceLengths",)
APPEND = ("UnpackRoPEAppend (K, V)",)
Q_SCRATCH = ("UnpackRoPEAppend (Q)",)
STAGING = ("CopyKvCacheRows and UnpackRoPEAppend (K, V)",)
COMPACTION = ("CompactKvCacheRows",)
MEA_STAGES = ("Ungroup (K)", "Ungroup (V)", "cutlass fmha (accumulator)")
XQA = RuntimeConfig.make(sm=80, sm_count=8)  # XQA takes decode: 8 SMs give B * Nk sequences several subsequences
XQA_STAGES = ("xqa (memset)", "kernel_mha multi-block epilogue")
UNFUSED_STAGES = ("Transpose_BSNH_to_BNSH", "QK GEMM", "UnfusedSoftmaxKernel", "AV GEMM", "Transpose_BNSH_to_BSNH")

# name: (geometry, configuration, route, stages)
CASES = {
    "xqa-decode-three-subsequences": (gqa(1, 1, 8, 2, 64, 650, past=700), XQA, "xqa", LENGTHS + APPEND + XQA_STAGES),
    "xqa-rotary-two-batch-entries": (gqa(2, 1, 4, 2, 64, 300, past=300, rotary=True), XQA, "xqa",
                                     LENGTHS + Q_SCRATCH + APPEND + XQA_STAGES),
    "xqa-window-one-subsequence": (gqa(1, 1, 4, 2, 64, 300, past=300, window=100),
                                   RuntimeConfig.make(sm=80, sm_count=2), "xqa", LENGTHS + APPEND + XQA_STAGES),
    "mea-causal-first-prompt": (gqa(1, 4, 4, 2, 8, 4, past=8), MEA, "mea", LENGTHS + APPEND + MEA_STAGES),
    "mea-decode-two-key-lengths": (gqa(2, 1, 4, 2, 8, 10, past=12), MEA, "mea", LENGTHS + APPEND + MEA_STAGES),
    "mea-window-prompt-after-past": (gqa(1, 3, 4, 2, 8, 10, past=12, window=3), MEA, "mea",
                                     LENGTHS + APPEND + MEA_STAGES),
    "mea-accumulator-h136": (gqa(1, 2, 4, 2, 136, 2, past=4), MEA, "mea", LENGTHS + APPEND + MEA_STAGES),
    "mea-rotary-packed-prompt": (gqa(1, 2, 4, 2, 16, 9, past=12, rotary=True, gqa_format=PACKED_QKV), MEA, "mea",
                                 LENGTHS + Q_SCRATCH + APPEND + MEA_STAGES),
    "unfused-window-softcap-prompt": (gqa(1, 3, 4, 2, 8, 10, past=12, window=3, softcap=2.0), UNFUSED,
                                      "unfused", LENGTHS + APPEND + UNFUSED_STAGES),
    "unfused-window-softcap-decode": (gqa(2, 1, 4, 2, 8, 10, past=12, window=3, softcap=2.0), UNFUSED,
                                      "unfused", LENGTHS + APPEND + UNFUSED_STAGES),
    "flash-rotary-first-prompt": (gqa(1, 3, 4, 2, 16, 3, past=12, rotary=True), FLASH, "flash",
                                  LENGTHS + Q_SCRATCH + APPEND + ("attention",)),
    "flash-rotary-decode": (gqa(2, 1, 4, 2, 16, 9, past=12, rotary=True), REGULAR, "flash",
                            LENGTHS + Q_SCRATCH + APPEND + ("attention",)),
    "flash-packed-prompt": (gqa(1, 2, 4, 2, 8, 9, past=12, gqa_format=PACKED_QKV), REGULAR, "flash",
                            LENGTHS + Q_SCRATCH + APPEND + ("attention",)),
    "windowed-prompt-full-cache": (gqa(1, 3, 4, 2, 8, 9, past=4, **WINDOWED), FLASH, "flash",
                                   LENGTHS + STAGING + ("attention",)),
    "windowed-prompt-filling-cache": (gqa(1, 3, 4, 2, 8, 5, past=4, **WINDOWED), FLASH, "flash",
                                      LENGTHS + STAGING + ("attention",)),
    "windowed-decode-compacts": (gqa(2, 1, 4, 2, 8, 6, past=4, **WINDOWED), FLASH, "flash",
                                 LENGTHS + COMPACTION + APPEND + ("attention",)),
    "windowed-prompt-unfused": (gqa(1, 3, 4, 2, 8, 9, past=4, **WINDOWED), UNFUSED, "unfused",
                                LENGTHS + STAGING + UNFUSED_STAGES),
}


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_route_runs_inside_its_footprint_and_matches_the_reference(case):
    g, config, route, stages = CASES[case]
    p = runtime_problem(g)
    assert select(p, config).route.backend.value == route
    report = validate_shape(g, config)
    assert report.failures == () and report.status == "passed"
    assert report.backend == route and report.stages == stages
    assert report.outside_regions.status == "passed"
    assert report.present_cache.status == ("not applicable" if p.sliding_window_cache else "passed")
    assert report.lse.status == ("passed" if route == "flash" else "not applicable")
    recipe = complete(p.workspace_problem(CONCRETE), select(p, config).route).total_workspace_bytes
    assert allocated(report) == {"output": 2 * p.batch_size * p.sequence_length * p.num_heads * p.head_size,
                                 "attention": recipe}
    assert report.max_error < report.tolerance / 4  # well inside, not at the edge


ROW = 8 * 2  # bytes of one cache row at H = 8


@pytest.mark.parametrize("case, region, rows", [
    # T = 9, S = 3: six earlier tokens, the C = 4 last held; seed rows 0..3, append rows 4..6 of C + S = 7.
    ("windowed-prompt-full-cache", "staged_key", 7),
    # T = 5, S = 3: two earlier tokens; seed rows 0..3, append rows 2..4: rows 5 and 6 stay unwritten.
    ("windowed-prompt-filling-cache", "staged_value", 5),
    # Batch entry 0: five earlier tokens in a full cache of 4, one evicted, 3 rows kept in each half;
    # entry 1 (key length drawn below 5) evicts nothing.
    ("windowed-decode-compacts", "compaction", 2 * 3),
])
def test_windowed_cache_writes_the_rows_orts_kernels_write(case, region, rows):
    g, config, _, _ = CASES[case]
    report = validate_shape(g, config)
    assert touched(report)[region] == rows * g.kv_heads * ROW
    assert report.launches_not_run == (() if g.seq == 1 else (
        "CopyKvCacheRows (write back): the staged rows into the present cache, no workspace bytes written",))


def test_mea_writes_its_accumulator_above_128_and_expands_every_cache_row():
    g, config, _, _ = CASES["mea-accumulator-h136"]
    written = touched(validate_shape(g, config))
    assert written["output_accumulator"] == 4 * g.batch * g.seq * g.heads * g.head_size
    assert written["expanded_key"] == written["expanded_value"] == 2 * g.heads * 4 * g.head_size  # all C = 4 rows


@pytest.mark.parametrize("g, config, unsupported", [
    (gqa(1, 4, 4, 2, 8, 4), RuntimeConfig.make(sm=90, sm_count=16), "route=cudnn"),
    (gqa(1, 1, 4, 2, 16, 9, past=12, rotary=True), FLASH, "do_rotary=True on fast decode"),
    (gqa(1, 1, 4, 2, 8, 9, past=12, gqa_format=PACKED_QKV), FLASH, "is_packed_qkv=True on fast decode"),
    (gqa(1, 3, 4, 2, 8, 10, past=12, softcap=2.0), MEA, "softcap=2 on MEA"),
], ids=["cudnn-route", "rotary-fast-decode", "packed-fast-decode", "softcap-mea"])
def test_a_route_or_feature_without_kernels_here_is_refused(g, config, unsupported):
    report = validate_shape(g, config)
    assert report.status == "refused" and report.unmodelled and not report.failures
    assert report.refused.startswith("no kernels here: ") and unsupported in report.refused
    assert report.stages == () and report.allocations == ()


def test_k_is_rotated_into_the_cache_so_the_q_scratch_holds_q_only():
    """ORT 1.31.1 appends the rotated K straight into the present cache: MEA's recipe reserves Q + K
    in the scratch (over-reserved), its kernels write Q alone (the footprint's one scratch touch)."""
    g, config, _, _ = CASES["mea-rotary-packed-prompt"]
    p = runtime_problem(g)
    written = touched(validate_shape(g, config))
    run = complete(p.workspace_problem(CONCRETE), select(p, config).route)
    q_bytes = 2 * p.batch_size * p.sequence_length * p.num_heads * p.head_size
    assert written["qkv_preprocess"] == q_bytes < run.preparation.region("qkv_preprocess").nbytes


def test_what_the_recipe_reserves_beyond_the_footprint_is_reported():
    """The union of the footprint's spans, and the rest of the workspace reported as spare (not a
    failure: ORT documents no slack for GroupQueryAttention): for XQA with three subsequences, the
    recipe's total less the semaphores, the row records and the partials the launch carves
    (`backends.xqa.scratch_layout`)."""
    from attnws.kernels.backends.xqa import scratch_layout

    assert covered_bytes([(0, 4), (2, 6), (10, 12), (11, 11)]) == 8 and covered_bytes([]) == 0
    g, config, _, _ = CASES["xqa-decode-three-subsequences"]
    report = validate_shape(g, config)
    layout = scratch_layout(g.batch * g.kv_heads, 3, g.heads // g.kv_heads, g.head_size)
    used = layout.semaphores + (layout.records_end - layout.row_max) + (layout.end - layout.partials)
    vectors = 3 * 4 * g.batch  # GetSequenceLengths' three int32 [B] vectors
    assert report.failures == () and report.spare_bytes == report.recipe_bytes - used - vectors > 0
    assert report.slack.status == "not applicable" and report.oversized == ()


def simulator_estimate(g, config) -> float:
    """Return the budget's simulator seconds for the route ORT picks (`attnws.kernels.budget`)."""
    from attnws.kernels.budget import run_cost
    from attnws.kernels.placement import place
    from attnws.spec.footprint import footprint
    from attnws.spec.recipe import recipe

    p = runtime_problem(g)
    backend = select(p, config).route.backend
    fp = footprint(p, backend, config=config)
    return run_cost(p, fp, place(p, fp, recipe(p, backend, config=config)), simulator=True).simulator_seconds


@pytest.mark.parametrize("config", [XQA, FLASH, MEA, UNFUSED], ids=["xqa", "flash", "mea", "unfused"])
def test_the_budget_grows_with_the_keys_and_refuses_a_models_decode_step(config):
    short, long = (simulator_estimate(gqa(1, 1, 8, 2, 64, t), config) for t in (256, 2048))
    assert 4 * short < long
    llama = gqa(4, 1, 32, 8, 128, 8192)  # Llama 3 8B's decode step at T = 8192: hours on the simulator
    assert simulator_estimate(llama, config) > 600
