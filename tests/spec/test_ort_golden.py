"""Replay ONNX Runtime's own unit-test expectations (tests/data/ort_golden_cases.json).

Each case states ORT inputs and what ORT's tests assert; the replay computes the same quantity
with attnws.spec and compares. See tests/data/ort_golden_cases.md for the format.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from attnws.spec import (
    CONCRETE,
    Backend,
    Estimate,
    Classification,
    Op,
    RuntimeConfig,
    WorkspaceError,
    aggregate,
    backends_from_mask,
    build_pa_problem,
    build_pmha_problem,
    estimate_from_hints,
    problem_from_fields,
    reachability,
    recipe,
    validate_recipe,
)
from attnws.spec.estimate import estimate_for_node
from attnws.spec.hints import parse_hint
from attnws.spec.problem import parse_enum
from attnws.spec.packed.problem import qkv_materialization_index_width
from attnws.spec.reachability import HeadDomain

CASES = json.loads((Path(__file__).parents[1] / "data" / "ort_golden_cases.json").read_text())
WIDTH_NAMES = {4: "vector4", 2: "vector2", 1: "scalar"}


def status_of(call) -> tuple[str, Any]:
    """Run call(); return ("ok", result) or (error status, None)."""
    try:
        return "ok", call()
    except WorkspaceError as error:
        return error.status, None


def op_of(case: dict) -> Op:
    return Op(case["op"])


def build(op: Op, inputs: dict):
    if op is Op.PA:
        return build_pa_problem(
            inputs["input"], inputs["weights"], inputs["bias"], inputs["token_offset"],
            inputs["cumulative_sequence_length"], element_size=inputs["element_size"],
            num_heads=inputs["num_heads"], qkv_hidden_sizes=inputs.get("qkv_hidden_sizes"),
            attention_bias=inputs.get("attention_bias"),
        )
    return build_pmha_problem(
        inputs["query"], inputs.get("key"), inputs.get("value"), inputs.get("bias"),
        inputs["token_offset"], inputs["cumulative_sequence_length"], inputs.get("attention_bias"),
        element_size=inputs["element_size"], num_heads=inputs["num_heads"],
    )


def config_of(inputs: dict) -> RuntimeConfig:
    device = inputs.get("device")
    sm = device["sm"] if isinstance(device, dict) else 80
    return RuntimeConfig.make(sm=sm, sdpa_kernel=inputs.get("options", {}).get("sdpa_kernel", 0))


def problem_and_route(case: dict) -> tuple[Any, dict]:
    """Return (problem or build status, route fields {backend, trt_runner_available})."""
    inputs = case["inputs"]
    op = op_of(case)
    if "problem" in inputs:
        fields = dict(inputs["problem"])
        status, problem = status_of(lambda: problem_from_fields(op, fields))
        return (problem if problem is not None else status), fields
    status, problem = status_of(lambda: build(op, inputs))
    if status != "ok":
        return status, {}
    overrides = dict(inputs.get("problem_overrides", {}))
    if "qkv_materialization_index_width" in overrides:
        problem = problem_from_fields(op, {**problem.as_dict(), **overrides})
    return problem, overrides


def run_recipe(problem, route: dict):
    backend = parse_enum(Backend, route.get("backend", "unfused"), "backend")
    return recipe(problem, backend, trt_runner_available=route.get("trt_runner_available", False))


def check_recipe(case: dict) -> None:
    expect = case["expect"]
    inputs = case["inputs"]
    problem, route = problem_and_route(case)
    if isinstance(problem, str):
        assert problem == expect.get("build_status", expect["status"])
        return
    if "build_status" in expect:
        assert expect["build_status"] == "ok"
    if "problem" in expect:
        observed = problem.as_dict()
        observed["qkv_materialization_index_width"] = WIDTH_NAMES.get(observed["qkv_materialization_index_width"])
        for key, value in expect["problem"].items():
            assert observed[key] == value, key
    status, result = status_of(lambda: run_recipe(problem, route))
    assert status == expect["status"], (status, result)
    if result is None:
        return
    observed = result.as_dict()
    for key, value in expect.items():
        if key in observed:
            assert observed[key] == value, (key, observed[key], value)
    if "validate_status" in expect:
        mutated = result
        mutation = inputs.get("validate_mutation", {})
        if mutation:
            changes = {k: (observed[v] if isinstance(v, str) and v in observed else v) for k, v in mutation.items()}
            mutated = dataclasses.replace(result, **changes)
        vstatus, _ = status_of(lambda: validate_recipe(CONCRETE, mutated))
        assert vstatus == expect["validate_status"]


def check_build(case: dict) -> None:
    expect = case["expect"]
    status, problem = status_of(lambda: build(op_of(case), case["inputs"]))
    assert status == expect["status"]
    for key, value in expect.get("problem", {}).items():
        observed = problem.as_dict()[key]
        if key == "qkv_materialization_index_width":
            observed = WIDTH_NAMES[observed]
        assert observed == value, key


def check_checked_arith(case: dict) -> None:
    inputs, expect = case["inputs"], case["expect"]
    a, b = inputs["a"], inputs["b"]
    calls = {
        "add": lambda: CONCRETE.add(a, b),
        "multiply": lambda: CONCRETE.mul(a, b),
        "align": lambda: CONCRETE.align_up(a, b),
        "materialization_index_width": lambda: WIDTH_NAMES[qkv_materialization_index_width(CONCRETE, a, b)],
    }
    status, result = status_of(calls[inputs["fn"]])
    assert status == expect["status"]
    if "result" in expect:
        assert result == expect["result"]


def check_aggregate(case: dict) -> None:
    inputs, expect = case["inputs"], case["expect"]
    problem, _ = problem_and_route(case)
    if isinstance(problem, str):
        assert problem == expect.get("build_status", expect["status"])
        return

    def run():
        if "backend_mask_raw" in inputs:
            backends = backends_from_mask(inputs["backend_mask_raw"])
        else:
            backends = [Backend(b) for b in inputs["backends"] or []]
        return aggregate(problem, backends, bounds=True)

    status, agg = status_of(run)
    assert status == expect["status"]
    if agg is None:
        return
    for key, value in expect.items():
        if hasattr(agg, key):
            assert getattr(agg, key) == value, key
    if expect.get("projection_nonzero"):
        assert agg.projection_bytes > 0
    if expect.get("projection_multiple_of_256"):
        assert agg.attention_workspace_offset_bytes % 256 == 0
    if expect.get("attention_offset_equals_projection"):
        assert agg.attention_workspace_offset_bytes == CONCRETE.align_up(agg.projection_bytes, 256)
    for key in ("projection_bytes", "attention_workspace_bytes"):
        if f"{key}_ge" in expect:
            assert getattr(agg, key) >= expect[f"{key}_ge"]


def check_routes(case: dict) -> None:
    inputs, expect = case["inputs"], case["expect"]
    op = op_of(case)
    config = config_of(inputs)
    if "builder" in inputs:
        status, problem = status_of(lambda: build(op, inputs["builder"]))
        assert status == expect["build_status"]
    else:
        problem = problem_from_fields(op, inputs["problem"])
    domain = HeadDomain(inputs.get("head_size_domain", "upper_bound")) if op is Op.PA else HeadDomain.UPPER_BOUND
    routes = {r.backend.value for r in reachability(problem, config, domain) if r.reachable}
    if "routes" in expect:
        assert routes == set(expect["routes"])
    assert set(expect.get("routes_include", [])) <= routes
    assert not set(expect.get("routes_exclude", [])) & routes
    values = expect.get("option_values", {})
    if "min_seq_len_flash_packed_qkv" in values:
        assert config.options.min_seq_flash_packed_qkv == values["min_seq_len_flash_packed_qkv"]
    if "min_seq_len_efficient_attention_fp32" in values:
        assert config.options.min_seq_mea_fp32 == values["min_seq_len_efficient_attention_fp32"]


def run_estimate(inputs: dict) -> Estimate:
    hints = [parse_hint(h, i) for i, h in enumerate(inputs["input_shapes"])]
    config = config_of(inputs)
    if "node" in inputs:
        node = inputs["node"]
        attrs = {k: node[k] for k in ("num_heads", "qkv_hidden_sizes") if node.get(k) is not None}
        return estimate_for_node(node["op_type"], node["element_type"], attrs, hints, config)
    c = inputs["config"]
    return estimate_from_hints(Op(c["op"]), c["element_size"], c["num_heads"], hints, config, c["qkv_hidden_sizes"])


def max_and_sum_of_routes(estimate: Estimate) -> tuple[int, int, int]:
    sizes = [r.attention_workspace_bytes for r in estimate.routes]
    return max(sizes), sum(sizes), sum(1 for s in sizes if s)


def check_estimate(case: dict) -> None:
    inputs, expect = case["inputs"], case["expect"]
    if "aggregate" in inputs:
        agg = inputs["aggregate"]
        fake = Estimate(Op.PA, Classification.SAFE_BOUND, status=agg["status"],
                        total_workspace_bytes=agg["total_workspace_bytes"])
        assert [r.as_dict() for r in fake.requirements()] == expect["requirements"]
        return
    est = run_estimate(inputs)
    if "status" in expect:
        assert est.status == expect["status"], est.message
    for key in ("projection_bytes", "attention_workspace_bytes", "attention_workspace_offset_bytes",
                "total_workspace_bytes"):
        if key in expect:
            assert getattr(est, key) == expect[key], key
        if f"{key}_gt" in expect:
            assert getattr(est, key) > expect[f"{key}_gt"]
    if "requirements" in expect:
        observed = [r.as_dict() for r in est.requirements()]
        wanted = [{**r, "size_bytes": est.total_workspace_bytes if r["size_bytes"] == "total_workspace_bytes"
                   else r["size_bytes"]} for r in expect["requirements"]]
        assert observed == wanted
    if expect.get("attention_equals_max_route_recipe") or expect.get("attention_lt_sum_if_multiple_nonzero"):
        maximum, total, nonzero = max_and_sum_of_routes(est)
        if expect.get("attention_equals_max_route_recipe"):
            assert est.attention_workspace_bytes == maximum
        if expect.get("attention_lt_sum_if_multiple_nonzero") and nonzero > 1:
            assert est.attention_workspace_bytes < total
    if expect.get("total_equals_attention"):
        assert est.total_workspace_bytes == est.attention_workspace_bytes
    if "total_equals_unfused_bound_aggregate_of" in expect:
        ref = next(c for c in CASES if c["id"] == expect["total_equals_unfused_bound_aggregate_of"].split(".")[0])
        problem = problem_from_fields(Op(ref["op"]), ref["inputs"]["problem"])
        assert est.total_workspace_bytes == aggregate(problem, [Backend.UNFUSED]).total_workspace_bytes


CHECKS = {
    "recipe": check_recipe,
    "build": check_build,
    "checked_arith": check_checked_arith,
    "aggregate": check_aggregate,
    "routes": check_routes,
    "estimate": check_estimate,
    "requirements": check_estimate,
}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_ort_golden_case(case: dict) -> None:
    CHECKS[case["kind"]](case)


def test_every_golden_kind_is_replayed() -> None:
    assert {c["kind"] for c in CASES} <= set(CHECKS)
    assert len(CASES) >= 150
