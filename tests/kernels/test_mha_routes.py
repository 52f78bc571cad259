"""MultiHeadAttention on the validator: every route x format x cache x mask on tiny shapes passes
every check (footprint placement, stage-by-stage writes, allocations, reference), and the hazards
the footprint finds in ORT's own recipes are reported before anything is launched.

Shapes are tiny (B = 2, S = 3, L = 5, N = 2, H = 8 unless stated) so the suite runs in seconds on
the CUDA simulator; S != L and Hv != H wherever the route allows.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.kernels import strided_copy, validate_shape
from attnws.spec import Backend, Geometry, Op, RuntimeConfig, recipe, runtime_problem
from attnws.spec.footprint import footprint
from attnws.spec.mha.problem import MaskType, MhaFormat

SM75 = RuntimeConfig.make(sm=75)
SM80 = RuntimeConfig.make(sm=80)
CUDNN = RuntimeConfig.make(sm=80, env={"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"})
F, M = MhaFormat, MaskType
PAST = {"with_past": True, "with_present": True, "past": 2}


def mha(dtype: int = 2, **dims) -> Geometry:
    return Geometry(Op.MHA, dtype, **{"batch": 2, "seq": 3, "heads": 2, "head_size": 8, "kv_seq": 5, **dims})


# id: (geometry, config, expected backend, expected no-QKV-workspace)
ROUTES = {
    "unfused-2d-mask-hv16": (mha(v_head_size=16, mask=M.KEY_PADDING), SM80, "unfused", False),
    "unfused-fp32-3d-mask-attn-bias": (mha(4, head_size=4, mask=M.ATTENTION, attn_bias=True), SM80, "unfused", False),
    "unfused-fp32-past-bias-causal": (mha(4, head_size=4, qkv_bias=True, unidirectional=True, **PAST), SM80,
                                      "unfused", False),
    "unfused-present-only": (mha(with_present=True, mask=M.KEY_PADDING), SM80, "unfused", False),
    "unfused-cross-bias": (mha(mha_format=F.CROSS, qkv_bias=True, mask=M.KEY_PADDING), SM80, "unfused", False),
    "unfused-packed-kv": (mha(mha_format=F.PACKED_KV, mask=M.KEY_PADDING), SM80, "unfused", False),
    "unfused-fp32-packed-qkv-bias": (mha(4, kv_seq=None, mha_format=F.PACKED_QKV, qkv_bias=True), SM80, "unfused",
                                     False),
    "unfused-fp32-key-lengths": (mha(4, mask=M.KEY_SEQ_LEN, attn_bias=True, attn_bias_broadcast_batch=True), SM80,
                                 "unfused", False),
    "unfused-fp32-key-starts": (mha(4, mask=M.KEY_SEQ_LEN_START), SM80, "unfused", False),
    "flash-direct": (mha(), SM80, "flash", True),
    "flash-bias": (mha(qkv_bias=True), SM80, "flash", False),
    "flash-past-causal": (mha(unidirectional=True, **PAST), SM80, "flash", False),
    "flash-present-only": (mha(with_present=True), SM80, "flash", True),
    "flash-packed-kv": (mha(mha_format=F.PACKED_KV), SM80, "flash", False),
    "flash-packed-qkv": (mha(kv_seq=None, mha_format=F.PACKED_QKV), SM80, "flash", False),
    "mea-attn-bias-broadcast-heads": (mha(seq=8, attn_bias=True, attn_bias_broadcast_heads=True), SM80, "mea",
                                      True),
    "mea-key-starts": (mha(mask=M.KEY_SEQ_LEN_START), SM80, "mea", True),
    "mea-accumulator-hv136": (mha(batch=1, seq=2, heads=1, kv_seq=3, v_head_size=136, qkv_bias=True), SM75, "mea",
                              False),
    "mea-past-bias": (mha(qkv_bias=True, **PAST), SM75, "mea", False),
    "mea-cross-bias": (mha(mha_format=F.CROSS, qkv_bias=True), SM75, "mea", False),
    "cudnn-attn-bias": (mha(attn_bias=True), CUDNN, "cudnn", True),
    "cudnn-key-lengths-hv16": (mha(mask=M.KEY_SEQ_LEN, v_head_size=16), CUDNN, "cudnn", True),
    "trt-cross-bias": (mha(qkv_bias=True), SM75, "trt_cross", False),
    "trt-cross-packed-kv": (mha(mha_format=F.PACKED_KV), SM75, "trt_cross", True),
    "trt-runner-bias-key-lengths": (mha(kv_seq=3, heads=1, head_size=32, qkv_bias=True, mask=M.KEY_SEQ_LEN), SM75,
                                    "trt", False),
    "trt-runner-packed-qkv": (mha(kv_seq=None, heads=1, head_size=32, mha_format=F.PACKED_QKV), SM75, "trt", True),
}


@pytest.mark.parametrize("geometry, config, backend, direct", ROUTES.values(), ids=ROUTES.keys())
def test_mha_route_passes_every_check(geometry, config, backend, direct):
    report = validate_shape(geometry, config)
    assert report.backend == backend
    assert report.passed, report.as_dict()
    problem = runtime_problem(geometry)
    assert recipe(problem, Backend(backend)).no_qkv_workspace == direct
    assert report.allocated_bytes == report.recipe_bytes
    assert report.stages == tuple(s.name for s in footprint(problem, Backend(backend)).stages)
    assert report.reference_tokens == geometry.batch * geometry.seq


def test_every_buffer_is_touched_as_stated():
    """Past, present, bias, causal, fp32: every byte of every buffer is written, the outputs included."""
    report = validate_shape(ROUTES["unfused-fp32-past-bias-causal"][0], SM80)
    touched = {b.name: (b.touched_bytes, b.footprint_bytes) for b in report.buffers}
    assert set(touched) == {"q", "k", "v", "present_key", "present_value", "scores", "probabilities", "context",
                            "output"}
    assert all(t == f > 0 for t, f in touched.values()), touched
    purposes = [r.purpose for r in report.allocations if not r.purpose.startswith("input:")]
    assert purposes == ["output", "present_key", "present_value", "attention"]


def test_the_trt_runner_reads_the_offsets_it_wrote():
    """With a [B] mask the runner's 2B + 1 offsets split each sequence in two: the stage writes
    20 bytes of the 256 ORT reserves."""
    report = validate_shape(*ROUTES["trt-runner-bias-key-lengths"][:2])
    offsets = next(b for b in report.buffers if b.name == "sequence_offsets")
    assert (offsets.footprint_bytes, offsets.touched_bytes, offsets.reserved_bytes) == (20, 20, 256)


def test_forced_backend_on_mha():
    geometry = mha(qkv_bias=True)
    for backend in ("unfused", "mea", "flash", "trt_cross"):
        report = validate_shape(geometry, SM80, backend)
        assert report.backend == backend and report.passed, report.as_dict()


@pytest.mark.filterwarnings("ignore:invalid value encountered")
@pytest.mark.parametrize("route, also", [("flash-bias", ("lse",)), ("unfused-2d-mask-hv16", ()),
                                         ("mea-past-bias", ("present cache",))])
def test_skipped_copies_read_sentinel_nan(monkeypatch, route, also):
    """No Q/K/V copy (and for unfused no transpose) runs: the checks see the unwritten buffers and
    the attention reads the NaN sentinel, into Flash's LSE too; the present outputs concatenated
    from the unwritten copies hold it."""
    monkeypatch.setattr(strided_copy, "launch", lambda plan: None)
    monkeypatch.setattr(strided_copy, "launch_all", lambda plans: None)
    report = validate_shape(*ROUTES[route][:2])
    assert report.failures == ("incomplete writes", "reference", *also) and report.max_error != report.max_error


# Hazards in ORT's own recipes that the footprint finds (the kernel_contract theorem's
# counterexamples): each is reported, and nothing unsafe is launched.
def test_unfused_context_over_q_reaching_v_is_reported():
    """S * (Hv - H) = 5 * 8 > L * H = 2 * 4: the context [B, N, S, Hv] written over Q runs into V
    while the P V GEMM reads it. The run goes ahead (the buffers fit the workspace); what it
    computes from a V it overwrites may be wrong, and which rows depends on the thread order."""
    report = validate_shape(mha(batch=1, seq=5, heads=1, head_size=4, v_head_size=12, kv_seq=2,
                                mask=M.KEY_PADDING), SM80)
    assert report.backend == "unfused" and report.overlapping == (("v", "context"),)
    assert "overlapping buffers" in report.failures
    assert set(report.failures) <= {"overlapping buffers", "reference", "incomplete writes"}


def test_unfused_context_running_past_the_workspace_is_not_launched():
    """B=1 S=2 L=1 N=2 H=8 Hv=153: the context is 1,224 bytes, the whole workspace 1,220."""
    report = validate_shape(mha(batch=1, seq=2, kv_seq=1, v_head_size=153, mask=M.KEY_PADDING), SM80)
    assert report.undersized == ("context",) and report.stages == ()
    assert report.overlapping == (("v", "context"), ("probabilities", "context"))


def test_odd_head_size_misaligns_the_v_copy():
    report = validate_shape(mha(batch=1, seq=1, kv_seq=2, head_size=9, v_head_size=8, mask=M.KEY_PADDING), SM80)
    assert report.failures == ("misaligned",) and report.misaligned == ("v",) and report.stages == ()


def test_trt_cross_offsets_after_an_odd_qkv_region_are_misaligned():
    report = validate_shape(mha(batch=1, seq=1, kv_seq=1, heads=1, head_size=1), SM75)
    assert report.backend == "trt_cross" and report.misaligned == ("q_sequence_offsets", "kv_sequence_offsets")


def test_present_values_wider_than_their_tensor_are_reported():
    """present_value is allocated [B, N, T, H]; with past the concatenation writes [B, N, T, Hv]."""
    report = validate_shape(mha(batch=1, seq=1, kv_seq=1, v_head_size=16, **{**PAST, "past": 1}), SM75)
    assert report.backend == "mea" and report.undersized == ("present_value",) and report.stages == ()


def test_an_equal_head_twin_of_each_hazard_passes():
    """The same shapes with Hv = H (and an even H) pass: each failure above is the hazard's."""
    for geometry, config in ((mha(batch=1, seq=5, heads=1, head_size=4, kv_seq=2, mask=M.KEY_PADDING), SM80),
                             (mha(batch=1, seq=2, kv_seq=1, mask=M.KEY_PADDING), SM80),
                             (mha(batch=1, seq=1, kv_seq=2, head_size=8, mask=M.KEY_PADDING), SM80),
                             (mha(batch=1, seq=1, kv_seq=1, **{**PAST, "past": 1}), SM75)):
        report = validate_shape(geometry, config)
        assert report.passed, report.as_dict()


def test_mha_reference_sampling_caps_the_rows():
    report = validate_shape(replace(ROUTES["flash-direct"][0], batch=3), SM80, reference_tokens=4)
    assert report.reference_tokens == 4 and report.passed
