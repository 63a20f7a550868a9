"""The report's figures for the pretrain, SFT, tokenizer and streams families (stats.py has the numbers).

Each `draw_<family>(data, out_dir)` writes that family's files, named in `layout.REPORT_FIGURES`:
  pretrain   tokens per source and split on a log axis, the budget of each split marked;
             document length histograms (log-spaced bins), train and val, per source
  sft        example length histograms per source with the T_max+1 window marked; supervised share
             of tokens; share of examples cut (longer than T_max+1) and dropped at build time;
             sft.mix beside the share of supervised tokens it implies and the caches' own shares
  tokenizer  bytes per token on each cache's train and val splits; vocabulary ids each cache uses
  streams    bytes per stream and split; streams.p_train beside each stream's share of the train bytes
Histograms show the share of documents (or examples) per bin, so train and val compare on one axis.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from niels_gpt.layout import REPORT_FIGURES, SPLITS
from niels_gpt.report.plotting import (
    SMALL_POINTS,
    SPLIT_COLORS,
    bar_figure,
    count,
    footnote,
    grouped_barh,
    legend,
    pct,
    pyplot,
    save,
    skipped_lines,
)

PANEL_INCHES = 1.5  # height of one histogram panel


def _paths(family: str, out_dir) -> list[Path]:
    return [Path(out_dir) / name for name in REPORT_FIGURES[family]]


def _histograms(rows: list[dict], edges: list[float], unit: str, marker=None):
    """One panel per source: share of units per length bin, train filled, val as a line; log x."""
    plt = pyplot()
    n = max(len(rows), 1)
    fig, axes = plt.subplots(n, 1, figsize=(8, 0.8 + PANEL_INCHES * n), squeeze=False, layout="constrained")
    edges = np.asarray(edges)
    filled = [i for r in rows for s in r["splits"].values() for i, c in enumerate(s["length_hist"]) if c]
    limits = (edges[max(min(filled, default=0) - 1, 0)], edges[min(max(filled, default=0) + 2, len(edges) - 1)])
    if marker is not None:  # keep the marked length (T_max + 1) in view
        marks = [marker(r)[0] for r in rows]
        limits = (min([limits[0], *marks]), max([limits[1], *(1.5 * m for m in marks)]))
    for ax, row in zip(axes[:, 0], rows):
        for split in SPLITS:
            hist = np.asarray(row["splits"].get(split, {}).get("length_hist", []), dtype=float)
            if not hist.sum():
                continue
            kind = {"histtype": "stepfilled", "alpha": 0.5} if split == "train" else {"histtype": "step", "lw": 1.5}
            ax.hist(edges[:-1], bins=edges, weights=hist / hist.sum(), color=SPLIT_COLORS[split], label=split, **kind)
        if marker is not None:
            x, text = marker(row)
            ax.axvline(x, color="black", ls="--", lw=1)
            ax.text(x, ax.get_ylim()[1] * 0.95, f" {text}", fontsize=SMALL_POINTS, va="top")
        ax.set_xscale("log")
        ax.set_xlim(*limits)
        ax.set_ylabel(f"share of {unit}s")
        ax.set_title(row["title"], loc="left")
        ax.legend(fontsize=SMALL_POINTS, loc="upper right")
    axes[-1, 0].set_xlabel(f"{unit} length (tokens, log scale)")
    return fig


def draw_pretrain(data: dict, out_dir) -> list[Path]:
    tokens_path, lengths_path = _paths("pretrain", out_dir)
    rows = data["sources"]
    names = [r["name"] for r in rows]
    fig, axes = bar_figure(len(rows), ncols=2)
    for ax, split in zip(axes[0], SPLITS):
        values = [r["splits"].get(split, {}).get("tokens") for r in rows]
        budgets = [r["splits"].get(split, {}).get("budget") for r in rows]
        grouped_barh(ax, names, {f"{split} tokens": values}, fmt=count, colors=[SPLIT_COLORS[split]], log=True)
        marked = [i for i, b in enumerate(budgets) if b]
        ax.scatter([budgets[i] for i in marked], marked, marker="|", s=300, color="black", zorder=3, label="budget")
        ax.set_xlim(right=max([v for v in values + budgets if v], default=10) * 6)
        ax.set_title(f"{split}: tokens per source (budget: max_{split}_tokens)", loc="left")
        legend(ax)
    footnote(fig, skipped_lines(data["skipped"]))
    save(fig, tokens_path)
    for r in rows:
        done = [(s, r["splits"][s]) for s in SPLITS if r["splits"].get(s, {}).get("documents")]
        r["title"] = f"{r['name']}: " + "; ".join(
            f"{s} {c['documents']:,} docs, mean {c['tokens'] / c['documents']:,.0f} tokens" for s, c in done
        )
    fig = _histograms(rows, data["length_edges"], "document")
    footnote(fig, skipped_lines(data["skipped"]))
    save(fig, lengths_path)
    return [tokens_path, lengths_path]


def _shares(rows: list[dict], split: str, num: str, den) -> list:
    """num / den(cell) of one split of every source (None where the split or the denominator is missing)."""
    cells = [r["splits"].get(split) for r in rows]
    return [c[num] / den(c) if c and den(c) else None for c in cells]


def draw_sft(data: dict, out_dir) -> list[Path]:
    lengths_path, supervision_path, mix_path = _paths("sft", out_dir)
    rows = data["sources"]
    for r in rows:
        train = r["splits"].get("train", {})
        r["title"] = f"{r['name']}: {train.get('examples', 0):,} train examples, truncation {r['truncation']}"
    fig = _histograms(rows, data["length_edges"], "example", marker=lambda r: (r["t_max"] + 1, "T_max + 1"))
    footnote(fig, skipped_lines(data["skipped"]) + ["examples longer than T_max + 1 tokens are cut at read time"])
    save(fig, lengths_path)

    names = [r["name"] for r in rows]
    fig, axes = bar_figure(len(rows), ncols=2, bars_per_group=2 * len(SPLITS))
    supervised = {split: _shares(rows, split, "labels", lambda c: c["tokens"]) for split in SPLITS}
    grouped_barh(axes[0][0], names, supervised, fmt=pct, colors=[SPLIT_COLORS[s] for s in SPLITS], percent=True)
    axes[0][0].set_title("supervised (loss-active) share of tokens", loc="left")
    lost = {f"cut ({split})": _shares(rows, split, "cut", lambda c: c["examples"]) for split in SPLITS}
    for split in SPLITS:
        lost[f"dropped ({split})"] = _shares(rows, split, "dropped", lambda c: c["examples"] + c["dropped"])
    grouped_barh(axes[0][1], names, lost, fmt=pct, percent=True)
    axes[0][1].set_title("examples cut (> T_max + 1 tokens) or dropped (no target kept)", loc="left")
    for ax in axes[0]:
        legend(ax)
    save(fig, supervision_path)
    _draw_mix(data["mix"], "sft.mix", "supervised tokens", mix_path, skipped_lines(data["skipped"]))
    return [lengths_path, supervision_path, mix_path]


def _draw_mix(mix: dict, key: str, what: str, path, notes: list[str]) -> None:
    """Configured weight, the share of `what` in mixed batches it implies, and the caches' own share."""
    names = list(mix)
    fig, axes = bar_figure(len(names), ncols=1, width=8, bars_per_group=3)
    series = {
        f"{key} weight": [mix[k]["weight"] for k in names],
        f"share of {what} in mixed batches": [mix[k]["implied_share"] for k in names],
        f"share of the cached train {what}": [mix[k]["cache_share"] for k in names],
    }
    grouped_barh(axes[0][0], names, series, fmt=pct, percent=True)
    axes[0][0].set_title(f"{key}: configured weights and the shares they imply", loc="left")
    legend(axes[0][0])
    footnote(fig, notes + _rates(mix, what))
    save(fig, path)


