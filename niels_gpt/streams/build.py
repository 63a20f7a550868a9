"""Byte streams for byte-level training: what each source's train and val streams hold, and writing them.

On disk, per (source, split), in the streams folder (names from layout.py):
  {source}_{split}.bin        the UTF-8 bytes of the stream, nothing else
  {source}_{split}.meta.json  what the stream was built from (its inputs) + n_bytes, sha256, format_version,
                              skipped_blank
The .bin is written first and the .meta.json last, both atomically, so a meta.json means its .bin
is complete. Streams:
  wiki    wikitext lines of the loader's train / val split, joined with `doc_separator`
  roam    markdown notes split by file (seeded, `niels_gpt.splits`), texts joined with `doc_separator`
  primer  the primer text split into dialogues on `delimiter` (held-out dialogues), kept as-is
Blank documents (empty or whitespace-only notes, lines or dialogues: `data.normalize.is_blank`) are
left out, so a separator never stands next to nothing, and counted in the meta's `skipped_blank`
(primer: blank dialogues are left out before the split and counted in the train stream's meta).

`source_streams(cfg, source)` is the one builder: for each split, the inputs its meta records and a
function that makes its bytes. The workflow's job (job.py) always builds and writes; `build_sources`
(reuse.py), for callers without Snakemake, first reuses every stream whose meta.json matches its
inputs. The same inputs give byte-identical .bin files.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial

from niels_gpt import layout
from niels_gpt.atomic import atomic_write_bytes, atomic_write_json
from niels_gpt.data.normalize import is_blank
from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.layout import SPLITS, STREAM_FORMAT_VERSION

BytesSources = dict[str, bytes]  # keys: "wiki" | "roam" | "primer"
ENCODING = "utf-8"  # streams hold UTF-8 bytes: values 0..255


@dataclass(frozen=True)
class StreamBuildConfig:
    """Everything the streams depend on. `cache_dir` is the streams folder; `force_rebuild` makes
    `build_sources` ignore matching caches; `enabled_sources` are built, `required_sources` (a subset)
    must have input and be non-empty in both splits."""

    roam_root: str = ".roam-data/"
    primer_path: str = "data/primer.txt"
    cache_dir: str = "data/cache/streams"
    doc_separator: str = "\n\n"
    roam_val_frac: float = 0.10
    primer_val_frac: float = 0.10
    seed: int = 42
    delimiter: str = "\n\n<dialogue>\n\n"
    force_rebuild: bool = False
    T: int = 256  # byte context length (config streams.T); every stream needs T+1 bytes
    enabled_sources: tuple[str, ...] = field(default=STREAM_SOURCES)
    required_sources: tuple[str, ...] = field(default=STREAM_SOURCES)


def join_documents(docs: Sequence[str], sep: str) -> tuple[bytes, int]:
    """(the non-blank docs joined with sep, utf-8 encoded; how many blank docs were left out)."""
    kept = [d for d in docs if not is_blank(d)]
    return sep.join(kept).encode(ENCODING), len(docs) - len(kept)


def build_wiki_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep (blank docs left out)."""
    return join_documents(docs, sep)[0]


