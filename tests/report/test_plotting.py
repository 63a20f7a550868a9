"""What every report figure shares (plotting.py): Agg, byte-identical SVG written atomically, bars, labels."""

from __future__ import annotations

from niels_gpt.report.plotting import (
    SMALL_POINTS,
    bar_figure,
    count,
    footnote,
    grouped_barh,
    pct,
    pyplot,
    save,
    skipped_lines,
)


def draw(path) -> None:
    fig, axes = bar_figure(3, ncols=1)
    grouped_barh(axes[0][0], ["a", "b", "c"], {"x": [1, None, 3], "y": [2, 2, 2]}, fmt=count)
    footnote(fig, ["b: not built"])
    save(fig, path)


def test_pyplot_draws_without_a_display():
    assert pyplot().get_backend().lower() == "agg"


def test_the_same_figure_gives_the_same_svg_bytes_and_leaves_no_temporary_file(tmp_path):
    draw(tmp_path / "one.svg")
    draw(tmp_path / "two.svg")
    one = (tmp_path / "one.svg").read_bytes()
    assert one == (tmp_path / "two.svg").read_bytes() and one.lstrip().startswith(b"<?xml")
    assert b"<text" in one and b"b: not built" in one  # text stays text (searchable)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.svg", "two.svg"]


def test_grouped_bars_leave_a_missing_value_out_and_label_the_rest():
    fig, axes = bar_figure(2)
    ax = axes[0][0]
    x, y = grouped_barh(ax, ["a", "b"], {"x": [5, None], "y": [1, 2]}, fmt=str)
    assert [b.get_width() for b in x] == [5, 0] and [b.get_width() for b in y] == [1, 2]
    assert [t.get_text() for t in ax.texts] == ["5", "", "1", "2"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b"]
    grouped_barh(ax, ["a", "b"], {"z": [10, 1000]}, log=True)
    assert ax.get_xscale() == "log" and ax.get_xlim() == (5, 6000)  # room for the labels on both sides
    pyplot().close(fig)


def test_labels():
    assert [count(v) for v in (999, 1_234, 5_600_000, 7.89e9)] == ["999", "1.2k", "5.6M", "7.9G"]
    assert pct(0.1234) == "12.3%"
    assert skipped_lines([{"name": "sft/oasst1", "reason": "not built: off"}]) == ["sft/oasst1: not built: off"]


def test_a_long_bar_holds_its_label_inside_and_a_percent_axis_stops_at_100_percent():
    fig, axes = bar_figure(2)
    ax = axes[0][0]
    grouped_barh(ax, ["a", "b"], {"x": [1.0, 0.1]}, fmt=pct, percent=True)
    assert ax.get_xlim() == (0, 1.0)  # not 105 % or 125 %: the long bar's label goes inside it
    full, short = ax.texts
    assert (full.get_text(), full.get_horizontalalignment(), full.get_color()) == ("100.0%", "right", "white")
    assert (short.get_text(), short.get_horizontalalignment(), short.get_color()) == ("10.0%", "left", "black")
    assert all(t.get_fontsize() >= SMALL_POINTS == 9 for t in ax.texts)
    pyplot().close(fig)


def test_bars_get_taller_figures_as_groups_hold_more_bars():
    heights = [bar_figure(3, bars_per_group=k)[0].get_figheight() for k in (1, 2, 4)]
    assert heights[0] == heights[1] < heights[2]
    pyplot().close("all")
