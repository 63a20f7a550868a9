"""A pretrain split's shard files, resolved from its meta.json: the one place every reader learns them.

A pretrain cache's meta.json lists, per split and in order, the files that hold the split's ids
(`shards[split]`), each with its token count and sha256:
  - a cache built by one job: `{"file": "shard_00000.bin", ...}`, a file of the split's folder `{source}/{split}/`;
  - a parted cache, the merge's manifest (pretrain/parts.py): `{"path": "parts/part_000/train/shard_00000.bin",
    "part": 0, ...}`, a part's own shard, relative to the source's folder (where meta.json is), so the source
    folder moves or copies as a whole. `"end_eot": true` marks the last file of a part whose split ends in a
    budget-cut document that a later part's tokens follow: readers see the eot id in place of that file's
    last token (the file stays as its part wrote it), so documents stay eot-separated across parts and the
    ids read are those a copy of the parts into new shards would hold.
Without a meta.json listing them (a folder of shards written by hand), a split is its folder's `shard_*.bin`
files in name order. `split_shards` resolves either into `Shard`s: token_files.TokenFile (path-like;
open_tokens and DiskSequence apply `end_eot`) with the name, count and sha256 meta.json lists.
`manifest_problems` names every part whose meta.json changed since the merge (a part rebuilt: the manifest is
stale); `unlisted_shards` the shard files in a split's folder that meta.json does not list.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from niels_gpt.hashing import sha256_file
from niels_gpt.layout import META
from niels_gpt.meta import read_meta
from niels_gpt.token_files import TokenFile, list_shards

SHORT_SHA = 12  # hex digits shown for a part meta.json that changed


@dataclass(frozen=True, kw_only=True)
class Shard(TokenFile):
    """One file of a split as meta.json lists it (path-like: os.fspath gives `path`)."""

    name: str  # relative to the source's folder: "train/shard_00000.bin", "parts/part_000/train/shard_00000.bin"
    listed: str  # as meta.json names it: the file in the split's folder, or the manifest's path
    tokens: int | None = None  # None: not listed (no meta.json)
    sha256: str | None = None
    part: int | None = None  # the part it belongs to (a manifest's file)


def is_manifest(meta: dict | None) -> bool:
    """Whether meta.json's shards are a merge's manifest (files of the parts) rather than the split folders'."""
    listed = ((meta or {}).get("shards") or {}).values()
    return any(isinstance(e, dict) and "path" in e for entries in listed for e in entries or [])


def read_source_meta(source_dir: str | os.PathLike) -> dict | None:
    """The source folder's meta.json, or None when there is none."""
    path = Path(source_dir) / META
    return read_meta(path) if path.is_file() else None


def split_shards(source_dir: str | os.PathLike, split: str, meta: dict | None = None) -> list[Shard]:
    """The files of `split` of the pretrain cache in `source_dir`, in order (see the module docstring).

    `meta`: the source's meta.json when the caller has read it (else it is read here, when present). Where
    no meta.json lists the split, a missing split folder is a NotADirectoryError (token_files.list_shards)."""
    source_dir = Path(source_dir)
    if meta is None:
        meta = read_source_meta(source_dir)
    listed = ((meta or {}).get("shards") or {}).get(split)
    if listed is None:
        return [Shard(path=p, name=f"{split}/{p.name}", listed=p.name) for p in list_shards(source_dir / split)]
    eot = meta.get("eot_id")
    out = []
    for entry in listed:
        entry = entry if isinstance(entry, dict) else {}
        if "path" in entry:
            name = listed_name = str(entry["path"])
        else:
            listed_name = str(entry.get("file", "?"))
            name = f"{split}/{listed_name}"
        out.append(
            Shard(
                path=source_dir / name,
                name=name,
                listed=listed_name,
                tokens=entry.get("tokens"),
                sha256=entry.get("sha256"),
                part=entry.get("part"),
                last_id=eot if entry.get("end_eot") else None,
            )
        )
    return out


def unlisted_shards(source_dir: str | os.PathLike, split: str, shards: list[Shard]) -> list[str]:
    """`{split}/shard_*.bin` files on disk in the split's folder that `shards` does not list (stale shards)."""
    folder = Path(source_dir) / split
    if not folder.is_dir():
        return []
    listed = {os.path.normpath(s.path) for s in shards}
    return [f"{split}/{p.name}" for p in list_shards(folder) if os.path.normpath(p) not in listed]


def manifest_problems(source_dir: str | os.PathLike, meta: dict | None) -> list[str]:
    """Every part of a manifest whose meta.json is missing or differs from the one merged (sha256): the part
    was rebuilt or removed since the merge, so the manifest no longer describes it. [] for any other cache."""
    if not is_manifest(meta):
        return []
    problems = []
    for part in meta.get("parts") or []:
        rel = part.get("meta")
        if not rel:
            continue
        path = Path(source_dir) / rel
        if not path.is_file():
            problems.append(f"{rel}: missing (part {part.get('index')} of the manifest); rebuild that part")
            continue
        got = sha256_file(path)
        if got != part.get("meta_sha256"):
            problems.append(
                f"{rel}: sha256 {got[:SHORT_SHA]}... differs from the merged part's "
                f"{str(part.get('meta_sha256'))[:SHORT_SHA]}...: part {part.get('index')} was rebuilt after the "
                "merge; merge again"
            )
    return problems
