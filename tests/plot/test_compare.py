"""`attnws plot --compare KEY=V1,V2`: one line under several configurations, each configuration's
series the same as plotting it alone, drawn in its own color."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest

from attnws.spec.command_line import load_target_arg
from attnws.plot.render import draw_comparison
from dataclasses import replace

from attnws.plot.series import compare_series, own_setting, parse_compare
from attnws.spec.errors import UsageError
from attnws.spec.options import RuntimeConfig, TrtRunner
from attnws.spec.target import DEFAULT_TARGET
from tests.cli.helpers import attnws


@pytest.mark.parametrize("key, config, expected", [
    ("sm_count", RuntimeConfig.make(sm=90, sm_count=100), "100 SMs"),
    ("sm_count", RuntimeConfig.make(sm=80), "108 SMs"),
    ("sdpa_kernel", RuntimeConfig.make(sdpa_kernel=2), "sdpa_kernel 2"),
    ("sdpa_kernel", RuntimeConfig.make(), "sdpa_kernel 0"),
    ("trt_runner", RuntimeConfig.make(trt_runner="unknown"), "TRT runner unknown"),
    ("trt_runner", RuntimeConfig.make(), "TRT runner auto"),
    ("flash_build", RuntimeConfig.make(flash_build=False), "flash build off"),
    ("mea_build", RuntimeConfig.make(mea_build=False), "mea build off"),
    ("mea_build", RuntimeConfig.make(), "mea build on"),
    ("trt_build", RuntimeConfig.make(trt_build=False), "trt build off"),
    ("sm", RuntimeConfig.make(sm=90), "sm90"),
    ("sm", RuntimeConfig.make(sm=80, sm_count=132), "sm80, 132 SMs"),
])
def test_the_target_s_own_setting_is_named_as_a_compared_one(key, config, expected):
    """What the picture says the target's own setting of the compared key is, written by hand."""
    assert own_setting(replace(DEFAULT_TARGET, config=config), key, ()) == expected


def test_each_key_gives_its_configurations_and_labels():
    key, variants = parse_compare("sm=80,90", DEFAULT_TARGET)
    assert key == "sm" and [(label, t.config.device.sm) for label, t in variants] == [("sm80", 80), ("sm90", 90)]
    flash = "ORT_DISABLE_FLASH_ATTENTION"
    _, variants = parse_compare(f"env={flash}=0,{flash}=1", DEFAULT_TARGET)
    assert [t.env for _, t in variants] == [((flash, "0"),), ((flash, "1"),)]
    _, variants = parse_compare("flash-build=on,off", DEFAULT_TARGET)
    assert [(label, t.config.build.flash) for label, t in variants] == [("flash build on", True),
                                                                         ("flash build off", False)]
    _, variants = parse_compare("trt_runner=auto,unknown", DEFAULT_TARGET)
    assert [t.config.trt_runner for _, t in variants] == [TrtRunner.AUTO, TrtRunner.UNKNOWN]
    _, variants = parse_compare("sdpa_kernel=0,2", DEFAULT_TARGET)
    assert [t.config.options.use_trt_fused for _, t in variants] == [True, False]


def test_an_env_value_overrides_the_targets_own_variable():
    target = load_target_arg("bert-large-pmha-fp16-sm90-no-flash-env")
    _, variants = parse_compare("env=ORT_DISABLE_FLASH_ATTENTION=0,ORT_DISABLE_FLASH_ATTENTION=1", target)
    assert [t.config.options.use_flash for _, t in variants] == [True, False]


@pytest.mark.parametrize("text", ["sm=80,80", "sm=80", "sm=", "x=1,2", "sm=80,90,86,89,75,120,80"])
def test_bad_comparisons_are_usage_errors(text):
    with pytest.raises(UsageError, match="--compare"):
        parse_compare(text, DEFAULT_TARGET)


def test_each_configuration_is_the_line_plotted_alone_under_that_flag():
    line = ["--target", "vit-b16-pmha-fp32-sm80", "--sweep", "batch"]
    doc = attnws("plot", *line, "--compare", "sdpa-kernel=0,16", "--title", "default and math only", "--json").json()
    assert doc["compare"] == "sdpa_kernel" and doc["title"] == "default and math only"
    assert [c["label"] for c in doc["configurations"]] == ["sdpa_kernel 0", "sdpa_kernel 16"]
    for configuration, flags in zip(doc["configurations"], ([], ["--sdpa-kernel", "16"])):
        alone = attnws("plot", *line, *flags, "--json").json()
        assert {k: v for k, v in configuration.items() if k != "label"} == {
            k: v for k, v in alone.items() if k not in ("schema_version", "ort_version")}


def test_the_picture_draws_each_runtime_in_its_own_color_and_names_shared_estimates():
    key, variants = parse_compare("sm=80,90", load_target_arg("bert-large-pmha-fp16-sm90"))
    c = compare_series(key, variants, "seq", {"batch": 2}, proofs=False)
    fig, ax = plt.subplots()
    try:
        draw_comparison(ax, c, None)
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        texts = [t.get_text() for t in ax.texts]
    finally:
        plt.close(fig)
    assert labels[0] == "sm80: runtime workspace" and "sm90: runtime workspace" in labels
    assert c.series[0].estimate_bytes == c.series[1].estimate_bytes
    assert any(t.startswith("sm80 estimate = sm90 estimate: ") for t in texts)
    assert ax.get_title().startswith("bert-large-pmha-fp16-sm90: sm compared\n")
    assert "compared: sm80 | sm90" in ax.get_title()
