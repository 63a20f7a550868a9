"""The one place a loader opens a dataset: a hub id, or local files in the hub dataset's own schema.

`open_dataset(dataset_id, config, split=..., streaming=..., revision=..., data_files=...)` calls
`datasets.load_dataset(dataset_id, config, split=, streaming=, revision=)` by default, and with
`data_files={split: glob}` calls `datasets.load_dataset("parquet"|"json", data_files=, split=,
streaming=)` instead (the builder follows the file extension). Either way the loader gets the same
kind of object and applies the same row mapping, so the offline demo runs the real code path.
Parquet files of one split that differ in shape (a column only some have, a nested column that is
all-null in one file) are read with the union of their schemas (`unified_parquet_features`).

`iter_rows` wraps iteration: the shuffle (`IterableDataset.shuffle(seed=, buffer_size=)` when
streaming, `torch.randperm` under a seeded Generator over row indices otherwise), `take` (stops
pulling rows once it has enough), and the unreachable-hub error. With `num_parts=N, part=k` it first
keeps part k of N disjoint parts (`shard_parts`: `ds.shard(num_shards=N, index=k)`, contiguous, BEFORE
the shuffle): a streamed dataset splits by data file (it needs at least N files), a prepared one by rows.

Provenance (a JSON-able dict the caller passes in and caches carry): dataset id, config, split,
streaming, the revision asked for and the revision actually read, when `datasets` exposes it
(the commit in the data file URLs `hf://datasets/<id>@<sha>/...` of a streamed dataset, or the
commit directory of a prepared dataset's Arrow cache); for local files, each file and its sha256.

Invariant: a hub dataset that cannot be reached raises `SourceUnavailableError` naming the dataset
and the demo switch; nothing ever falls back to the sample data silently.
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import sys
from collections.abc import Iterator
from typing import Any

from niels_gpt.hashing import sha256_file

# datasets' packaged builders, chosen by the extension of the local files (the schemas we mirror
# are parquet on the hub, except dolly-15k which is one jsonl file)
BUILDER_BY_EXTENSION = {
    ".parquet": "parquet",
    ".jsonl": "json",
    ".json": "json",
    ".jsonl.gz": "json",
    ".json.gz": "json",
}

# a resolved hub commit inside a data file URL, e.g. hf://datasets/OpenAssistant/oasst1@<40 hex>/data/...
_HF_URL_REVISION = re.compile(r"hf://datasets/(?P<repo>[^@\s]+?)@(?P<sha>[0-9a-f]{40})/")
# the commit directory of a prepared (non-streaming) dataset's Arrow cache: .../<version>/<sha>/<file>.arrow
_CACHE_PATH_REVISION = re.compile(r"/(?P<sha>[0-9a-f]{40})/[^/]+\.arrow$")

ROW_BATCH = 1024  # rows fetched per Arrow take when reading a prepared dataset in shuffled order

DEMO_HINT = "offline? run with `--config demo=true` (Snakemake) or `--demo` (CLI) to use the bundled sample data"


class SourceUnavailableError(ConnectionError):
    """A hub dataset could not be reached (offline, DNS, timeout). Never replaced by sample data."""


def _connection_error_types() -> tuple[type[BaseException], ...]:
    """What datasets / huggingface_hub / requests / aiohttp raise when the network is not there."""
    types: list[type[BaseException]] = [ConnectionError, TimeoutError]
    try:
        from huggingface_hub.errors import LocalEntryNotFoundError, OfflineModeIsEnabled

        types += [OfflineModeIsEnabled, LocalEntryNotFoundError]  # not in the local cache and no network
    except ImportError:
        pass
    try:
        from huggingface_hub.utils import httpx

        types.append(httpx.TransportError)  # ConnectError, TimeoutException, NetworkError, ProxyError
    except (ImportError, AttributeError):
        pass
    if "requests" in sys.modules:
        import requests

        types += [requests.ConnectionError, requests.Timeout]
    if "aiohttp" in sys.modules:
        from aiohttp import ClientConnectionError

        types.append(ClientConnectionError)
    return tuple(types)


def is_unreachable_error(exc: BaseException) -> bool:
    """True if `exc` or anything in its cause/context chain is a connection or offline-mode error."""
    types = _connection_error_types()
    seen = 0
    while exc is not None and seen < 20:
        if isinstance(exc, types):
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def unavailable(dataset_id: str, config: str | None, exc: BaseException) -> SourceUnavailableError:
    what = f"{dataset_id!r}" + (f" (config {config!r})" if config else "")
    return SourceUnavailableError(f"cannot reach hub dataset {what}: {type(exc).__name__}: {exc}. {DEMO_HINT}.")


def builder_for(path: str) -> str:
    for ext, builder in BUILDER_BY_EXTENSION.items():
        if path.endswith(ext):
            return builder
    raise ValueError(f"{path}: unsupported data file type; expected one of {', '.join(BUILDER_BY_EXTENSION)}")


def expand_data_files(pattern: str, *, split: str, dataset_id: str) -> list[str]:
    """The files a glob matches, sorted (the read order); FileNotFoundError when there are none."""
    files = sorted(glob.glob(pattern, recursive=True))
    if not files:
        raise FileNotFoundError(
            f"{pattern}: no local data files for {dataset_id!r} split {split!r} "
            f"(check sources.*.demo_data_files, or generate the bundled sample data)"
        )
    return files


def unified_parquet_features(files: list[str]):
    """`datasets.Features` covering every file's columns, or None when all files share one schema.

    Files of one split may differ in shape, as real exports do: a column only some files have
    (fineweb-edu's `date`), or a nested column typed struct in one file and all-null in another
    (oasst1's `emojis`, `labels`, `detoxify`). `datasets` casts every file to the first file's schema
    and fails on such a mix; the union (pyarrow's permissive unification: a missing column or a null
    type takes the other files' type) reads them all, missing values as None. Reads the footers only.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    from datasets import Features

    schemas = [pq.read_schema(f).remove_metadata() for f in files]
    if all(s.equals(schemas[0]) for s in schemas[1:]):
        return None
    try:
        union = pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
        raise ValueError(f"{', '.join(files)}: the files' columns cannot be read as one table ({e})") from None
    return Features.from_arrow_schema(union)


def open_dataset(
    dataset_id: str,
    config: str | None = None,
    *,
    split: str,
    streaming: bool,
    revision: str | None = None,
    data_files: dict[str, str] | None = None,
    provenance: dict | None = None,
):
    """A `datasets.Dataset` / `IterableDataset` of one split; `provenance` (if given) is filled in."""
    import datasets

    prov = provenance if provenance is not None else {}
    prov.update({"dataset_id": dataset_id, "config": config, "split": split, "streaming": streaming})
    if data_files is not None:
        if split not in data_files:
            raise ValueError(
                f"local data files for {dataset_id!r} have no split {split!r} (splits: {', '.join(sorted(data_files))})"
            )
        files = expand_data_files(data_files[split], split=split, dataset_id=dataset_id)
        builders = sorted({builder_for(f) for f in files})
        if len(builders) != 1:
            raise ValueError(f"{data_files[split]}: mixes file types {builders}; use one format per split")
        prov.update(
            {
                "local": True,
                "builder": builders[0],
                "data_files": [{"path": f, "sha256": sha256_file(f)} for f in files],
                "revision": None,
            }
        )
        features = unified_parquet_features(files) if builders[0] == "parquet" else None
        return datasets.load_dataset(
            builders[0], data_files={split: files}, split=split, streaming=streaming, features=features
        )
    prov.update({"local": False, "revision_requested": revision, "revision": None})
    try:
        ds = datasets.load_dataset(dataset_id, config, split=split, streaming=streaming, revision=revision)
    except Exception as e:
        if is_unreachable_error(e):
            raise unavailable(dataset_id, config, e) from e
        raise
    prov.update(resolved_revision(ds, dataset_id))
    return ds


def _ex_iterable_strings(ex_iterable: Any, depth: int = 0) -> Iterator[str]:
    """Every string in the generator kwargs of a streamed dataset's iterable chain (its data file URLs)."""
    if ex_iterable is None or depth > 20:
        return
    for value in (getattr(ex_iterable, "kwargs", None) or {}).values():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, str):
                yield item
    yield from _ex_iterable_strings(getattr(ex_iterable, "ex_iterable", None), depth + 1)
    for child in getattr(ex_iterable, "ex_iterables", None) or []:
        yield from _ex_iterable_strings(child, depth + 1)


def resolved_revision(ds: Any, dataset_id: str) -> dict:
    """{"revision": sha or None, "revision_from": where it was read} for a dataset opened from the hub."""
    for url in _ex_iterable_strings(getattr(ds, "_ex_iterable", None)):
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


def shard_parts(ds: Any, *, num_parts: int, part: int, dataset_id: str, provenance: dict | None = None) -> Any:
    """Part `part` of `num_parts` disjoint, together covering parts of `ds` (`ds` itself when num_parts == 1).

    `datasets`' `shard(num_shards=N, index=k)` with contiguous blocks: the parts in order 0..N-1 are the
    dataset in its order. A streamed dataset is split by data file (`ds.num_shards` of them; the first
    `num_shards % N` parts get one more), so it needs at least N files: fewer is a ValueError naming both.
    """
    if not isinstance(num_parts, int) or num_parts < 1 or not isinstance(part, int) or not 0 <= part < num_parts:
        raise ValueError(
            f"part must be in 0..num_parts-1 with num_parts >= 1, got part={part!r}, num_parts={num_parts!r}"
        )
    if num_parts == 1:
        return ds
    n_files = getattr(ds, "num_shards", None)  # only a streamed dataset has it; a prepared one splits by rows
    if n_files is not None and n_files < num_parts:
        raise ValueError(
            f"{dataset_id!r} has {n_files} data file(s) (datasets' num_shards) but {num_parts} parts were asked for: "
            f"a streamed dataset splits by file; set pretrain.num_parts <= {n_files}"
        )
    shard = ds.shard(num_shards=num_parts, index=part, contiguous=True)
    if provenance is not None:
        provenance.update({"num_parts": num_parts, "part": part, "data_shards_total": n_files})
        if n_files is not None:
            provenance["part_data_files"] = _part_files(shard, provenance)
    return shard


def _part_files(shard: Any, provenance: dict) -> list[str]:
    """The data files a streamed part reads: local ones as provenance lists them, hub ones as URLs."""
    named = list(_ex_iterable_strings(getattr(shard, "_ex_iterable", None)))
    if provenance.get("local"):
        mine = {os.path.abspath(n) for n in named}
        return [f["path"] for f in provenance.get("data_files", []) if os.path.abspath(f["path"]) in mine]
    return [n for n in named if "://" in n]


def _rows_in_order(ds: Any, order: list[int], batch: int = ROW_BATCH) -> Iterator[tuple[int, dict]]:
    """(index, row) for each index of `order`, read `batch` rows at a time (one Arrow take per batch)."""
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        columns = ds[chunk]
        names = list(columns)
        for j, index in enumerate(chunk):
            yield index, {name: columns[name][j] for name in names}


def iter_rows(
    ds: Any,
    *,
    dataset_id: str,
    config: str | None = None,
    take: int | None = None,
    shuffle: bool = False,
    seed: int = 42,
    shuffle_buffer_size: int = 10_000,
    provenance: dict | None = None,
    num_parts: int = 1,
    part: int = 0,
) -> Iterator[tuple[int, dict]]:
    """(index, row) pairs of part `part` of `num_parts` (`shard_parts`; all rows by default), optionally
    shuffled, at most `take` of them.

    A streamed dataset is shuffled with `IterableDataset.shuffle(seed=, buffer_size=)` and `index` is
    the position in the stream; a prepared dataset is read in `row_order` and `index` is the row's
    own index. `take` stops pulling rows as soon as it is reached. A connection error while reading
    becomes `SourceUnavailableError` (local files are never mapped: their errors name the file).
    """
    if take is not None and take < 0:
        raise ValueError(f"take must be >= 0 or None, got {take}")
    local = bool(provenance and provenance.get("local"))
    from datasets import IterableDataset

    ds = shard_parts(ds, num_parts=num_parts, part=part, dataset_id=dataset_id, provenance=provenance)

    if not isinstance(ds, IterableDataset):
        if shuffle:
            rows = _rows_in_order(ds, row_order(len(ds), shuffle=True, seed=seed)[:take])
        else:
            rows = enumerate(ds if take is None else itertools.islice(ds, take))
    else:
        if shuffle:
            ds = ds.shuffle(seed=seed, buffer_size=shuffle_buffer_size)
        rows = enumerate(ds if take is None else itertools.islice(ds, take))
    try:
        yield from rows
    except Exception as e:
        if not local and is_unreachable_error(e):
            raise unavailable(dataset_id, config, e) from e
        raise
