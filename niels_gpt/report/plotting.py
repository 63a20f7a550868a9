"""What every report figure shares: matplotlib on the Agg backend, reproducible SVG, grouped bars.

SVG keeps text as text (searchable, small) and, with the hash salt pinned and no date written, the
same numbers give byte-identical files. Figures are written under a temporary name and renamed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from niels_gpt.atomic import atomic_open

SPLIT_COLORS = {"train": "#3b6ea8", "val": "#e08a2c"}
SERIES_COLORS = ("#3b6ea8", "#e08a2c", "#5a9e5a", "#9d5fb0")
STYLE = {
    "svg.hashsalt": "niels_gpt",  # the ids matplotlib writes into the SVG: fixed, so the bytes are too
    "svg.fonttype": "none",  # text stays <text>, not glyph outlines
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}
ROW_INCHES = 0.32  # height per bar group: labels never overlap however many sources there are


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


def grouped_barh(ax, labels: Sequence[str], series: Mapping[str, Sequence], *, fmt=None, colors=None, log=False):
    """Horizontal bars: one group per label (top to bottom), one bar per series (legend name -> values,
    None = no bar), `fmt(value)` written at the end of each bar; a log or a linear axis with room for
    the labels. Returns the bar containers."""
    colors = colors or SERIES_COLORS
    height = 0.8 / max(1, len(series))
    containers, shown = [], []
    for k, (name, values) in enumerate(series.items()):
        ys = [i + (k - (len(series) - 1) / 2) * height for i in range(len(labels))]
        bars = ax.barh(ys, [0 if v is None else v for v in values], height=height, label=name, color=colors[k % 4])
        containers.append(bars)
        shown += [v for v in values if v]
        if fmt is not None:
            ax.bar_label(bars, labels=["" if v is None else fmt(v) for v in values], padding=2, fontsize=7)
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    if log:
        ax.set_xscale("log")
        ax.set_xlim(min(shown, default=1) / 2, max(shown, default=10) * 6)
    else:
        ax.set_xlim(0, max(shown, default=1) * 1.25)
    return containers


def percent_axis(ax) -> None:
    from matplotlib.ticker import PercentFormatter

    ax.xaxis.set_major_formatter(PercentFormatter(1.0))


def legend(ax) -> None:
    """The axes' legend under it, outside the bars."""
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(0, -0.1), ncol=2, frameon=False)


def bar_figure(n_groups: int, ncols: int = 1, width: float = 10.0):
    """A figure of `ncols` bar panels side by side, tall enough for `n_groups` bar groups."""
    plt = pyplot()
    height = 1.8 + ROW_INCHES * max(n_groups, 1) * 1.6
    return plt.subplots(1, ncols, figsize=(width, height), squeeze=False, layout="constrained")


def footnote(fig, lines: Sequence[str]) -> None:
    """Small print under the figure (what was left out, and why)."""
    if lines:
        fig.supxlabel("\n".join(lines), fontsize=7, x=0.01, ha="left", color="#555555")


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
