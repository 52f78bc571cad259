"""MultiHeadAttention's kernel footprint: hand-derived from ONNX Runtime's kernel sources,
independent of the recipes (`attnws/spec/mha/footprint.py`).

Bytes per buffer, worked out by hand (B = 2, S = 3, L = 5, N = 2 unless stated; e = 2 for fp16):
Q e*B*N*S*H, K e*B*N*L*H, V e*B*N*L*Hv; unfused scores and probabilities e*B*N*S*T each, the
context e*B*N*S*Hv over Q; present e*B*N*T*H allocated by ORT, e*B*N*T*Hv written for the values;
TRT offsets 4 * (B + 1) (2B + 1 with a mask) in AlignSize(4 * (2B + 1)) reserved bytes.
"""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from attnws.solver.contract import kernel_conditions
from attnws.spec import Geometry, Op, runtime_problem
from attnws.spec.domain import CONCRETE
from attnws.spec.footprint import footprint, may_launch, reads_inputs_directly
from attnws.spec.statement import ATTENTION, OUTPUT, footprint_bytes, slack_bytes
from attnws.spec.mha.problem import MaskType, MhaFormat
from attnws.spec.problem import Backend
from attnws.spec.recipe import recipe
from attnws.spec.target import target_from_dict

MHA_FOOTPRINT = Path(__file__).resolve().parents[2] / "attnws" / "spec" / "mha" / "footprint.py"


def mha(batch=2, seq=3, kv_seq=5, heads=2, head_size=4, v_head_size=None, dtype=2, fmt="separate", **flags):
    """Return a MultiHeadAttention problem from its geometry (fp16, separate Q/K/V by default)."""
    return runtime_problem(Geometry(Op.MHA, dtype, batch, seq, heads, head_size, v_head_size, kv_seq=kv_seq,
                                    mha_format=MhaFormat(fmt), **flags))


PAST = {"with_past": True, "with_present": True, "past": 2}

