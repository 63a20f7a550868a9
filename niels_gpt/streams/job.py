"""One source's byte streams from the validated config: what the `streams` rule and `build-all` run.

`build_stream_from_config(cfg, source, out_dir)` always builds and writes both splits (under
Snakemake the .bin files are targets, so deciding whether to rebuild is Snakemake's job) and reads
only that source's inputs (editing a roam note changes the roam streams only). A source that is
enabled but not required and has no input gets empty .bin files and a meta.json saying why, so the
workflow's targets exist; `load_stream_cache` skips them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from niels_gpt import layout
from niels_gpt.data.registry import STREAM_SOURCES, roam_root, wikitext_lines
from niels_gpt.streams.build import (
    StreamBuildConfig,
    check_stream_lengths,
    log,
    source_streams,
    stream_paths,
    write_stream,
)

NO_INPUT = "not required and had no input"


def stream_build_config(cfg: Mapping, *, cache_dir: str | os.PathLike | None = None, **overrides) -> StreamBuildConfig:
    """The StreamBuildConfig of a validated config dict (roam root routed for demo=true)."""
    streams, roam, primer = cfg["streams"], cfg["sources"]["roam"], cfg["sources"]["primer"]
    values = dict(
        roam_root=os.fspath(roam_root(cfg)),
        primer_path=primer["text"],
        cache_dir=os.fspath(cache_dir) if cache_dir is not None else layout.streams_dir(cfg["cache_dir"]),
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


def _placeholders(out_dir, source: str) -> dict:
    metas = {}
    for split in layout.SPLITS:
        inputs = {"source": source, "split": split, "empty_reason": NO_INPUT}
        metas[split] = write_stream(out_dir, source, split, b"", inputs)
        log(f"{source} {split}: empty placeholder ({NO_INPUT}) -> {stream_paths(out_dir, source, split)[0]}")
    return metas


def build_stream_from_config(cfg: Mapping, source: str, out_dir: str | os.PathLike) -> dict:
    """Build one source's train and val streams in `out_dir`; returns {"train": meta, "val": meta}."""
    if source not in STREAM_SOURCES:
        raise ValueError(f"unknown stream source {source!r}; streams are {list(STREAM_SOURCES)}")
    enabled = cfg["streams"]["enabled_sources"]
    if source not in enabled:
        raise ValueError(f"stream source {source!r} is not in streams.enabled_sources {enabled}; enable it first")
    required = source in cfg["streams"]["required_sources"]
    scfg = stream_build_config(cfg, cache_dir=out_dir)
    try:
        jobs = source_streams(scfg, source, wikitext_lines(cfg) if source == "wiki" else None)
    except (FileNotFoundError, NotADirectoryError):
        if required:
            raise
        return _placeholders(out_dir, source)
    built = {job.split: job.build() for job in jobs}
    data = {split: b for split, (b, _) in built.items()}
    if not required and not all(data.values()):
        return _placeholders(out_dir, source)
    check_stream_lengths({(source, split): b for split, b in data.items()}, scfg.T, (source,) if required else ())
    metas = {}
    for job in jobs:
        blank = built[job.split][1]
        metas[job.split] = write_stream(out_dir, source, job.split, data[job.split], job.inputs, blank)
        bin_path = stream_paths(out_dir, source, job.split)[0]
        log(f"{source} {job.split}: {len(data[job.split]):,} bytes ({blank:,} blank documents left out) -> {bin_path}")
    return metas