def _rates(mix: dict, what: str) -> list[str]:
    """How much more (or less) often than uniform sampling over the caches a mixture reads each source."""
    return [
        f"{k}: its {what} are read {m['implied_share'] / m['cache_share']:.2f}x as often as under uniform sampling"
        for k, m in mix.items()
        if m["cache_share"]
    ]


def draw_tokenizer(data: dict, out_dir) -> list[Path]:
    bpt_path, vocab_path = _paths("tokenizer", out_dir)
    rows = data["caches"]
    names = [r["name"] for r in rows]

    def bpt(r: dict, split: str):
        s = r["splits"].get(split)
        return s["bytes"] / s["ordinary_tokens"] if s and s["ordinary_tokens"] else None

    fig, axes = bar_figure(len(rows), ncols=1, width=8)
    ax = axes[0][0]
    splits = {f"{split} split": [bpt(r, split) for r in rows] for split in SPLITS}
    grouped_barh(ax, names, splits, fmt=lambda v: f"{v:.2f}", colors=[SPLIT_COLORS[s] for s in SPLITS])
    ax.set_xlabel("UTF-8 bytes per token (special tokens excluded)")
    ax.set_title("tokenizer compression per cache (higher = fewer tokens for the same text)", loc="left")
    legend(ax)
    footnote(fig, skipped_lines(data["skipped"]))
    save(fig, bpt_path)

    fig, axes = bar_figure(len(rows), ncols=1, width=8, bars_per_group=1)
    vocab = data["vocab_size"]
    used = [r["ids_used"] / vocab for r in rows]
    grouped_barh(
        axes[0][0], names, {"ids used": used}, fmt=lambda v: f"{v * vocab:,.0f} ({pct(v)})", percent=True, xmax=1.0
    )
    axes[0][0].set_xlabel(f"share of the {vocab:,} vocabulary ids that occur in the cache (train + val)")
    axes[0][0].set_title("vocabulary use per cache", loc="left")
    save(fig, vocab_path)
    return [bpt_path, vocab_path]


def draw_streams(data: dict, out_dir) -> list[Path]:
    (path,) = _paths("streams", out_dir)
    rows = data["streams"]
    fig, axes = bar_figure(max(len(rows), len(data["mix"])), ncols=2)
    sizes = {split: [r["splits"].get(split) for r in rows] for split in SPLITS}
    grouped_barh(axes[0][0], [r["name"] for r in rows], sizes, fmt=count, colors=list(SPLIT_COLORS.values()), log=True)
    axes[0][0].set_title("bytes per stream and split", loc="left")
    names = list(data["mix"])
    series = {
        "streams.p_train weight (= share of bytes in mixed batches)": [data["mix"][k]["weight"] for k in names],
        "share of the train bytes": [data["mix"][k]["cache_share"] for k in names],
    }
    grouped_barh(axes[0][1], names, series, fmt=pct, percent=True)
    axes[0][1].set_title("streams.p_train beside each stream's share of the bytes", loc="left")
    for ax in axes[0]:
        legend(ax)
    footnote(fig, skipped_lines(data["skipped"]) + _rates(data["mix"], "bytes"))
    save(fig, path)
    return [path]