# id: (problem, backend, {buffer: (allocation, placed_at, bytes, alignment)}, attention slack, reads inputs)
TABLE = {
    "unfused separate H=4 Hv=8": (mha(v_head_size=8), Backend.UNFUSED, {
        "q": (ATTENTION, "q", 96, 8), "k": (ATTENTION, "k", 160, 8), "v": (ATTENTION, "v", 320, 8),
        "scores": (ATTENTION, "scores", 120, 2), "probabilities": (ATTENTION, "probabilities", 120, 2),
        "context": (ATTENTION, "q", 192, 8), "output": (OUTPUT, "output", 192, 8)}, 2 * (256 - 120), False),
    "unfused cross H=4": (mha(fmt="cross"), Backend.UNFUSED, {
        "q": (ATTENTION, "q", 96, 8), "scores": (ATTENTION, "scores", 120, 2),
        "probabilities": (ATTENTION, "probabilities", 120, 2), "context": (ATTENTION, "q", 96, 8),
        "output": (OUTPUT, "output", 96, 8)}, (416 - 96) + 2 * (256 - 120), False),
    "unfused packed QKV fp32 H=4": (mha(kv_seq=None, fmt="packed_qkv", dtype=4), Backend.UNFUSED, {
        "q": (ATTENTION, "q", 192, 16), "k": (ATTENTION, "k", 192, 16), "v": (ATTENTION, "v", 192, 16),
        "scores": (ATTENTION, "scores", 144, 4), "probabilities": (ATTENTION, "probabilities", 144, 4),
        "context": (ATTENTION, "q", 192, 8), "output": (OUTPUT, "output", 192, 8)}, 2 * (256 - 144), False),
    "unfused past P=2 H=4": (mha(**PAST), Backend.UNFUSED, {
        "q": (ATTENTION, "q", 96, 8), "k": (ATTENTION, "k", 160, 8), "v": (ATTENTION, "v", 160, 8),
        "present_key": ("present_key", "present_key", 224, 2),
        "present_value": ("present_value", "present_value", 224, 2),
        "scores": (ATTENTION, "scores", 168, 2), "probabilities": (ATTENTION, "probabilities", 168, 2),
        "context": (ATTENTION, "q", 96, 8), "output": (OUTPUT, "output", 96, 8)}, 2 * (256 - 168), False),
    "trt cross separate bias H=8": (mha(head_size=8, qkv_bias=True), Backend.TRT_CROSS, {
        "q": (ATTENTION, "q", 192, 8), "kv_packed": (ATTENTION, "kv_packed", 640, 8),
        "q_sequence_offsets": (ATTENTION, "q_sequence_offsets", 12, 4),
        "kv_sequence_offsets": (ATTENTION, "kv_sequence_offsets", 12, 4),
        "output": (OUTPUT, "output", 192, 2)}, 2 * 256 - 24, False),
    "trt cross packed KV H=8": (mha(head_size=8, fmt="packed_kv"), Backend.TRT_CROSS, {
        "q_sequence_offsets": (ATTENTION, "q_sequence_offsets", 12, 4),
        "kv_sequence_offsets": (ATTENTION, "kv_sequence_offsets", 12, 4),
        "output": (OUTPUT, "output", 192, 2)}, 2 * 256 - 24, True),
    "trt runner separate [B] mask N=1 H=32": (mha(kv_seq=3, heads=1, head_size=32, mask=MaskType.KEY_SEQ_LEN),
                                              Backend.TRT, {
        "qkv_packed": (ATTENTION, "qkv_packed", 1152, 8), "sequence_offsets": (ATTENTION, "sequence_offsets", 20, 4),
        "output": (OUTPUT, "output", 384, 2)}, 256 - 20, False),
    "trt runner packed QKV N=1 H=32": (mha(kv_seq=None, heads=1, head_size=32, fmt="packed_qkv"), Backend.TRT, {
        "sequence_offsets": (ATTENTION, "sequence_offsets", 12, 4), "output": (OUTPUT, "output", 384, 2)},
        256 - 12, True),
    "mea past P=2 H=8": (mha(head_size=8, **PAST), Backend.MEA, {
        "k": (ATTENTION, "k", 320, 8), "v": (ATTENTION, "v", 320, 8),
        "present_key": ("present_key", "present_key", 448, 2),
        "present_value": ("present_value", "present_value", 448, 2),
        "output": (OUTPUT, "output", 192, 2)}, 832 - 640, False),
    "mea bias H=8 Hv=136 (accumulator)": (mha(head_size=8, v_head_size=136, qkv_bias=True), Backend.MEA, {
        "q": (ATTENTION, "q", 192, 8), "k": (ATTENTION, "k", 320, 8), "v": (ATTENTION, "v", 5440, 8),
        "mea_accumulator": (ATTENTION, "mea_accumulator", 6528, 4),
        "output": (OUTPUT, "output", 3264, 2)}, 0, False),
    "flash present only H=8": (mha(head_size=8, with_present=True), Backend.FLASH, {
        "present_key": ("present_key", "present_key", 320, 8),
        "present_value": ("present_value", "present_value", 320, 8),
        "softmax_lse": ("softmax_lse", "softmax_lse", 48, 4), "output": (OUTPUT, "output", 192, 2)}, 0, True),
    "flash separate no bias H=8": (mha(head_size=8), Backend.FLASH, {
        "softmax_lse": ("softmax_lse", "softmax_lse", 48, 4), "output": (OUTPUT, "output", 192, 2)}, 0, True),
    "cudnn packed KV H=8": (mha(head_size=8, fmt="packed_kv"), Backend.CUDNN, {
        "k": (ATTENTION, "k", 320, 8), "v": (ATTENTION, "v", 320, 8), "output": (OUTPUT, "output", 192, 2)},
        192, False),
}


@pytest.mark.parametrize("problem, backend, expected, slack, direct", TABLE.values(), ids=TABLE.keys())
def test_buffers_match_the_hand_table(problem, backend, expected, slack, direct):
    fp = footprint(problem, backend)
    got = {b.name: (b.allocation, b.placed_at, b.nbytes(), b.alignment) for b in fp.buffers}
    assert got == expected
    assert slack_bytes(CONCRETE, fp, ATTENTION) == slack
    assert fp.reads_inputs_directly is direct and reads_inputs_directly(problem, backend) is direct


@pytest.mark.parametrize("problem, backend, expected, slack, direct", TABLE.values(), ids=TABLE.keys())
def test_the_real_recipe_serves_the_hand_table(problem, backend, expected, slack, direct):
    """Every route of the table: the recipe places every buffer, none oversized, all kernel args fit."""
    target = target_from_dict({"name": "t", "op": "mha", "batch": 2, "seq": 3, "heads": 2, "head_size": 8,
                               "sm": 80, "env": {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}})
    r = recipe(problem, backend)
    failing = [name for name, cond in kernel_conditions(CONCRETE, problem, r, target) if not cond]
    assert failing == []


