"""`attnws model --prove` and `--policy tight`: per-node solver checks on each node's target."""

from __future__ import annotations

import subprocess
import sys

import pytest

from attnws.command import EXIT_OK
from attnws.model.examples import EncoderSpec, packed_encoder
from attnws.spec.problem import Op

from .builders import run, save

DIMS = ["--dim", "token_count=24", "--dim", "batch=4", "--dim", "seq=8", "--dim", "batch_plus_1=5"]


@pytest.mark.parametrize("spec", [
    EncoderSpec(layers=2, hidden=64, heads=4, ffn=64),
    EncoderSpec(layers=1, hidden=64, heads=4, ffn=64, op=Op.PA, qkv_hidden_sizes=True, attention_bias=(True, False)),
], ids=["pmha-packed", "pa-qkv-hidden-sizes-bias"])
def test_prove_gives_proved_safe_bound_and_containment_per_node(spec, tmp_path):
    result = run(save(packed_encoder(spec), tmp_path), *DIMS, "--prove")
    assert result.exit_code == EXIT_OK and result.json["verdict"] == "PROVED"
    checks = result.json["checks"]
    assert len(checks) == spec.layers
    for check in checks.values():
        assert [(p["theorem"], p["verdict"]) for p in check["proofs"]] == [("safe_bound", "PROVED"),
                                                                              ("containment", "PROVED")]
    assert result.json["policy_sum_total_bytes"] == result.json["sum_total_bytes"]  # ORT policy


def test_identical_layers_share_one_run(tmp_path):
    result = run(save(packed_encoder(EncoderSpec(layers=3, hidden=64, heads=4, ffn=64)), tmp_path), *DIMS, "--prove")
    assert {c["shared_from"] for c in result.json["checks"].values()} == {"main/attention_0"}
    assert "main/attention_0, main/attention_1, main/attention_2 (x3, one target)" in result.text


def test_tight_policy_is_proved_and_never_above_ort(tmp_path):
    result = run(save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), tmp_path), *DIMS,
                 "--policy", "tight")
    doc = result.json
    tights = [c["tight"] for c in doc["checks"].values()]
    assert result.exit_code == EXIT_OK and all(t["verdict"] == "PROVED" for t in tights)
    assert all(t["tight_total_bytes"] <= t["ort_total_bytes"] == doc["peak_total_bytes"] for t in tights)
    assert doc["policy_sum_total_bytes"] == sum(t["tight_total_bytes"] for t in tights)
    assert doc["policy_peak_total_bytes"] == max(t["tight_total_bytes"] for t in tights)


def test_model_layer_does_not_load_the_solver():
    code = "import sys, attnws.model, attnws.model.commands; print('z3' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
