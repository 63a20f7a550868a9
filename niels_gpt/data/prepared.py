"""A prepared (non-streamed) split, read from its Arrow cache files with plain reads: no memory map.

`load_dataset(..., split=)` is `load_dataset_builder(...)`, `download_and_prepare()` and
`as_dataset(split)`, and `as_dataset` memory-maps every Arrow file of the split and walks its record-batch
headers (one every 1,000 rows): the pages it touches, and the kernel's pages around each touch, stay in the
job's RSS until it ends, so a job reading wikitext-103 grew with the split (~300 MiB file-backed at full
size) even when it read the rows with plain reads (`hub.iter_rows`).

`open_split(builder, split)`: after `download_and_prepare()`, a `PreparedSplit` of the split's Arrow files
(their names as `as_dataset` finds them: `datasets.arrow_reader.ArrowReader.get_file_instructions`, not
in datasets' documented API, so tests/data/test_prepared.py checks it against the Dataset, sharded and not;
the row count and features from the builder's info), opened by nothing until its rows are read. Its rows (`iter(split)`,
`split.rows()`) come from the files one record batch at a time through a plain file object (`pa.OSFile`),
so the job holds one batch: the same rows, in the same order, as the `Dataset` gives them. Anything else
(random access `split[i]`, `shuffle`, `map`, ...) builds the `Dataset` itself (`split.dataset`,
`builder.as_dataset`) once and asks it, and so does iterating columns that datasets decodes or shapes
(any feature but a plain `Value`: their rows are the Dataset's to give). Where the split's files are not
known by name (a split expression such as `train[:10%]`, a dataset kept in memory, a legacy cache layout),
`open_split` returns the `Dataset`, as `load_dataset` did.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any


def open_split(builder: Any, split: str) -> Any:
    """What `load_dataset(..., split=split)` returns, after `builder.download_and_prepare()`: a
    `PreparedSplit` of `split`'s Arrow files where they are known by name, else
    `builder.as_dataset(split=split)` (which also raises datasets' own error for a split that is not there)."""
    from datasets import Features
    from datasets.arrow_reader import ArrowReader
    from datasets.utils.info_utils import is_small_dataset

    info = builder.info
    in_memory = is_small_dataset(info.dataset_size)
    if in_memory or split not in (info.splits or {}) or info.features is None:
        return builder.as_dataset(split=split, in_memory=in_memory)
    shards = ArrowReader(builder.cache_dir, info).get_file_instructions(
        builder.dataset_name, split, info.splits.values()
    )
    files = [shard["filename"] for shard in shards]
    num_rows = info.splits[split].num_examples
    lengths = info.splits[split].shard_lengths or [num_rows]  # rows per file (None: one file)
    takes = [length if shard["take"] == -1 else shard["take"] for shard, length in zip(shards, lengths)]
    if len(shards) != len(lengths) or takes != lengths or any(shard["skip"] for shard in shards):
        return builder.as_dataset(split=split)  # not every row of every file
    if not files or not all(os.path.isfile(name) for name in files):  # a legacy cache layout: datasets finds it
        return builder.as_dataset(split=split)
    features = info.features.reorder_fields_as(Features.from_arrow_schema(file_schema(files[0])))
    return PreparedSplit(builder, split, tuple(files), num_rows, features)


def file_schema(path: str) -> Any:
    """The schema of an Arrow stream file, read from its first message."""
    import pyarrow as pa

    with pa.OSFile(path) as source:
        return pa.ipc.open_stream(source).schema


def arrow_rows(
    files: list[str] | tuple[str, ...], start: int = 0, stop: int | None = None, columns: list[str] | None = None
) -> Iterator[dict]:
    """Rows `start` to `stop` (None: the end) of the Arrow stream files, concatenated in order, as dicts of
    `columns` (None: all); read one record batch at a time from a plain file object, never memory-mapped.
    The batches before `start` are read and dropped."""
    import pyarrow as pa

    row = 0
    for name in files:
        with pa.OSFile(name) as source:
            for batch in pa.ipc.open_stream(source):
                if stop is not None and row >= stop:
                    return
                n = batch.num_rows
                if row + n > start:
                    if columns is not None:
                        batch = batch.select(columns)
                    lo, hi = max(start - row, 0), n if stop is None else min(stop - row, n)
                    yield from (batch if (lo, hi) == (0, n) else batch.slice(lo, hi - lo)).to_pylist()
                row += n


class PreparedSplit:
    """Rows `start`..`stop` of a prepared split (its Arrow files `files`, `num_rows` rows in all), the
    columns `columns` (None: all). Iterating it reads the files (`arrow_rows`); `shard`, `select_columns`
    and `len` need no read; anything else is asked of the memory-mapped `dataset`, built on first use."""

    def __init__(
        self,
        builder: Any,
        split: str,
        files: tuple[str, ...],
        num_rows: int,
        features: Any,
        *,
        start: int = 0,
        stop: int | None = None,
        columns: tuple[str, ...] | None = None,
    ):
        self.builder, self.split, self.files, self.total_rows = builder, split, files, num_rows
        self.start, self.stop = start, num_rows if stop is None else stop
        self.all_features, self.columns = features, columns
        self._dataset = None

    def _with(self, **changes: Any) -> PreparedSplit:
        now = {"start": self.start, "stop": self.stop, "columns": self.columns}
        return PreparedSplit(self.builder, self.split, self.files, self.total_rows, self.all_features, **now | changes)

    @property
    def features(self) -> Any:
        from datasets import Features

        if self.columns is None:
            return self.all_features
        return Features({name: self.all_features[name] for name in self.columns})

    @property
    def column_names(self) -> list[str]:
        return list(self.features)

    @property
    def num_rows(self) -> int:
        return self.stop - self.start

    def __len__(self) -> int:
        return self.num_rows

    @property
    def cache_files(self) -> list[dict]:
        return [{"filename": name} for name in self.files]

    @property
    def plain(self) -> bool:
        """True if every column is a plain `Value` (its rows read from the files are the Dataset's)."""
        from datasets import Value

        return all(isinstance(feature, Value) for feature in self.features.values())

    def rows(self) -> Iterator[dict]:
        """The rows in order: read from the files one record batch at a time, or (a column that is not
        `plain`) the Dataset's."""
        if not self.plain:
            return iter(self.dataset)
        columns = None if self.columns is None else list(self.columns)
        return arrow_rows(self.files, self.start, self.stop, columns)

    def __iter__(self) -> Iterator[dict]:
        return self.rows()

    def select_columns(self, column_names: str | list[str]) -> PreparedSplit:
        """Only `column_names`, in the split's order (as `Dataset.select_columns`)."""
        names = [column_names] if isinstance(column_names, str) else list(column_names)
        missing = [name for name in names if name not in self.column_names]
        if missing:
            raise ValueError(
                f"column(s) {missing} not in the dataset; its columns: {self.column_names} (select_columns)"
            )
        return self._with(columns=tuple(name for name in self.column_names if name in names))

    def shard(self, num_shards: int, index: int, contiguous: bool = True, **kwargs: Any) -> Any:
        """Part `index` of `num_shards`: contiguous (the default, as `Dataset.shard`), the rows it gives (the
        first `len % num_shards` parts one row more), read from the files; else the Dataset's own shard."""
        if not contiguous or kwargs or not 0 <= index < num_shards:
            return self.dataset.shard(num_shards=num_shards, index=index, contiguous=contiguous, **kwargs)
        div, mod = divmod(len(self), num_shards)
        start = self.start + div * index + min(index, mod)
        return self._with(start=start, stop=start + div + (1 if index < mod else 0))

    @property
    def dataset(self) -> Any:
        """These rows as the `datasets.Dataset` (memory-mapped Arrow files): built once, on first use."""
        if self._dataset is None:
            ds = self.builder.as_dataset(split=self.split)
            if (self.start, self.stop) != (0, self.total_rows):
                ds = ds.select(range(self.start, self.stop))
            self._dataset = ds if self.columns is None else ds.select_columns(list(self.columns))
        return self._dataset

    def __getitem__(self, key: Any) -> Any:
        return self.dataset[key]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __repr__(self) -> str:
        return (
            f"PreparedSplit(split={self.split!r}, rows {self.start}..{self.stop} of {self.total_rows}, "
            f"files={len(self.files)}, columns={self.column_names})"
        )
