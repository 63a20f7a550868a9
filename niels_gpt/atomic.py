"""Atomic file writes: every file is written as `name.tmp`, fsynced, then renamed onto `name` (`os.replace`).

A failed or killed build therefore never leaves a partial file under a final name, and never damages
the file a final name held before; readers ignore `*.tmp`. On error the temporary file is removed and
the exception re-raised.

- one file: `atomic_open` (a context manager), `atomic_write_bytes`, `atomic_write_text`, `atomic_write_json`;
- the files of one build that must all be complete before any is published (the shards of a pretrain
  split, an SFT cache's tokens and offsets): `StagedFiles`, whose files are renamed only by an explicit
  `commit()` once the whole build has succeeded; meta.json is written after that, so a meta.json means
  every file it lists is complete.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from niels_gpt import interrupt

TMP_SUFFIX = ".tmp"


def tmp_path_for(path: str | os.PathLike) -> Path:
    """The temporary name `path` is written under before it is renamed into place."""
    p = Path(path)
    return p.with_name(p.name + TMP_SUFFIX)


class StagedFile:
    """One file written under `path.tmp`; `commit()` renames it onto `path`, `discard()` removes it.

    `file` is the open temporary file; `close()` flushes and fsyncs it (it keeps its temporary name).
    Until `commit()`, the final name holds what it held before, or nothing. `tmp` names another
    temporary file (on the same file system; a resumable build keeps its files outside the output),
    and mode "ab" continues one already there."""

    def __init__(self, path: str | os.PathLike, mode: str = "wb", *, tmp: str | os.PathLike | None = None):
        if "w" not in mode and "a" not in mode:
            raise ValueError(f"a staged file is for writing, got mode {mode!r}")
        self.path = Path(path)
        self.tmp = Path(tmp) if tmp is not None else tmp_path_for(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tmp.parent.mkdir(parents=True, exist_ok=True)
        self.file: IO[Any] = open(self.tmp, mode, encoding=None if "b" in mode else "utf-8")
        self.committed = False

    def write(self, data) -> int:
        return self.file.write(data)

    def close(self) -> None:
        """Flush, fsync and close the temporary file (again: nothing)."""
        if not self.file.closed:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()

    def commit(self) -> Path:
        """Close the file and rename it onto its final name; returns that name. After a Ctrl-C (even one
        a C extension swallowed: interrupt.py) nothing is renamed: KeyboardInterrupt."""
        self.close()
        interrupt.check()
        os.replace(self.tmp, self.path)
        self.committed = True
        return self.path

    def discard(self) -> None:
        """Remove what this file wrote: the temporary file, or the final one if it was committed."""
        self.file.close()
        self.tmp.unlink(missing_ok=True)
        if self.committed:
            self.path.unlink(missing_ok=True)
            self.committed = False


class StagedFiles:
    """The files of one build, published together: nothing reaches a final name before `commit()`.

        with StagedFiles() as staged:
            f = staged.open(out / "train_tokens.bin")   # written as train_tokens.bin.tmp
            ...
            staged.write_bytes(out / "train_idx.npy", data)
            staged.commit()                             # every file renamed, in the order opened

    Leaving the block without `commit()` (an error, re-raised, or a forgotten commit) discards every
    file: temporary ones, and any a failed `commit()` had already renamed."""

    def __init__(self) -> None:
        self.files: list[StagedFile] = []

    def open(self, path: str | os.PathLike, mode: str = "wb", *, tmp: str | os.PathLike | None = None) -> StagedFile:
        staged = StagedFile(path, mode, tmp=tmp)
        self.files.append(staged)
        return staged

    def write_bytes(self, path: str | os.PathLike, data: bytes) -> StagedFile:
        """A whole file at once, fsynced; it keeps its temporary name until `commit()`."""
        staged = self.open(path, "wb")
        staged.write(data)
        staged.close()
        return staged

    def commit(self) -> list[Path]:
        """Close every file and rename it onto its final name; returns the final names."""
        for staged in self.files:
            staged.close()
        return [staged.commit() for staged in self.files]

    def discard(self) -> None:
        for staged in self.files:
            staged.discard()

    @property
    def committed(self) -> bool:
        return bool(self.files) and all(staged.committed for staged in self.files)

    def __enter__(self) -> StagedFiles:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None or not self.committed:
            self.discard()


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """Open `path.tmp` for writing; on clean exit fsync and rename it to `path`, on error remove it."""
    staged = StagedFile(path, mode)
    try:
        yield staged.file
        staged.commit()
    except BaseException:
        staged.discard()
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    with atomic_open(path, "wb") as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    with atomic_open(path, "w") as f:
        f.write(text)


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    """Canonical JSON (sorted keys, 2-space indent, trailing newline): same dict => same bytes."""
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
