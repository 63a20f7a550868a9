"""Byte streams for byte-level training: wiki, roam, primer, each split train/val (seed 002, SPEC 8).

On disk, per (source, split), in `cache_dir`:
  {source}_{split}.bin        the UTF-8 bytes of the stream, nothing else
  {source}_{split}.meta.json  what the stream was built from + n_bytes, sha256, format_version
The .bin is written first and the .meta.json last, both atomically, so a meta.json means its .bin
is complete. Streams:
  wiki    wikitext lines of the loader's train / val split, joined with `doc_separator`
  roam    markdown notes split by file (seeded, `niels_gpt.splits`), texts joined with `doc_separator`
  primer  the primer text split into dialogues on `delimiter` (held-out dialogues), kept as-is

Invalidation when `build_sources` is called directly (seed 002): a stream is loaded from its .bin
when its meta.json matches the current inputs (wiki: source, split, n_docs, total_chars, sep;
roam: each file's path, mtime_ns, size + sep; primer: path, mtime_ns, size, delimiter + split;
roam and primer also record seed and val_frac, which decide the split) and the .bin has n_bytes;
otherwise it is rebuilt. Under Snakemake the .bin files are rule targets and `build-streams` always
rebuilds (`niels_gpt.cache.cli_streams`). The same inputs give byte-identical .bin files.

Gating: only `enabled_sources` are built; `required_sources` (a subset) must be non-empty in both
splits. An enabled source that is not required and has no input (missing folder/file, empty
split) is left out with a note. Every stream returned holds at least T+1 bytes; otherwise one
ValueError lists every short stream with its length.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from niels_gpt.atomic import atomic_write_bytes, atomic_write_json

BytesSources = dict[str, bytes]  # keys: "wiki" | "roam" | "primer"

STREAM_SOURCES = ("wiki", "roam", "primer")
SPLITS = ("train", "val")
# bump when the bytes built from the same inputs change: caches then rebuild on purpose
STREAM_FORMAT_VERSION = 1
ENCODING = "utf-8"  # seed 002: streams are UTF-8, values 0..255


@dataclass(frozen=True)
class StreamBuildConfig:
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


def build_wiki_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep."""
    return sep.join(docs).encode(ENCODING)


def build_roam_stream(docs: Sequence[str], *, sep: str) -> bytes:
    """utf-8 encode docs and join with sep."""
    return sep.join(docs).encode(ENCODING)


def build_primer_stream(text: str) -> bytes:
    """utf-8 encode text exactly as-is."""
    return text.encode(ENCODING)


def stream_paths(cache_dir: str | os.PathLike, source: str, split: str) -> tuple[str, str]:
    """(.bin path, .meta.json path) of one stream."""
    base = os.path.join(os.fspath(cache_dir), f"{source}_{split}")
    return base + ".bin", base + ".meta.json"


@dataclass
class _Job:
    """One (source, split) stream: what its cache must match, and how to build it."""

    source: str
    split: str
    inputs: dict
    build: Callable[[], bytes]


def _file_stat(path: str | os.PathLike) -> dict:
    st = os.stat(path)
    return {"path": os.fspath(path), "mtime_ns": st.st_mtime_ns, "size": st.st_size}


def _wiki_jobs(cfg: StreamBuildConfig, docs_by_split: Mapping[str, Sequence[str]]) -> list[_Job]:
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
        jobs.append(_Job("wiki", split, inputs, partial(build_wiki_stream, docs, sep=cfg.doc_separator)))
    return jobs


def _roam_jobs(cfg: StreamBuildConfig) -> list[_Job]:
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
        build = partial(lambda ps: build_roam_stream(load_texts(ps), sep=cfg.doc_separator), list(split_paths))
        jobs.append(_Job("roam", split, inputs, build))
    return jobs


