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


def test_dispatch_and_recipe_size_flash_s_side_allocations():
    """#32453's decode step on MultiHeadAttention's Flash (B 1, S 1, N 2, H 64, T 13,824, 108 SMs):
    54 splits, so LSE 4 * 1 * 2 * 1 = 8 B, LSE accumulator 4 * 54 * 2 = 432 B and output
    accumulator 4 * 54 * 2 * 64 = 27,648 B beside the workspace; the packed family has none."""
    shape = ("--batch", "1..1", "--seq", "1..1", "--heads", "2", "--head-size", "64", "--sm", "80")
    run = attnws("dispatch", "--op", "mha", *shape, "--kv-seq", "13824..13824", "--json")
    side = run.json()["side_allocations"]["flash"]
    assert run.code == 0 and (side["splits"], side["softmax_lse_bytes"], side["softmax_lse_accum_bytes"],
                              side["out_accum_bytes"], side["total_bytes"]) == (54, 8, 432, 27648, 28088)
    recipe = attnws("recipe", "--op", "mha", *shape, "--kv-seq", "13825..13825", "--backend", "flash")
    assert recipe.code == 0 and "28 splits on 108 SMs" in recipe.out and "output accumulator 14,336 B" in recipe.out
    packed = attnws("dispatch", "--op", "pmha", "--batch", "1..1", "--seq", "64..64", "--heads", "2", "--head-size",
                    "64", "--sm", "80", "--json")
    assert packed.code == 0 and packed.json()["side_allocations"] == {}
