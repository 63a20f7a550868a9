"""`info`: what every cache holds, measured from the files, as three tables.

1. every artifact and split: built or not, tokens, documents / examples, bytes, files, the short sha256
   of the tokenizer it was built with (marked `!=` when it differs from the tokenizer in use);
2. pretrain: documents (eot ids, plus a budget-cut last one), empty documents (an eot at the start of a
   split or right after another eot: the reference pipeline's "double EOS" bug indicator), mean
   document length, vocab coverage (share of ids seen, counted on at most COVERAGE_SAMPLE_TOKENS spread
   over the split);
3. SFT: examples, share of loss-active (label) tokens, longest example, examples longer than the
   T_max+1 window the dataset keeps (they are cut, head or tail per meta.json).
Counts come from one streaming pass over each file (token_scan.py), not from meta.json, so info also
shows what a damaged cache holds; `verify` is the tool that compares the two. `info --json` prints the
same rows as JSON (`info_json`).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from niels_gpt.chat_template import loss_mask_from_tokens
from niels_gpt.hashing import sha256_file
from niels_gpt.inspection.scan import example_blocks, example_lengths, scan_tokens
from niels_gpt.inspection.tree import Artifact, default_tokenizer_path, find_artifacts
from niels_gpt.layout import SPLITS, TOKENIZER_MODEL, sft_offsets_name, sft_tokens_name
from niels_gpt.token_files import list_shards, open_tokens, token_count

COVERAGE_SAMPLE_TOKENS = 1 << 24  # 16.8M ids counted for coverage: well past saturation for a 16k vocab
SHA_SHOWN = 8  # hex digits of a tokenizer sha256 in the table


@dataclass
class SplitInfo:
    """One row of the overview table, plus the kind-specific figures of tables 2 and 3."""

    artifact: str
    kind: str
    split: str
    built: str = "yes"
    tokens: int | None = None
    units: int | None = None  # documents (pretrain), examples (sft), documents/files (streams)
    n_bytes: int = 0
    files: int = 0
    tokenizer_sha: str | None = None
    extra: dict = field(default_factory=dict)
    note: str = ""  # why it is not built / not readable, printed under the table


def human_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return str(n)


def _pretrain(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    eot, vocab = meta.get("eot_id"), meta.get("vocab_size")
    rows = []
    for split in SPLITS:
        shards = list_shards(art.path / split) if (art.path / split).is_dir() else []
        total = sum(token_count(p) for p in shards)
        frac = min(1.0, COVERAGE_SAMPLE_TOKENS / total) if total and vocab else 0.0
        counts, after_eot, last, n_eot, n_empty, sampled = None, True, None, 0, 0, 0
        for p in shards:
            s = scan_tokens(
                p,
                hash=False,
                vocab_size=vocab,
                eot_id=eot,
                after_eot=after_eot,
                sample_frac=frac,
                id_counts=counts,
                on_bytes=on_bytes,
            )
            counts, n_eot, n_empty, sampled = (
                s.id_counts,
                n_eot + s.n_eot,
                n_empty + s.n_double_eot,
                sampled + s.n_sampled,
            )
            if s.last_token is not None:
                last, after_eot = s.last_token, s.last_token == eot
        docs = n_eot + int(last is not None and last != eot)
        extra = {"documents": docs, "empty": n_empty, "mean_len": total / docs if docs else None}
        if counts is not None and vocab:
            extra.update(coverage=float(np.count_nonzero(counts[:vocab])) / vocab, sampled=sampled, total=total)
        rows.append(
            SplitInfo(
                art.name,
                "pretrain",
                split,
                tokens=total,
                units=docs,
                n_bytes=total * 2,
                files=len(shards),
                tokenizer_sha=meta.get("tokenizer_sha256"),
                extra=extra,
            )
        )
    return rows


def _sft(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    special, t_max = meta.get("special_token_ids") or {}, meta.get("T_max")
    rows = []
    for split in SPLITS:
        tok_path, idx_path = art.path / sft_tokens_name(split), art.path / sft_offsets_name(split)
        tokens = open_tokens(tok_path)
        offsets = np.load(idx_path, mmap_mode="r", allow_pickle=False)
        lengths = example_lengths(offsets, len(tokens))
        labels = sum(
            int(loss_mask_from_tokens(tokens[lo:hi], special, example_starts=st).sum())
            for lo, hi, st in example_blocks(offsets, len(tokens))
        )
        if on_bytes is not None:
            on_bytes(tok_path.stat().st_size)
        extra = {
            "label_share": labels / len(tokens) if len(tokens) else None,
            "labels": labels,
            "longest": int(lengths.max()) if len(lengths) else 0,
            "over": int((lengths > t_max + 1).sum()) if t_max else None,
            "t_max": t_max,
            "truncation": meta.get("truncation"),
        }
        rows.append(
            SplitInfo(
                art.name,
                "sft",
                split,
                tokens=len(tokens),
                units=len(offsets),
                files=2,
                n_bytes=tok_path.stat().st_size + idx_path.stat().st_size,
                tokenizer_sha=meta.get("tokenizer_sha256"),
                extra=extra,
            )
        )
    return rows


def _stream(art: Artifact, meta: dict) -> list[SplitInfo]:
    units = meta.get("n_docs", len(meta["files"]) if isinstance(meta.get("files"), list) else None)
    return [
        SplitInfo(art.name, "stream", meta.get("split", "?"), units=units, files=1, n_bytes=art.path.stat().st_size)
    ]


def artifact_info(art: Artifact, on_bytes=None) -> list[SplitInfo]:
    """Rows of one artifact; an unreadable artifact gives one row that says why (run verify)."""
    try:
        meta = art.read_meta()
        if meta.get("built") is False:
            return [
                SplitInfo(
                    art.name,
                    art.kind,
                    "-",
                    built="no",
                    tokenizer_sha=meta.get("tokenizer_sha256"),
                    note=f"not built: {meta.get('reason', 'no reason recorded')}",
                )
            ]
        if art.kind == "tokenizer":
            model = art.path / meta.get("model_file", TOKENIZER_MODEL)
            return [
                SplitInfo(
                    art.name,
                    "tokenizer",
                    "-",
                    units=meta.get("vocab_size"),
                    n_bytes=model.stat().st_size,
                    files=1,
                    tokenizer_sha=meta.get("sha256"),
                )
            ]
        if art.kind == "stream":
            return _stream(art, meta)
        return (_pretrain if art.kind == "pretrain" else _sft)(art, meta, on_bytes)
    except (OSError, ValueError, KeyError) as e:
        return [SplitInfo(art.name, art.kind, "-", built="?", note=f"unreadable: {e}; run verify")]


def collect_info(
    path: str | os.PathLike, *, tokenizer_path=None, on_bytes=None
) -> tuple[list[SplitInfo], str | None, Path | None]:
    """(rows, sha256 of the tokenizer in use or None, its path)."""
    selection = find_artifacts(path)
    tok_path = Path(tokenizer_path) if tokenizer_path else default_tokenizer_path(selection)
    current = sha256_file(tok_path) if tok_path is not None and tok_path.is_file() else None
    rows = [row for art in selection.artifacts for row in artifact_info(art, on_bytes)]
    return rows, current, tok_path


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    left = {0, 1}  # artifact and split columns read left to right; figures align right

    def line(cells):
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def _n(v) -> str:
    return "-" if v is None else f"{v:,}"


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


UNITS = {"pretrain": "docs", "sft": "examples", "stream": "docs", "tokenizer": "ids"}


def _overview(rows: list[SplitInfo], current: str | None) -> list[str]:
    def sha(r: SplitInfo) -> str:
        if not r.tokenizer_sha:
            return "-"
        mark = " !=" if current and r.kind != "tokenizer" and r.tokenizer_sha != current else ""
        return r.tokenizer_sha[:SHA_SHOWN] + mark

    def units(r: SplitInfo) -> str:
        return f"{_n(r.units)} {UNITS[r.kind]}" if r.units is not None else "-"

    headers = ["artifact", "split", "built", "tokens", "docs/examples", "bytes", "files", "tokenizer"]
    cells = [
        [r.artifact, r.split, r.built, _n(r.tokens), units(r), human_bytes(r.n_bytes), str(r.files), sha(r)]
        for r in rows
    ]
    return _table(headers, cells)


def _pretrain_table(rows: list[SplitInfo]) -> list[str]:
    def coverage(e: dict) -> str:
        sampled = "" if e.get("sampled", 0) >= e.get("total", 0) else f" (sample of {e['sampled']:,})"
        return _pct(e.get("coverage")) + sampled

    headers = ["artifact", "split", "documents", "empty docs (double eot)", "mean doc len", "vocab coverage"]
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


def _sft_table(rows: list[SplitInfo]) -> list[str]:
    headers = ["artifact", "split", "examples", "label tokens", "longest", "> T_max+1 (cut)"]
    cells = [
        [
            r.artifact,
            r.split,
            _n(r.units),
            f"{_n(r.extra['labels'])} ({_pct(r.extra['label_share'])})",
            _n(r.extra["longest"]),
            f"{_n(r.extra['over'])} (T_max {_n(r.extra['t_max'])}, {r.extra['truncation']})",
        ]
        for r in rows
    ]
    return _table(headers, cells)


def info_json(rows: list[SplitInfo], current: str | None, tok_path: Path | None) -> str:
    """The same rows as `format_info`, machine-readable: {"tokenizer": {"path", "sha256"}, "rows": [every
    SplitInfo field, `extra` included]}; unknown values are null."""
    doc = {
        "tokenizer": {"path": None if tok_path is None else str(tok_path), "sha256": current},
        "rows": [asdict(r) for r in rows],
    }
    return json.dumps(doc, indent=2, sort_keys=True)


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
    return "\n".join(out)
