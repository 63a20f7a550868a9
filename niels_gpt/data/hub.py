"""The one place a loader opens a dataset: a hub id, or local files in the hub dataset's own schema.

`HubRead` (source.py) holds every option of one read; the registry builds it from the config and it
travels unchanged through a loader to `open_dataset(read)` and `iter_rows(ds, read)`.

`open_dataset` does what `datasets.load_dataset(dataset_id, config, split=, streaming=, revision=)` does
(a transient hub error retried by `read.retry`, retry.py): `load_dataset_builder(...)`, then a streamed
split (`as_streaming_dataset`), or `download_and_prepare()` and the prepared split as a
`prepared.PreparedSplit` (its Arrow cache files read with plain reads, never memory-mapped; the `Dataset`
only where random access needs it), or, with `data_files` (any form `datasets` takes),
`local_files.open_local`: the same kind of object from local files, so the offline demo runs the real code
path.

`iter_rows` keeps part k of N (`shard_parts`: `ds.shard(num_shards=N, index=k)`, contiguous, before the
shuffle; a streamed dataset splits by data file), shuffles (`IterableDataset.shuffle(seed=, buffer_size=)`
when streaming, `torch.randperm` under a seeded Generator over row indices otherwise) and stops after
`take` rows. A `RowMapper` makes the rows into what its reader wants: a streamed read takes only the
columns it names and maps whole blocks of rows at once.

Provenance (a JSON-able dict the caller passes in and caches carry): dataset id, config, split,
streaming, the revision asked for and the revision actually read where `datasets` exposes it (the
commit in a streamed dataset's data file URLs, or in a prepared dataset's Arrow cache path); for local
files, each file and its sha256.

Invariant: a hub dataset that cannot be reached raises `SourceUnavailableError` naming the dataset
and the demo switch; nothing ever falls back to the sample data silently. A read that names what the
repository does not have (the dataset, a config, a split, a revision) raises `HubDatasetError`: one
line naming it and what the repository has (its configs, its splits, or its default branch's commit).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from niels_gpt.data import prepared, resumable, retry, stream_files
from niels_gpt.data.local_files import open_local
from niels_gpt.data.source import HubDatasetError, HubRead, SourceUnavailableError, unavailable

# a resolved hub commit inside a data file URL, e.g. hf://datasets/OpenAssistant/oasst1@<40 hex>/data/...
_HF_URL_REVISION = re.compile(r"hf://datasets/(?P<repo>[^@\s]+?)@(?P<sha>[0-9a-f]{40})/")
# the commit directory of a prepared (non-streaming) dataset's Arrow cache: .../<version>/<sha>/<file>.arrow
_CACHE_PATH_REVISION = re.compile(r"/(?P<sha>[0-9a-f]{40})/[^/]+\.arrow$")

ROW_BATCH = 1024  # rows fetched per Arrow take when reading a prepared dataset in shuffled order
LISTED_NAMES = 40  # configs / splits named in an error line (fineweb-edu has one config per crawl: ~100)


def _listing(names: Any) -> str:
    names = list(map(str, names))
    more = f" and {len(names) - LISTED_NAMES} more" if len(names) > LISTED_NAMES else ""
    return ", ".join(names[:LISTED_NAMES]) + more


def _what(read: HubRead) -> str:
    config = f" config {read.config!r}" if read.config else ""
    revision = f" at revision {read.revision!r}" if read.revision else ""
    return f"hub dataset {read.dataset_id!r}{config}{revision}"


def _ask(call, *args, **kwargs):
    """`call(...)`'s answer, or None when it fails (it only words an error that is already raised)."""
    try:
        return call(*args, **kwargs)
    except Exception:
        return None


def _missing_dataset_or_revision(read: HubRead, exc: BaseException) -> HubDatasetError:
    import datasets
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RevisionNotFoundError

    chain = list(retry.cause_chain(exc))
    if read.revision is not None and any(isinstance(e, RevisionNotFoundError) for e in chain):
        head = _ask(lambda: HfApi().dataset_info(read.dataset_id, timeout=30).sha)
        pin = (
            f"its default branch is at commit {head}: pin it with `revision: {head}`"
            if head
            else "pin an existing branch, tag or commit sha"
        )
        return HubDatasetError(
            f"hub dataset {read.dataset_id!r} has no revision {read.revision!r} (a branch, tag or commit sha); "
            f"{pin} in the source's section of config.yaml, or set `revision: null` to read the default branch"
        )
    if any(isinstance(e, GatedRepoError) for e in chain):
        return HubDatasetError(
            f"hub dataset {read.dataset_id!r} is gated: accept its terms on the hub, then log in "
            "(`hf auth login`, or set HF_TOKEN)"
        )
    return HubDatasetError(
        f"hub dataset {read.dataset_id!r} does not exist on {datasets.config.HF_ENDPOINT} or cannot be accessed; "
        "check the source's `dataset_id:` in config.yaml (a private dataset also needs `hf auth login` or HF_TOKEN)"
    )


