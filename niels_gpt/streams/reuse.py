"""`build_sources(StreamBuildConfig)`: every enabled byte stream, reusing those whose cache is current.

For callers without Snakemake. A stream is loaded from its .bin when its .meta.json matches the
current inputs (wiki: source, split, n_docs, total_chars, sep; roam: each file's path, mtime_ns,
size + sep; primer: path, mtime_ns, size, delimiter + split; roam and primer also seed and val_frac,
which decide the split) and the .bin has n_bytes; otherwise it is built by the same builder the
workflow runs (`build.source_streams`) and written. Under Snakemake the .bin files are rule targets
and `build-streams` always rebuilds.

Gating: only `enabled_sources` are built; `required_sources` (a subset) must be non-empty in both
splits. An enabled source that is not required and has no input (missing folder/file, empty
split) is left out with a note. Every stream returned holds at least T+1 bytes; otherwise one
ValueError lists every short stream with its length, and nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.layout import SPLITS, STREAM_FORMAT_VERSION
from niels_gpt.streams.build import (
    BytesSources,
    SplitStream,
    StreamBuildConfig,
    check_gating,
    check_stream_lengths,
    log,
    source_streams,
    stream_paths,
    write_stream,
)


def _plan(cfg: StreamBuildConfig, wiki_docs) -> tuple[list[SplitStream], dict[str, str]]:
    """Streams of every enabled source in STREAM_SOURCES order; skipped non-required sources -> reason."""
    jobs: list[SplitStream] = []
    skipped: dict[str, str] = {}
    for source in STREAM_SOURCES:
        if source not in cfg.enabled_sources:
            continue
        try:
            jobs += source_streams(cfg, source, wiki_docs)
        except (FileNotFoundError, NotADirectoryError) as e:
            if source in cfg.required_sources:
                raise
            skipped[source] = f"no input ({e})"
    return jobs, skipped


def _load_cached(job: SplitStream, cache_dir: str) -> bytes | None:
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


def build_sources_from_docs(
    cfg: StreamBuildConfig, *, wiki_docs: Mapping[str, Sequence[str]] | None = None
) -> tuple[BytesSources, BytesSources]:
    """`build_sources` with the wiki documents given ({"train": [...], "val": [...]}) instead of loaded.

    Roam and primer still come from `cfg.roam_root` / `cfg.primer_path`. Nothing is written when a
    check fails.
    """
    check_gating(cfg)
    jobs, skipped = _plan(cfg, wiki_docs)
    streams: dict[tuple[str, str], bytes] = {}
    rebuilt: list[tuple[SplitStream, int]] = []  # (job, blank documents left out)
    for job in jobs:
        data = None if cfg.force_rebuild else _load_cached(job, cfg.cache_dir)
        if data is None:
            data, blank = job.build()
            rebuilt.append((job, blank))
        streams[(job.source, job.split)] = data
    for source in sorted({s for s, _ in streams}):
        empty = [split for split in SPLITS if not streams[(source, split)]]
        if empty and source not in cfg.required_sources:
            skipped[source] = f"empty {'/'.join(empty)} split"
            for split in SPLITS:
                del streams[(source, split)]
    check_stream_lengths(streams, cfg.T, cfg.required_sources)
    for job, blank in rebuilt:
        if (job.source, job.split) in streams:
            write_stream(cfg.cache_dir, job.source, job.split, streams[(job.source, job.split)], job.inputs, blank)
    built = {(j.source, j.split) for j, _ in rebuilt}
    for (source, split), data in streams.items():
        how = "built ->" if (source, split) in built else "cached in"
        log(f"{source} {split}: {len(data):,} bytes, {how} {stream_paths(cfg.cache_dir, source, split)[0]}")
    for source, reason in sorted(skipped.items()):
        log(f"{source}: left out, not required and {reason}")
    train = {src: b for (src, split), b in streams.items() if split == "train"}
    val = {src: b for (src, split), b in streams.items() if split == "val"}
    return train, val


def build_sources(cfg: StreamBuildConfig) -> tuple[BytesSources, BytesSources]:
    """(sources_train, sources_val): source -> UTF-8 bytes, for the enabled sources (see the docstring)."""
    return build_sources_from_docs(cfg)
