"""Where the artifacts of a cache tree are, for the read-only tools (`verify`, `info`, `inspect`).

The tree the Snakemake workflow writes (layout.py):
  {cache}/tokenizer/spm.model + meta.json
  {cache}/pretrain/{source}/meta.json + {train,val}/shard_NNNNN.bin
  {cache}/sft/{source}/meta.json + {train,val}_tokens.bin + {train,val}_idx.npy
  {cache}/streams/{source}_{split}.bin + {source}_{split}.meta.json
`find_artifacts(path)` accepts the cache root, a family folder (`pretrain/`, `sft/`, `streams/`), one
artifact (a source folder, the tokenizer folder, one stream's .bin or .meta.json) or one split of it
(a pretrain split folder or shard, an SFT `{split}_tokens.bin`), and lists the artifacts it holds in the
order above. Only folder listings are read here; meta.json files are read by the tools. Temporary
`*.tmp` files (a running or killed build) are never artifacts; `stray_tmp_files` lists them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from niels_gpt.atomic import TMP_SUFFIX
from niels_gpt.cache.meta import read_meta
from niels_gpt.layout import (
    META,
    SPLITS,
    STREAM_META_SUFFIX,
    TOKENIZER_MODEL,
    sft_offsets_name,
    sft_tokens_name,
    tokenizer_model,
)

FAMILIES = ("tokenizer", "pretrain", "sft", "streams")
BUILD_HINT = "build it with `snakemake -j4 cache/all` (add `--config demo=true` for the offline sample data)"


@dataclass(frozen=True)
class Artifact:
    """One cache artifact: kind tokenizer | pretrain | sft | stream."""

    kind: str
    name: str  # "tokenizer", "pretrain/wikitext", "sft/primer", "streams/wiki_train"
    path: Path  # its folder; for a stream, its .bin
    meta_path: Path

    def read_meta(self) -> dict:
        return read_meta(str(self.meta_path))


@dataclass(frozen=True)
class Selection:
    """What a path names: the cache root (None outside a tree), its artifacts, and a split if one was named."""

    root: Path | None
    artifacts: list[Artifact]
    split: str | None = None
    whole_tree: bool = False  # the cache root itself was named


def tokenizer_artifact(root: Path) -> Artifact:
    return Artifact("tokenizer", "tokenizer", root / "tokenizer", root / "tokenizer" / META)


def source_artifact(kind: str, folder: Path) -> Artifact:
    family = "pretrain" if kind == "pretrain" else "sft"
    return Artifact(kind, f"{family}/{folder.name}", folder, folder / META)


def stream_artifact(streams_dir: Path, stem: str) -> Artifact:
    return Artifact(
        "stream", f"streams/{stem}", streams_dir / f"{stem}.bin", streams_dir / f"{stem}{STREAM_META_SUFFIX}"
    )


def stream_stems(streams_dir: Path) -> list[str]:
    """`{source}_{split}` of every stream with a .bin or a .meta.json (so a lone file is still verified)."""
    stems = set()
    for p in streams_dir.iterdir():
        if p.name.endswith(STREAM_META_SUFFIX):
            stems.add(p.name[: -len(STREAM_META_SUFFIX)])
        elif p.suffix == ".bin":
            stems.add(p.stem)
    return sorted(stems)


def _family(root: Path, family: str) -> list[Artifact]:
    d = root / family
    if not d.is_dir():
        return []
    if family == "streams":
        return [stream_artifact(d, stem) for stem in stream_stems(d)]
    kind = "pretrain" if family == "pretrain" else "sft"
    return [source_artifact(kind, p) for p in sorted(d.iterdir()) if p.is_dir()]


def _is_root(d: Path) -> bool:
    return any((d / f).is_dir() for f in FAMILIES)


def _source_kind(d: Path) -> str | None:
    """pretrain | sft for a source folder (by its meta.json, else by the files it holds)."""
    if (d / META).is_file():
        try:
            meta = read_meta(str(d / META))
        except ValueError:
            meta = {}
        if meta.get("kind") == "sft" or "train_examples" in meta:
            return "sft"
        if "shards" in meta:
            return "pretrain"
    if any((d / sft_tokens_name(s)).exists() for s in SPLITS):
        return "sft"
    if any((d / s).is_dir() for s in SPLITS) or d.parent.name == "pretrain":
        return "pretrain"
    return "sft" if d.parent.name == "sft" else None


def _root_of(artifact_dir: Path, family: str) -> Path | None:
    return artifact_dir.parent.parent if artifact_dir.parent.name == family else None


def _select_file(p: Path) -> Selection:
    if p.name.endswith(TMP_SUFFIX):
        raise ValueError(f"{p}: a temporary file of an unfinished build, not an artifact; delete it or rebuild")
    if p.name.endswith(STREAM_META_SUFFIX) or (p.suffix == ".bin" and p.with_suffix(STREAM_META_SUFFIX).exists()):
        stem = p.name[: -len(STREAM_META_SUFFIX)] if p.name.endswith(STREAM_META_SUFFIX) else p.stem
        root = p.parent.parent if p.parent.name == "streams" else None
        return Selection(root, [stream_artifact(p.parent, stem)])
    if p.suffix == ".bin" and p.parent.name in SPLITS:  # a pretrain shard
        art = source_artifact("pretrain", p.parent.parent)
        return Selection(_root_of(art.path, "pretrain"), [art], p.parent.name)
    for split in SPLITS:  # an SFT split file
        if p.name in (sft_tokens_name(split), sft_offsets_name(split)):
            return Selection(_root_of(p.parent, "sft"), [source_artifact("sft", p.parent)], split)
    if p.name == TOKENIZER_MODEL:
        return Selection(p.parent.parent, [tokenizer_artifact(p.parent.parent)])
    if p.name == META:
        return find_artifacts(p.parent)
    raise ValueError(
        f"{p}: not a cache file (expected a stream .bin/.meta.json, a shard_*.bin, {{split}}_tokens.bin or meta.json)"
    )


def find_artifacts(path: str | os.PathLike) -> Selection:
    """The artifacts under `path` (see the module docstring); errors name the path and what to do."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such cache; {BUILD_HINT}")
    if p.is_file():
        return _select_file(p)
    if _is_root(p):
        arts = [tokenizer_artifact(p)] + [a for f in FAMILIES[1:] for a in _family(p, f)]
        return Selection(p, arts, whole_tree=True)
    if p.name in ("pretrain", "sft", "streams") and _is_root(p.parent):
        return Selection(p.parent, _family(p.parent, p.name))
    if (p / TOKENIZER_MODEL).exists() or p.name == "tokenizer":
        return Selection(p.parent, [tokenizer_artifact(p.parent)])
    if any(q.name.endswith(STREAM_META_SUFFIX) for q in p.iterdir()):  # a streams folder outside a tree
        return Selection(None, [stream_artifact(p, stem) for stem in stream_stems(p)])
    if p.name in SPLITS and (p.parent / META).is_file() and _source_kind(p.parent) == "pretrain":
        art = source_artifact("pretrain", p.parent)
        return Selection(_root_of(art.path, "pretrain"), [art], p.name)
    kind = _source_kind(p)
    if kind is None:
        raise ValueError(
            f"{p}: not a cache folder (expected a cache root with {', '.join(f + '/' for f in FAMILIES)}, "
            f"or one artifact folder with a meta.json); {BUILD_HINT}"
        )
    family = "pretrain" if kind == "pretrain" else "sft"
    return Selection(_root_of(p, family), [source_artifact(kind, p)])


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
            if a.kind == "stream":  # only this stream's files, not its neighbours'
                candidates += a.path.parent.glob(f"{a.path.stem}.*{TMP_SUFFIX}")
            elif a.path.is_dir():
                candidates += a.path.rglob(f"*{TMP_SUFFIX}")
    return sorted({q for q in candidates if q.is_file()})
