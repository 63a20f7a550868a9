"""The one walker of a cache tree: which artifacts a path names, with their splits and files.

The tree the Snakemake workflow writes (layout.py):
  {cache}/tokenizer/spm.model + meta.json
  {cache}/pretrain/{source}/meta.json + {train,val}/shard_NNNNN.bin (parted: the parts' shards, listed in meta.json)
  {cache}/sft/{source}/meta.json + {train,val}_tokens.bin + {train,val}_idx.npy
  {cache}/streams/{source}_{split}.bin + {source}_{split}.meta.json
`list_artifacts(root)` lists every artifact of a cache root in that order (the report and the leakage
audit read it); `find_artifacts(path)` (verify, info, inspect) accepts the cache root, a family folder
(`pretrain/`, `sft/`, `streams/`), one artifact (a source folder, the tokenizer folder, one stream's
.bin or .meta.json) or one split of it (a pretrain split folder or shard, an SFT `{split}_tokens.bin`).
An artifact's kind is its family (layout.FAMILIES), read from its meta.json's `kind`; where the
meta.json is missing, damaged or names no family, the family folder it sits in stands in, so that
`verify` can still report the damage. Temporary `*.tmp` files (a running or killed build) are never
artifacts; `stray_tmp_files` lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from niels_gpt.atomic import TMP_SUFFIX
from niels_gpt.layout import (
    FAMILIES,
    META,
    SPLITS,
    STREAM_BIN_SUFFIX,
    STREAM_META_SUFFIX,
    TOKENIZER_MODEL,
    Family,
    sft_offsets_name,
    sft_tokens_name,
    stream_meta_beside,
    stream_stem,
    tokenizer_model,
)
from niels_gpt.meta import read_meta
from niels_gpt.shard_list import split_shards

SOURCE_FAMILIES = ("pretrain", "sft")  # a folder per source, holding both splits
BUILD_HINT = (
    "build it with `snakemake` (the real corpora, into cache/) "
    "or `snakemake --config demo=true` (the offline sample, into cache-demo/)"
)


@dataclass(frozen=True)
class Artifact:
    """One cache artifact (one meta.json): the tokenizer, a pretrain or SFT cache, or one split's byte stream."""

    kind: str  # its family: tokenizer | pretrain | sft | streams (layout.FAMILIES)
    name: str  # "tokenizer", "pretrain/wikitext", "sft/primer", "streams/wiki_train"
    path: Path  # its folder; for a stream, its .bin
    meta_path: Path
    source: str | None = None  # "wikitext", "primer", "wiki"; None for the tokenizer
    split: str | None = None  # a stream's split (each split of a stream is its own artifact)

    @property
    def family(self) -> Family:
        return FAMILIES[self.kind]

    @property
    def splits(self) -> tuple[str, ...]:
        if self.kind in SOURCE_FAMILIES:
            return SPLITS
        return (self.split,) if self.split else ()

    def files(self, split: str) -> list[Path]:
        """The files holding one split's ids (or bytes), in order: a pretrain split's shards as its meta.json
        lists them (shard_list.split_shards: Shard objects, path-like, a manifest's parts' shards with their
        end_eot; without a readable meta.json the split folder's shards, none if it is missing), an SFT
        `{split}_tokens.bin`, a stream's .bin."""
        if self.kind == "pretrain":
            try:
                meta = self.read_meta() if self.meta_path.is_file() else {}
            except ValueError:  # damaged meta.json: verify reports it; the files on disk are what there is
                meta = {}
            try:
                return split_shards(self.path, split, meta if isinstance(meta, dict) else {})
            except NotADirectoryError:  # listed nowhere, and no folder
                return []
        if self.kind == "sft":
            return [self.path / sft_tokens_name(split)]
        return [self.path] if self.kind == "streams" else []

    def offsets(self, split: str) -> Path:
        """An SFT split's `{split}_idx.npy` (the start offset of every example)."""
        return self.path / sft_offsets_name(split)

    def read_meta(self) -> dict:
        return read_meta(self.meta_path)


