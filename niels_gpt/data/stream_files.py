"""The data files of a stream and how they are read, with public APIs only.

- `register(ds, files)`: `hub.open_dataset` remembers the resolved data files of a streamed dataset
  (`load_dataset_builder(...).config.data_files`, or the local files it expanded) with its features;
  `files_of(ds)` / `supports(ds)`: an all-parquet stream is read by resumable.ShuffledStream.
- The order of datasets 5.2 over files: `part_files` (its `shard(num_shards, index, contiguous=True)`),
  `shuffled_files` (its `shuffle(seed)` of the file list).
- `open_file`: a hub file (`hf://datasets/{id}@{commit}/{path}`) through huggingface_hub's HfFileSystem,
  a local one directly; `ParquetReader`: a file's tables from a row on, cast to the features as datasets'
  Parquet builder casts; `Block`: a table's rows as datasets hands them out (`Features.decode_batch`).
- `library_versions` / `resume_note`: what meta.json records about the libraries and about resume.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

# The datasets releases a streamed build is tested with (pyproject.toml states the same range): on each,
# a parquet stream is read here, in datasets 5.2's order, and resumes mid-stream.
SUPPORTED_DATASETS = ">=4.8,<5.3"
# the releases whose own IterableDataset.shuffle gives this order (tests compare with datasets' own there;
# 4.8.5's and 5.0.1's own orders differ, measured)
REPRODUCED_DATASETS = ("5.1.", "5.2.")


def library_versions() -> dict[str, str]:
    """The datasets and huggingface_hub releases installed (what a stream is read with)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("datasets", "huggingface_hub")}


def resume_note(resumable: bool) -> str | None:
    """None where mid-stream resume is available, else why not (one line, for the log and meta.json)."""
    if resumable:
        return None
    return (
        "mid-stream resume is not available for this input: datasets reads it itself (only parquet files are "
        "read here), in its own order; a build the hub stops starts again from the first row"
    )


@dataclass(frozen=True)
class StreamFiles:
    """What a streamed split is read from: its data files in datasets' order, and their features."""

    files: tuple[str, ...]
    features: Any  # datasets.Features


_REGISTERED: WeakKeyDictionary = WeakKeyDictionary()  # streamed dataset -> StreamFiles (hub.open_dataset)


def register(ds: Any, files: list[str] | None) -> None:
    """Remember the resolved data files of a streamed `ds` that `hub.open_dataset` opened (datasets has
    no public way to ask a dataset for them); only all-parquet files are read here."""
    if files and all(str(f).endswith(".parquet") for f in files):
        _REGISTERED[ds] = StreamFiles(tuple(map(str, files)), ds.features)


def files_of(ds: Any) -> StreamFiles | None:
    try:
        return _REGISTERED.get(ds)
    except TypeError:  # not weak-referenceable: not a dataset opened here
        return None


def supports(ds: Any) -> bool:
    """True if `ds` is a streamed dataset of parquet files opened by `hub.open_dataset` (read here)."""
    return files_of(ds) is not None


def part_files(files: list, num_parts: int, part: int) -> list:
    """Contiguous block `part` of `num_parts` (the first len % num_parts one longer): datasets'
    `shard(num_shards, index, contiguous=True)` over data files."""
    div, mod = divmod(len(files), num_parts)
    start = div * part + min(part, mod)
    return files[start : start + div + (1 if part < mod else 0)]


def shuffled_files(files: list, seed: int) -> list:
    """The files in the order `IterableDataset.shuffle(seed)` reads them: its generator's shuffle of their
    indices (datasets shuffles a copy of default_rng(seed); the buffer's generator starts afresh)."""
    import numpy as np

    order = list(range(len(files)))
    np.random.default_rng(seed).shuffle(order)
    return [files[i] for i in order]


def open_file(path: str):
    """A data file for reading: a hub file (`hf://datasets/{id}@{commit}/{path}`) through huggingface_hub's
    HfFileSystem (range requests, its retries and the client of retry.configure), a local one directly."""
    if path.startswith("hf://"):
        from huggingface_hub import HfFileSystem

        return HfFileSystem().open(path, "rb")
    return open(path, "rb")


class ParquetReader:
    """The tables of a parquet file, as datasets' Parquet builder yields them: `ParquetFile` without
    pre-buffering (a row group's column chunks are fetched when it is decoded, not every range of the
    file at once) and without Arrow's thread pool (decoded in the calling thread: no read is left running
    when the iteration stops), only `columns`, cast to `features` (datasets' table_cast)."""

    def __init__(self, features: Any, columns: list[str] | None):
        from datasets import Features

        if features is not None and columns is not None:
            features = Features({name: features[name] for name in columns if name in features})
        self.schema = features.arrow_schema if features is not None else None
        self.columns = columns

    def tables(self, path: str, row: int) -> Iterator:
        """The tables of the file at `path` from row `row` on: the row group holding that row is read and
        cut, the ones before it are skipped (its footer says where they start)."""
        import pyarrow.parquet as pq
        from datasets.table import table_cast

        with open_file(path) as f:
            parquet = pq.ParquetFile(f, pre_buffer=False)
            for g in range(parquet.num_row_groups):
                n = parquet.metadata.row_group(g).num_rows
                if row >= n:
                    row -= n
                    continue
                table = parquet.read_row_group(g, columns=self.columns, use_threads=False)
                if self.schema is not None:
                    table = table_cast(table, self.schema)
                yield table.slice(row) if row else table
                row = 0


class Block:
    """The rows of one block of a stream: `table` (Arrow, cast to the stream's features) as datasets
    hands them out (`Features.decode_batch` of its Python values), all of them (`rows`, dicts) or one
    column's values (`column`)."""

    __slots__ = ("table", "_features")

    def __init__(self, table: Any, features: Any):
        self.table, self._features = table, features

    def rows(self) -> list[dict]:
        batch = self.table.to_pydict()
        if self._features is not None:
            batch = self._features.decode_batch(batch)
        names = list(batch)
        return [{name: batch[name][i] for name in names} for i in range(self.table.num_rows)]

    def column(self, name: str) -> list:
        values = self.table.column(name).to_pylist()
        return self._features.decode_column(values, name) if self._features is not None else values
