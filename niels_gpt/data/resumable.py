"""A streamed dataset read in `IterableDataset.shuffle(seed, buffer_size)` order that can stop and go on.

`ShuffledStream(ds, read)` yields what iterating `ds.shuffle(seed=read.seed, buffer_size=...)` (or `ds`,
unshuffled) yields, as (index, row) pairs, at most `read.take` - from its own copy of datasets 5.2's
shuffle, so that its position can be saved (`state()`), a later stream can start there (`start=`), and a
read that fails is re-opened where it stopped instead of at the first row:

1. files: datasets' shard order, `shuffle_data_sources(numpy.random.default_rng(seed))`;
2. G = min(files, MAX_INPUT_SHARDS) groups of consecutive files (datasets' contiguous split); a group is
   read as tables of B = max(1, buffer_size // MAX_INPUT_SHARDS) rows: rows [0, B), [B, 2B) ... of its
   files in order, the last one shorter; each group's next table is fetched ahead in a thread;
3. tables are taken from the groups in turn, a finished group skipped;
4. the buffer: tables are appended; once it holds n >= buffer_size rows, rng.permutation(n) orders them,
   the first n - buffer_size // 2 are yielded and the rest kept; at the end the rest, permuted;
   rng = default_rng(seed). Unshuffled: the files in order as one group, no buffer.

Reading: a plain parquet file (datasets' Parquet builder, no filters, columns or scan options of its own)
is read here, a row group at a time, by `pyarrow.parquet.ParquetFile` without pre-buffering and without
Arrow's threads, and cast as the builder casts it; other formats by the builder's own generator.
`columns` keeps only those columns (a parquet file's other column chunks are not fetched). The rows of
each block (a table taken from the buffer) are formatted together: as datasets hands them out (dicts),
or as a `mapper` makes them of the whole block (hub.RowMapper).

A position (`state()`): JSON (per group the file and row reached and whether it is done, the turn, the
rows yielded, the rng state) and one Arrow table: the rows of the current block not yet yielded, then the
buffer. A file re-opened at row r starts at the parquet row group holding r (that row group is read
again, earlier ones are not; other formats re-read the file up to r). A failed read is retried by
re-opening its group at its position (`read.retry`, retry.py); once the policy gives up,
`StreamUnavailable` names the rows read. Another datasets version, or a dataset that is not a plain
streamed one, is read by datasets itself (`supports`).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from niels_gpt.data import retry
from niels_gpt.data.source import HubRead, SourceUnavailableError

# The datasets releases a streamed build is tested with (pyproject.toml states the same range). On 5.2.x the
# stream is read here (its order is datasets' own: a test compares them) and resumes mid-stream; on the
# others of the range datasets reads it itself: its own shuffle order, retried but not resumable (said
# once in the log and in meta.json: `resume_note`).
SUPPORTED_DATASETS = ">=4.8,<5.3"
MAX_INPUT_SHARDS = 10  # IterableDataset.shuffle's max_buffer_input_shards default: files read at once
REPRODUCED_DATASETS = "5.2."  # the datasets release whose shuffle this copies (a test compares the orders)
UNSHUFFLED_TABLE_ROWS = 1_000  # rows per table of an unshuffled stream (any size gives the same rows)
STATE_FORMAT = 2  # bump when `state()` changes meaning (2: the buffer holds only the columns read)


class StreamUnavailable(SourceUnavailableError):
    """A stream read that failed after every retry; `rows_read` rows had been yielded, `retries` made."""

    def __init__(self, message: str, rows_read: int, retries: int):
        super().__init__(message)
        self.rows_read, self.retries = rows_read, retries


class StaleStreamState(ValueError):
    """A saved position that belongs to another stream (other files, seed, buffer or revision)."""


def library_versions() -> dict[str, str]:
    """The datasets and huggingface_hub releases installed (what a stream is read with)."""
    from importlib.metadata import version

    return {name: version(name) for name in ("datasets", "huggingface_hub")}


def resume_note(versions: dict[str, str]) -> str | None:
    """None where mid-stream resume is available, else why not (one line, for the log and meta.json)."""
    if versions["datasets"].startswith(REPRODUCED_DATASETS):
        return None
    return (
        f"mid-stream resume is not available with datasets {versions['datasets']} (it needs datasets "
        f"{REPRODUCED_DATASETS}x): datasets reads the stream itself, in its own shuffle order; a build the hub "
        "stops starts again from the first row"
    )


def supports(ds: Any) -> bool:
    """True if `ds` is a plain streamed dataset this module reads exactly as datasets does."""
    import datasets
    from datasets.iterable_dataset import ArrowExamplesIterable, IterableDataset

    return (
        datasets.__version__.startswith(REPRODUCED_DATASETS)
        and isinstance(ds, IterableDataset)
        and type(ds._ex_iterable) is ArrowExamplesIterable
        and ds._formatting is None
        and ds._distributed is None
        and not int(ds.epoch)
    )


@dataclass
class _Pos:
    file: int = 0  # index in the group's files
    row: int = 0  # rows of that file consumed
    done: bool = False


class _Group:
    """Consecutive files read as tables of `size` rows; `pos` is what the stream has consumed, the read
    cursor may be ahead of it (`fetch` runs in a thread, one at a time per group)."""

    def __init__(self, ex_iterable: Any, size: int, columns: list[str] | None = None):
        from datasets.utils.sharding import _split_gen_kwargs

        self.generate = ex_iterable.generate_tables_fn
        self.files = _split_gen_kwargs(ex_iterable.kwargs, max_num_jobs=ex_iterable.num_shards)
        self.size = size
        self.columns = columns
        self.parquet = _ParquetReader.of(self.generate, columns)
        self.pos = _Pos()
        self.reset()

    def names(self) -> list[str]:
        return [str(kw["files"][0]) if "files" in kw else repr(sorted(kw)) for kw in self.files]

    def reset(self) -> None:
        """Drop what was read ahead: the next fetch starts at `pos`."""
        self._file, self._row = self.pos.file, self.pos.row
        self._tables: Iterator | None = None
        self._left = None

    def fetch(self) -> tuple[Any, _Pos]:
        """The next table of `size` rows (fewer at the group's end; None past it) and the position after it."""
        import pyarrow as pa

        parts, need = [], self.size
        while need > 0 and self._file < len(self.files):
            if self._left is None:
                self._left = self._next_raw()
                continue
            part = self._left.slice(0, need)
            self._left = self._left.slice(part.num_rows) if part.num_rows < self._left.num_rows else None
            self._row += part.num_rows
            need -= part.num_rows
            parts.append(part)
            if self._left is None:  # learn now whether the file ended, so a position never points at its end
                self._left = self._look_ahead()
        end = _Pos(self._file, self._row, self._file >= len(self.files))
        return (pa.concat_tables(parts) if parts else None), end

    def _look_ahead(self):
        """`_next_raw()` for a table that is not needed yet: a read error is left to the next fetch (which
        re-opens the file at the cursor), so the rows already taken are delivered."""
        try:
            return self._next_raw()
        except Exception:
            self._tables = None
            return None

    def _next_raw(self):
        """The next non-empty table of the current file, moving to the next file at its end; None at the group's end."""
        while self._file < len(self.files):
            if self._tables is None:
                self._tables = self._open(self._file, self._row)
            table = next(self._tables, None)
            if table is None:
                self._tables, self._file, self._row = None, self._file + 1, 0
            elif table.num_rows:
                return table
        return None

    def _open(self, k: int, row: int) -> Iterator:
        if self.parquet is not None:
            return self.parquet.tables(self.files[k], row)
        tables = (table for _, table in self.generate(**self.files[k]))
        if self.columns is not None:
            tables = (table.select([c for c in self.columns if c in table.column_names]) for table in tables)
        return _skipped(tables, row)


def _skipped(tables: Iterator, rows: int) -> Iterator:
    for table in tables:
        if rows >= table.num_rows:
            rows -= table.num_rows
            continue
        yield table.slice(rows) if rows else table
        rows = 0


class _ParquetReader:
    """The tables of datasets' Parquet builder, read here: `ParquetFile` without pre-buffering (a row
    group's column chunks are fetched when it is decoded, not every range of the file at once) and
    without Arrow's thread pool (decoded in the calling thread: no read is left running when the
    iteration stops), only `columns`, cast to the builder's features as its `_cast_table` casts."""

    def __init__(self, builder: Any, columns: list[str] | None):
        from datasets import Features

        self.open = getattr(sys.modules[type(builder).__module__], "open", open)  # datasets' streaming open
        features = builder.info.features
        if features is not None and columns is not None:
            features = Features({name: features[name] for name in columns if name in features})
        self.schema = features.arrow_schema if features is not None else None
        self.columns = columns

    @classmethod
    def of(cls, generate: Any, columns: list[str] | None) -> _ParquetReader | None:
        """A reader for `generate` if it is the Parquet builder's plain read (no filters, columns or
        scan options set), else None."""
        from datasets.packaged_modules.parquet.parquet import Parquet

        builder = getattr(generate, "__self__", None)  # a hub dataset's builder is a subclass named after it
        if not isinstance(builder, Parquet) or getattr(generate, "__name__", None) != "_generate_tables":
            return None
        config = builder.config
        if any(getattr(config, key, None) is not None for key in ("filters", "columns", "fragment_scan_options")):
            return None
        return cls(builder, columns)

    def tables(self, kwargs: dict, row: int) -> Iterator:
        """The tables of the one file in `kwargs` (its `row_groups_list` if any), from row `row` on: the
        row group holding that row is read and cut, the ones before it are skipped (its footer says
        where they start)."""
        import pyarrow.parquet as pq
        from datasets.table import table_cast

        with self.open(kwargs["files"][0], "rb") as f:
            parquet = pq.ParquetFile(f, pre_buffer=False)
            groups = kwargs.get("row_groups_list", [None])[0]
            for g in range(parquet.num_row_groups) if groups is None else groups:
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
    hands them out, all of them (`rows`, dicts) or one column's values (`column`)."""

    __slots__ = ("table", "_formatter")

    def __init__(self, table: Any, formatter: Any):
        self.table, self._formatter = table, formatter

    def rows(self) -> list[dict]:
        batch = self._formatter.format_batch(self.table)
        names = list(batch)
        return [{name: batch[name][i] for name in names} for i in range(self.table.num_rows)]

    def column(self, name: str) -> list:
        return self._formatter.format_column(self.table.select([name]))


_END = object()  # the end of a stream, where a row is expected


class ShuffledStream:
    """(index, row) of a streamed `ds` read as `read` says (see the module docstring); `state()` saves
    the position after the rows yielded so far, `start=` (a state) continues from one. `columns` (names
    of `ds`'s features) keeps only those columns; `mapper` (hub.RowMapper) makes the yielded rows of
    each block (`mapper.block(Block)`) instead of datasets' dicts."""

    def __init__(
        self,
        ds: Any,
        read: HubRead,
        *,
        identity: dict | None = None,
        start: tuple | None = None,
        columns: list[str] | None = None,
        mapper: Any = None,
    ):
        import numpy as np

        base = ds._ex_iterable
        self.read, self.policy = read, read.retry
        self.take = read.take
        self.mapper = mapper
        if read.shuffle:
            source = base.shuffle_data_sources(np.random.default_rng(read.seed))
            n = min(source.num_shards, MAX_INPUT_SHARDS)
            size = max(1, read.shuffle_buffer_size // MAX_INPUT_SHARDS)
            self.groups = [_Group(source.shard_data_sources(n, i), size, columns) for i in range(n)]
            self._rng = np.random.default_rng(read.seed)
        else:
            self.groups = [_Group(base, UNSHUFFLED_TABLE_ROWS, columns)] if base.num_shards else []
            self._rng = None
        # datasets' own parquet reads can leave Arrow's threads reading a Python file object after the
        # interpreter began to exit (an open Arrow bug: a crash or a hang at exit); the reads here use no
        # Arrow thread, so only a group read by the builder's generator waits
        self._sleep_at_end = bool(getattr(base, "sleep_on_threads_shutdown", False)) and any(
            g.parquet is None for g in self.groups
        )
        self.identity = {
            "format": STATE_FORMAT,
            "files": [g.names() for g in self.groups],
            "shuffle": read.shuffle,
            "seed": read.seed,
            "buffer_size": read.shuffle_buffer_size if read.shuffle else 0,
            "take": read.take,
            "columns": columns,
            **(identity or {}),
        }
        features = ds._info.features
        if features is not None and columns is not None:
            from datasets import Features

            features = Features({name: features[name] for name in columns if name in features})
        self._features = features
        from datasets.formatting import PythonFormatter

        self._formatter = PythonFormatter(
            features=None if base.is_typed else features, token_per_repo_id=ds._token_per_repo_id
        )
        self.turn, self.yielded, self.retries = 0, 0, 0
        self._block, self._rows, self._at = None, None, 0
        self._buffer: list = []
        self._buffer_rows = 0
        self._futures: list[Future | None] = [None] * len(self.groups)
        self._pool: ThreadPoolExecutor | None = None
        if start is not None:
            self._restore(*start)

    # ---------------------------------------------------------------- position

    def state(self) -> tuple[dict, Any]:
        """(JSON-able position, Arrow table of the block's unread rows then the buffer, or None) after
        the rows yielded so far; valid only between rows (the stream is not being read)."""
        import pyarrow as pa

        rest = self._block.slice(self._at) if self._block is not None else None
        tables = ([rest] if rest is not None and rest.num_rows else []) + [t for t in self._buffer if t.num_rows]
        info = {
            "identity": self.identity,
            "yielded": self.yielded,
            "turn": self.turn,
            "groups": [[g.pos.file, g.pos.row, g.pos.done] for g in self.groups],
            "rng": self._rng.bit_generator.state if self._rng is not None else None,
            "block_rows": rest.num_rows if rest is not None else 0,
            "buffer_rows": self._buffer_rows,
        }
        return info, (pa.concat_tables(tables) if tables else None)

    def _restore(self, info: dict, table: Any) -> None:
        if info.get("identity") != self.identity:
            raise StaleStreamState("the saved position belongs to another stream (files, seed, buffer or revision)")
        for g, (file, row, done) in zip(self.groups, info["groups"]):
            g.pos = _Pos(file, row, done)
            g.reset()
        self.turn, self.yielded = info["turn"], info["yielded"]
        if self._rng is not None:
            self._rng.bit_generator.state = info["rng"]
        n_block, n_buffer = info["block_rows"], info["buffer_rows"]
        if n_block + n_buffer != (table.num_rows if table is not None else 0):
            raise StaleStreamState(
                f"the saved buffer holds {table.num_rows if table is not None else 0} rows, "
                f"its position says {n_block + n_buffer}"
            )
        self._block = table.slice(0, n_block) if n_block else None
        self._buffer = [table.slice(n_block)] if n_buffer else []
        self._buffer_rows = n_buffer

    # ---------------------------------------------------------------- reading

    def __iter__(self) -> Iterator[tuple[int, Any]]:
        try:
            while self.take is None or self.yielded < self.take:
                row = self._next_row()
                if row is _END:
                    return
                self.yielded += 1
                yield self.yielded - 1, row
        finally:
            self.close()

    def _next_row(self) -> Any:
        while self._rows is None or self._at >= len(self._rows):
            if self._rows is not None:
                self._block, self._rows, self._at = None, None, 0
            if self._block is None and not self._refill():
                return _END
            block = Block(self._cast(self._block), self._formatter)
            self._rows = self.mapper.block(block) if self.mapper is not None else block.rows()
        row = self._rows[self._at]
        self._at += 1
        return row

    def _cast(self, table):
        """`table` cast to the features (a column missing from it added as nulls), as datasets does."""
        if self._features is not None:
            import pyarrow as pa
            from datasets.table import cast_table_to_features

            for name in self._features:
                if name not in table.column_names:
                    table = table.append_column(name, pa.NullArray.from_buffers(pa.null(), len(table), [None]))
            if table.schema != self._features.arrow_schema:
                table = cast_table_to_features(table, self._features)
        return table

    def _refill(self) -> bool:
        """Set the next block of rows to yield; False once everything is yielded."""
        while True:
            table = self._next_input()
            if self._rng is None:
                self._block = table
                return table is not None
            if table is None:
                if not self._buffer_rows:
                    return False
                self._block = self._shuffled_buffer(keep=0)
                return True
            self._buffer.append(table)
            self._buffer_rows += table.num_rows
            if self._buffer_rows >= self.read.shuffle_buffer_size:
                self._block = self._shuffled_buffer(keep=self.read.shuffle_buffer_size // 2)
                return True

    def _shuffled_buffer(self, keep: int):
        """The buffer permuted by the rng: its first rows - all but `keep` - are returned, the rest kept."""
        import pyarrow as pa

        n = self._buffer_rows
        shuffled = pa.concat_tables(self._buffer).take(self._rng.permutation(n))
        self._buffer = [shuffled.slice(n - keep)] if keep else []
        self._buffer_rows = keep
        return shuffled.slice(0, n - keep)

    def _next_input(self):
        """The next table of the groups in turn (a finished group skipped); None when all are done."""
        while any(not g.pos.done for g in self.groups):
            i = self.turn
            if self.groups[i].pos.done:
                self.turn = (i + 1) % len(self.groups)
                continue
            table, end = self._take(i)  # may fail: then the turn stays with group i
            self.groups[i].pos = end
            self.turn = (i + 1) % len(self.groups)
            if table is None:
                continue
            if not end.done:
                self._submit(i)
            return table
        return None

    def _submit(self, i: int) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=len(self.groups), thread_name_prefix="stream-group")
            for k, g in enumerate(self.groups):
                if not g.pos.done and self._futures[k] is None and k != i:
                    self._futures[k] = self._pool.submit(g.fetch)
        self._futures[i] = self._pool.submit(self.groups[i].fetch)

    def _take(self, i: int):
        """Group i's next table, its read retried by the policy (retry.call; re-opened at the group's
        position)."""
        group, tries = self.groups[i], 0

        def read():
            nonlocal tries
            tries += 1
            if tries > 1:
                self.retries += 1
                group.reset()
            if self._futures[i] is None:
                self._submit(i)
            future, self._futures[i] = self._futures[i], None
            return future.result()

        def failure(e: BaseException) -> str:
            return (
                f"reading {group.names()[group.pos.file]} failed ({type(e).__name__}: {retry.short(e, 120)}); "
                f"re-opening at row {group.pos.row:,}"
            )

        try:
            return retry.call(read, what=self._what(), policy=self.policy, failure=failure)
        except retry.RetriesExhausted as e:
            raise self._unavailable(e.last, e.tries, e.waited_s) from e.last

    def _what(self) -> str:
        config = f" (config {self.read.config!r})" if self.read.config else ""
        return f"hub dataset {self.read.dataset_id!r}{config}"

    def _unavailable(self, exc: BaseException, tries: int, waited: float) -> StreamUnavailable:
        retries = self.retries  # the tries after the first of every failed read so far
        return StreamUnavailable(
            f"{self._what()}: a read of the stream failed {tries} time{'s' if tries != 1 else ''} in a row "
            f"({retries} retr{'ies' if retries != 1 else 'y'} in all, given up {waited:.0f} s after the first failure; "
            f"last error: {type(exc).__name__}: {retry.short(exc)}); {self.yielded:,} rows read so far",
            rows_read=self.yielded,
            retries=retries,
        )

    def close(self) -> None:
        """Stop the read-ahead threads (waiting for the reads in flight); the position stays."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        futures, self._futures = self._futures, [None] * len(self.groups)
        for f in futures:
            if f is not None:
                f.cancel()
        pool.shutdown(wait=True)
        for g in self.groups:
            g.reset()
        if self._sleep_at_end:  # datasets' guard against that crash
            import datasets

            time.sleep(datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN)


# ------------------------------------------------------------------------- one build's stream, tracked

_TRACKER: ContextVar[Tracker | None] = ContextVar("niels_gpt_stream_tracker", default=None)


class Tracker:
    """What a build knows of the stream it reads: `stream` (the ShuffledStream opened while it is
    active, None before the first row), `start` (a saved position the stream starts from)."""

    def __init__(self, start: tuple | None = None):
        self.start = start
        self.stream: ShuffledStream | None = None


@contextmanager
def tracking(start: tuple | None = None) -> Iterator[Tracker]:
    """While active, the streamed read opened by `stream_rows` registers with the tracker yielded here
    and starts at `start` (a `ShuffledStream.state()`)."""
    tracker = Tracker(start)
    token = _TRACKER.set(tracker)
    try:
        yield tracker
    finally:
        _TRACKER.reset(token)


def stream_rows(ds: Any, read: HubRead, identity: dict | None = None, mapper: Any = None) -> Iterator[tuple[int, Any]]:
    """The (index, row) pairs of a streamed `ds` read as `read` says, through ShuffledStream (registered
    with the active tracker, if any, and started at its saved position); with a `mapper`
    (hub.RowMapper) only its `columns` are read and the rows are what it makes of them."""
    tracker = _TRACKER.get()
    columns = mapper.columns(ds.features) if mapper is not None else None
    stream = ShuffledStream(
        ds, read, identity=identity, start=tracker.start if tracker else None, columns=columns, mapper=mapper
    )
    if tracker is not None:
        tracker.stream = stream
    return iter(stream)
