"""What every report figure shares: matplotlib on the Agg backend, reproducible SVG, grouped bars.

SVG keeps text as text (searchable, small) and, with the hash salt pinned and no date written, the
same numbers give byte-identical files. Figures are written under a temporary name and renamed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from niels_gpt.atomic import atomic_open

SPLIT_COLORS = {"train": "#3b6ea8", "val": "#e08a2c"}
SERIES_COLORS = ("#3b6ea8", "#e08a2c", "#5a9e5a", "#9d5fb0")  # dark enough for white labels inside the bars
SMALL_POINTS = 9  # the smallest text of a figure (value labels, legends, notes): 7 pt was too small to read
STYLE = {
    "svg.hashsalt": "niels_gpt",  # the ids matplotlib writes into the SVG: fixed, so the bytes are too
    "svg.fonttype": "none",  # text stays <text>, not glyph outlines
    "font.size": 10,
    "axes.titlesize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
GROUP_INCHES = 0.5  # height of a bar group, at least
BAR_INCHES = 0.2  # height of one bar, at least: a 9 pt label beside it never touches the next bar's
INSIDE_FROM = 0.7  # a bar reaching past this share of its (linear) axis has its label inside, in white


def pyplot():
    """matplotlib.pyplot on the Agg backend (no display needed) with the report's style."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(STYLE)
    return plt


def save(fig, path: str | os.PathLike) -> None:
    """Write `fig` as SVG to `path` (atomically) and close it."""
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format="svg", metadata={"Date": None}, bbox_inches="tight")
    pyplot().close(fig)


def grouped_barh(
    ax,
    labels: Sequence[str],
    series: Mapping[str, Sequence],
    *,
    fmt=None,
    colors=None,
    log=False,
    percent=False,
    xmax: float | None = None,
):
    """Horizontal bars: one group per label (top to bottom), one bar per series (legend name -> values,
    None = no bar), `fmt(value)` written at the end of each bar: beside it, or inside it (white) on a bar
    longer than INSIDE_FROM of a linear axis. A log axis leaves room for the labels; a linear one runs to
    `xmax`, else just past the longest bar, and a `percent` axis (shares of 1) never past 100 %. Returns the
    bar containers."""
    colors = colors or SERIES_COLORS
    height = 0.8 / max(1, len(series))
    containers, shown = [], []
    for k, (name, values) in enumerate(series.items()):
        ys = [i + (k - (len(series) - 1) / 2) * height for i in range(len(labels))]
        bars = ax.barh(ys, [0 if v is None else v for v in values], height=height, label=name, color=colors[k % 4])
        containers.append(bars)
        shown += [v for v in values if v]
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(shown, default=1) / 2, max(shown, default=10) * 6)
    else:
        top = xmax or max(shown, default=1) * 1.05  # the longest bars hold their labels inside
        ax.set_xlim(0, min(top, 1.0) if percent else top)
    if percent:
        percent_axis(ax)
    if fmt is not None:
        for bars, values in zip(containers, series.values()):
            _label_bars(
                ax, bars, ["" if v is None else fmt(v) for v in values], inside_from=None if log else INSIDE_FROM
            )
    return containers


def _label_bars(ax, bars, texts: Sequence[str], inside_from: float | None) -> None:
    """One label per bar at its end: just outside it, or right-aligned inside it in white when the bar is
    longer than `inside_from` of the (linear) axis."""
    for bar, text in zip(bars, texts):
        inside = inside_from is not None and bar.get_width() > inside_from * ax.get_xlim()[1]
        ax.annotate(
            text,
            (bar.get_width(), bar.get_y() + bar.get_height() / 2),
            xytext=(-3 if inside else 3, 0),
            textcoords="offset points",
            ha="right" if inside else "left",
            va="center",
            fontsize=SMALL_POINTS,
            color="white" if inside else "black",
        )


def percent_axis(ax) -> None:
    from matplotlib.ticker import PercentFormatter

    ax.xaxis.set_major_formatter(PercentFormatter(1.0))


def legend(ax) -> None:
    """The axes' legend under it, outside the bars."""
    ax.legend(fontsize=SMALL_POINTS, loc="upper left", bbox_to_anchor=(0, -0.1), ncol=2, frameon=False)


def bar_figure(n_groups: int, ncols: int = 1, width: float = 10.0, bars_per_group: int = 2):
    """A figure of `ncols` bar panels side by side, tall enough for `n_groups` groups of `bars_per_group`
    bars (each at least BAR_INCHES high)."""
    plt = pyplot()
    height = 1.8 + max(GROUP_INCHES, BAR_INCHES * bars_per_group / 0.8) * max(n_groups, 1)
    return plt.subplots(1, ncols, figsize=(width, height), squeeze=False, layout="constrained")


def footnote(fig, lines: Sequence[str]) -> None:
    """Small print under the figure (what was left out, and why)."""
    if lines:
        fig.supxlabel("\n".join(lines), fontsize=SMALL_POINTS, x=0.01, ha="left", color="#555555")


def skipped_lines(skipped: Sequence[Mapping]) -> list[str]:
    return [f"{k['name']}: {k['reason']}" for k in skipped]


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def count(x: float) -> str:
    """1,234 / 12.3k / 4.5M: short labels for token and byte counts."""
    for div, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= div:
            return f"{x / div:.1f}{unit}"
    return f"{x:,.0f}"