def _missing_config_or_split(read: HubRead) -> HubDatasetError | None:
    """The config or split of `read` that its repository lacks, asked of the hub; None if both exist."""
    import datasets

    configs = _ask(datasets.get_dataset_config_names, read.dataset_id, revision=read.revision)
    if configs and read.config not in configs and (read.config is not None or "default" not in configs):
        if read.config is None:
            return HubDatasetError(
                f"hub dataset {read.dataset_id!r} has several configs and none is the default; "
                f"its configs: {_listing(configs)}. Name one with the source's `config:` in config.yaml"
            )
        return HubDatasetError(
            f"{_what(read)} does not exist; its configs: {_listing(configs)}. "
            "Set the source's `config:` in config.yaml to one of them"
        )
    splits = _ask(datasets.get_dataset_split_names, read.dataset_id, read.config, revision=read.revision)
    if splits and read.split not in splits:
        return HubDatasetError(
            f"{_what(read)} has no split {read.split!r}; its splits: {_listing(splits)}. "
            "Set the source's split in config.yaml to one of them"
        )
    return None


def hub_dataset_error(read: HubRead, exc: BaseException) -> HubDatasetError | None:
    """What `load_dataset`'s `exc` means for `read` when the repository lacks what it names, else None."""
    from datasets.exceptions import DatasetNotFoundError

    if isinstance(exc, DatasetNotFoundError):
        return _missing_dataset_or_revision(read, exc)
    if isinstance(exc, ValueError):
        return _missing_config_or_split(read)
    return None


def open_dataset(read: HubRead, provenance: dict | None = None):
    """A `prepared.PreparedSplit` (or, where its files are not known by name, a `datasets.Dataset`) or an
    `IterableDataset` of `read.split`; `provenance` (if given) is filled in. Opening it is retried by
    `read.retry` (retry.py)."""
    prov = provenance if provenance is not None else {}
    prov.update(
        {"dataset_id": read.dataset_id, "config": read.config, "split": read.split, "streaming": read.streaming}
    )
    if read.local:
        return open_local(read, prov)
    prov.update({"local": False, "revision_requested": read.revision, "revision": None})
    retry.configure(read.retry)
    try:
        ds, files = retry.call(lambda: _load(read), what="load_dataset", policy=read.retry)
    except Exception as e:
        if retry.classify(e) != retry.PERMANENT or isinstance(e, retry.RetriesExhausted):
            raise unavailable(read.dataset_id, read.config, e) from e
        missing = hub_dataset_error(read, e)
        if missing is not None:
            raise missing from e
        raise
    stream_files.register(ds, files)
    prov.update(resolved_revision(ds, files))
    return ds


class CachedFallbackError(ConnectionError):
    """`load_dataset` could not reach the hub and fell back to a cached copy of the dataset."""


_FALLBACK_WARNING = "Using the latest cached version of the dataset"  # datasets' CachedDatasetModuleFactory


