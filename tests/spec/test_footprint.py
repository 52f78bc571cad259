"""The kernels' footprint: hand-derived from ONNX Runtime's kernel sources, independent of the recipes.

Bytes per buffer for B = 2, S = 4, N = 2, T = 6 (fact sheet §7's shape), fp16 unless stated:
Q/K/V rows are B*S = 8 (unfused, padded) or T = 6 (Flash / MEA / TRT); scores es*B*N*S*S;
the unfused context [B, N, S, Hv] sits over Q; the LSE is float32 [B, N, S] with N*(B*S - T)
rows never written; the MEA accumulator float32 [B, S, N, Hv] iff fp16 and Hv > 128.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from attnws.spec.domain import CONCRETE
from attnws.spec.footprint import footprint, may_launch, reads_inputs_directly
from attnws.spec.statement import ATTENTION, OUTPUT, PROJECTION, footprint_bytes, slack_bytes
from attnws.spec.problem import Backend, Op

from . import helpers

def pa(**kwargs):
    return helpers.pa(**{"tokens": 6, **kwargs})


def pmha(**kwargs):
    return helpers.pmha(**{"tokens": 6, **kwargs})


FOOTPRINT = Path(__file__).resolve().parents[2] / "attnws" / "spec" / "footprint.py"

# id: (problem, backend, {buffer: (placed_at, bytes, unwritten bytes)}, attention slack bytes)
TABLE = {
    "pa(H=4) unfused": (pa(), Backend.UNFUSED, {
        "projection": ("projection", 2 * 6 * 24, 0), "q": ("q", 2 * 8 * 2 * 4, 0), "k": ("k", 128, 0),
        "v": ("v", 128, 0), "scores": ("scores", 2 * 2 * 2 * 16, 0), "probabilities": ("probabilities", 128, 0),
        "context": ("q", 128, 0), "output": ("output", 2 * 6 * 2 * 4, 0)}, 2 * (256 - 128)),
    "pmha(H=4, Hv=12, fp32) unfused": (pmha(v_head_size=12, fmt="separate", dtype=4), Backend.UNFUSED, {
        "q": ("q", 4 * 8 * 2 * 4, 0), "k": ("k", 256, 0), "v": ("v", 4 * 8 * 2 * 12, 0),
        "scores": ("scores", 4 * 64, 0), "probabilities": ("probabilities", 256, 0),
        "context": ("q", 4 * 8 * 2 * 12, 0), "output": ("output", 4 * 6 * 2 * 12, 0)}, 0),
    "pmha(H=8, packed) flash": (pmha(head_size=8), Backend.FLASH, {
        "q": ("q", 2 * 6 * 2 * 8, 0), "k": ("k", 192, 0), "v": ("v", 192, 0),
        "softmax_lse": ("softmax_lse", 4 * 2 * 2 * 4, 4 * 2 * 2), "output": ("output", 192, 0)}, 2 * 2 * 2 * 24),
    "pmha(H=8, separate) flash": (pmha(head_size=8, fmt="separate"), Backend.FLASH, {
        "softmax_lse": ("softmax_lse", 64, 16), "output": ("output", 192, 0)}, 0),
    "pmha(H=8, Hv=136, separate, bias) mea": (pmha(head_size=8, v_head_size=136, fmt="separate", qkv_bias=True),
                                              Backend.MEA, {
        "q": ("q", 192, 0), "k": ("k", 192, 0), "v": ("v", 2 * 6 * 2 * 136, 0),
        "mea_accumulator": ("mea_accumulator", 4 * 2 * 4 * 2 * 136, 4 * 2 * 2 * 136),
        "output": ("output", 2 * 6 * 2 * 136, 0)}, 2 * 2 * 2 * (16 + 136)),
    "pmha(H=8, Hv=136, fp32, separate) mea": (pmha(head_size=8, v_head_size=136, fmt="separate", dtype=4),
                                              Backend.MEA, {"output": ("output", 4 * 6 * 2 * 136, 0)}, 0),
    "pa(H=32, N=1) trt": (pa(heads=1, head_size=32), Backend.TRT, {
        "projection": ("projection", 2 * 6 * 96, 0), "qkv_interleaved": ("qkv_interleaved", 2 * 6 * 1 * 96, 0),
        "output": ("output", 2 * 6 * 32, 0)}, 2 * 2 * 96),
    "pmha(H=32, N=1, packed) trt": (pmha(heads=1, head_size=32), Backend.TRT, {"output": ("output", 384, 0)}, 0),
}


@pytest.mark.parametrize("problem, backend, expected, slack", TABLE.values(), ids=TABLE.keys())
def test_buffers_match_the_hand_table(problem, backend, expected, slack):
    fp = footprint(problem, backend)
    got = {b.name: (b.placed_at, b.nbytes(), b.unwritten_bytes()) for b in fp.buffers}
    assert got == expected
    assert slack_bytes(CONCRETE, fp, ATTENTION) == slack


def test_the_unfused_stages_follow_orts_launch_sequence():
    fp = footprint(pa(), Backend.UNFUSED)
    assert [s.name for s in fp.stages] == ["projection", "materialize_q", "materialize_k", "materialize_v", "scores",
                                           "softmax", "context", "transpose"]
    assert fp.live_together("context", "v") and not fp.live_together("context", "k")
    assert not fp.live_together("context", "q") and fp.live_together("scores", "v")
    assert fp.live_in(6) == ("v", "probabilities")


def test_the_context_over_q_counts_once_as_the_larger_of_the_two():
    fp = footprint(pmha(v_head_size=12, fmt="separate", dtype=4), Backend.UNFUSED)
    q, k, v, context = (fp.buffer(n).nbytes() for n in ("q", "k", "v", "context"))
    assert footprint_bytes(CONCRETE, fp, ATTENTION) == max(q, context) + k + v + 2 * 256
    assert footprint_bytes(CONCRETE, fp, PROJECTION) == 0 and fp.buffer(OUTPUT).allocation == OUTPUT


@pytest.mark.parametrize("problem, backend, direct", [
    (pmha(head_size=32, heads=1), Backend.TRT, True),
    (pmha(head_size=32, heads=1, qkv_bias=True), Backend.TRT, False),
    (pmha(head_size=32, heads=1, fmt="separate"), Backend.TRT, False),
    (pmha(head_size=8, fmt="separate"), Backend.MEA, True),
    (pmha(head_size=8), Backend.MEA, False),
    (pmha(head_size=8, fmt="separate", qkv_bias=True), Backend.FLASH, False),
    (pmha(head_size=8, fmt="separate"), Backend.UNFUSED, False),
    (pa(head_size=8), Backend.MEA, False),
], ids=["trt packed", "trt packed + bias", "trt separate", "mea separate", "mea packed", "flash separate + bias",
        "unfused separate", "pa mea"])
def test_direct_reads_follow_what_each_kernel_consumes(problem, backend, direct):
    assert reads_inputs_directly(problem, backend) is direct


@pytest.mark.parametrize("backend, op, sdpa, env, built, allowed", [
    (Backend.FLASH, Op.PMHA, 0, {}, {}, True),
    (Backend.FLASH, Op.PMHA, 0, {"ORT_DISABLE_FLASH_ATTENTION": "1"}, {}, False),
    (Backend.FLASH, Op.PMHA, 2, {}, {}, False),
    (Backend.MEA, Op.PMHA, 2, {"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}, {}, True),
    (Backend.MEA, Op.PA, 0, {"ORT_DISABLE_MEMORY_EFFICIENT_ATTENTION": "1"}, {}, True),
    (Backend.MEA, Op.PA, 0, {}, {Backend.MEA: False}, False),
    (Backend.TRT, Op.PA, 0, {"ORT_DISABLE_FUSED_ATTENTION": "true"}, {}, False),
    (Backend.UNFUSED, Op.PA, 4, {}, {}, True),
], ids=["flash default", "flash disabled by env", "flash not in mask 2", "mask ignores env", "pa mea ignores env",
        "mea not built", "trt disabled by env", "unfused always"])
def test_may_launch_reads_the_raw_settings(backend, op, sdpa, env, built, allowed):
    assert may_launch(backend, op, sdpa, env, built) is allowed


def test_the_footprint_is_written_without_the_recipes():
    """The statement must not read what it is checked against."""
    tree = ast.parse(FOOTPRINT.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not imported & {"recipe", "layout", "containment", "aggregate", "estimate", "reachability", "dispatch",
                           "options", "backends"}, imported
