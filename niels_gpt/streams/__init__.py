"""The byte-streams stage: UTF-8 byte streams of wiki, roam and primer text, and mixed byte batches
(rules/streams.smk).

    from niels_gpt.streams import StreamBuildConfig, build_sources
    sources_train, sources_val = build_sources(StreamBuildConfig(roam_root=".roam-data/"))

build.py (what each stream holds, and writing it), reuse.py (`build_sources`: reuse streams whose
meta.json matches, for callers without Snakemake), job.py (config -> one source's streams: the
workflow's job), batches.py (mixed byte batches; public as `niels_gpt.batching`), cli.py (`build-streams`).
"""

from niels_gpt.streams.build import (
    BytesSources,
    StreamBuildConfig,
    build_primer_stream,
    build_roam_stream,
    build_wiki_stream,
    check_gating,
    check_stream_lengths,
    stream_paths,
    write_stream,
)
from niels_gpt.streams.job import build_stream_from_config, stream_build_config
from niels_gpt.streams.reuse import build_sources, build_sources_from_docs

__all__ = [
    "BytesSources",
    "StreamBuildConfig",
    "build_primer_stream",
    "build_roam_stream",
    "build_sources",
    "build_sources_from_docs",
    "build_stream_from_config",
    "build_wiki_stream",
    "check_gating",
    "check_stream_lengths",
    "stream_build_config",
    "stream_paths",
    "write_stream",
]