def build_roam_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep (blank docs left out)."""
    return join_documents(docs, sep)[0]


def build_primer_stream(text: str) -> bytes:
    """utf-8 encode text exactly as-is."""
    return text.encode(ENCODING)


def stream_paths(cache_dir: str | os.PathLike, source: str, split: str) -> tuple[str, str]:
    """(.bin path, .meta.json path) of one stream."""
    return layout.stream_bin(cache_dir, source, split), layout.stream_meta(cache_dir, source, split)


@dataclass
class SplitStream:
    """One (source, split) stream: the inputs its meta.json records, and how to build it:
    `build()` -> (its bytes, blank documents left out)."""

    source: str
    split: str
    inputs: dict
    build: Callable[[], tuple[bytes, int]]


def _file_stat(path: str | os.PathLike) -> dict:
    st = os.stat(path)
    return {"path": os.fspath(path), "mtime_ns": st.st_mtime_ns, "size": st.st_size}


def _wiki_jobs(cfg: StreamBuildConfig, docs_by_split: Mapping[str, Sequence[str]]) -> list[SplitStream]:
    jobs = []
    for split in SPLITS:
        if split not in docs_by_split:
            raise ValueError(f"wiki docs have no {split!r} split (got {sorted(docs_by_split)}); expected train and val")
        docs = docs_by_split[split]
        inputs = {
            "source": "wiki",
            "split": split,
            "n_docs": len(docs),
            "total_chars": sum(map(len, docs)),
            "sep": cfg.doc_separator,
        }
        jobs.append(SplitStream("wiki", split, inputs, partial(join_documents, docs, cfg.doc_separator)))
    return jobs


def _roam_jobs(cfg: StreamBuildConfig) -> list[SplitStream]:
    from niels_gpt.data.roam import list_roam_paths, load_texts, split_roam_paths

    paths = list_roam_paths(cfg.roam_root)
    train_paths, val_paths = split_roam_paths(paths, val_frac=cfg.roam_val_frac, seed=cfg.seed)
    jobs = []
    for split, split_paths in (("train", train_paths), ("val", val_paths)):
        inputs = {
            "source": "roam",
            "split": split,
            "files": [_file_stat(p) for p in split_paths],
            "sep": cfg.doc_separator,
            "seed": cfg.seed,
            "val_frac": cfg.roam_val_frac,
        }
        build = partial(lambda ps: join_documents(load_texts(ps), cfg.doc_separator), list(split_paths))
        jobs.append(SplitStream("roam", split, inputs, build))
    return jobs


def _primer_jobs(cfg: StreamBuildConfig) -> list[SplitStream]:
    from niels_gpt.data.primer import dialogue_blocks, load_primer_text, split_primer_dialogues

    if not os.path.isfile(cfg.primer_path):
        raise FileNotFoundError(
            f"{cfg.primer_path}: primer text file not found; create it or point sources.primer.text at it"
        )
    stat = _file_stat(cfg.primer_path)
    texts: dict[str, str] = {}
    blank: list[int] = []

    def build(split: str) -> tuple[bytes, int]:
        if not texts:  # split once, for both splits; split_primer_dialogues leaves blank dialogues out
            text = load_primer_text(cfg.primer_path)
            texts["train"], texts["val"] = split_primer_dialogues(
                text, val_frac=cfg.primer_val_frac, seed=cfg.seed, delimiter=cfg.delimiter
            )
            blank.append(sum(map(is_blank, dialogue_blocks(text, cfg.delimiter))))
        return build_primer_stream(texts[split]), blank[0] if split == "train" else 0

    jobs = []
    for split in SPLITS:
        inputs = {
            "source": "primer",
            "split": split,
            **stat,
            "delimiter": cfg.delimiter,
            "seed": cfg.seed,
            "val_frac": cfg.primer_val_frac,
        }
        jobs.append(SplitStream("primer", split, inputs, partial(build, split)))
    return jobs


def source_streams(
    cfg: StreamBuildConfig, source: str, wiki_docs: Mapping[str, Sequence[str]] | None = None
) -> list[SplitStream]:
    """The train and val streams of `source`; wiki reads `wiki_docs` ({"train": [...], "val": [...]}),
    or wikitext's default splits when None. FileNotFoundError when the source has no input."""
    if source == "wiki":
        if wiki_docs is None:
            from niels_gpt.data.wikitext import load_wikitext

            wiki_docs = load_wikitext()
        return _wiki_jobs(cfg, wiki_docs)
    if source == "roam":
        return _roam_jobs(cfg)
    if source == "primer":
        return _primer_jobs(cfg)
    raise ValueError(f"unknown stream source {source!r}; streams are {list(STREAM_SOURCES)}")


def check_gating(cfg: StreamBuildConfig) -> None:
    """Known source names, required_sources a subset of enabled_sources, T >= 1."""
    unknown = sorted((set(cfg.enabled_sources) | set(cfg.required_sources)) - set(STREAM_SOURCES))
    if unknown:
        raise ValueError(f"unknown stream sources {unknown}; streams are {list(STREAM_SOURCES)}")
    extra = [s for s in cfg.required_sources if s not in cfg.enabled_sources]
    if extra:
        raise ValueError(
            f"required_sources {extra} are not in enabled_sources {list(cfg.enabled_sources)}; "
            "enable them or drop them from required_sources"
        )
    if cfg.T < 1:
        raise ValueError(f"T must be >= 1, got {cfg.T}")


def write_stream(
    cache_dir: str | os.PathLike, source: str, split: str, data: bytes, inputs: dict, skipped_blank: int = 0
) -> dict:
    """Write the .bin, then its .meta.json (both atomic); returns the meta."""
    bin_path, meta_path = stream_paths(cache_dir, source, split)
    atomic_write_bytes(bin_path, data)
    meta = {
        **inputs,
        "bin": os.path.basename(bin_path),
        "n_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "encoding": ENCODING,
        "format_version": STREAM_FORMAT_VERSION,
        "skipped_blank": skipped_blank,
    }
    atomic_write_json(meta_path, meta)
    return meta


def check_stream_lengths(streams: Mapping[tuple[str, str], bytes], T: int, required: Sequence[str] = ()) -> None:
    """One ValueError listing every (source, split) shorter than T+1 bytes."""
    short = [(src, split, len(b)) for (src, split), b in streams.items() if len(b) < T + 1]
    if short:
        lines = [
            f"{src} {split}: {n:,} bytes"
            + (" (empty, and the source is required)" if n == 0 and src in required else "")
            for src, split, n in short
        ]
        raise ValueError(
            f"byte streams shorter than T+1 = {T + 1:,} bytes:\n  - "
            + "\n  - ".join(lines)
            + "\nadd data, lower streams.T, or drop the source from streams.enabled_sources / required_sources"
        )


def log(msg: str) -> None:
    print(f"streams: {msg}", file=sys.stderr, flush=True)
