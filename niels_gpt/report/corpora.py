"""The splits of a built cache tree, as the report and the leakage audit read them.

Every pretrain, SFT and streams cache of the source registry, in registry order, each split as one
`Split`: a name ("pretrain/wikitext", "sft/primer", "streams/wiki"), the files the cache-tree walker
(inspection/tree.py) lists for it, and its family's space and unit (layout.FAMILIES): "tokens" (uint16
ids of the one tokenizer, so pretrain and SFT splits compare with each other) or "bytes" (the UTF-8
streams); a pretrain document (ends at an eot), an SFT example (starts at an offset of
`{split}_idx.npy`), a stream segment (text between two separators of its meta.json). Caches that are
not built (`built: false`), missing or empty are listed with the reason instead, never silently dropped.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES, STREAM_SOURCES
from niels_gpt.inspection.tree import Artifact, list_artifacts
from niels_gpt.meta import is_built, read_meta
from niels_gpt.token_files import BYTE_DTYPE, TOKEN_DTYPE, DiskSequence

REGISTRY = {"pretrain": PRETRAIN_SOURCES, "sft": SFT_SOURCES, "streams": STREAM_SOURCES}  # the families reported
EXCERPT_TOKENS = 32  # decoded for a val document named in the audit: enough to recognise it
EXCERPT_CHARS = 100


@dataclass(frozen=True)
class Split:
    """One split of one cache (see the module docstring)."""

    artifact: Artifact
    split: str  # train | val
    files: tuple[Path, ...]
    meta: dict = field(repr=False)

    @property
    def family(self) -> str:
        return self.artifact.kind

    @property
    def source(self) -> str:
        return self.artifact.source

    @property
    def name(self) -> str:
        return f"{self.family}/{self.source}"

    @property
    def space(self) -> str:
        return self.artifact.family.space

    @property
    def unit(self) -> str:
        return self.artifact.family.unit

    def sequence(self) -> DiskSequence:
        """The split's ids (or bytes) as one sequence on disk: nothing is read yet."""
        return DiskSequence(self.files, BYTE_DTYPE if self.space == "bytes" else TOKEN_DTYPE)

    def unit_bounds(self, data: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) of every unit of this split, whose whole content is `data`; [start, end) is the
        unit's text without its separator (a pretrain document's eot, a stream's separator)."""
        n = len(data)
        if self.family == "sft":
            starts = np.load(self.artifact.offsets(self.split), allow_pickle=False)
            return starts, np.append(starts[1:], n)
        if self.family == "pretrain":
            eots = np.flatnonzero(data == self.meta["eot_id"])
            starts = np.concatenate(([0], eots[eots + 1 < n] + 1))
            return starts, np.append(eots, n)[: len(starts)]
        sep = (self.meta.get("sep") or self.meta.get("delimiter") or "\n\n").encode("utf-8")
        found = [m.start() for m in re.finditer(re.escape(sep), data.tobytes())]
        return np.array([0] + [f + len(sep) for f in found], dtype=np.int64), np.array(found + [n], dtype=np.int64)

    def special_ids(self) -> list[int]:
        """Ids that are never text (the chat specials, eot among them): no n-gram may hold one."""
        return sorted((self.meta.get("special_token_ids") or {}).values()) if self.space == "tokens" else []


def _not_found(cache_dir, family: str, source: str, split: str) -> str:
    """Why a registry source's split is missing: the meta.json it would have."""
    if family == "streams":
        path = layout.stream_meta(layout.streams_dir(cache_dir), source, split)
        return f"{path} not found (not in streams.enabled_sources?)"
    folder = layout.pretrain_dir(cache_dir, source) if family == "pretrain" else layout.sft_dir(cache_dir, source)
    return f"{folder}/{layout.META} not found"


def _split_or_reason(art: Artifact | None, split: str) -> tuple[Split | None, str | None]:
    """The split of `art`, or (None, why not): missing, not built, or empty."""
    if art is None or not art.meta_path.is_file():
        return None, None
    meta = read_meta(art.meta_path)
    if not is_built(meta):
        return None, f"not built: {meta['reason']}"
    files = tuple(art.files(split))
    if sum(os.path.getsize(p) for p in files) == 0:
        return None, "empty"
    return Split(art, split, files, meta), None


def find_splits(cache_dir: str | os.PathLike, spaces=None) -> tuple[list[Split], list[dict]]:
    """(every non-empty split of every registry source's cache under `cache_dir`, [{"name", "reason"} of
    what is left out]): a source none of whose splits is there is left out once, by its name. `spaces`
    ("tokens", "bytes"): only the families of those spaces (default: all)."""
    artifacts = {(a.kind, a.source, s): a for a in list_artifacts(cache_dir) for s in a.splits}
    splits, skipped = [], []
    for family, sources in REGISTRY.items():
        if spaces is not None and layout.FAMILIES[family].space not in spaces:
            continue
        for source in sources:
            found, missing = [], {}
            for split in layout.SPLITS:
                s, reason = _split_or_reason(artifacts.get((family, source, split)), split)
                if s is None:
                    missing[split] = reason or _not_found(cache_dir, family, source, split)
                found += [s] if s is not None else []
            name = f"{family}/{source}"
            if not found and "empty" not in missing.values():  # the whole cache is left out: say so once
                skipped.append({"name": name, "reason": missing[layout.SPLITS[0]]})
            else:
                skipped += [{"name": f"{name} {k}", "reason": r} for k, r in missing.items()]
            splits += found
    return splits, skipped


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
