"""The tables `info` prints: an overview, then pretrain, SFT and cleaning figures (see info.py).

`format_info(rows, current, tok_path)` turns the SplitInfo rows of `info.collect_info` into aligned
text tables; counts get thousands separators, shares one decimal, a tokenizer its first SHA_SHOWN hex
digits (marked `!=` when it differs from the tokenizer in use).
"""

from __future__ import annotations

from pathlib import Path

from niels_gpt.inspection.info import SplitInfo
from niels_gpt.layout import FAMILIES
from niels_gpt.sft.windows import format_reasons

SHA_SHOWN = 8  # hex digits of a tokenizer sha256 in the table


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def _table(headers: list[str], rows: list[list[str]], left: tuple[int, ...] = (0, 1)) -> list[str]:
    """Aligned text rows; the `left` columns (artifact, split) read left to right, figures align right."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _n(v) -> str:
    return "-" if v is None else f"{v:,}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def _overview(rows: list[SplitInfo], current: str | None) -> list[str]:
    def sha(r: SplitInfo) -> str:
        if not r.tokenizer_sha:
            return "-"
        mark = " !=" if current and r.kind != "tokenizer" and r.tokenizer_sha != current else ""
        return r.tokenizer_sha[:SHA_SHOWN] + mark

    def units(r: SplitInfo) -> str:
        return f"{_n(r.units)} {FAMILIES[r.kind].unit}s" if r.units is not None else "-"

    headers = ["artifact", "split", "built", "tokens", "units", "bytes", "files", "tokenizer"]
    cells = [
        [r.artifact, r.split, r.built, _n(r.tokens), units(r), human_bytes(r.n_bytes), str(r.files), sha(r)]
        for r in rows
    ]
    return _table(headers, cells)


def _pretrain_table(rows: list[SplitInfo]) -> list[str]:
    def coverage(e: dict) -> str:
        sampled = "" if e.get("sampled", 0) >= e.get("total", 0) else f" (sample of {e['sampled']:,})"
        return _pct(e.get("coverage")) + sampled

    headers = [
        "artifact",
        "split",
        "documents",
        "empty documents (double eot)",
        "mean document length",
        "vocab coverage",
    ]
    cells = [
        [
            r.artifact,
            r.split,
            _n(r.extra["documents"]),
            _n(r.extra["empty"]),
            "-" if r.extra["mean_len"] is None else f"{r.extra['mean_len']:,.1f}",
            coverage(r.extra),
        ]
        for r in rows
    ]
    return _table(headers, cells)


def _by_reason(counts: dict | None) -> str:
    """e.g. "12 (prompt 11, reply 1)", "0", or "-" when unknown."""
    return "-" if counts is None else format_reasons(counts)


def _sft_table(rows: list[SplitInfo]) -> list[str]:
    headers = ["artifact", "split", "examples", "label tokens", "longest", "cut to T_max+1", "dropped at build"]
    cells = [
        [
            r.artifact,
            r.split,
            _n(r.units),
            f"{_n(r.extra['labels'])} ({_pct(r.extra['label_share'])})",
            _n(r.extra["longest"]),
            f"{_by_reason(r.extra['cut'])}; T_max {_n(r.extra['t_max'])}, {r.extra['truncation']}",
            _by_reason(r.extra["dropped"]),
        ]
        for r in rows
    ]
    return _table(headers, cells)


def _cleaning_table(rows: list[SplitInfo]) -> list[str]:
    """One row per cache / byte stream: what cleaning removed, which splits are empty on purpose (meta.json)."""
    by_artifact: dict[str, dict] = {}
    for r in rows:
        by_artifact.setdefault(r.artifact, r.extra["cleaning"])
    headers = ["artifact", "blank documents skipped", "gutenberg boilerplate stripped", "empty on purpose"]
    cells = []
    for name, c in by_artifact.items():
        books = c.get("boilerplate_books_stripped")
        stripped = "-" if books is None else f"{books:,} books, {c.get('boilerplate_chars_removed', 0):,} chars"
        cells.append(
            [name, _n(c.get("skipped_blank")), stripped, ", ".join(sorted(c.get("empty_splits") or {})) or "-"]
        )
    return _table(headers, cells, left=(0,))


def format_info(rows: list[SplitInfo], current: str | None, tok_path: Path | None) -> str:
    """The overview table, notes, then the pretrain and SFT tables (see the module docstring)."""
    out = _overview(rows, current)
    out += [f"{r.artifact}: {r.note}" for r in rows if r.note]
    if current:
        out.append(f"tokenizer in use: {tok_path} (sha256 {current[:SHA_SHOWN]}); '!=' marks caches built with another")
    pre = [r for r in rows if r.kind == "pretrain" and "documents" in r.extra]
    if pre:
        out += ["", "pretrain", *_pretrain_table(pre)]
    sft = [r for r in rows if r.kind == "sft" and "labels" in r.extra]
    if sft:
        out += ["", "sft", *_sft_table(sft)]
    cleaned = [r for r in rows if "cleaning" in r.extra]
    if cleaned:
        out += ["", "cleaning (from meta.json)", *_cleaning_table(cleaned)]
    return "\n".join(out)
