"""`attnws model MODEL.onnx --plot FILE`: per node bars of ORT's estimate, the tight bound and the
proven maximum, with the model's sum and peak; identical nodes share one bar group (x12), and a
0 B bar is marked and labelled."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
from matplotlib import image

from attnws.plot.model import BarGroup, NodeBars, draw_model
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
    group = {k: v for k, v in nodes[0].items() if k != "node"}
    assert doc["plot_groups"] == [{"nodes": [n["node"] for n in nodes], "count": 2, **group}]
    assert image.imread(out).shape[:2] == (round(HEIGHT_IN * DPI), round(WIDTH_IN * DPI))


@pytest.mark.parametrize("out, words", [("x.jpg", "must be a .png or .svg"), ("/nonexistent-attnws/x.png", "does not exist")])
def test_model_plot_bad_file_is_a_usage_error(encoder, out, words):
    run = attnws("model", encoder, *DIMS, "--plot", out)
    assert run.code == 2 and "--plot" in run.err and words in run.err and "Traceback" not in run.err


def test_identical_nodes_are_one_bar_group_with_their_count_and_the_sum_counts_each(tmp_path):
    import onnx

    from attnws.model.examples import EncoderSpec, packed_encoder

    path = tmp_path / "enc5.onnx"
    onnx.save(packed_encoder(EncoderSpec(layers=5, hidden=64, heads=4, ffn=64)), str(path))
    doc = attnws("model", str(path), *DIMS, "--plot", str(tmp_path / "x.png"), "--json").json()
    (group,) = doc["plot_groups"]
    assert group["count"] == 5 and len(doc["plot_nodes"]) == 5
    for key in ("ort_estimate_bytes", "tight_bound_bytes", "proven_max_bytes"):
        assert doc["plot_totals"][key] == {"sum": 5 * group[key], "peak": group[key]}
    label = BarGroup(tuple(group["nodes"]), NodeBars("", 1, 1, 1), ()).label
    assert label == "main/attention_0 \u2026 main/attention_4 (x5)"


@pytest.mark.parametrize("groups, upright", [(1, True), (30, False)])
def test_a_0_byte_bar_has_a_floor_and_a_label_upright_where_it_fits(groups, upright):
    bars = [BarGroup((f"g/n{i}",), NodeBars(f"g/n{i}", 1 << 20, 0, 0), (i,)) for i in range(groups)]
    fig, ax = plt.subplots()
    try:
        draw_model(ax, bars, "a $title$ with {braces}$")
        zero = [t for t in ax.texts if t.get_text() == "0 B"]
        floors = ax.collections
    finally:
        plt.close(fig)
    assert len(zero) == 2 * (groups + 2) and len(floors) == 2 * (groups + 2)  # tight and proven, sum and peak too
    assert {t.get_rotation() for t in zero} == ({0.0} if upright else {90.0})
    assert all(t.get_fontsize() >= 8 for t in zero)