class _FallbackSeen(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        self.seen = self.seen or record.getMessage().startswith(_FALLBACK_WARNING)


def _load(read: HubRead) -> tuple[Any, list[str] | None]:
    """One `load_dataset` try: (the dataset, a streamed one's resolved data files). On any hub error
    datasets silently uses the newest cached copy, whatever its revision: unless offline mode asks for
    that, such a fall-back is a failed try (retried; unreachable if the hub's name did not resolve)."""
    import datasets

    seen = _FallbackSeen()
    retry.take_unreachable()
    logger = logging.getLogger("datasets.load")
    logger.addHandler(seen)
    try:
        if read.streaming:  # what load_dataset(streaming=True) does, keeping the builder's resolved files
            builder = datasets.load_dataset_builder(read.dataset_id, read.config, revision=read.revision)
            ds = builder.as_streaming_dataset(split=read.split)
            files = (builder.config.data_files or {}).get(read.split)
        else:  # what load_dataset does, but the split's Arrow files are read without a memory map (prepared.py)
            builder = datasets.load_dataset_builder(read.dataset_id, read.config, revision=read.revision)
            builder.download_and_prepare()
            ds = prepared.open_split(builder, read.split)
            files = None
    finally:
        logger.removeHandler(seen)
    if seen.seen and not datasets.config.HF_HUB_OFFLINE:
        raise CachedFallbackError(
            f"the hub did not answer for {read.dataset_id!r} and datasets fell back to its cached copy (of any "
            "revision); set HF_HUB_OFFLINE=1 to build from the cached copy on purpose"
        ) from retry.take_unreachable()
    return ds, (list(map(str, files)) if files is not None else None)


def resolved_revision(ds: Any, files: list[str] | None = None) -> dict:
    """{"revision": sha or None, "revision_from": where it was read} for a dataset opened from the hub: the
    commit in a streamed dataset's resolved data file URLs, or in a prepared one's Arrow cache path."""
    for url in files or []:
        m = _HF_URL_REVISION.search(url)
        if m:
            return {"revision": m.group("sha"), "revision_from": "data file urls", "revision_repo": m.group("repo")}
    for entry in getattr(ds, "cache_files", None) or []:
        m = _CACHE_PATH_REVISION.search(str(entry.get("filename", "")).replace(os.sep, "/"))
        if m:
            return {"revision": m.group("sha"), "revision_from": "arrow cache path"}
    return {"revision": None, "revision_from": "not exposed by datasets"}


def row_order(n: int, *, shuffle: bool, seed: int) -> list[int]:
    """Row indices of a non-streaming dataset: torch.randperm under a seeded Generator, or 0..n-1."""
    if not shuffle:
        return list(range(n))
    import torch

    return torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()


def shard_parts(ds: Any, read: HubRead, provenance: dict | None = None) -> Any:
    """Part `read.part` of `read.num_parts` disjoint, together covering parts of `ds` (`ds` itself for one).

    `datasets`' `shard(num_shards=N, index=k)` with contiguous blocks: the parts in order 0..N-1 are the
    dataset in its order. A streamed dataset is split by data file (`ds.num_shards` of them; the first
    `num_shards % N` parts get one more), so it needs at least N files: fewer is a ValueError naming both.
    """
    num_parts, part = read.num_parts, read.part
    if num_parts == 1:
        return ds
    # only a streamed dataset has it; a prepared one splits by rows (a PreparedSplit without its Dataset)
    n_files = None if isinstance(ds, prepared.PreparedSplit) else getattr(ds, "num_shards", None)
    if n_files is not None and n_files < num_parts:
        raise ValueError(
            f"{read.dataset_id!r} has {n_files} data file(s) (datasets' num_shards) but {num_parts} parts were "
            f"asked for: a streamed dataset splits by file; set pretrain.num_parts <= {n_files}"
        )
    shard = ds.shard(num_shards=num_parts, index=part, contiguous=True)
    if provenance is not None:
        provenance.update({"num_parts": num_parts, "part": part, "data_shards_total": n_files})
        if n_files is not None:
            provenance["part_data_files"] = _part_files(ds, read)
    return shard


def _part_files(ds: Any, read: HubRead) -> list[str] | None:
    """The data files a streamed part reads (local paths or hub URLs); None for a stream not read here."""
    source = stream_files.files_of(ds)
    return None if source is None else stream_files.part_files(list(source.files), read.num_parts, read.part)


def _rows_in_order(ds: Any, order: list[int], batch: int = ROW_BATCH) -> Iterator[tuple[int, dict]]:
    """(index, row) for each index of `order`, read `batch` rows at a time (one Arrow take per batch)."""
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        columns = ds[chunk]
        names = list(columns)
        for j, index in enumerate(chunk):
            yield index, {name: columns[name][j] for name in names}


class RowMapper(Protocol):
    """What a reader makes of a dataset's rows, one at a time (`row`: a dict as datasets hands it out)
    or a streamed block at once (`block`: stream_files.Block), and the columns it needs (`columns`, from
    the features; None: all). `block(b)` must equal `[row(r) for r in b.rows()]` (the rows of the
    needed columns), so a stream read either way yields the same."""

    def columns(self, features: Any) -> list[str] | None: ...

    def row(self, row: Mapping) -> Any: ...

    def block(self, block: Any) -> list: ...


def _stream_identity(provenance: dict | None) -> dict:
    """What besides the files names a stream's rows: the commit read, local files' sha256."""
    prov = provenance or {}
    return {"revision": prov.get("revision"), "data_files": prov.get("data_files")}


def iter_rows(
    ds: Any, read: HubRead, provenance: dict | None = None, mapper: RowMapper | None = None
) -> Iterator[tuple[int, Any]]:
    """(index, row) pairs of part `read.part` of `read.num_parts` (`shard_parts`), shuffled if
    `read.shuffle`, at most `read.take` of them; with a `mapper`, (index, what it makes of the row).

    A streamed dataset is read in the order of `IterableDataset.shuffle(seed=, buffer_size=)` by
    `resumable.ShuffledStream` (a read that fails is retried from where it stopped; a build can save and
    resume its position) and `index` is the position in the stream; a prepared dataset is read in
    `row_order` and `index` is the row's own index. `take` stops pulling rows as soon as it is reached.
    A connection error while reading becomes `SourceUnavailableError` (local files are never mapped:
    their errors name the file).
    """
    from datasets import IterableDataset

    whole, ds = ds, shard_parts(ds, read, provenance)
    if isinstance(ds, IterableDataset):
        _record_libraries(read, provenance, stream_files.supports(whole))
    if stream_files.supports(whole):  # the part is taken by the stream itself, from the whole's files
        rows = resumable.stream_rows(whole, read, _stream_identity(provenance), mapper)
    else:
        if read.shuffle and not isinstance(ds, IterableDataset):
            rows = _rows_in_order(ds, row_order(len(ds), shuffle=True, seed=read.seed)[: read.take])
        else:
            if read.shuffle:
                ds = ds.shuffle(seed=read.seed, buffer_size=read.shuffle_buffer_size)
            if isinstance(ds, prepared.PreparedSplit):
                plain = ds.rows()
            else:
                plain = file_rows(ds) if ds is whole and not read.shuffle else None
            ordered = ds if plain is None else plain
            rows = enumerate(ordered if read.take is None else itertools.islice(ordered, read.take))
        if mapper is not None:
            rows = ((index, mapper.row(row)) for index, row in rows)
    n = 0
    try:
        for n, row in enumerate(rows, 1):  # noqa: B007 (n: the rows read, for the message)
            yield row
    except SourceUnavailableError:
        raise
    except Exception as e:
        if not read.local and retry.classify(e) != retry.PERMANENT:
            if n and isinstance(ds, IterableDataset):
                raise stream_failed(read, e, n) from e
            raise unavailable(read.dataset_id, read.config, e) from e
        raise


def file_rows(ds: Any) -> Iterator[dict] | None:
    """The rows of a prepared `Dataset`, in order, read from its Arrow cache files with plain reads one record
    batch at a time; None where that would not give the rows as the Dataset does (kept in memory, or a column
    datasets decodes: any feature but a plain Value).

    Iterating the Dataset walks the files' memory map, and every page it touches stays counted in the job's
    RSS until the process ends (wikitext-103's train split: ~560 MiB at full size, growing with the split);
    a plain read holds one batch. Only for the whole split as loaded (no shard, no shuffle). A Dataset that
    `open_dataset` hands out is one where its split's files were not known by name (prepared.py); the usual
    prepared split is a `prepared.PreparedSplit`, whose Dataset is never opened to read its rows in order.
    """
    from datasets import Dataset, Value

    if not isinstance(ds, Dataset) or not ds.cache_files:
        return None
    if not all(isinstance(feature, Value) for feature in ds.features.values()):
        return None
    if ds.data.num_rows != len(ds):  # an indices mapping (a selection or an order of its own)
        return None
    files = [f["filename"] for f in ds.cache_files]
    want = ds.data.schema.remove_metadata()
    for name in files:  # a renamed, selected or cast column shares the file but not its schema
        if not prepared.file_schema(name).remove_metadata().equals(want):
            return None

    return prepared.arrow_rows(files)


def stream_failed(read: HubRead, exc: BaseException, rows: int) -> SourceUnavailableError:
    """The one line of a stream datasets read itself (no resume) that failed after `rows` rows."""
    config = f" (config {read.config!r})" if read.config else ""
    return SourceUnavailableError(
        f"hub dataset {read.dataset_id!r}{config}: the stream failed after {rows:,} rows read "
        f"({type(exc).__name__}: {retry.short(exc)}); datasets read it itself, retrying by its own rules"
    )


_announced: set[str] = set()  # the resume notes already logged by this process


def _record_libraries(read: HubRead, provenance: dict | None, readable: bool) -> None:
    """Record in `provenance` the datasets / huggingface_hub releases a stream is read with and, where
    mid-stream resume is not available, say so (logged once per process)."""
    from niels_gpt.log import log

    versions = stream_files.library_versions()
    note = stream_files.resume_note(readable)
    if provenance is not None:
        provenance["libraries"] = versions
        provenance["resume"] = note or "available"
    if note and note not in _announced:
        _announced.add(note)
        log(f"{read.dataset_id}: {note}")
