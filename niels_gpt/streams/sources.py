"""`build_sources(StreamBuildConfig)`: every enabled byte stream, and the one build path behind it.

`build_streams` is what both `build_sources` (callers without Snakemake) and the workflow's job
(job.py, one source at a time, `force_rebuild`: deciding whether to rebuild is Snakemake's job there)
run:
  1. plan every enabled source (`build.source_streams`); a source that is not required and has no
     input (missing folder or file) is not built;
  2. per stream: its bytes from disk when it is current (`build.read_current`: its meta.json records
     the same header and inputs, its .bin is whole) and `force_rebuild` is off, else built;
  3. a source that is not required and has an empty split is not built;
  4. every stream left holds at least T+1 bytes, or one ValueError lists every short one
     (`build.check_stream_lengths`), and nothing is written;
  5. the streams that were built are written, and each source not built gets its "not built" record.
Only `enabled_sources` are touched; `required_sources` (a subset) must have input and be non-empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.layout import SPLITS
from niels_gpt.log import log
from niels_gpt.meta import is_built
from niels_gpt.streams.build import (
    BytesSources,
    SplitStream,
    StreamBuildConfig,
    WikiDocs,
    check_gating,
    check_stream_lengths,
    read_current,
    source_streams,
    stream_header,
    stream_paths,
    write_not_built,
    write_stream,
)


@dataclass(frozen=True)
class Stream:
    """One (source, split) stream after `build_streams`: its bytes (b"" when not built), its meta as
    written or read, and whether it was taken from disk as current."""

    data: bytes
    meta: dict
    reused: bool = False


def _plan(
    cfg: StreamBuildConfig, wiki_docs, wiki_dataset, wiki_read
) -> tuple[dict[str, list[SplitStream]], dict[str, str]]:
    """Streams of every enabled source in STREAM_SOURCES order; sources not built -> reason."""
    plans: dict[str, list[SplitStream]] = {}
    not_built: dict[str, str] = {}
    for source in STREAM_SOURCES:
        if source not in cfg.enabled_sources:
            continue
        try:
            plans[source] = source_streams(cfg, source, wiki_docs, wiki_dataset, wiki_read)
        except (FileNotFoundError, NotADirectoryError) as e:
            if source in cfg.required_sources:
                raise
            not_built[source] = f"not in streams.required_sources and has no input ({e})"
    return plans, not_built


@dataclass
class _Pending:
    """A stream between steps 2 and 5: its plan, its bytes, the meta read when it is current, blank docs."""

    plan: SplitStream
    data: bytes
    meta: dict | None
    blank: int


def _load_or_build(cfg: StreamBuildConfig, plan: SplitStream) -> _Pending:
    current = None if cfg.force_rebuild else read_current(cfg.cache_dir, plan)
    if current is not None:
        return _Pending(plan, *current, blank=0)
    data, blank = plan.build()
    return _Pending(plan, data, None, blank)


def _write_or_keep(cfg: StreamBuildConfig, p: _Pending) -> Stream:
    source, split = p.plan.source, p.plan.split
    bin_path = stream_paths(cfg.cache_dir, source, split)[0]
    if p.meta is not None:
        log(f"streams: {source} {split}: {len(p.data):,} bytes, current in {bin_path}")
        return Stream(p.data, p.meta, reused=True)
    meta = write_stream(cfg.cache_dir, source, split, p.data, p.plan.inputs, p.blank, header=p.plan.header)
    log(f"streams: {source} {split}: {len(p.data):,} bytes ({p.blank:,} blank documents left out) -> {bin_path}")
    return Stream(p.data, meta)


def build_streams(
    cfg: StreamBuildConfig,
    *,
    wiki_docs: WikiDocs | None = None,
    wiki_dataset: tuple[str, str | None] | None = None,
    wiki_read: Mapping | None = None,
) -> dict[tuple[str, str], Stream]:
    """(source, split) -> Stream for every enabled source, built or not (steps: the module docstring).

    `wiki_docs` ({"train": [...], "val": [...]}, lines of `wiki_dataset` = (dataset id, config), or a
    function returning them, called only when wiki is enabled) replace loading wikitext's default
    splits; `wiki_dataset` defaults to wikitext's (`build.wikitext_dataset`); `wiki_read` (what the loader
    read, filled while `wiki_docs` runs) is recorded in the wiki streams' meta (`build.source_streams`)."""
    check_gating(cfg)
    plans, not_built = _plan(cfg, wiki_docs, wiki_dataset, wiki_read)
    pending: dict[tuple[str, str], _Pending] = {}
    for source, splits in plans.items():
        got = {plan.split: _load_or_build(cfg, plan) for plan in splits}
        empty = [split for split in SPLITS if not got[split].data]
        if empty and source not in cfg.required_sources:
            not_built[source] = f"not in streams.required_sources and its {'/'.join(empty)} split is empty"
        else:
            pending.update({(source, split): p for split, p in got.items()})
    check_stream_lengths(
        {f"{source} {split}": len(p.data) for (source, split), p in pending.items()},
        cfg.T,
        required={f"{source} {split}" for source, split in pending if source in cfg.required_sources},
    )
    out = {key: _write_or_keep(cfg, p) for key, p in pending.items()}
    for source, reason in not_built.items():
        header = stream_header(cfg, source, wiki_dataset)
        for split in SPLITS:
            meta = write_not_built(cfg.cache_dir, source, split, reason=reason, header=header)
            out[(source, split)] = Stream(b"", meta)
        log(f"streams: {source}: not built, {reason}")
    return out


def _by_split(streams: Mapping[tuple[str, str], Stream]) -> tuple[BytesSources, BytesSources]:
    """(train, val): source -> bytes of the streams that were built (not the "not built" ones)."""
    built = {key: s.data for key, s in streams.items() if is_built(s.meta)}
    train, val = ({source: data for (source, split), data in built.items() if split == want} for want in SPLITS)
    return train, val


def build_sources_from_docs(
    cfg: StreamBuildConfig,
    *,
    wiki_docs: WikiDocs | None = None,
    wiki_dataset: tuple[str, str | None] | None = None,
    wiki_read: Mapping | None = None,
) -> tuple[BytesSources, BytesSources]:
    """`build_sources` with the wiki documents given ({"train": [...], "val": [...]}) instead of loaded.

    Roam and primer still come from `cfg.roam_root` / `cfg.primer_path`. Nothing is written when a
    check fails.
    """
    return _by_split(build_streams(cfg, wiki_docs=wiki_docs, wiki_dataset=wiki_dataset, wiki_read=wiki_read))


def build_sources(cfg: StreamBuildConfig) -> tuple[BytesSources, BytesSources]:
    """(sources_train, sources_val): source -> UTF-8 bytes of every enabled source that was built.

    A stream whose cache is current (its .meta.json matches the current inputs) is loaded from its .bin;
    the others are built and written (.bin, then .meta.json). See the module docstring."""
    return build_sources_from_docs(cfg)