@dataclass(frozen=True)
class Selection:
    """What a path names: the cache root (None outside a tree), its artifacts, and a split if one was named."""

    root: Path | None
    artifacts: list[Artifact]
    split: str | None = None
    whole_tree: bool = False  # the cache root itself was named


def tokenizer_artifact(folder: Path) -> Artifact:
    return Artifact("tokenizer", "tokenizer", folder, folder / META)


def stream_artifact(streams_dir: Path, stem: str) -> Artifact:
    """The stream `{source}_{split}` of a streams folder (source = stem, no split, if not named so)."""
    source, split = stem, None
    for s in SPLITS:
        if stream_stem(stem[: -len(s) - 1], s) == stem:
            source, split = stem[: -len(s) - 1], s
    return Artifact(
        "streams",
        f"streams/{stem}",
        streams_dir / (stem + STREAM_BIN_SUFFIX),
        streams_dir / (stem + STREAM_META_SUFFIX),
        source,
        split,
    )


def meta_kind(folder: Path, fallback: str | None) -> str | None:
    """The family of the artifact in `folder`: its meta.json's `kind`; `fallback` (the family folder it
    sits in) where the meta.json is missing, unreadable or names no family."""
    try:
        meta = read_meta(folder / META)
    except (OSError, ValueError):
        return fallback
    kind = meta.get("kind") if isinstance(meta, dict) else None
    return kind if kind in FAMILIES else fallback


def folder_artifact(folder: Path, fallback: str | None) -> Artifact | None:
    """The artifact whose folder is `folder` (kind: `meta_kind`), or None if it is none."""
    kind = meta_kind(folder, fallback)
    if kind == "tokenizer":
        return tokenizer_artifact(folder)
    if kind in SOURCE_FAMILIES:
        return Artifact(kind, f"{kind}/{folder.name}", folder, folder / META, folder.name)
    return None


def stream_stems(streams_dir: Path) -> list[str]:
    """`{source}_{split}` of every stream with a .bin or a .meta.json (so a lone file is still verified)."""
    stems = set()
    for p in streams_dir.iterdir():
        if p.name.endswith(STREAM_META_SUFFIX):
            stems.add(p.name[: -len(STREAM_META_SUFFIX)])
        elif p.name.endswith(STREAM_BIN_SUFFIX):
            stems.add(p.name[: -len(STREAM_BIN_SUFFIX)])
    return sorted(stems)


def _family(root: Path, family: str) -> list[Artifact]:
    d = root / family
    if not d.is_dir():
        return []
    if family == "streams":
        return [stream_artifact(d, stem) for stem in stream_stems(d)]
    return [a for p in sorted(d.iterdir()) if p.is_dir() and (a := folder_artifact(p, family)) is not None]


def list_artifacts(root: str | os.PathLike) -> list[Artifact]:
    """Every artifact of the cache tree at `root`, in layout order: the tokenizer (listed even if it is
    missing), then each family's folders in name order."""
    root = Path(root)
    return [tokenizer_artifact(root / "tokenizer")] + [
        a for f in FAMILIES if f != "tokenizer" for a in _family(root, f)
    ]


def _is_root(d: Path) -> bool:
    return any((d / f).is_dir() for f in FAMILIES)


def _root_of(artifact_dir: Path, family: str) -> Path | None:
    return artifact_dir.parent.parent if artifact_dir.parent.name == family else None


def _in_tree(art: Artifact) -> Selection:
    return Selection(_root_of(art.path, art.kind), [art])


