"""The leakage audit for people: a heatmap (leakage.svg) and a table of the most affected units (leakage_table.html).

Both are drawn from leakage.json alone (leakage.py has its fields). The heatmap has one panel per
space (token 13-grams: pretrain and SFT; byte 50-grams: streams): a row per val split, a column per
train split plus "any train", each cell the share of the val split's n-grams found in that train
split. The HTML page (self-contained: inline style, no scripts, opens offline) repeats the numbers
and lists, per val split, the documents / examples / segments with the largest share, with the
beginning of their text.
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from niels_gpt.atomic import atomic_write_text
from niels_gpt.layout import REPORT_FIGURES
from niels_gpt.report.leakage import SPACES
from niels_gpt.report.plotting import SMALL_POINTS, footnote, pct, pyplot, save, skipped_lines

ANY = "any train"
CELL_INCHES = (1.15, 0.4)
CSS = (
    "body{font-family:sans-serif;font-size:13px;margin:1em}table{border-collapse:collapse;margin:0.5em 0 1.5em}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}td.t{text-align:left}th{background:#f2f2f2}"
    ".hi{background:#f8d0c8}"
)


def _matrix(result: dict, space: str) -> tuple[list[str], list[str], np.ndarray]:
    vals = [v for v in result["val_splits"] if v["space"] == space]
    trains = [t["name"] for t in result["train_splits"] if t["space"] == space]
    m = np.array([[v["fraction"].get(t, 0.0) for t in trains] + [v["fraction_any"]] for v in vals]).reshape(
        len(vals), len(trains) + 1
    )
    return [v["name"] for v in vals], trains + [ANY], m


def draw_heatmap(result: dict, path) -> None:
    spaces = [s for s in SPACES if any(v["space"] == s for v in result["val_splits"])]
    plt = pyplot()
    shapes = [_matrix(result, s)[2].shape for s in spaces]
    width = CELL_INCHES[0] * max([c for _, c in shapes] + [4]) + 2.5
    heights = [max(r, 1) for r, _ in shapes] or [1]
    fig, axes = plt.subplots(
        max(len(spaces), 1),
        1,
        figsize=(width, 1.5 + CELL_INCHES[1] * sum(heights) * 1.6),
        squeeze=False,
        gridspec_kw={"height_ratios": heights},
        layout="constrained",
    )
    for ax, space in zip(axes[:, 0], spaces):
        rows, cols, m = _matrix(result, space)
        top = max(float(m.max()), 0.01)
        ax.imshow(m, cmap="Reds", vmin=0, vmax=top, aspect="auto")
        for (i, j), v in np.ndenumerate(m):
            ax.text(
                j,
                i,
                pct(v) if v < 0.1 else f"{100 * v:.0f}%",
                ha="center",
                va="center",
                fontsize=SMALL_POINTS,
                color="white" if v > top * 0.6 else "black",
            )
        ax.set_xticks(range(len(cols)), [c + " train" if c != ANY else c for c in cols], rotation=30, ha="right")
        ax.set_yticks(range(len(rows)), [r + " val" for r in rows])
        ax.grid(False)
        n = result["n"][space]
        ax.set_title(
            f"share of each val split's {n}-{'token' if space == 'tokens' else 'byte'} grams found in a train split",
            loc="left",
        )
    footnote(fig, skipped_lines(result["skipped"]))
    save(fig, path)


def _cell(value: float, limit: float | None) -> str:
    cls = ' class="hi"' if limit is not None and value > limit else ""
    return f"<td{cls}>{100 * value:.2f}%</td>"


def table_html(result: dict) -> str:
    """The self-contained HTML page (see the module docstring)."""
    limit = result["max_fraction"]
    gate = "report only (leakage.max_fraction is null)" if limit is None else f"gate: leakage.max_fraction = {limit:g}"
    out = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>leakage audit</title><style>{CSS}</style></head>",
        f"<body><h2>Train/val leakage</h2><p>{result['n']['tokens']}-token grams (pretrain, SFT) and "
        f"{result['n']['bytes']}-byte grams (streams); {html.escape(gate)}.</p>",
    ]
    for space in SPACES:
        rows, cols, m = _matrix(result, space)
        if not rows:
            continue
        out.append("<table><tr><th>val \\ train</th>" + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + "</tr>")
        for name, values in zip(rows, m):
            cells = "".join(_cell(v, limit) for v in values)
            out.append(f"<tr><td class='t'>{html.escape(name)} val</td>{cells}</tr>")
        out.append("</table>")
    for v in result["val_splits"]:
        out.append(
            f"<h3>{html.escape(v['name'])} val: {v['units']:,} {v['unit']}s, {v['ngrams']:,} n-grams, "
            f"{100 * v['fraction_any']:.2f}% in some train split</h3>"
        )
        if not v["top"]:
            out.append("<p>no n-gram found in any train split</p>")
            continue
        out.append(
            f"<table><tr><th>{v['unit']}</th><th>n-grams</th><th>in any train</th><th>worst train split</th>"
            "<th class='t'>by train split</th><th class='t'>beginning</th></tr>"
        )
        for u in v["top"]:
            by = ", ".join(f"{html.escape(k)} {100 * f:.1f}%" for k, f in u["by_train"].items())
            out.append(
                f"<tr><td>{u['unit']}</td><td>{u['ngrams']:,}</td><td>{100 * u['fraction']:.1f}%</td>"
                f"<td class='t'>{html.escape(u['worst_train'])}</td><td class='t'>{by}</td>"
                f"<td class='t'>{html.escape(u['excerpt'])}</td></tr>"
            )
        out.append("</table>")
    out += [f"<p>left out: {html.escape(line)}</p>" for line in skipped_lines(result["skipped"])]
    return "\n".join(out + ["</body></html>", ""])


def draw_leakage(result: dict, out_dir) -> list[Path]:
    svg, page = (Path(out_dir) / name for name in REPORT_FIGURES["leakage"])
    draw_heatmap(result, svg)
    atomic_write_text(page, table_html(result))
    return [svg, page]
