"""The byte-streams stage: UTF-8 byte streams of wiki, roam and primer text, and mixed byte batches
(rules/streams.smk).

    from niels_gpt.streams import StreamBuildConfig, build_sources
    sources_train, sources_val = build_sources(StreamBuildConfig(roam_root=".roam-data/"))

build.py (what each stream holds, its files, whether they are current), sources.py (`build_sources`
and `build_streams`: the one build path, for callers without Snakemake and for the workflow's job),
job.py (config -> one source's streams: the workflow's job), batches.py (mixed byte batches; public
as `niels_gpt.batching`), cli.py (`build-streams`).
"""

from niels_gpt.streams.build import (
    BytesSources,
    ByteStream,
    StreamBuildConfig,
    build_primer_stream,
    build_roam_stream,
    build_wiki_stream,
    check_gating,
    check_stream_lengths,
    read_current,
    stream_paths,
    write_not_built,
    write_stream,
)
from niels_gpt.streams.job import build_stream_from_config, stream_build_config
from niels_gpt.streams.sources import build_sources, build_sources_from_docs, build_streams

__all__ = [
    "ByteStream",
    "BytesSources",
    "StreamBuildConfig",
    "build_primer_stream",
    "build_roam_stream",
    "build_sources",
    "build_sources_from_docs",
    "build_stream_from_config",
    "build_streams",
    "build_wiki_stream",
    "check_gating",
    "check_stream_lengths",
    "read_current",
    "stream_build_config",
    "stream_paths",
    "write_not_built",
    "write_stream",
]
