"""attnws's own PagedAttention bound, reachability and footprint, each held to a brute force over
every step of a small node (no solver): the bound covers every step's dispatched recipe, every
route a step takes is reachable, and each recipe request holds exactly what the kernels' statement
says they touch. Each check has a planted bug it catches."""

from __future__ import annotations

from dataclasses import replace

import pytest

from attnws.spec.dispatch import dispatch
from attnws.spec.domain import CONCRETE
from attnws.spec.errors import InvalidArgument
from attnws.spec.estimate import estimate_geometry
from attnws.spec.gates import HeadDomain
from attnws.spec.hints import Geometry
from attnws.spec.options import RuntimeConfig
from attnws.spec.paged import estimate as paged_estimate
from attnws.spec.paged import footprint as paged_footprint
from attnws.spec.paged import reachability as paged_reachability
from attnws.spec.paged.inputs import runtime_problem
from attnws.spec.problem import Backend, Op
from attnws.spec.recipe import recipe

SMALL_SMS = 4  # few SMs, so the paged decode kernel splits at small T * N


def node(**flags) -> dict:
    """A small node: N 4, Nk 2, H 64, 16-token blocks, 4 blocks per sequence."""
    return {"heads": 4, "kv_heads": 2, "head_size": 64, "block_size": 16, "max_blocks": 4, **flags}


def steps(batch: int, seq: int, tokens: int, kv_len: int, **flags):
    """Every valid step (B, S, T, L) up to the maxima, as geometries."""
    for b in range(1, batch + 1):
        for s in range(1, seq + 1):
            for t in range(s, min(tokens, b * s) + 1):
                for length in range(s, kv_len + 1, 7):
                    yield Geometry(Op.PAGED, 2, batch=b, seq=s, tokens=t, kv_len=length, **node(**flags))


def config(**kw) -> RuntimeConfig:
    return RuntimeConfig.make(sm=kw.pop("sm", 80), sm_count=kw.pop("sm_count", SMALL_SMS), **kw)


def worst_step(maxima: dict, cfg: RuntimeConfig, **flags):
    """The step needing the most bytes (its dispatched recipe), and that many bytes."""
    worst, most = None, -1
    for g in steps(**maxima, **flags):
        outcome = dispatch(runtime_problem(g), cfg)
        if not outcome.backends:
            continue
        need = recipe(outcome.problem, outcome.backends[0], config=cfg).attention_workspace_bytes
        if need > most:
            worst, most = g, need
    return worst, most


CASES = [
    ({}, {}),  # block 16: paged decode for T <= B, MEA above
    ({"block_size": 256, "max_blocks": 1}, {}),  # Flash
    ({"block_size": 128, "max_blocks": 1, "kv_quant": "int8", "heads": 8, "kv_heads": 2}, {}),  # XQA / gathered Flash
    ({"metadata": "bounds", "block_size": 256, "max_blocks": 4}, {}),  # Flash split-KV decode at L > 512
]


@pytest.mark.parametrize("flags, options", CASES, ids=["block16", "flash", "int8-xqa", "metadata-split"])
def test_the_bound_covers_every_step_up_to_the_maxima(flags, options):
    maxima = {"batch": 3, "seq": 3, "tokens": 6, "kv_len": node(**flags)["block_size"] * node(**flags)["max_blocks"]}
    cfg = config(**options)
    g = Geometry(Op.PAGED, 2, batch=maxima["batch"], seq=maxima["seq"], tokens=maxima["tokens"],
                 kv_len=maxima["kv_len"], **node(**flags))
    bound = estimate_geometry(g, cfg)
    assert bound.ok, bound.message
    worst, most = worst_step(maxima, cfg, **flags)
    assert most <= bound.total_workspace_bytes, (worst, most, bound.total_workspace_bytes)


def test_a_bound_sized_only_at_the_maxima_misses_the_decode_split_drop(monkeypatch):
    """Planted: size every request at the maxima alone; the decode kernel's partials at a smaller T
    (more splits) then exceed it."""
    maxima = {"batch": 8, "seq": 1, "tokens": 8, "kv_len": 512}
    cfg = config(sm_count=16)  # T = 7 launches 2 splits (14 partial rows per head), T = 8 one (8 rows)
    g = Geometry(Op.PAGED, 2, batch=8, seq=1, tokens=8, kv_len=512, **node(max_blocks=32))
    honest = estimate_geometry(g, cfg).total_workspace_bytes
    monkeypatch.setattr(paged_estimate, "candidate_steps", lambda p, backend, config: [p])
    planted = estimate_geometry(g, cfg).total_workspace_bytes
    worst, most = worst_step(maxima, cfg, max_blocks=32)
    assert planted < most <= honest and worst.t == 7


def test_every_route_a_step_takes_is_reachable_and_the_others_say_why():
    maxima = {"batch": 3, "seq": 3, "tokens": 6, "kv_len": 64}
    for flags, options in CASES[:3]:
        cfg = config(**options)
        kv_len = node(**flags)["block_size"] * node(**flags)["max_blocks"]
        g = Geometry(Op.PAGED, 2, batch=3, seq=3, tokens=6, kv_len=kv_len, **node(**flags))
        verdicts = paged_reachability.reachability(runtime_problem(g), cfg, HeadDomain.EXACT)
        reachable = {v.backend for v in verdicts if v.reachable}
        taken = {dispatch(runtime_problem(s), cfg).backends[0] for s in steps(**{**maxima, "kv_len": kv_len}, **flags)}
        assert taken <= reachable
        assert all(v.reason for v in verdicts if not v.reachable)