def test_the_allocation_bound_is_the_buffers_plus_the_slack():
    problem = mha(v_head_size=8)
    fp, r = footprint(problem, Backend.UNFUSED), recipe(problem, Backend.UNFUSED)
    assert footprint_bytes(CONCRETE, fp, ATTENTION) == max(96, 192) + 160 + 320 + 120 + 120
    assert r.attention_workspace_bytes == 96 + 160 + 320 + 2 * 256 == 1088 <= 912 + 272


def test_present_outputs_are_sized_as_ort_allocates_them():
    """present_key and present_value are both [B, N, T, H]; the values written are [B, N, T, Hv]."""
    fp = footprint(mha(head_size=8, v_head_size=16, **PAST), Backend.UNFUSED)
    assert dict(fp.outputs) == {"output": 2 * 2 * 3 * 2 * 16, "present_key": 448, "present_value": 448}
    assert fp.buffer("present_value").nbytes() == 2 * 2 * 2 * 7 * 16 == 896


def test_the_unfused_stages_follow_orts_launch_sequence():
    fp = footprint(mha(v_head_size=8), Backend.UNFUSED)
    assert [s.name for s in fp.stages] == ["materialize_q", "materialize_k", "materialize_v", "scores", "softmax",
                                           "context", "transpose"]
    assert fp.live_together("context", "v") and fp.live_together("context", "probabilities")
    assert not fp.live_together("context", "k") and not fp.live_together("context", "scores")


def test_with_past_the_workspace_k_and_v_die_at_the_concatenation():
    fp = footprint(mha(**PAST), Backend.UNFUSED)
    assert [s.name for s in fp.stages][:5] == ["materialize_q", "materialize_k", "materialize_v", "concat_past",
                                                "scores"]
    assert fp.stages[4].reads == ("q", "present_key") and fp.stages[6].reads == ("probabilities", "present_value")
    assert not fp.live_together("context", "v")


def test_without_past_present_takes_k_and_v_directly():
    fp = footprint(mha(with_present=True), Backend.UNFUSED)
    assert [(s.name, s.writes) for s in fp.stages[:3]] == [
        ("materialize_q", ("q",)), ("materialize_k", ("present_key",)), ("materialize_v", ("present_value",))]
    assert not any(b.name in ("k", "v") for b in fp.buffers)


def test_the_trt_offsets_count_doubles_with_a_mask():
    plain = footprint(mha(kv_seq=3, heads=1, head_size=32), Backend.TRT)
    masked = footprint(mha(kv_seq=3, heads=1, head_size=32, mask=MaskType.KEY_SEQ_LEN), Backend.TRT)
    assert plain.buffer("sequence_offsets").nbytes() == 12 and masked.buffer("sequence_offsets").nbytes() == 20


def test_the_mea_accumulator_needs_fp16_and_hv_over_128():
    for hv, dtype, present in ((128, 2, False), (136, 2, True), (136, 4, False)):
        fp = footprint(mha(head_size=8, v_head_size=hv, dtype=dtype, qkv_bias=True), Backend.MEA)
        assert any(b.name == "mea_accumulator" for b in fp.buffers) is present


def _failing(problem, backend, target_fields=None):
    target = target_from_dict({"name": "t", "op": "mha", "batch": 1, "seq": 1, "heads": 1, "head_size": 8,
                               "sm": 80, **(target_fields or {})})
    return [name for name, cond in kernel_conditions(CONCRETE, problem, recipe(problem, backend), target)
            if not cond]


@pytest.mark.parametrize("seq", [1, 2, 3, 5])
@pytest.mark.parametrize("kv_seq", [1, 2, 4])
@pytest.mark.parametrize("head_size, v_head_size", [(4, 4), (4, 8), (4, 12), (8, 24), (8, 40)])
def test_the_context_over_q_reaches_v_exactly_when_s_times_hv_minus_h_exceeds_l_times_h(seq, kv_seq, head_size,
                                                                                         v_head_size):
    """ORT writes the context [B, N, S, Hv] at Q while P V still reads V: they share bytes iff
    B*N*S*Hv > B*N*(S + L)*H, i.e. S * (Hv - H) > L * H. A real hazard, which the contract reports."""
    problem = mha(batch=1, seq=seq, kv_seq=kv_seq, heads=1, head_size=head_size, v_head_size=v_head_size)
    failing = _failing(problem, Backend.UNFUSED)
    assert ("v and context do not overlap while both hold data" in failing) is (
        seq * (v_head_size - head_size) > kv_seq * head_size)