def _primer_jobs(cfg: StreamBuildConfig) -> list[_Job]:
    from niels_gpt.data.primer import load_primer_text, split_primer_dialogues

    if not os.path.isfile(cfg.primer_path):
        raise FileNotFoundError(f"{cfg.primer_path}: primer text file not found; create it or point sources.primer.text at it")
    stat = _file_stat(cfg.primer_path)
    texts: dict[str, str] = {}

    def build(split: str) -> bytes:
        if not texts:  # split once, for both splits
            text = load_primer_text(cfg.primer_path)
            texts["train"], texts["val"] = split_primer_dialogues(
                text, val_frac=cfg.primer_val_frac, seed=cfg.seed, delimiter=cfg.delimiter
            )
        return build_primer_stream(texts[split])

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
        jobs.append(_Job("primer", split, inputs, partial(build, split)))
    return jobs


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


def _plan(cfg: StreamBuildConfig, wiki_docs) -> tuple[list[_Job], dict[str, str]]:
    """Jobs of every enabled source in STREAM_SOURCES order; skipped non-required sources -> reason."""
    jobs: list[_Job] = []
    skipped: dict[str, str] = {}
    for source in STREAM_SOURCES:
        if source not in cfg.enabled_sources:
            continue
        try:
            if source == "wiki":
                if wiki_docs is None:
                    from niels_gpt.data.wikitext import load_wikitext

                    wiki_docs = load_wikitext()
                jobs += _wiki_jobs(cfg, wiki_docs)
            elif source == "roam":
                jobs += _roam_jobs(cfg)
            else:
                jobs += _primer_jobs(cfg)
        except (FileNotFoundError, NotADirectoryError) as e:
            if source in cfg.required_sources:
                raise
            skipped[source] = f"no input ({e})"
    return jobs, skipped


def _load_cached(job: _Job, cache_dir: str) -> bytes | None:
    """The cached bytes if the meta matches the job's inputs and the .bin is whole, else None."""
    bin_path, meta_path = stream_paths(cache_dir, job.source, job.split)
    try:
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
        if meta.get("format_version") != STREAM_FORMAT_VERSION:
            return None
        if any(meta.get(k) != v for k, v in json.loads(json.dumps(job.inputs)).items()):
            return None
        data = Path(bin_path).read_bytes()
    except (FileNotFoundError, json.JSONDecodeError, AttributeError):
        return None
    return data if len(data) == meta.get("n_bytes") else None


def write_stream(cache_dir: str | os.PathLike, source: str, split: str, data: bytes, inputs: dict) -> dict:
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
    }
    atomic_write_json(meta_path, meta)
    return meta


def check_stream_lengths(streams: Mapping[tuple[str, str], bytes], T: int, required: Sequence[str] = ()) -> None:
    """One ValueError listing every (source, split) shorter than T+1 bytes."""
    short = [(src, split, len(b)) for (src, split), b in streams.items() if len(b) < T + 1]
    if short:
        lines = [
            f"{src} {split}: {n:,} bytes" + (" (empty, and the source is required)" if n == 0 and src in required else "")
            for src, split, n in short
        ]
        raise ValueError(
            f"byte streams shorter than T+1 = {T + 1:,} bytes:\n  - " + "\n  - ".join(lines)
            + "\nadd data, lower streams.T, or drop the source from streams.enabled_sources / required_sources"
        )


def _log(msg: str) -> None:
    print(f"streams: {msg}", file=sys.stderr, flush=True)


def build_sources_from_docs(
    cfg: StreamBuildConfig, *, wiki_docs: Mapping[str, Sequence[str]] | None = None
) -> tuple[BytesSources, BytesSources]:
    """`build_sources` with the wiki documents given ({"train": [...], "val": [...]}) instead of loaded.

    Roam and primer still come from `cfg.roam_root` / `cfg.primer_path` (tests use temp files).
    Nothing is written when a check fails.
    """
    check_gating(cfg)
    jobs, skipped = _plan(cfg, wiki_docs)
    streams: dict[tuple[str, str], bytes] = {}
    rebuilt: list[_Job] = []
    for job in jobs:
        data = None if cfg.force_rebuild else _load_cached(job, cfg.cache_dir)
        if data is None:
            data = job.build()
            rebuilt.append(job)
        streams[(job.source, job.split)] = data
    for source in sorted({s for s, _ in streams}):
        empty = [split for split in SPLITS if not streams[(source, split)]]
        if empty and source not in cfg.required_sources:
            skipped[source] = f"empty {'/'.join(empty)} split"
            for split in SPLITS:
                del streams[(source, split)]
    check_stream_lengths(streams, cfg.T, cfg.required_sources)
    for job in rebuilt:
        if (job.source, job.split) in streams:
            write_stream(cfg.cache_dir, job.source, job.split, streams[(job.source, job.split)], job.inputs)
    built = {(j.source, j.split) for j in rebuilt}
    for (source, split), data in streams.items():
        how = "built ->" if (source, split) in built else "cached in"
        _log(f"{source} {split}: {len(data):,} bytes, {how} {stream_paths(cfg.cache_dir, source, split)[0]}")
    for source, reason in sorted(skipped.items()):
        _log(f"{source}: left out, not required and {reason}")
    train = {src: b for (src, split), b in streams.items() if split == "train"}
    val = {src: b for (src, split), b in streams.items() if split == "val"}
    return train, val


