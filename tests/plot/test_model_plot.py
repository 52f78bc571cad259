"""`attnws model MODEL.onnx --plot FILE`: per node bars of ORT's estimate, the tight bound and the
proven maximum, with the model's sum and peak."""

from __future__ import annotations

import pytest
from matplotlib import image

from attnws.plot.render import DPI, HEIGHT_IN, WIDTH_IN
from tests.cli.helpers import attnws

DIMS = ["--dim", "batch=8", "--dim", "seq=512", "--dim", "token_count=4096", "--dim", "batch_plus_1=9"]


@pytest.fixture(scope="module")
def encoder(tmp_path_factory) -> str:
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path_factory.mktemp("plot") / "enc.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=2, hidden=64, heads=4, ffn=64)), str(path))
    return str(path)


def test_model_plot_draws_every_node_and_the_sum_and_peak(encoder, tmp_path):
    out = tmp_path / "nodes.png"
    run = attnws("model", encoder, *DIMS, "--plot", str(out), "--json")
    assert run.code == 0, run.err
    doc = run.json()
    nodes = doc["plot_nodes"]
    assert [n["node"] for n in nodes] == [f"{n['graph']}/{n['name']}" for n in doc["nodes"]] and len(nodes) == 2
    estimates = [n["ort_estimate_bytes"] for n in nodes]
    assert doc["plot_totals"]["ort_estimate_bytes"] == {"sum": sum(estimates), "peak": max(estimates)}
    assert doc["plot_totals"]["ort_estimate_bytes"]["sum"] == doc["sum_total_bytes"]
    for n in nodes:
        assert n["proven_max_bytes"] <= n["tight_bound_bytes"] <= n["ort_estimate_bytes"]
    assert image.imread(out).shape[:2] == (round(HEIGHT_IN * DPI), round(WIDTH_IN * DPI))


@pytest.mark.parametrize("out, words", [("x.jpg", "must be a .png or .svg"), ("/nonexistent-attnws/x.png", "does not exist")])
def test_model_plot_bad_file_is_a_usage_error(encoder, out, words):
    run = attnws("model", encoder, *DIMS, "--plot", out)
    assert run.code == 2 and "--plot" in run.err and words in run.err and "Traceback" not in run.err
