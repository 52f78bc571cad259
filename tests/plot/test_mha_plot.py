"""Pictures of MultiHeadAttention: its own sweeps (L, P), its own backends in the series, its own
estimate named as attnws's, and sweeps of the other family refused."""

from __future__ import annotations

import pytest

from attnws.spec.command_line import load_target_arg
from attnws.plot.series import compute_series
from attnws.spec.errors import UsageError
from attnws.spec.mha.problem import BACKENDS as MHA_BACKENDS

from tests.cli.helpers import attnws


def test_sweeping_the_key_length_shows_the_cross_kernel_up_to_128_then_mea():
    s = compute_series(load_target_arg("mha-whisper-decoder-cross-fp16-sm75"), "kv-seq", {"seq": 64}, proofs=False)
    picked = {p.x: p.dispatched for p in s.points}
    assert picked[128] == ("trt_cross",) and picked[129] == ("mea",)
    assert set(s.as_dict()["series"]["recipe_bytes"]) == {b.value for b in MHA_BACKENDS}
    assert s.estimator == "attnws's"


def test_sweeping_the_past_grows_the_unfused_regions_below_the_mea_threshold():
    s = compute_series(load_target_arg("mha-decoder-past-fp32-sm80"), "past", {"seq": 255}, proofs=False)
    runtime = s.runtime
    assert s.points[0].dispatched == ("unfused",) and runtime == sorted(runtime) and runtime[0] < runtime[-1]


@pytest.mark.parametrize("name, sweep, says", [
    ("bert-base-pmha-fp16-sm80", "past", "PackedMultiHeadAttention has no such dimension"),
    ("mha-bert-encoder-fp16-sm80", "tokens", "MultiHeadAttention has no such dimension"),
    ("mha-bert-encoder-fp16-sm80", "past", "has no past_key / past_value"),
])
def test_a_sweep_of_the_other_family_is_refused(name, sweep, says):
    with pytest.raises(UsageError, match=says):
        compute_series(load_target_arg(name), sweep, proofs=False)


def test_the_command_names_whose_estimate_it_draws(tmp_path):
    run = attnws("plot", "--target", "mha-whisper-decoder-cross-fp16-sm75", "--sweep", "kv-seq", "--at", "seq=8",
                 "--out", str(tmp_path / "x.svg"))
    assert run.code == 0 and "attnws's AOT estimate" in run.out and (tmp_path / "x.svg").is_file()
