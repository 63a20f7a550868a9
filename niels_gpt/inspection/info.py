"""`info`: what every cache holds, as rows that info_tables.py prints as four tables.

1. every artifact and split: built or not, tokens, documents / examples, bytes, files, the short sha256
   of the tokenizer it was built with (marked `!=` when it differs from the tokenizer in use);
2. pretrain: documents (eot ids, plus a budget-cut last one), empty documents (an eot at the start of a
   split or right after another eot: the reference pipeline's "double EOS" bug indicator), mean
   document length, vocab coverage (share of ids seen, counted on at most COVERAGE_SAMPLE_TOKENS spread
   over the split);
3. SFT: examples, share of loss-active (label) tokens, longest example, examples the dataset cuts to
   T_max+1 tokens by reason (sft/windows.py, with meta.json's truncation) and examples dropped at build
   time by reason (from meta.json: they are not in the files);
4. cleaning, per cache and byte stream, from meta.json (what was removed is not in the files): blank
   documents skipped, Project Gutenberg boilerplate stripped (books, characters), splits left empty
   on purpose.
Other counts come from one streaming pass over each file (scan.py), not from meta.json, so info
also shows what a damaged cache holds; `verify` is the tool that compares the two. `info --json`
prints the same rows as JSON (`info_json`).
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
from niels_gpt.layout import SPLITS, TOKENIZER_MODEL
from niels_gpt.meta import is_built
from niels_gpt.sft.windows import CUT_REASONS, kept_segments, reason_counts
from niels_gpt.token_files import open_tokens, token_count

COVERAGE_SAMPLE_TOKENS = 1 << 24  # 16.8M ids counted for coverage: well past saturation for a 16k vocab


@dataclass
class SplitInfo:
    """One row of the overview table, plus the kind-specific figures of tables 2 and 3."""

    artifact: str
    kind: str
    split: str
    built: str = "yes"
    tokens: int | None = None
    units: int | None = None  # in the family's unit (layout.FAMILIES): documents, examples, segments, pieces
    n_bytes: int = 0
    files: int = 0
    tokenizer_sha: str | None = None
    extra: dict = field(default_factory=dict)
    note: str = ""  # why it is not built / not readable, printed under the table


def _pretrain(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    eot, vocab = meta.get("eot_id"), meta.get("vocab_size")
    rows = []
    for split in SPLITS:
        shards = art.files(split)
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
        extra["cleaning"] = {**(meta.get("cleaning") or {}), "empty_splits": meta.get("empty_splits") or {}}
        if counts is not None and vocab:
            extra.update(coverage=float(np.count_nonzero(counts[:vocab])) / vocab, sampled=sampled, total=total)
        rows.append(
            SplitInfo(
                art.name,
                art.kind,
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


def _labels_and_cuts(tokens, offsets, special: dict, t_max: int | None, truncation: str) -> tuple[int, dict]:
    """Loss-active tokens of a split and its examples cut to T_max+1 by reason, block by block."""
    labels, cut = 0, dict.fromkeys(CUT_REASONS[truncation], 0)
    for lo, hi, starts in example_blocks(offsets, len(tokens)):
        mask = loss_mask_from_tokens(tokens[lo:hi], special, example_starts=starts)
        labels += int(mask.sum())
        if t_max:
            lengths = np.diff(np.append(starts, hi - lo))
            for reason, n in reason_counts(
                kept_segments(mask, starts, lengths, t_max, truncation).cut, tuple(cut)
            ).items():
                cut[reason] += n
    return labels, cut


def _sft(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    special, t_max = meta.get("special_token_ids") or {}, meta.get("T_max")
    truncation = meta.get("truncation", "head")
    rows = []
    for split in SPLITS:
        (tok_path,), idx_path = art.files(split), art.offsets(split)
        tokens = open_tokens(tok_path)
        offsets = np.load(idx_path, mmap_mode="r", allow_pickle=False)
        lengths = example_lengths(offsets, len(tokens))
        labels, cut = _labels_and_cuts(tokens, offsets, special, t_max, truncation)
        if on_bytes is not None:
            on_bytes(tok_path.stat().st_size)
        extra = {
            "label_share": labels / len(tokens) if len(tokens) else None,
            "labels": labels,
            "longest": int(lengths.max()) if len(lengths) else 0,
            "cut": cut if t_max else None,
            "dropped": ((meta.get("splits") or {}).get(split) or {}).get("dropped"),
            "t_max": t_max,
            "truncation": truncation,
            "cleaning": {"empty_splits": meta.get("empty_splits") or {}},
        }
        rows.append(
            SplitInfo(
                art.name,
                art.kind,
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


def _stream(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    units = meta.get("n_docs", len(meta["files"]) if isinstance(meta.get("files"), list) else None)
    size = art.path.stat().st_size
    extra = {"cleaning": {"skipped_blank": meta.get("skipped_blank")}}
    return [SplitInfo(art.name, art.kind, art.split or "?", units=units, files=1, n_bytes=size, extra=extra)]


def _tokenizer(art: Artifact, meta: dict, on_bytes) -> list[SplitInfo]:
    model = art.path / meta.get("model_file", TOKENIZER_MODEL)
    size = model.stat().st_size
    return [
        SplitInfo(
            art.name,
            art.kind,
            "-",
            units=meta.get("vocab_size"),
            n_bytes=size,
            files=1,
            tokenizer_sha=meta.get("sha256"),
        )
    ]


ROWS = {"tokenizer": _tokenizer, "pretrain": _pretrain, "sft": _sft, "streams": _stream}  # by family


def artifact_info(art: Artifact, on_bytes=None) -> list[SplitInfo]:
    """Rows of one artifact; an unreadable artifact gives one row that says why (run verify)."""
    try:
        meta = art.read_meta()
        if not is_built(meta):
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
        return ROWS[art.kind](art, meta, on_bytes)
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


def info_json(rows: list[SplitInfo], current: str | None, tok_path: Path | None) -> str:
    """The same rows as `format_info`, machine-readable: {"tokenizer": {"path", "sha256"}, "rows": [every
    SplitInfo field, `extra` included]}; unknown values are null."""
    doc = {
        "tokenizer": {"path": None if tok_path is None else str(tok_path), "sha256": current},
        "rows": [asdict(r) for r in rows],
    }
    return json.dumps(doc, indent=2, sort_keys=True)
