"""ORT 1.31.1's run-time failures, found by the solver on the committed targets where they occur.

Each failure kind has a committed target whose box holds shapes that fail (`no_runtime_failure`
REFUTED, its counterexample of that kind) and shapes that run. Planting the bug the check exists
to catch, a spec that forgets the failure, turns the verdict into PROVED: the refutation rests
on that condition alone.
"""

from __future__ import annotations

import sys

import pytest

from attnws.solver.gateway import Verdict
from attnws.solver.theorems import prove_target
from attnws.spec import runtime_failures as rf
from attnws.spec.target import load_target
from attnws.solver.ledger import TARGETS_DIR

TARGETS = [
    ("mha-fp16-sm75-packed-kv-unpack-limit", "unpack_block_limit"),
    ("mha-fp16-sm80-attn-bias-mea-alignment", "mea_bias_alignment"),
    ("mha-fp16-sm80-causal-key-mask-long", "causal_mask_1d"),
    ("mha-fp16-sm80-padding-mask-long-cudnn-on", "softmax_shared_memory"),
]
RUNNING = ["pa-fp16-sm89-h32-trt", "pmha-fp16-sm80-h32-packed-trt", "mha-fp16-sm80-h32-key-mask-trt"]


def no_runtime_failure(name: str):
    (result,) = prove_target(load_target(TARGETS_DIR / f"{name}.json"), names=["no_runtime_failure"])
    return result


def forget(kind: str, monkeypatch) -> None:
    """Plant the bug: a spec whose routes never fail with `kind`."""
    original = rf.route_failures

    def mutated(d, p, config, backend):
        return [f for f in original(d, p, config, backend) if f.kind != kind]

    for module in [m for name, m in sys.modules.items() if name.startswith("attnws.")]:
        if getattr(module, "route_failures", None) is original:
            monkeypatch.setattr(module, "route_failures", mutated)


@pytest.mark.parametrize("name, kind", TARGETS, ids=[k for _, k in TARGETS])
def test_the_failure_is_found_on_its_target(name, kind):
    result = no_runtime_failure(name)
    assert result.verdict is Verdict.REFUTED
    assert result.counterexample["failure"].startswith(f"{kind}: ")


@pytest.mark.parametrize("name, kind", TARGETS, ids=[k for _, k in TARGETS])
def test_a_spec_that_forgets_the_failure_proves_the_claim(name, kind, monkeypatch):
    forget(kind, monkeypatch)
    assert no_runtime_failure(name).verdict is Verdict.PROVED


@pytest.mark.parametrize("name", RUNNING)
def test_head_size_32_runs_on_the_trt_runner(name):
    assert no_runtime_failure(name).verdict is Verdict.PROVED
