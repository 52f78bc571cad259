"""Every dispatch gate of every family is crossed by the committed targets.

The gates are listed from the spec's cascade (`cascade_gates` on one problem per operator form),
not by hand. A gate that a dimension can move (a threshold, a head-size rule, S == L: one that a broad probe
box crosses) must be crossed inside one committed target's box: a shape where dispatch reaches it
and it holds, and one where it fails. A gate fixed by the configuration or the flags (built,
enabled, fp16, a mask kind) must be seen on both sides across the committed targets of its
operator. The witnesses are
found by the solver and replayed through the concrete cascade (`attnws/solver/gates.py`).
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from attnws.solver.gates import crossings, gate_key, gate_reached
from attnws.solver.ledger import committed_targets
from attnws.spec.dispatch import cascade_gates
from attnws.spec.domain import CONCRETE
from attnws.spec.estimate import runtime_problem
from attnws.spec.options import RuntimeConfig
from attnws.spec.target import Target, target_from_dict

# Probes: broad boxes per operator form and flag set, every dimension a range. A gate some probe
# crosses is one a dimension can move: a committed target must cross it inside its own box.
_PA = {"op": "pa", "batch": "1..4", "seq": "1..600", "heads": "2..2", "head_size": "1..80", "tokens": "1..2400"}
_PMHA = {"op": "pmha", "batch": "1..4", "seq": "1..600", "heads": "2..2", "head_size": "1..80", "tokens": "1..2400"}
_MHA = {"op": "mha", "batch": "1..4", "seq": "1..600", "kv_seq": "1..600", "heads": "2..2", "head_size": "1..80",
        "v_head_size": "1..80"}
PROBES = {
    "pa": _PA, "pa bias": {**_PA, "attn_bias": True},
    "pmha packed": {**_PMHA, "format": "packed"}, "pmha packed bias": {**_PMHA, "format": "packed", "attn_bias": True},
    "pmha separate": {**_PMHA, "format": "separate", "v_head_size": "1..80"},
    "pmha separate fp32": {**_PMHA, "format": "separate", "v_head_size": "1..80", "dtype": "fp32"},
    "pmha unknown runner": {**_PMHA, "format": "packed", "trt_runner": "unknown"},
    "mha": _MHA, "mha fp32": {**_MHA, "dtype": "fp32"}, "mha bias": {**_MHA, "attn_bias": True},
    "mha causal cudnn": {**_MHA, "unidirectional": True, "env": {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}},
    "mha cudnn": {**_MHA, "env": {"ORT_ENABLE_CUDNN_FLASH_ATTENTION": "1"}},
    "mha mask": {**_MHA, "mask": "1d_key_seq_len"},
    "mha unknown runner": {**_MHA, "trt_runner": "unknown"},
    "mha past": {**_MHA, "past": "0..600", "with_past": True, "with_present": True},
}


@lru_cache(maxsize=None)
def probe(form: str) -> Target:
    return target_from_dict({**PROBES[form], "name": f"probe {form}"})


@lru_cache(maxsize=None)
def gates_of(form: str) -> tuple[str, ...]:
    """Return the gate keys of the form's cascade, in order, from the spec."""
    p = runtime_problem(probe(form).max_geometry())
    return tuple(gate_key(b, g.name) for b, gates in cascade_gates(CONCRETE, p, RuntimeConfig(), True) for g in gates)


@lru_cache(maxsize=None)
def committed_crossings() -> tuple[tuple[Target, dict], ...]:
    return tuple((t, crossings(t)) for t in committed_targets())


def op_gates(op: str) -> list[str]:
    """Return the gate keys of every form of the operator, each once, in cascade order."""
    return list(dict.fromkeys(key for form in PROBES if PROBES[form]["op"] == op for key in gates_of(form)))


@lru_cache(maxsize=None)
def probe_crossings(form: str) -> dict:
    return crossings(probe(form))


def moved_by_a_dimension(op: str, key: str) -> bool:
    """Return whether some probe of the operator holds the gate on both sides inside its box."""
    return any({s for s, w in probe_crossings(form).get(key, {}).items() if isinstance(w, dict)} == {"holds", "fails"}
               for form in PROBES if PROBES[form]["op"] == op)


def sides(op: str, key: str) -> tuple[set[str], set[str]]:
    """Return (targets crossing the gate inside their box, sides seen across the op's targets)."""
    inside, seen = set(), set()
    for target, found in committed_crossings():
        if target.op.value != op:
            continue
        entry = {side for side, w in found.get(key, {}).items() if isinstance(w, dict)}
        seen |= entry
        if entry == {"holds", "fails"}:
            inside.add(target.name)
    return inside, seen


CASES = [(op, key) for op in ("pa", "pmha", "mha") for key in op_gates(op)]


def test_the_cascades_have_the_gates_they_are_known_for():
    assert len(CASES) >= 60
    assert "flash/packed QKV sequence threshold" in gates_of("pmha packed")
    assert "flash/packed QKV sequence threshold" not in gates_of("pmha separate")


@pytest.mark.parametrize("op, key", CASES, ids=[f"{op}: {k}" for op, k in CASES])
def test_every_gate_is_crossed_by_a_committed_target(op, key):
    inside, seen = sides(op, key)
    if moved_by_a_dimension(op, key):
        assert inside, f"{op} {key}: no committed target's box crosses it (seen {sorted(seen)})"
    else:
        assert seen == {"holds", "fails"}, f"{op} {key}: the committed targets only see it {sorted(seen)}"


def test_a_witness_that_does_not_reach_its_gate_is_refused():
    """The planted bug: a witness shape replayed where the cascade never reaches the gate."""
    target = probe("pmha packed")
    p = runtime_problem(target.geometry(batch=1, seq=600, heads=2, head_size=64, tokens=600))
    assert gate_reached(p, target, "flash/packed QKV sequence threshold") == [True]
    assert gate_reached(p, target, "mea/fp32 sequence threshold") == []
