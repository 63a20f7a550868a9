"""The raw caches curation reads: where they are, their splits in the survival order, their units in chunks.

Layout (rules/curation.smk): the per-source build jobs write what they always wrote, under
`{cache}/curation/raw/` instead of `{cache}/`:
  raw/pretrain/{source}/{train,val}/shard_NNNNN.bin, meta.json      (a source built as one job)
  raw/pretrain/{source}/parts/part_NNN/{train,val}/..., meta.json   (a part of a scaled-out source)
  raw/sft/{source}/{train,val}_tokens.bin, _idx.npy, meta.json
`curate` reads all of them; `apply` writes each one's curated copy to the usual path.

Survival order (`ordered_splits`): within a family (pretrain documents, SFT examples), every val split
before every train split, then sources in `dedup.source_priority` order (unlisted ones after, in registry
order), then parts in order, then units in stream order.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from niels_gpt import layout
from niels_gpt.data.registry import PRETRAIN_SOURCES, SFT_SOURCES
from niels_gpt.layout import RAW_DIR
from niels_gpt.meta import is_built, read_meta
from niels_gpt.token_files import TOKEN_DTYPE, DiskSequence, list_shards

# Units are read in chunks of ~2 M tokens (4 MB; the keys of one chunk take ~150 MB of temporaries, a few
# chunks are in flight): memory flat in the corpus size.
CHUNK_TOKENS = 1 << 21


def raw_root(cache_dir: str | os.PathLike) -> str:
    return f"{cache_dir}/{RAW_DIR}"


@dataclass
class RawSplit:
    """One split of one raw cache (a part of a source, for a scaled-out source)."""

    family: str  # pretrain | sft
    source: str
    part: str | None
    split: str
    folder: Path
    meta: dict = field(repr=False)
    budget: int | None = None  # pretrain: the split's final budget (a part's share for a part)

    @property
    def name(self) -> str:
        return f"{self.family}/{self.source}" + (f"/{self.part}" if self.part else "") + f" {self.split}"

    def files(self) -> list[Path]:
        if self.family == "pretrain":
            return list_shards(self.folder / self.split)
        return [self.folder / layout.sft_tokens_name(self.split)]

    def sequence(self) -> DiskSequence:
        return DiskSequence(self.files(), TOKEN_DTYPE)

    def unit_starts(self) -> np.ndarray | None:
        """SFT: the example offsets; pretrain: None (documents end at eot)."""
        if self.family == "sft":
            return np.load(self.folder / layout.sft_offsets_name(self.split), allow_pickle=False).astype(np.int64)
        return None


def source_order(family: str, priority: list[str] | None) -> list[str]:
    registry = PRETRAIN_SOURCES if family == "pretrain" else SFT_SOURCES
    listed = [s for s in (priority or []) if s in registry]
    return listed + [s for s in registry if s not in listed]


def ordered_splits(raw_dirs: dict[tuple[str, str, str | None], Path], priority: list[str] | None) -> list[RawSplit]:
    """Every built split of the raw caches `{(family, source, part): folder}`, in the survival order."""
    out = []
    for family in ("pretrain", "sft"):
        for split in ("val", "train"):
            for source in source_order(family, priority):
                parts = sorted(p for f, s, p in raw_dirs if f == family and s == source)
                for part in parts:
                    folder = Path(raw_dirs[(family, source, part)])
                    meta = read_meta(folder / layout.META)
                    if is_built(meta):
                        out.append(RawSplit(family, source, part, split, folder, meta))
    return out


def doc_chunks(seq: DiskSequence, eot: int, chunk: int | None = None) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """(offset of the chunk in the split, its ids, start of each document in it) over whole documents:
    a document (its eot included) is never split between chunks; a last document without eot (cut by a
    budget) is one too."""
    total, lo, chunk = len(seq), 0, chunk or CHUNK_TOKENS
    while lo < total:
        hi = min(lo + chunk, total)
        ids = seq.read(lo, hi)
        if hi < total:
            eots = np.flatnonzero(ids == eot)
            while not len(eots) and hi < total:  # one document longer than a chunk: read on to its end
                hi = min(hi + chunk, total)
                ids = seq.read(lo, hi)
                eots = np.flatnonzero(ids == eot)
            if hi < total:
                ids = ids[: eots[-1] + 1]
        ends = np.flatnonzero(ids == eot) + 1
        starts = np.concatenate(([0], ends[ends < len(ids)]))
        yield lo, ids, starts
        lo += len(ids)


def unit_chunks(
    seq: DiskSequence, offsets: np.ndarray, chunk: int | None = None
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The same over SFT examples (`offsets`: each example's start)."""
    total, k, chunk = len(seq), 0, chunk or CHUNK_TOKENS
    bounds = np.append(offsets, total)
    while k < len(offsets):
        lo = int(bounds[k])
        last = max(int(np.searchsorted(bounds, lo + chunk, side="right")) - 1, k + 1)
        last = min(last, len(offsets))
        hi = int(bounds[last])
        yield lo, seq.read(lo, hi), bounds[k:last] - lo
        k = last