def _select_file(p: Path) -> Selection:
    if p.name.endswith(TMP_SUFFIX):
        raise ValueError(f"{p}: a temporary file of an unfinished build, not an artifact; delete it or rebuild")
    meta_beside = stream_meta_beside(p)
    if p.name.endswith(STREAM_META_SUFFIX):
        return _in_tree(stream_artifact(p.parent, p.name[: -len(STREAM_META_SUFFIX)]))
    if meta_beside is not None and Path(meta_beside).exists():  # a stream's .bin
        return _in_tree(stream_artifact(p.parent, p.name[: -len(STREAM_BIN_SUFFIX)]))
    if p.name.endswith(STREAM_BIN_SUFFIX) and p.parent.name in SPLITS:  # a pretrain shard
        art = folder_artifact(p.parent.parent, "pretrain")
        return Selection(_root_of(p.parent.parent, "pretrain"), [art] if art else [], p.parent.name)
    for split in SPLITS:  # an SFT split file
        if p.name in (sft_tokens_name(split), sft_offsets_name(split)):
            art = folder_artifact(p.parent, "sft")
            return Selection(_root_of(p.parent, "sft"), [art] if art else [], split)
    if p.name == TOKENIZER_MODEL:
        return Selection(p.parent.parent, [tokenizer_artifact(p.parent)])
    if p.name == META:
        return find_artifacts(p.parent)
    raise ValueError(
        f"{p}: not a cache file (expected a stream .bin/.meta.json, a shard_*.bin, {{split}}_tokens.bin or meta.json)"
    )


def find_artifacts(path: str | os.PathLike) -> Selection:
    """The artifacts under `path` (see the module docstring); errors name the path and what to do."""
    p = Path(path)
    if not p.exists() and not (p.name in SPLITS and (p.parent / META).is_file()):
        raise FileNotFoundError(f"{p}: no such cache; {BUILD_HINT}")
    if p.is_file():
        return _select_file(p)
    if _is_root(p):
        return Selection(p, list_artifacts(p), whole_tree=True)
    if p.name in FAMILIES and p.name != "tokenizer" and _is_root(p.parent):
        return Selection(p.parent, _family(p.parent, p.name))
    if p.name in SPLITS and (p.parent / META).is_file():  # a pretrain split (a manifest's has no folder)
        parent = p.parent.parent.name
        if meta_kind(p.parent, parent if parent in FAMILIES else None) == "pretrain":
            return Selection(_root_of(p.parent, "pretrain"), [folder_artifact(p.parent, "pretrain")], p.name)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such cache; {BUILD_HINT}")
    art = folder_artifact(p, p.parent.name if p.parent.name in FAMILIES else p.name)
    if art is not None:
        return _in_tree(art) if art.kind != "tokenizer" else Selection(p.parent, [art])
    if any(q.name.endswith(STREAM_META_SUFFIX) for q in p.iterdir()):  # a streams folder outside a tree
        return Selection(None, [stream_artifact(p, stem) for stem in stream_stems(p)])
    raise ValueError(
        f"{p}: not a cache folder (expected a cache root with {', '.join(f + '/' for f in FAMILIES)}, "
        f"or one artifact folder with a meta.json); {BUILD_HINT}"
    )


def default_tokenizer_path(selection: Selection) -> Path | None:
    """`{cache}/tokenizer/spm.model` of the selection's cache tree, or None outside a tree."""
    return None if selection.root is None else Path(tokenizer_model(selection.root))


def stray_tmp_files(selection: Selection) -> list[Path]:
    """`*.tmp` files under the selection (the whole tree for a root): left by a running or killed build."""
    if selection.whole_tree:
        candidates = selection.root.rglob(f"*{TMP_SUFFIX}")
    else:
        candidates = []
        for a in selection.artifacts:
            if a.kind == "streams":  # only this stream's files, not its neighbours'
                candidates += a.path.parent.glob(f"{a.path.stem}.*{TMP_SUFFIX}")
            elif a.path.is_dir():
                candidates += a.path.rglob(f"*{TMP_SUFFIX}")
    return sorted({q for q in candidates if q.is_file()})
