"""One source's byte streams from the validated config: what the `streams` rule and `build-all` run.

`build_stream_from_config(cfg, source, out_dir)` runs the one build path (`sources.build_streams`)
for that source alone, so it reads only that source's inputs (editing a roam note changes the roam
streams only), and always rebuilds (`force_rebuild`): under Snakemake the .bin files are targets, so
deciding whether to rebuild is Snakemake's job. A source that is enabled but not required and has no
input gets empty .bin files and a "not built" meta.json, so the workflow's targets exist.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from niels_gpt import layout
from niels_gpt.data.registry import STREAM_SOURCES, roam_root, wikitext_lines
from niels_gpt.streams.build import StreamBuildConfig


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


def build_stream_from_config(cfg: Mapping, source: str, out_dir: str | os.PathLike) -> dict:
    """Build one source's train and val streams in `out_dir`; returns {"train": meta, "val": meta}."""
    from niels_gpt.streams.sources import build_streams

    if source not in STREAM_SOURCES:
        raise ValueError(f"unknown stream source {source!r}; streams are {list(STREAM_SOURCES)}")
    enabled = cfg["streams"]["enabled_sources"]
    if source not in enabled:
        raise ValueError(f"stream source {source!r} is not in streams.enabled_sources {enabled}; enable it first")
    required = (source,) if source in cfg["streams"]["required_sources"] else ()
    scfg = stream_build_config(
        cfg, cache_dir=out_dir, enabled_sources=(source,), required_sources=required, force_rebuild=True
    )
    wikitext = cfg["sources"]["wikitext"]
    wiki_read: dict = {}  # what each wikitext split read (the commit included), filled by wikitext_lines
    streams = build_streams(
        scfg,
        # read only when the source is wiki, one line at a time as the stream is written
        wiki_docs=lambda: wikitext_lines(cfg, provenance=wiki_read, lazy=True),
        wiki_dataset=(wikitext["dataset_id"], wikitext["config"]),
        wiki_read=wiki_read,
    )
    return {split: streams[(source, split)].meta for split in layout.SPLITS}
