"""What the pictures show, read back from the drawn axes: no line hidden without a word, one
marker per legend entry, backends that never run named instead of drawn at 0 B, readable byte
ticks, and titles printed literally."""

from __future__ import annotations

from functools import lru_cache

import matplotlib.pyplot as plt
import pytest

from attnws.spec.command_line import load_target_arg
from attnws.plot.render import byte_ticks, draw_series, render
from attnws.plot.series import Series, compute_series
from attnws.spec.target import DEFAULT_TARGET

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@lru_cache(maxsize=None)
def series(name: str, sweep: str = "seq", proofs: bool = False) -> Series:
    return compute_series(DEFAULT_TARGET if name == "default" else load_target_arg(name), sweep, proofs=proofs)


def drawn(s: Series, title: str | None = None) -> tuple[list[str], list[str], object]:
    """Draw the series; return its legend labels (one line each), the texts written on the axes
    and the axes (closed with its figure by the caller's `plt.close`)."""
    fig, ax = plt.subplots()
    draw_series(ax, s, title)
    labels = [t.get_text().replace("\n  ", " ") for t in ax.get_legend().get_texts()]
    return labels, [t.get_text() for t in ax.texts], ax


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_byte_ticks_are_1_2_5_steps_and_decades_with_labelled_minors_when_wide():
    assert byte_ticks(512 * KiB, 8 * GiB) == (
        [0.0, MiB, 2 * MiB, 5 * MiB, 10 * MiB, 20 * MiB, 50 * MiB, 100 * MiB, 200 * MiB, 500 * MiB, GiB, 2 * GiB,
         5 * GiB], [], False)
    major, minor, labelled = byte_ticks(128 * KiB, 9 * GiB)
    assert major == [0.0, MiB, 10 * MiB, 100 * MiB, GiB] and labelled
    assert minor == [200 * KiB, 500 * KiB, 2 * MiB, 5 * MiB, 20 * MiB, 50 * MiB, 200 * MiB, 500 * MiB, 2 * GiB, 5 * GiB]
    major, minor, labelled = byte_ticks(16, 100 * GiB)
    assert major[:4] == [0.0, 100.0, KiB, 10 * KiB] and not labelled and len(major) <= 12


def test_the_default_target_says_the_runtime_and_the_tight_policy_share_0_bytes():
    """The tight policy is the proven maximum, 0 B: one line, labelled so, drawn over the runtime
    with its own markers, apart from the estimate's, and the shared value is written beside them."""
    s = series("default", proofs=True)
    labels, texts, ax = drawn(s)
    assert "runtime on TRT fused = tight policy = proven maximum: 0 B" in texts
    assert "tight policy = proven maximum over target: 0 B" in labels
    assert not any("proven max over target" in label or "tight bound" in label for label in labels)
    runtime_z = max(line.get_zorder() for line in ax.get_lines() if line.get_color() == "black")
    bounds = [line for line in ax.get_lines() if line.get_color() in ("tab:blue", "tab:cyan")]
    assert len(bounds) == 1 and all(line.get_zorder() > runtime_z and line.get_marker() != "None" for line in bounds)
    estimate = [line for line in ax.get_lines() if line.get_color() == "tab:red"]
    assert {line.get_markevery() for line in bounds + estimate} == {(0, 3), (1, 3)}  # markers at different places


def test_each_legend_entry_has_one_marker_at_most_and_no_dot_in_its_text():
    labels, _, ax = drawn(series("bert-base-pmha-fp32-sm80"))
    legend = ax.get_legend()
    assert legend.numpoints == 1
    assert not any("\u25cf" in label for label in labels)
    assert labels.count("memory-efficient (MEA) recipe") == 1
    assert labels.count("unfused (math) recipe") == 1


def test_a_backend_that_never_runs_is_named_with_its_reason_not_drawn_at_0_bytes():
    labels, _, ax = drawn(series("bert-base-pmha-fp32-sm80"))
    assert "not drawn: TRT fused, Flash (needs fp16, element size = 4)" in labels
    assert not any(line.get_color() in ("tab:purple", "tab:orange") for line in ax.get_lines())
    labels, _, _ = drawn(series("bert-large-pmha-fp16-sm90"))
    assert "not drawn: TRT fused (no supported TRT kernel on sm90 for S in [1, 1024] and head sizes <= 64)" in labels


def test_coinciding_recipes_are_dashed_over_each_other_and_say_so():
    """On PackedAttention sm75 the MEA recipe equals TRT's at every S, and TRT's is the runtime."""
    labels, _, ax = drawn(series("bert-base-pa-fp16-sm75"))
    assert "memory-efficient (MEA) recipe (same as TRT fused on this whole line)" in labels
    assert "TRT fused recipe (the runtime wherever it has a recipe: under the black line)" in labels
    mea = [line for line in ax.get_lines() if line.get_color() == "tab:green"]
    assert mea and mea[0].get_linestyle() == "--"


def test_a_recipe_that_exists_at_one_point_only_is_marked_there():
    """TRT's fused runner serves only S = L: on the S sweep at L = 256 it has one point."""
    s = series("mha-fp16-sm80-head-size-range")
    assert [p.x for p in s.points if p.recipes["trt"] is not None] == [256]
    _, _, ax = drawn(s)
    marks = [line for line in ax.get_lines() if line.get_color() == "tab:purple" and line.get_marker() == "_"]
    assert [list(line.get_xdata()) for line in marks] == [[256]]


def test_a_title_is_printed_literally_even_with_dollar_signs(tmp_path):
    """matplotlib read '$a^{$' as broken math and raised: the title is escaped."""
    s = series("vit-b16-pmha-fp32-sm80", "batch")
    _, _, ax = drawn(s, "cost x $a^{$")
    assert ax.get_title().startswith("cost x \\$a^{\\$\n")
    assert render(s, tmp_path / "t.png", "cost x $a^{$") > 0