def build_sources(cfg: StreamBuildConfig) -> tuple[BytesSources, BytesSources]:
    """(sources_train, sources_val): source -> UTF-8 bytes, for the enabled sources.

    Loads each stream from `cfg.cache_dir` when its meta matches the current inputs, else builds
    it and writes .bin + .meta.json (see the module docstring).
    """
    return build_sources_from_docs(cfg)


# ---- config-driven builds: the Snakemake rule (`build-streams`) and `build-all` ----


def stream_build_config(cfg: Mapping, *, cache_dir: str | os.PathLike | None = None, **overrides) -> StreamBuildConfig:
    """The StreamBuildConfig of a validated config dict (roam root routed for demo=true)."""
    from niels_gpt.data.registry import roam_root

    streams, roam, primer = cfg["streams"], cfg["sources"]["roam"], cfg["sources"]["primer"]
    values = dict(
        roam_root=os.fspath(roam_root(cfg)),
        primer_path=primer["text"],
        cache_dir=os.fspath(cache_dir) if cache_dir is not None else os.path.join(cfg["cache_dir"], "streams"),
        doc_separator=streams["doc_separator"],
        roam_val_frac=roam["val_frac"],
        primer_val_frac=primer["val_frac"],
        seed=cfg["seed"],
        delimiter=primer["delimiter"],
        T=streams["T"],
        enabled_sources=tuple(streams["enabled_sources"]),
        required_sources=tuple(streams["required_sources"]),
    )
    values.update(overrides)
    return StreamBuildConfig(**values)


def build_stream_from_config(cfg: Mapping, source: str, out_dir: str | os.PathLike) -> dict:
    """Rebuild one source's train and val streams in `out_dir` (always: under Snakemake they are targets).

    Reads only that source's inputs (editing a roam note changes the roam streams only). A source
    that is enabled but not required and has no input gets empty .bin files and a meta.json saying
    why, so the workflow's targets exist; `batching.load_stream_cache` skips them.
    Returns {"train": meta, "val": meta}.
    """
    if source not in STREAM_SOURCES:
        raise ValueError(f"unknown stream source {source!r}; streams are {list(STREAM_SOURCES)}")
    enabled = cfg["streams"]["enabled_sources"]
    if source not in enabled:
        raise ValueError(f"stream source {source!r} is not in streams.enabled_sources {enabled}; enable it first")
    required = (source,) if source in cfg["streams"]["required_sources"] else ()
    scfg = stream_build_config(
        cfg, cache_dir=out_dir, force_rebuild=True, enabled_sources=(source,), required_sources=required
    )
    wiki_docs = None
    if source == "wiki":
        from niels_gpt.data.registry import wikitext_lines

        wiki_docs = wikitext_lines(cfg)
    train, _ = build_sources_from_docs(scfg, wiki_docs=wiki_docs)
    metas = {}
    for split in SPLITS:
        if source not in train:  # left out: not required, no input
            reason = "not required and had no input"
            metas[split] = write_stream(out_dir, source, split, b"", {"source": source, "split": split, "empty_reason": reason})
            _log(f"{source} {split}: empty placeholder ({reason}) -> {stream_paths(out_dir, source, split)[0]}")
        else:
            with open(stream_paths(out_dir, source, split)[1], encoding="utf-8") as f:
                metas[split] = json.load(f)
    return metas
