"""The splits of a built cache tree, as the report and the leakage audit read them.

Every pretrain, SFT and stream cache of the source registry, in registry order, each split as one
`Split`: a name ("pretrain/wikitext", "sft/primer", "streams/wiki"), its space ("tokens": uint16 ids
of the one tokenizer, so pretrain and SFT splits compare with each other; "bytes": the UTF-8 streams),
its files, and the unit a reader thinks in: a pretrain document (ends at an eot), an SFT example
(starts at an offset of `{split}_idx.npy`), a stream segment (text between two separators of its
meta.json). Caches that are not built (`built: false`), missing or empty are listed with the reason
instead, never silently dropped.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.cache.meta import read_meta
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES, STREAM_SOURCES
from niels_gpt.report.ngrams import Concatenated, DiskArray
from niels_gpt.token_files import TOKEN_DTYPE, list_shards

UNITS = {"pretrain": "document", "sft": "example", "streams": "segment"}
EXCERPT_TOKENS = 32  # decoded for a val document named in the audit: enough to recognise it
EXCERPT_CHARS = 100


@dataclass(frozen=True)
class Split:
    """One split of one cache (see the module docstring)."""

    family: str  # pretrain | sft | streams
    source: str
    split: str  # train | val
    files: tuple[Path, ...]
    meta: dict = field(repr=False)

    @property
    def name(self) -> str:
        return f"{self.family}/{self.source}"

    @property
    def space(self) -> str:
        return "bytes" if self.family == "streams" else "tokens"

    @property
    def unit(self) -> str:
        return UNITS[self.family]

    def sequence(self) -> Concatenated:
        """The split's ids (or bytes) as one sequence on disk: nothing is read yet."""
        return Concatenated([DiskArray(p, np.uint8 if self.space == "bytes" else TOKEN_DTYPE) for p in self.files])

    def unit_bounds(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of every unit of this split, whose whole content is `data`; [start, end) is the
        unit's text without its separator (a pretrain document's eot, a stream's separator)."""
        n = len(data)
        if self.family == "sft":
            starts = np.load(self.files[0].with_name(layout.sft_offsets_name(self.split)), allow_pickle=False)
            return starts, np.append(starts[1:], n)
        if self.family == "pretrain":
            eots = np.flatnonzero(data == self.meta["special_token_ids"]["eot"])
            starts = np.concatenate(([0], eots[eots + 1 < n] + 1))
            return starts, np.append(eots, n)[: len(starts)]
        sep = (self.meta.get("sep") or self.meta.get("delimiter") or "\n\n").encode("utf-8")
        found = [m.start() for m in re.finditer(re.escape(sep), data.tobytes())]
        return np.array([0] + [f + len(sep) for f in found], dtype=np.int64), np.array(found + [n], dtype=np.int64)

    def special_ids(self) -> list[int]:
        """Ids that are never text (the chat specials, eot among them): no n-gram may hold one."""
        return sorted((self.meta.get("special_token_ids") or {}).values()) if self.space == "tokens" else []


def _meta_or_reason(path: str) -> tuple[dict | None, str | None]:
    if not os.path.exists(path):
        return None, f"{path} not found"
    meta = read_meta(path)
    if meta.get("built") is False:
        return None, f"not built: {meta.get('reason', 'no reason recorded')}"
    return meta, None


def find_splits(cache_dir: str | os.PathLike) -> tuple[list[Split], list[dict]]:
    """(every non-empty split of every cache under `cache_dir`, [{"name", "reason"} of what is left out])."""
    splits, skipped = [], []

    def add(family: str, source: str, split: str, meta: dict | None, reason: str | None, files) -> None:
        name = f"{family}/{source}"
        if meta is None:
            if split == layout.SPLITS[0]:
                skipped.append({"name": name, "reason": reason})
            return
        files = tuple(Path(p) for p in files)
        if sum(os.path.getsize(p) for p in files) == 0:
            skipped.append({"name": f"{name} {split}", "reason": "empty"})
            return
        splits.append(Split(family, source, split, files, meta))

    for source in PRETRAIN_SOURCES:
        folder = layout.pretrain_dir(cache_dir, source)
        meta, reason = _meta_or_reason(f"{folder}/{layout.META}")
        for split in layout.SPLITS:
            add("pretrain", source, split, meta, reason, list_shards(f"{folder}/{split}") if meta else ())
    for source in SFT_SOURCES:
        folder = layout.sft_dir(cache_dir, source)
        meta, reason = _meta_or_reason(f"{folder}/{layout.META}")
        for split in layout.SPLITS:
            add("sft", source, split, meta, reason, [f"{folder}/{layout.sft_tokens_name(split)}"] if meta else ())
    streams = layout.streams_dir(cache_dir)
    for source in STREAM_SOURCES:
        for split in layout.SPLITS:
            meta_path = layout.stream_meta(streams, source, split)
            meta = _read_json(meta_path) if os.path.exists(meta_path) else None
            reason = None if meta else f"{meta_path} not found (not in streams.enabled_sources?)"
            add("streams", source, split, meta, reason, [layout.stream_bin(streams, source, split)] if meta else ())
    return splits, skipped


def _read_json(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def excerpt(split: Split, data: np.ndarray, start: int, end: int, tokenizer=None) -> str:
    """The beginning of the unit data[start:end], as one short line of text (chat roles as <|usr|> ...)."""
    if split.space == "bytes":
        text = data[start : min(end, start + 4 * EXCERPT_CHARS)].tobytes().decode("utf-8", errors="replace")
    elif tokenizer is not None:
        text = tokenizer.decode_with_specials(data[start : min(end, start + EXCERPT_TOKENS)], short_names=True)
    else:
        return ""
    text = " ".join(text.split())
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
