"""A streamed dataset read in `IterableDataset.shuffle(seed, buffer_size)` order that can stop and go on.

`ShuffledStream(ds, read)` yields, as (index, row) pairs, at most `read.take`, the rows datasets 5.2
yields for `ds.shard(num_shards=N, index=k, contiguous=True).shuffle(seed=read.seed, buffer_size=...)`
(or unshuffled), read with public APIs only (the data files and features `hub.open_dataset` resolved,
`HfFileSystem`, pyarrow) - so that the order is the same on every supported datasets release, its
position can be saved (`state()`), a later stream can start there (`start=`), and a read that fails is
re-opened where it stopped instead of at the first row. The order (datasets 5.2's documented shuffle):

1. part k of N: the files' contiguous block k (the first len % N blocks one file longer);
2. files: permuted by `numpy.random.default_rng(seed).shuffle` of their indices;
3. G = min(files, MAX_INPUT_SHARDS) contiguous groups of files; a group is read as tables of
   B = max(1, buffer_size // MAX_INPUT_SHARDS) rows: rows [0, B), [B, 2B) ... of its files in order, the
   last one shorter; each group's next table is fetched ahead in a thread;
4. tables are taken from the groups in turn, a finished group skipped;
5. the buffer: tables are appended; once it holds n >= buffer_size rows, rng.permutation(n) orders them,
   the first n - buffer_size // 2 are yielded and the rest kept; at the end the rest, permuted;
   rng = default_rng(seed). Unshuffled: the files in order as one group, no buffer.

Reading (stream_files.py): a parquet file a row group at a time, only `columns`; the rows of each block
(a table taken from the buffer) as datasets hands them out, or as a `mapper` makes them of the whole
block (hub.RowMapper). A stream of other files (json) is read by datasets itself: its order, no resume.

A position (`state()`): JSON (per group the file and row reached and whether it is done, the turn, the
rows yielded, the rng state) and one Arrow table: the rows of the current block not yet yielded, then the
buffer. A file re-opened at row r starts at the parquet row group holding r (that row group is read
again, earlier ones are not). A failed read is retried by re-opening its group at its position
(`read.retry`, retry.py); once the policy gives up, `StreamUnavailable` names the rows read.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from niels_gpt.data import retry
from niels_gpt.data.source import HubRead, SourceUnavailableError
from niels_gpt.data.stream_files import Block, ParquetReader, files_of, part_files, shuffled_files

MAX_INPUT_SHARDS = 10  # IterableDataset.shuffle's max_buffer_input_shards default: files read at once
UNSHUFFLED_TABLE_ROWS = 1_000  # rows per table of an unshuffled stream (any size gives the same rows)
STATE_FORMAT = 2  # bump when `state()` changes meaning (2: the buffer holds only the columns read)


class StreamUnavailable(SourceUnavailableError):
    """A stream read that failed after every retry; `rows_read` rows had been yielded, `retries` made."""

    def __init__(self, message: str, rows_read: int, retries: int):
        super().__init__(message)
        self.rows_read, self.retries = rows_read, retries


class StaleStreamState(ValueError):
    """A saved position that belongs to another stream (other files, seed, buffer or revision)."""


@dataclass
class _Pos:
    file: int = 0  # index in the group's files
    row: int = 0  # rows of that file consumed
    done: bool = False


class _Group:
    """Consecutive files read as tables of `size` rows; `pos` is what the stream has consumed, the read
    cursor may be ahead of it (`fetch` runs in a thread, one at a time per group)."""

    def __init__(self, files: list[str], size: int, reader: ParquetReader):
        self.files = files
        self.size = size
        self.parquet = reader
        self.pos = _Pos()
        self.reset()

    def names(self) -> list[str]:
        return list(self.files)

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
        return self.parquet.tables(self.files[k], row)


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

        source = files_of(ds)
        if source is None:
            raise ValueError("not a stream of parquet files opened by hub.open_dataset (stream_files.supports)")
        self.read, self.policy = read, read.retry
        self.take = read.take
        self.mapper = mapper
        features = source.features
        if features is not None and columns is not None:
            from datasets import Features

            features = Features({name: features[name] for name in columns if name in features})
        self._features = features
        reader = ParquetReader(source.features, columns)
        files = part_files(list(source.files), read.num_parts, read.part)
        if read.shuffle:
            files = shuffled_files(files, read.seed)
            n = min(len(files), MAX_INPUT_SHARDS)
            size = max(1, read.shuffle_buffer_size // MAX_INPUT_SHARDS)
            self.groups = [_Group(part_files(files, n, i), size, reader) for i in range(n)]
            self._rng = np.random.default_rng(read.seed)
        else:
            self.groups = [_Group(files, UNSHUFFLED_TABLE_ROWS, reader)] if files else []
            self._rng = None
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
            block = Block(self._cast(self._block), self._features)
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


class StreamPosition:
    """Where a resumable build's stream starts (`start`: a saved `ShuffledStream.state()`, or None) and the
    stream opened from it (`stream`, set by `stream_rows`): the build hands it to the loader in its
    HubRead (`read.position`) and saves `stream.state()` at each checkpoint."""

    def __init__(self, start: tuple | None = None):
        self.start = start
        self.stream: ShuffledStream | None = None


def stream_rows(ds: Any, read: HubRead, identity: dict | None = None, mapper: Any = None) -> Iterator[tuple[int, Any]]:
    """The (index, row) pairs of a streamed `ds` read as `read` says, through ShuffledStream (started at
    `read.position.start` and registered there, if the read has a position); with a `mapper`
    (hub.RowMapper) only its `columns` are read and the rows are what it makes of them."""
    position = read.position
    columns = mapper.columns(ds.features) if mapper is not None else None
    start = position.start if position is not None else None
    stream = ShuffledStream(ds, read, identity=identity, start=start, columns=columns, mapper=mapper)
    if position is not None:
        position.stream = stream
    return iter(stream)
