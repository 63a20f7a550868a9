"""`build_sources(StreamBuildConfig)`: every enabled byte stream, and the one build path behind it.

`build_streams` is what both `build_sources` (callers without Snakemake) and the workflow's job
(job.py, one source at a time, `force_rebuild`: deciding whether to rebuild is Snakemake's job there)
run:
  1. plan every enabled source (`build.source_streams`); a source that is not required and has no
     input (missing folder or file) is not built;
  2. per stream, unless `force_rebuild`: kept when current (`build.read_current`: its meta.json
     records the same header and inputs, its .bin is whole); else written as read into its staged
     .bin (`build.stage_stream`: one document in memory at a time). A wiki stream learns its inputs
     (line counts, the commit read) while written, so it is judged current after that, and its staged
     file dropped;
  3. a source that is not required and has an empty split is not built;
  4. every stream left holds at least T+1 bytes, or one ValueError lists every short one
     (`build.check_stream_lengths`), every staged file is removed and nothing is published;
  5. the streams that were written are published, and each source not built gets its "not built" record.
Only `enabled_sources` are touched; `required_sources` (a subset) must have input and be non-empty.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from niels_gpt.atomic import StagedFile
from niels_gpt.data.registry import STREAM_SOURCES
from niels_gpt.layout import SPLITS
from niels_gpt.log import log
from niels_gpt.meta import is_built
from niels_gpt.streams.build import (
    BytesSources,
    SplitStream,
    StreamBuildConfig,
    WikiDocs,
    Written,
    check_gating,
    check_stream_lengths,
    publish_stream,
    read_current,
    source_streams,
    stage_stream,
    stream_header,
    stream_paths,
    stream_record,
    write_not_built,
)


@dataclass(frozen=True)
class Stream:
    """One (source, split) stream after `build_streams`: its .bin, its meta as written or read, and
    whether it was taken from disk as current. `data` reads the .bin (b"" when not built)."""

    path: str
    meta: dict
    reused: bool = False

    @property
    def data(self) -> bytes:
        return Path(self.path).read_bytes() if is_built(self.meta) else b""


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
    """A stream between steps 2 and 5: its plan, and either the meta read when it is current or its
    staged .bin and what was written."""

    plan: SplitStream
    current: dict | None = None
    staged: StagedFile | None = None
    written: Written | None = None

    @property
    def n_bytes(self) -> int:
        return self.current["n_bytes"] if self.current is not None else self.written.n_bytes


def _load_or_stage(cfg: StreamBuildConfig, plan: SplitStream) -> _Pending:
    keep = not cfg.force_rebuild
    if keep and plan.inputs_complete and (current := read_current(cfg.cache_dir, plan)) is not None:
        return _Pending(plan, current=current)
    staged, written = stage_stream(cfg.cache_dir, plan.source, plan.split, plan.write)
    if keep and not plan.inputs_complete:  # judged once read: the inputs it learned, and the same bytes
        current = read_current(cfg.cache_dir, plan, written.inputs)
        if current is not None and current.get("sha256") == written.sha256:
            staged.discard()
            return _Pending(plan, current=current)
    return _Pending(plan, staged=staged, written=written)


def _publish_or_keep(cfg: StreamBuildConfig, p: _Pending) -> Stream:
    source, split = p.plan.source, p.plan.split
    bin_path = stream_paths(cfg.cache_dir, source, split)[0]
    if p.current is not None:
        log(f"streams: {source} {split}: {p.n_bytes:,} bytes, current in {bin_path}")
        return Stream(bin_path, p.current, reused=True)
    record = stream_record(cfg.cache_dir, source, split, p.written, p.plan.inputs, p.plan.header)
    meta = publish_stream(cfg.cache_dir, source, split, p.staged, record)
    blank = p.written.skipped_blank
    log(f"streams: {source} {split}: {p.n_bytes:,} bytes ({blank:,} blank documents left out) -> {bin_path}")
    return Stream(bin_path, meta)


def _discard(pending: Iterable[_Pending]) -> None:
    """Remove the staged .bin of each stream not yet published (a published one stays)."""
    for p in pending:
        if p.staged is not None and not p.staged.committed:
            p.staged.discard()


def build_streams(
    cfg: StreamBuildConfig,
    *,
    wiki_docs: WikiDocs | None = None,
    wiki_dataset: tuple[str, str | None] | None = None,
    wiki_read: Mapping | None = None,
) -> dict[tuple[str, str], Stream]:
    """(source, split) -> Stream for every enabled source, built or not (steps: the module docstring).

    `wiki_docs` ({"train": lines, "val": lines} of `wiki_dataset` = (dataset id, config), lists or
    one-pass iterables, or a function returning them, called only when wiki is enabled) replace loading
    wikitext's default splits; `wiki_dataset` defaults to wikitext's (`build.wikitext_dataset`);
    `wiki_read` (what the loader read, filled while the lines are read) is recorded in the wiki streams'
    meta (`build.source_streams`)."""
    check_gating(cfg)
    plans, not_built = _plan(cfg, wiki_docs, wiki_dataset, wiki_read)
    made_dir = not os.path.isdir(cfg.cache_dir)
    pending: dict[tuple[str, str], _Pending] = {}
    try:
        for source, splits in plans.items():
            got: dict[str, _Pending] = {}
            for plan in splits:
                got[plan.split] = pending[(source, plan.split)] = _load_or_stage(cfg, plan)
            empty = [split for split in SPLITS if not got[split].n_bytes]
            if empty and source not in cfg.required_sources:
                not_built[source] = f"not in streams.required_sources and its {'/'.join(empty)} split is empty"
                _discard([pending.pop((source, split)) for split in SPLITS])
        check_stream_lengths(
            {f"{source} {split}": p.n_bytes for (source, split), p in pending.items()},
            cfg.T,
            required={f"{source} {split}" for source, split in pending if source in cfg.required_sources},
        )
    except BaseException:
        _discard(pending.values())
        if made_dir and os.path.isdir(cfg.cache_dir) and not os.listdir(cfg.cache_dir):
            os.rmdir(cfg.cache_dir)  # nothing written: not even the folder
        raise
    try:
        out = {key: _publish_or_keep(cfg, p) for key, p in pending.items()}
    except BaseException:
        _discard(pending.values())
        raise
    for source, reason in not_built.items():
        header = stream_header(cfg, source, wiki_dataset)
        for split in SPLITS:
            meta = write_not_built(cfg.cache_dir, source, split, reason=reason, header=header)
            out[(source, split)] = Stream(stream_paths(cfg.cache_dir, source, split)[0], meta)
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