def test_the_context_can_run_past_the_whole_workspace():
    """B=1 S=2 L=1 N=2 H=8 Hv=153 (the solver's minimal counterexample): the context is 1,224
    bytes, the workspace 708 + 2 * 256 = 1,220."""
    problem = mha(batch=1, seq=2, kv_seq=1, head_size=8, v_head_size=153)
    assert recipe(problem, Backend.UNFUSED).attention_workspace_bytes == 1220
    assert footprint(problem, Backend.UNFUSED).buffer("context").nbytes() == 1224
    assert "context lies inside the attention allocation" in _failing(problem, Backend.UNFUSED)


def test_an_odd_head_size_misaligns_the_v_producer():
    """V starts at e*B*N*(S + L)*H bytes; with H = 9 and Hv = 8 its 8-byte stores are misaligned."""
    problem = mha(batch=1, seq=1, kv_seq=2, heads=2, head_size=9, v_head_size=8)
    assert "v starts on a 8-byte boundary" in _failing(problem, Backend.UNFUSED)


def test_trt_cross_offsets_after_an_odd_qkv_region_are_misaligned():
    problem = mha(batch=1, seq=1, kv_seq=1, heads=1, head_size=1)
    failing = _failing(problem, Backend.TRT_CROSS)
    assert "q_sequence_offsets starts on a 4-byte boundary" in failing


def test_present_values_wider_than_the_tensor_are_reported():
    problem = mha(batch=1, seq=1, kv_seq=1, heads=2, head_size=64, v_head_size=72, **PAST)
    assert "present_value lies inside the present_value tensor ORT allocates" in _failing(problem, Backend.MEA)


@pytest.mark.parametrize("backend, sdpa, env, allowed", [
    (Backend.TRT_CROSS, 0, {}, True),
    (Backend.TRT_CROSS, 0, {"ORT_DISABLE_FUSED_CROSS_ATTENTION": "1"}, False),
    (Backend.TRT_CROSS, 64, {"ORT_DISABLE_FUSED_CROSS_ATTENTION": "1"}, True),
    (Backend.TRT_CROSS, 4, {}, False),
    (Backend.CUDNN, 0, {}, False),
    (Backend.CUDNN, 0, {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}, True),
    (Backend.CUDNN, 8, {}, True),
    (Backend.CUDNN, 1, {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}, False),
], ids=["cross default", "cross disabled", "cross bit 64", "cross not in mask", "cudnn off by default",
        "cudnn enabled by env", "cudnn bit 8", "cudnn not in mask"])
def test_may_launch_knows_the_mha_backends(backend, sdpa, env, allowed):
    assert may_launch(backend, Op.MHA, sdpa, env, {}) is allowed


def test_a_recipe_without_the_second_unfused_region_is_caught():
    problem = mha(v_head_size=8)
    r = recipe(problem, Backend.UNFUSED)
    dropped = replace(r, view_list=tuple(v for v in r.view_list if v.name != "probabilities"))
    target = target_from_dict({"name": "t", "op": "mha", "batch": 2, "seq": 3, "heads": 2, "head_size": 4})
    failing = [name for name, cond in kernel_conditions(CONCRETE, problem, dropped, target) if not cond]
    assert failing == ["the recipe has a view for the probabilities buffer"]


def test_the_mha_footprint_is_written_without_the_recipes():
    """The statement must not read what it is checked against: no recipe, layout or dispatch."""
    tree = ast.parse(MHA_FOOTPRINT.read_text())
    imported = {("." * node.level) + (node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    forbidden = {".recipe", "..recipe", "..layout", "..containment", "..aggregate", "..estimate", "..reachability",
                 "..dispatch", ".dispatch", ".reachability", "..options", "..backends", ".builder"}
    assert not imported & forbidden, imported
    assert all(not isinstance(node, ast.Import) for node in ast.walk(tree))