def test_reachability_without_the_t_above_b_step_misses_mea(monkeypatch):
    """Planted: drop the steps with T > B; MEA (which a prefill step at block 16 takes) is lost."""
    g = Geometry(Op.PAGED, 2, batch=3, seq=3, tokens=6, kv_len=64, **node())
    p = runtime_problem(g)
    honest = {v.backend for v in paged_reachability.reachability(p, config(), HeadDomain.EXACT) if v.reachable}
    real = paged_reachability.representative_steps
    monkeypatch.setattr(paged_reachability, "representative_steps",
                        lambda q: [s for s in real(q) if s.token_count <= s.batch_size])
    planted = {v.backend for v in paged_reachability.reachability(p, config(), HeadDomain.EXACT) if v.reachable}
    assert Backend.MEA in honest and Backend.MEA not in planted


def test_mea_is_not_kept_beside_an_eligible_flash():
    g = Geometry(Op.PAGED, 2, batch=3, seq=3, tokens=6, kv_len=256, **node(block_size=256, max_blocks=1))
    verdicts = {v.backend: v for v in paged_reachability.reachability(runtime_problem(g), config(), HeadDomain.EXACT)}
    assert verdicts[Backend.FLASH].reachable and not verdicts[Backend.MEA].reachable
    assert "Flash is eligible" in verdicts[Backend.MEA].reason


@pytest.mark.parametrize("flags", [{}, {"block_size": 256, "max_blocks": 1}, {"rotary": True},
                                   {"block_size": 128, "max_blocks": 2, "kv_quant": "int8", "heads": 8},
                                   {"metadata": "bounds", "block_size": 256, "max_blocks": 4}],
                         ids=["block16", "flash", "rotary", "int8", "metadata"])
def test_each_request_holds_exactly_what_the_kernels_touch(flags):
    cfg = config()
    kv_len = node(**flags)["block_size"] * node(**flags)["max_blocks"]
    for g in steps(batch=2, seq=2, tokens=4, kv_len=kv_len, **flags):
        p = runtime_problem(g)
        backend = dispatch(p, cfg).backends[0]
        r = recipe(p, backend, config=cfg)
        failing = [claim for claim, holds in paged_footprint.room_contract(CONCRETE, p, r, cfg) if not holds]
        assert failing == [], (g, backend, failing)


def test_the_contract_catches_a_request_one_row_short(monkeypatch):
    """Planted: the paged decode partials sized for one split fewer than the kernel launches."""
    from attnws.spec.paged import recipe as paged_recipe

    cfg = config()
    g = Geometry(Op.PAGED, 2, batch=2, seq=1, tokens=1, kv_len=64, **node())
    p = runtime_problem(g)
    real = paged_recipe.decode_splits
    monkeypatch.setattr(paged_recipe, "decode_splits", lambda d, q, kx, sm: real(d, q, kx, sm) - 1)
    r = recipe(p, Backend.PAGED_DECODE, config=cfg)
    failing = [claim for claim, holds in paged_footprint.room_contract(CONCRETE, p, r, cfg) if not holds]
    assert "decode_partial_out lies inside its request" in failing


def test_a_head_sink_on_mea_is_ort_s_run_time_error_and_its_neighbour_runs():
    g = Geometry(Op.PAGED, 2, batch=1, seq=4, tokens=4, kv_len=16, **node(head_sink=True))
    failed = dispatch(runtime_problem(g), config())
    assert failed.backends == (Backend.MEA,) and failed.failure_kind == "paged_head_sink_mea"
    assert "'head_sink' is only supported by the FlashAttention and paged decode backends" in failed.failure
    ran = dispatch(runtime_problem(replace(g, head_sink=None)), config())
    assert ran.backends == (Backend.MEA,) and not ran.failure


def test_metadata_bounds_are_clamped_as_ort_clamps_them():
    """0 is 'unknown' (T, and M * block_size); a bound above them is clamped to them."""
    from attnws.spec.paged.inputs import _shapes, attributes
    from attnws.spec.paged.builder import build_paged_problem

    g = Geometry(Op.PAGED, 2, batch=2, seq=2, tokens=3, kv_len=20, metadata="bounds", **node())
    for s, length, want in ((0, 0, (3, 64)), (1 << 20, 1 << 20, (3, 64)), (2, 20, (2, 20))):
        p = build_paged_problem(**_shapes(g), **attributes(g), max_query_len=s, max_kv_len=length)
        assert (p.max_query_len, p.max_kv_len) == want
    with pytest.raises(InvalidArgument, match="must be non-negative"):
        build_paged_problem(**_shapes(g), **attributes(g), max_query_len=-1, max_kv_len=20)


def test_int4_takes_xqa_only_in_its_variant():
    base = node(heads=12, kv_heads=2, head_size=256, block_size=128, max_blocks=1, kv_quant="int4")
    g = Geometry(Op.PAGED, 2, batch=2, seq=1, tokens=2, kv_len=64, kv_scale="per_channel", **base)
    assert dispatch(runtime_problem(g), config()).backends == (Backend.XQA,)
    for change in ({"kv_scale": None}, {"bf16": True}, {"heads": 8}):
        other = replace(g, **change)
        assert dispatch(runtime_problem(other), config()).backends != (Backend.XQA,), change
