"""`attnws estimate` says which backends can run in the target, apart from which ones ORT's
estimate sizes: a replayed witness shape per backend dispatch picks, "never" where the solver
proves no valid shape takes it (issue: "can run" answered directly)."""

from __future__ import annotations

from .helpers import attnws


def test_each_backend_that_runs_has_a_witness_and_the_others_are_proven_never():
    doc = attnws("estimate", "--target", "bert-base-pmha-fp32-sm80", "--json").json()
    dispatch = doc["dispatch"]
    assert dispatch["mea"] == {"dispatched": True, "witness": dispatch["mea"]["witness"]}
    assert dispatch["mea"]["witness"]["seq"] == 256  # fp32 MEA from S = 256
    assert dispatch["unfused"]["dispatched"] and dispatch["flash"] == {"dispatched": False}


def test_routes_the_estimate_sizes_but_dispatch_never_picks_are_named():
    run = attnws("estimate")  # the default target: the TRT runner takes every shape
    assert run.code == 0
    lines = {line.split()[0]: line for line in run.out.splitlines()[-6:] if line.startswith("    ")}
    assert "yes, e.g." in lines["trt"] and "(sized, never runs)" in lines["mea"]


def test_an_exact_shape_needs_no_solver():
    run = attnws("estimate", "--exact", "--op", "pmha", "--batch", "1", "--seq", "4", "--heads", "1",
                 "--head-size", "8", "--json")
    assert run.code == 0 and "dispatch" not in run.json()
